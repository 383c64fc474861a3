"""Read an ELMoForManyLangs model directory (HIT-SCIR, package `elmoformanylangs`) without that package,
and map it onto `ElmoModel`'s config fields and state-dict names.

The directory, as the package's runtime reads it:

* `config.json`: `{"config_path": ...}` names the architecture json. The runtime opens
  `os.path.join(model_dir, config_path)`; the released models name a path on their authors' machines,
  so this reader tries that path, then a file of the same basename in the directory, then
  `KNOWN_ARCHITECTURES` (the package's own `configs/*.json`, by basename).
* the architecture: `token_embedder` (name "cnn", activation, filters, n_highway, word_dim, char_dim,
  max_characters_per_token) and `encoder` (name "elmo", dim, projection_dim, n_layers, cell_clip,
  proj_clip).
* `char.dic` (when char_dim > 0) and `word.dic` (when word_dim > 0): the runtime iterates a
  `codecs` UTF-8 reader, so lines end wherever `str.splitlines` ends them (U+2028, U+0085, ... too,
  not only "\\n"); each line is `line.strip().split('\\t')`, a single field is the id of U+3000 (a
  whitespace token that `strip` removed), and a later line for the same token overwrites an earlier
  one. The runtime sizes each embedding by the entry count, so ids must be exactly 0..len-1.
* `token_embedder.pkl`, `encoder.pkl`: legacy-format torch state dicts, read only with
  `torch.load(..., weights_only=True)`; `weight_table` lists every tensor with its shape.

The architecture's fields are checked by `EfmlTokenEmbedder` / `EfmlEncoder` (`efml_config.py`),
huggingface_hub `@strict` dataclasses as `ElmoConfig` is; every problem is one line naming the json,
the field, what it is and what was expected.

The runtime's token encoding (implemented by the tokenizer, stated here for the mapping): each
sentence is wrapped in `<bos>` / `<eos>` tokens; a token longer than max_characters_per_token − 2
characters is cut before both lookups; words are looked up as written (unknown: `<oov>`); a token's
character row is `<pad>`-filled with the id of `<eow>` at position 0 and that of `<bow>` after the
last character (the runtime swaps the two names; the released weights were trained that way).

The mapping (`weight_table`, applied by `efml_to_elmo`), to our layout:

* character ids: 0 = padding of whole tokens (a zero row we add), 1 = `<pad>`, 2 = begin-of-word
  (EFML's `<eow>` row), 3 = end-of-word (EFML's `<bow>` row), 4 = `<bos>`, 5 = `<eos>`, 6 = `<oov>`,
  7... = the other characters in EFML id order; the returned char lexicon names ids 2 and 3 by what
  they do in our model: `<bow>` = 2, `<eow>` = 3.
* word ids: 0 = `<bos>`, 1 = `<eos>`, 2 = `<oov>`, 3... = the other words in EFML id order; EFML's
  `<pad>` row is dropped (padding never reaches the embedding).
* AllenNLP highway [nonlinear; gate] halves → `transform` and the *negated* gate (our gate weighs the
  transform, AllenNLP's the carry; 1 − σ(z) = σ(−z)); the projection of cat([word, chars]) → the sum
  of `word_projection` (first word_dim columns, no bias) and `projection` (the rest, with the bias);
  AllenNLP `LstmCellWithProjection` (gate order i, f, j, o, out = W·x) → TF orientation x·W with gate
  order i, j, f, o, forget_bias 0 (the trained bias already holds it), skip connections from layer 1.
"""

import pickle
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from ..constants import (
    CONFIG_FILE,
    EFML_CHAR_LEXICON_FILE,
    EFML_ENCODER_FILE,
    EFML_TOKEN_EMBEDDER_FILE,
    EFML_WEIGHT_FILES,
    EFML_WORD_LEXICON_FILE,
)
from ..hf.configuration_elmo import read_json_object
from ..hf.fp32_weights import check_unchanged, stamps
from .efml_config import (
    KNOWN_ARCHITECTURES,
    EfmlArchitecture,
    EfmlEncoder,
    EfmlFormatError,
    EfmlTokenEmbedder,
)

CHAR_SPECIALS = ("<oov>", "<pad>", "<bos>", "<eos>", "<bow>", "<eow>")
WORD_SPECIALS = ("<oov>", "<pad>", "<bos>", "<eos>")

_GATES_ALLENNLP_TO_TF = (0, 2, 1, 3)  # (i, f, j, o) chunks → (i, j, f, o)


@dataclass
class EfmlDirectory:
    """A validated ELMoForManyLangs model directory, as its runtime would load it (EFML ids)."""

    path: Path
    architecture: dict  # the json as read
    architecture_source: str  # the file it came from, or the built-in table entry
    char_lexicon: dict[str, int]
    word_lexicon: dict[str, int] | None  # None when word_dim is 0
    token_embedder: dict[str, torch.Tensor]
    encoder: dict[str, torch.Tensor]
    spec: EfmlArchitecture  # the architecture's fields this reader uses, checked


def is_efml_directory(path: str | Path) -> bool:
    """True for a folder that is meant as an ELMoForManyLangs model: its config.json holds
    `config_path`, or it has no config.json but token_embedder.pkl or encoder.pkl. Whether it is
    complete is `check_efml_directory`'s to say."""
    directory = Path(path)
    if not directory.is_dir():
        return False
    if not (directory / CONFIG_FILE).is_file():
        return any((directory / name).is_file() for name in EFML_WEIGHT_FILES)
    try:
        config = read_json_object(directory / CONFIG_FILE, EfmlFormatError)
    except (EfmlFormatError, OSError):
        return False
    return "config_path" in config


def _not_a_file(path: Path, what: str) -> EfmlFormatError:
    return EfmlFormatError(f"{path}: {'is a directory' if path.is_dir() else 'no such file'}; expected {what}")


def read_architecture(path: str | Path) -> tuple[dict, str]:
    """The architecture dict a directory's config.json names, and where it was found."""
    directory = Path(path)
    config_file = directory / CONFIG_FILE
    if not config_file.is_file():
        raise _not_a_file(config_file, "the ELMoForManyLangs config naming the architecture json")
    config_path = read_json_object(config_file, EfmlFormatError).get("config_path")
    if not isinstance(config_path, str) or not config_path.strip():
        raise EfmlFormatError(
            f"{config_file}: field 'config_path' is {config_path!r}; expected the name of the architecture json"
        )
    basename = re.split(r"[\\/]", config_path)[-1]
    # an absolute config_path stays absolute; a bare file name is one candidate, tried once
    candidates = list(dict.fromkeys((directory / config_path, directory / basename)))
    for candidate in candidates:
        if candidate.is_file():
            return read_json_object(candidate, EfmlFormatError), str(candidate)
    tried = [str(candidate) for candidate in candidates]
    if basename in KNOWN_ARCHITECTURES:
        return KNOWN_ARCHITECTURES[
            basename
        ], f"{config_file} (config_path {basename!r}: the package's built-in architecture)"
    raise EfmlFormatError(
        f"{config_file}: config_path {config_path!r} names no architecture: tried {', '.join(tried)} and the "
        f"package's built-in ones ({', '.join(sorted(KNOWN_ARCHITECTURES))}); put that json in the directory"
    )


def _line_break_note(piece: str) -> str:
    lines = piece.splitlines()
    end = piece[len(lines[0]) :] if lines else piece
    if end in ("", "\n", "\r\n"):
        return ""
    return f" (the runtime also ends a line at U+{ord(end[0]):04X})"


def read_lexicon(path: str | Path, specials: tuple[str, ...]) -> dict[str, int]:
    """A char.dic / word.dic as the runtime reads it (token → EFML id), checked."""
    path = Path(path)
    if not path.is_file():
        raise EfmlFormatError(f"{path}: lexicon not found (the architecture's dimensions need it)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise EfmlFormatError(f"{path}: line {line} is not valid UTF-8 ({err.reason} at byte {err.start})") from None
    lexicon: dict[str, int] = {}
    line_of: dict[str, int] = {}
    overwritten: dict[int, tuple[int, str, int]] = {}  # lost id → (its line, token, line that replaced it)
    number = 1
    # the runtime's codecs reader yields exactly these pieces (str.splitlines boundaries, ends kept)
    for piece in text.splitlines(keepends=True):
        here, number = number, number + piece.count("\n")
        fields = piece.strip().split("\t")
        if fields == [""]:
            raise EfmlFormatError(f"{path}: line {here} is blank{_line_break_note(piece)}; expected 'token<TAB>id'")
        if len(fields) == 1:
            fields = ["\u3000", fields[0]]
        if len(fields) != 2:
            raise EfmlFormatError(
                f"{path}: line {here} has {len(fields)} tab-separated fields; "
                f"expected 'token<TAB>id'{_line_break_note(piece)}"
            )
        token, raw = fields
        try:
            index = int(raw)
        except ValueError:
            raise EfmlFormatError(
                f"{path}: line {here}: id {raw!r} is not an integer{_line_break_note(piece)}"
            ) from None
        if token in lexicon and lexicon[token] != index:
            overwritten[lexicon[token]] = (line_of[token], token, here)
        lexicon[token], line_of[token] = index, here
    missing = [s for s in specials if s not in lexicon]
    if missing:
        bom = " (the file starts with a byte-order mark, which the runtime keeps)" if text.startswith("\ufeff") else ""
        raise EfmlFormatError(f"{path}: missing the special token(s) {', '.join(missing)}{bom}")
    by_id: dict[int, str] = {}
    for token, index in lexicon.items():
        if index in by_id:
            raise EfmlFormatError(
                f"{path}: id {index} is used twice: {by_id[index]!r} (line {line_of[by_id[index]]}) "
                f"and {token!r} (line {line_of[token]})"
            )
        by_id[index] = token
    size = len(lexicon)
    outside = sorted(i for i in by_id if not 0 <= i < size)
    if outside:
        index = outside[0]
        lost = next(i for i in range(size) if i not in by_id)
        why = ""
        if lost in overwritten:
            old_line, token, new_line = overwritten[lost]
            why = f"; line {old_line} gave it to {token!r}, which line {new_line} gives id {lexicon[token]}"
        raise EfmlFormatError(
            f"{path}: ids must be exactly 0..{size - 1} (the runtime sizes the embedding by the {size} entries): "
            f"{by_id[index]!r} (line {line_of[by_id[index]]}) has id {index} and id {lost} is unused{why}"
        )
    return lexicon


# --------------------------------------------------------------------------------------------------
# The EFML tensor ↔ ElmoModel tensor table

Transform = Callable[[torch.Tensor], torch.Tensor]  # the EFML tensor (float32) → ours


def _lstm_to_tf(weight: torch.Tensor) -> torch.Tensor:
    """AllenNLP [4H] or [4H, in] in gate order (i, f, j, o) → (i, j, f, o), a matrix transposed to x·W."""
    chunks = weight.chunk(4, dim=0)
    reordered = torch.cat([chunks[g] for g in _GATES_ALLENNLP_TO_TF], dim=0)
    return reordered.t().contiguous() if reordered.dim() == 2 else reordered


def _ordered(lexicon: dict[str, int], first: tuple[str, ...], skip: tuple[str, ...] = ()) -> list[str]:
    """`first`, then the other tokens (minus `skip`) in EFML id order."""
    rest = sorted((t for t in lexicon if t not in first and t not in skip), key=lexicon.__getitem__)
    return list(first) + rest


# our id order: chars from id 1 (id 0, padding of whole tokens, is a zero row we add); our 2 begins
# a word and 3 ends it, and the runtime begins a word with the id of `<eow>` and ends it with that of
# `<bow>` (`bow_id, eow_id = char2id['<eow>'], char2id['<bow>']`; the released weights were trained
# so): EFML's `<eow>` row comes first, and the returned lexicon names our 2 `<bow>` and our 3 `<eow>`
CHAR_ORDER = ("<pad>", "<eow>", "<bow>", "<bos>", "<eos>", "<oov>")
OUR_CHAR_NAME = {"<eow>": "<bow>", "<bow>": "<eow>"}
WORD_ORDER, WORD_DROPPED = ("<bos>", "<eos>", "<oov>"), ("<pad>",)  # padding never reaches the embedding


def _lexicon_rows(
    lexicon: dict[str, int], first: tuple[str, ...], skip: tuple[str, ...] = (), padding_row=False
) -> Transform:
    """An embedding's rows in our id order (`_ordered`), after a zero row when `padding_row`."""

    def transform(weight: torch.Tensor) -> torch.Tensor:
        rows = weight[torch.tensor([lexicon[t] for t in _ordered(lexicon, first, skip)])]
        return torch.cat([weight.new_zeros(1, weight.shape[1]), rows]) if padding_row else rows

    return transform


class Entry(NamedTuple):
    """One tensor of an EFML state dict, or one block of it, ↔ one tensor of `ElmoModel.state_dict()`."""

    file: str  # "token_embedder.pkl" or "encoder.pkl"
    name: str  # the tensor's name in that file
    shape: tuple[int, ...]  # the whole tensor's shape there
    tensor: str  # ours
    transform: Transform = torch.clone
    direction: int | None = None  # our LSTM tensors stack both directions: [2, ...]
    hint: str = ""  # what the shape comes from, said when it does not match


def weight_table(
    arch: EfmlArchitecture, char_lexicon: dict[str, int], word_lexicon: dict[str, int] | None
) -> list[Entry]:
    """Every tensor of token_embedder.pkl and encoder.pkl for `arch` and the lexicons, with the tensor it
    becomes (in each file's order: a missing tensor is reported as the first one listed here)."""
    emb, enc = arch.token_embedder, arch.encoder
    n_filters, word_dim, proj, hidden = emb.n_filters, emb.word_dim, enc.projection_dim, enc.dim
    te, ours = EFML_TOKEN_EMBEDDER_FILE, "token_encoder."
    table = []
    if word_dim > 0:
        assert word_lexicon is not None, "read_efml reads word.dic when word_dim > 0"
        table.append(
            Entry(
                te,
                "word_emb_layer.embedding.weight",
                (len(word_lexicon), word_dim),
                ours + "word_embedding.weight",
                _lexicon_rows(word_lexicon, WORD_ORDER, WORD_DROPPED),
                hint=f"word.dic has {len(word_lexicon)} entries, word_dim is {word_dim}",
            )
        )
    table.append(
        Entry(
            te,
            "char_emb_layer.embedding.weight",
            (len(char_lexicon), emb.char_dim),
            ours + "char_embedding.weight",
            _lexicon_rows(char_lexicon, CHAR_ORDER, padding_row=True),
            hint=f"char.dic has {len(char_lexicon)} entries, char_dim is {emb.char_dim}",
        )
    )
    for i, (width, num) in enumerate(emb.filters):
        table += [
            Entry(te, f"convolutions.{i}.weight", (num, emb.char_dim, width), f"{ours}convolutions.{i}.weight"),
            Entry(te, f"convolutions.{i}.bias", (num,), f"{ours}convolutions.{i}.bias"),
        ]
    for k in range(emb.n_highway):
        # AllenNLP: [nonlinear; gate] = W x + b, y = σ(gate)·x + (1 − σ(gate))·relu(nonlinear); ours:
        # y = g·relu(T x) + (1 − g)·x, so g = 1 − σ(gate) = σ(−gate): the gate half negated
        theirs, highway = f"highways._layers.{k}.", f"{ours}highways.{k}."
        for part, shape in (("weight", (2 * n_filters, n_filters)), ("bias", (2 * n_filters,))):
            table += [
                Entry(te, theirs + part, shape, f"{highway}transform.{part}", lambda w: w[:n_filters]),
                Entry(te, theirs + part, shape, f"{highway}gate.{part}", lambda w: -w[n_filters:]),
            ]
    # projection(cat([word, chars])) = word_projection(word) + projection(chars)
    shape = (proj, word_dim + n_filters)
    table.append(Entry(te, "projection.weight", shape, ours + "projection.weight", lambda w: w[:, word_dim:]))
    if word_dim > 0:
        table.append(Entry(te, "projection.weight", shape, ours + "word_projection.weight", lambda w: w[:, :word_dim]))
    table.append(Entry(te, "projection.bias", (proj,), ours + "projection.bias"))
    # every layer reads projection_dim-wide inputs; AllenNLP's cell → TF's (see `_lstm_to_tf`)
    for layer in range(enc.n_layers):
        for direction, name in enumerate(("forward", "backward")):
            cell, ours_lstm = f"{name}_layer_{layer}.", f"encoder.layers.{layer}."
            table += [
                Entry(
                    EFML_ENCODER_FILE,
                    cell + "input_linearity.weight",
                    (4 * hidden, proj),
                    ours_lstm + "input_weight",
                    _lstm_to_tf,
                    direction,
                ),
                Entry(
                    EFML_ENCODER_FILE,
                    cell + "state_linearity.weight",
                    (4 * hidden, proj),
                    ours_lstm + "hidden_weight",
                    _lstm_to_tf,
                    direction,
                ),
                Entry(
                    EFML_ENCODER_FILE,
                    cell + "state_linearity.bias",
                    (4 * hidden,),
                    ours_lstm + "bias",
                    _lstm_to_tf,
                    direction,
                ),
                Entry(
                    EFML_ENCODER_FILE,
                    cell + "state_projection.weight",
                    (proj, hidden),
                    ours_lstm + "proj_weight",
                    torch.t,
                    direction,
                ),
            ]
    return table


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:4])
    return shown + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")


def read_state_dict(path: str | Path, entries: list[Entry]) -> dict[str, torch.Tensor]:
    """A .pkl state dict loaded with weights_only=True and checked name by name against `entries`
    (`weight_table`'s rows for that file)."""
    expected = {entry.name: entry.shape for entry in entries}
    hints = {entry.name: entry.hint for entry in entries if entry.hint}
    path = Path(path)
    if not path.is_file():
        raise EfmlFormatError(f"{path}: weights file not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        # what torch's weights-only unpickler refused (torch 2.4 names a builtin `builtins.exec`, 2.13 `exec`);
        # torch 2.4 raises this error for a broken file too (2.13 a RuntimeError), naming what broke after the prefix
        found = re.search(r"Unsupported global: GLOBAL (?:builtins\.)?(\S+)", str(err))
        broken = re.search(r"WeightsUnpickler error: (?!Unsupported)(.+)", str(err))
        if broken and not found:
            raise EfmlFormatError(
                f"{path}: not a readable PyTorch state dict (truncated or corrupt?): {broken.group(1).strip()}"
            ) from None
        what = f"calls {found.group(1)}" if found else "holds objects other than tensors"
        raise EfmlFormatError(
            f"{path}: refused: the pickle {what}, which would run code when unpickled; a state dict holds only "
            "tensors (loaded with torch.load(weights_only=True))"
        ) from None
    except Exception as err:  # noqa: BLE001 - any failure to parse the file is a broken file, reported in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        reason = f"{type(err).__name__}: {first}" if first else type(err).__name__
        if isinstance(err, EOFError):
            reason = "it ends before the state dict does"
        raise EfmlFormatError(f"{path}: not a readable PyTorch state dict (truncated or corrupt?): {reason}") from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise EfmlFormatError(f"{path}: expected a state dict of named tensors, found {type(state).__name__}")
    missing = [name for name in expected if name not in state]
    if missing:
        raise EfmlFormatError(
            f"{path}: missing tensor(s) {_names(missing)}; "
            f"'{missing[0]}' should have shape {list(expected[missing[0]])}"
        )
    extra = [name for name in state if name not in expected]
    if extra:
        raise EfmlFormatError(
            f"{path}: unexpected tensor(s) {_names(extra)} ('{extra[0]}' of shape {list(state[extra[0]].shape)}), "
            "which the architecture does not have"
        )
    for name, shape in expected.items():
        tensor = state[name]
        if tuple(tensor.shape) != shape:
            hint = f" ({hints[name]})" if hints and name in hints else ""
            raise EfmlFormatError(
                f"{path}: tensor '{name}' has shape {list(tensor.shape)}, expected {list(shape)}{hint}"
            )
        if not tensor.is_floating_point():
            raise EfmlFormatError(f"{path}: tensor '{name}' has dtype {tensor.dtype}, expected floating point")
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise EfmlFormatError(f"{path}: tensor '{name}' contains {bad} NaN/inf values")
    return dict(state)


def _check_directory(directory: Path) -> tuple[dict, str, EfmlArchitecture]:
    if not directory.is_dir():
        raise EfmlFormatError(f"{directory}: not a directory (an ELMoForManyLangs model is a folder)")
    architecture, source = read_architecture(directory)
    spec = EfmlArchitecture.read(architecture, source)
    word_dim = spec.token_embedder.word_dim
    needed = {
        EFML_CHAR_LEXICON_FILE: "character lexicon",
        EFML_WORD_LEXICON_FILE: f"word lexicon (word_dim is {word_dim})",
        EFML_TOKEN_EMBEDDER_FILE: "token embedder weights",
        EFML_ENCODER_FILE: "biLSTM weights",
    }
    if word_dim == 0:
        del needed[EFML_WORD_LEXICON_FILE]
    for name, what in needed.items():
        if not (directory / name).is_file():
            raise _not_a_file(directory / name, f"the ELMoForManyLangs {what}")
    return architecture, source, spec


def check_efml_directory(path: str | Path) -> tuple[dict, str]:
    """Checks an ELMoForManyLangs model directory without reading its lexicons or weights: its
    architecture is found and supported, and every file the runtime reads is there. Returns
    `read_architecture`'s (architecture, source); every problem is one EfmlFormatError line."""
    return _check_directory(Path(path))[:2]


def read_efml(path: str | Path) -> EfmlDirectory:
    """Reads and validates an ELMoForManyLangs model directory; every problem is one EfmlFormatError line."""
    directory = Path(path)
    architecture, source, spec = _check_directory(directory)
    char_lexicon = read_lexicon(directory / EFML_CHAR_LEXICON_FILE, CHAR_SPECIALS)
    word_lexicon = (
        read_lexicon(directory / EFML_WORD_LEXICON_FILE, WORD_SPECIALS) if spec.token_embedder.word_dim > 0 else None
    )
    table = weight_table(spec, char_lexicon, word_lexicon)
    token_embedder, encoder = (
        read_state_dict(directory / name, [entry for entry in table if entry.file == name])
        for name in EFML_WEIGHT_FILES
    )
    return EfmlDirectory(directory, architecture, source, char_lexicon, word_lexicon, token_embedder, encoder, spec)


def efml_to_elmo(
    d: EfmlDirectory,
) -> tuple[dict, dict[str, torch.Tensor], dict[str, int], dict[str, int] | None]:
    """(ElmoConfig kwargs, ElmoModel state dict (float32), char lexicon → our ids, word lexicon → our ids or None):
    `weight_table`'s rows applied to the directory's tensors."""
    emb, enc = d.spec.token_embedder, d.spec.encoder
    files = {EFML_TOKEN_EMBEDDER_FILE: d.token_embedder, EFML_ENCODER_FILE: d.encoder}
    state: dict[str, torch.Tensor] = {}
    directions: dict[str, dict[int, torch.Tensor]] = {}
    for entry in weight_table(d.spec, d.char_lexicon, d.word_lexicon):
        value = entry.transform(files[entry.file][entry.name].float())
        if entry.direction is None:
            state[entry.tensor] = value.contiguous()
        else:
            directions.setdefault(entry.tensor, {})[entry.direction] = value
    state.update({name: torch.stack([per[0], per[1]]).contiguous() for name, per in directions.items()})
    char_lexicon = {OUR_CHAR_NAME.get(t, t): i for i, t in enumerate(_ordered(d.char_lexicon, CHAR_ORDER), start=1)}
    word_lexicon = None
    if d.word_lexicon is not None:
        word_lexicon = {t: i for i, t in enumerate(_ordered(d.word_lexicon, WORD_ORDER, WORD_DROPPED))}
    config = {
        "char_vocab_size": 1 + len(char_lexicon),  # row 0: padding of whole tokens
        "word_vocab_size": len(word_lexicon) if word_lexicon is not None else 0,
        "word_embedding_dim": emb.word_dim,
        "char_embedding_dim": emb.char_dim,
        "filters": [list(f) for f in emb.filters],
        "n_highway": emb.n_highway,
        "activation": emb.activation,
        "max_characters_per_token": emb.max_characters_per_token,
        "num_layers": enc.n_layers,
        "lstm_dim": enc.dim,
        "projection_dim": enc.projection_dim,
        "cell_clip": None if enc.cell_clip is None else float(enc.cell_clip),
        "proj_clip": None if enc.proj_clip is None else float(enc.proj_clip),
        "use_skip_connections": True,
        "forget_bias": 0.0,
    }
    return config, state, char_lexicon, word_lexicon


@dataclass(frozen=True)
class EfmlFiles:
    """The ELMoForManyLangs directory a model was loaded from: where its fp32 weights are read back
    from once a low precision released them (`hf.fp32_weights.WeightsFiles`), its weight files
    checked unchanged."""

    path: Path
    seen: tuple

    @classmethod
    def of(cls, path: str | Path) -> "EfmlFiles":
        directory = Path(path)
        return cls(directory, stamps([directory / name for name in EFML_WEIGHT_FILES]))

    @property
    def converted_from(self) -> str:
        return describe_efml(self.path)

    def describe(self) -> str:
        return str(self.path)

    def read(self, names: Sequence[str]) -> dict[str, torch.Tensor]:
        check_unchanged([self.path / name for name in EFML_WEIGHT_FILES], self.seen)
        state = efml_to_elmo(read_efml(self.path))[1]
        return {name: state[name] for name in names}


def load_efml(path: str | Path, lang: str = "xx"):
    """(`ElmoModel` in eval mode, `ElmoTokenizer` with the model's lexicons) from an EFML directory.

    `lang`: the spaCy language whose tokenizer splits raw text for the HF tokenizer (EFML
    directories do not say; "xx" is spaCy's multi-language tokenizer). The model records the
    directory (`EfmlFiles`: its `converted_from`, which the card `save_pretrained` writes names, and
    where a low precision reads the fp32 weights back from).
    """
    from ..hf.configuration_elmo import ElmoConfig
    from ..hf.modeling_elmo import ElmoModel
    from ..hf.tokenization_elmo import ElmoTokenizer

    config_kwargs, state, char_lexicon, word_lexicon = efml_to_elmo(read_efml(path))
    model = ElmoModel(ElmoConfig(**config_kwargs))
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not k.startswith("scalar_mixes.")]
    if missing or result.unexpected_keys:  # efml_to_elmo and ElmoModel disagree: a bug, not bad input
        raise RuntimeError(
            f"{path}: mapped weights do not fit the model (missing {missing}, unexpected {result.unexpected_keys})"
        )
    model.attach_weights_files(EfmlFiles.of(path))
    tokenizer = ElmoTokenizer(
        max_characters_per_token=model.config.max_characters_per_token,
        lang=lang,
        char_vocab=char_lexicon,
        word_vocab=word_lexicon,
    )
    return model.eval(), tokenizer


def describe_efml(path: str | Path) -> str:
    """The directory as a model card names it (its name only, as `legacy.describe_legacy`)."""
    return f"the ELMoForManyLangs directory `{Path(path).name}`"


__all__ = [
    "EfmlFiles",
    "CHAR_SPECIALS",
    "KNOWN_ARCHITECTURES",
    "WORD_SPECIALS",
    "EfmlArchitecture",
    "EfmlDirectory",
    "EfmlEncoder",
    "EfmlFormatError",
    "EfmlTokenEmbedder",
    "Entry",
    "check_efml_directory",
    "describe_efml",
    "efml_to_elmo",
    "load_efml",
    "is_efml_directory",
    "read_architecture",
    "read_efml",
    "read_lexicon",
    "read_state_dict",
    "weight_table",
]
