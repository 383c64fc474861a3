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
* `token_embedder.pkl`, `encoder.pkl`: legacy-format torch state dicts (names and shapes:
  `expected_token_embedder`, `expected_encoder`), read only with `torch.load(..., weights_only=True)`.

The runtime's token encoding (implemented by the tokenizer, stated here for the mapping): each
sentence is wrapped in `<bos>` / `<eos>` tokens; a token longer than max_characters_per_token − 2
characters is cut before both lookups; words are looked up as written (unknown: `<oov>`); a token's
character row is `<pad>`-filled with the id of `<eow>` at position 0 and that of `<bow>` after the
last character (the runtime swaps the two names; the released weights were trained that way).

The mapping (`efml_to_elmo`), to our layout:

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

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .configuration_elmo import read_json_object
from .legacy import LegacyFormatError

CHAR_SPECIALS = ("<oov>", "<pad>", "<bos>", "<eos>", "<bow>", "<eow>")
WORD_SPECIALS = ("<oov>", "<pad>", "<bos>", "<eos>")

# the architectures the package ships (configs/*.json), by the basename a config.json names
KNOWN_ARCHITECTURES: dict[str, dict] = {
    "cnn_50_100_512_4096_sample.json": {
        "token_embedder": {
            "name": "cnn",
            "activation": "relu",
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2,
            "word_dim": 100,
            "char_dim": 50,
            "max_characters_per_token": 50,
        },
        "encoder": {"name": "elmo", "projection_dim": 512, "dim": 4096, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
    },
}

_GATES_ALLENNLP_TO_TF = (0, 2, 1, 3)  # (i, f, j, o) chunks → (i, j, f, o)


class EfmlFormatError(LegacyFormatError):
    """An ELMoForManyLangs directory is incomplete or does not match the layout its runtime reads."""


@dataclass
class EfmlDirectory:
    """A validated ELMoForManyLangs model directory, as its runtime would load it (EFML ids)."""

    path: Path
    architecture: dict
    architecture_source: str  # the file it came from, or the built-in table entry
    char_lexicon: dict[str, int]
    word_lexicon: dict[str, int] | None  # None when word_dim is 0
    token_embedder: dict[str, torch.Tensor]
    encoder: dict[str, torch.Tensor]


def is_efml_directory(path: str | Path) -> bool:
    """True for a folder that is meant as an ELMoForManyLangs model: its config.json holds
    `config_path`, or it has no config.json but token_embedder.pkl or encoder.pkl. Whether it is
    complete is `check_efml_directory`'s to say."""
    directory = Path(path)
    if not directory.is_dir():
        return False
    if not (directory / "config.json").is_file():
        return any((directory / name).is_file() for name in ("token_embedder.pkl", "encoder.pkl"))
    try:
        config = read_json_object(directory / "config.json", EfmlFormatError)
    except (EfmlFormatError, OSError):
        return False
    return "config_path" in config


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_architecture(path: str | Path) -> tuple[dict, str]:
    """The architecture dict a directory's config.json names, and where it was found."""
    directory = Path(path)
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise EfmlFormatError(
            f"{config_file}: no such file; expected the ELMoForManyLangs config naming the architecture json"
        )
    config_path = read_json_object(config_file, EfmlFormatError).get("config_path")
    if not isinstance(config_path, str) or not config_path.strip():
        raise EfmlFormatError(f"{config_file}: field 'config_path' is {config_path!r}; expected the name of the architecture json")
    basename = re.split(r"[\\/]", config_path)[-1]
    # an absolute config_path stays absolute; a bare file name is one candidate, tried once
    candidates = list(dict.fromkeys((directory / config_path, directory / basename)))
    for candidate in candidates:
        if candidate.is_file():
            return read_json_object(candidate, EfmlFormatError), str(candidate)
    tried = [str(candidate) for candidate in candidates]
    if basename in KNOWN_ARCHITECTURES:
        return KNOWN_ARCHITECTURES[basename], f"{config_file} (config_path {basename!r}: the package's built-in architecture)"
    raise EfmlFormatError(
        f"{config_file}: config_path {config_path!r} names no architecture: tried {', '.join(tried)} and the "
        f"package's built-in ones ({', '.join(sorted(KNOWN_ARCHITECTURES))}); put that json in the directory"
    )


def _check_architecture(arch: dict, source: str) -> None:
    def fail(problem: str):
        raise EfmlFormatError(f"{source}: {problem}")

    sections = {}
    for section in ("token_embedder", "encoder"):
        if not isinstance(arch.get(section), dict):
            fail(f"missing section '{section}'")
        sections[section] = arch[section]
    emb, enc = sections["token_embedder"], sections["encoder"]

    def field(section: str, name: str):
        values = sections[section]
        if name not in values:
            fail(f"missing field '{section}.{name}'")
        return values[name]

    def integer(section: str, name: str, minimum: int) -> int:
        value = field(section, name)
        if not _is_int(value) or value < minimum:
            fail(f"field '{section}.{name}' is {value!r}; expected an integer >= {minimum}")
        return value

    for section in ("token_embedder", "encoder"):
        if not isinstance(field(section, "name"), str):
            fail(f"field '{section}.name' is {sections[section]['name']!r}; expected a string")
    if emb["name"].lower() != "cnn":
        fail(
            f"token_embedder.name is {emb['name']!r}: the released models use the cnn token embedder; "
            "this one is not supported"
        )
    if enc["name"].lower() != "elmo":
        fail(f"encoder.name is {enc['name']!r}: only the 'elmo' biLM encoder (the released models') is supported")
    if integer("token_embedder", "char_dim", 0) == 0:
        fail("token_embedder.char_dim is 0 (a word-only model without the character CNN): not supported")
    integer("token_embedder", "word_dim", 0)
    integer("token_embedder", "n_highway", 0)
    max_chars = integer("token_embedder", "max_characters_per_token", 3)
    activation = field("token_embedder", "activation")
    if activation not in ("relu", "tanh"):
        fail(f"field 'token_embedder.activation' is {activation!r}; expected 'relu' or 'tanh'")
    filters = field("token_embedder", "filters")
    if not isinstance(filters, list) or not filters or not all(
        isinstance(f, list) and len(f) == 2 and all(_is_int(x) and x >= 1 for x in f) and f[0] <= max_chars
        for f in filters
    ):
        fail(
            f"field 'token_embedder.filters' is {filters!r}; expected [width, number] pairs of positive "
            f"integers, widths <= max_characters_per_token ({max_chars})"
        )
    dim, proj = integer("encoder", "dim", 1), integer("encoder", "projection_dim", 1)
    integer("encoder", "n_layers", 1)
    if proj >= dim:
        fail(
            f"encoder.projection_dim ({proj}) is not below encoder.dim ({dim}): the LSTM then keeps a square "
            "projection that this biLM does not have; not supported"
        )
    for name in ("cell_clip", "proj_clip"):
        value = field("encoder", name)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0):
            fail(f"field 'encoder.{name}' is {value!r}; expected a number >= 0 or null")


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
                f"{path}: line {here} has {len(fields)} tab-separated fields; expected 'token<TAB>id'{_line_break_note(piece)}"
            )
        token, raw = fields
        try:
            index = int(raw)
        except ValueError:
            raise EfmlFormatError(f"{path}: line {here}: id {raw!r} is not an integer{_line_break_note(piece)}") from None
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


def expected_token_embedder(arch: dict, n_chars: int, n_words: int | None) -> dict[str, tuple[int, ...]]:
    """token_embedder.pkl's tensor names and shapes for an architecture and lexicon sizes."""
    emb, proj = arch["token_embedder"], arch["encoder"]["projection_dim"]
    char_dim, word_dim = emb["char_dim"], emb["word_dim"]
    n_filters = sum(num for _, num in emb["filters"])
    shapes: dict[str, tuple[int, ...]] = {}
    if word_dim > 0:
        shapes["word_emb_layer.embedding.weight"] = (n_words, word_dim)
    shapes["char_emb_layer.embedding.weight"] = (n_chars, char_dim)
    for i, (width, num) in enumerate(emb["filters"]):
        shapes[f"convolutions.{i}.weight"] = (num, char_dim, width)
        shapes[f"convolutions.{i}.bias"] = (num,)
    for k in range(emb["n_highway"]):
        shapes[f"highways._layers.{k}.weight"] = (2 * n_filters, n_filters)
        shapes[f"highways._layers.{k}.bias"] = (2 * n_filters,)
    shapes["projection.weight"] = (proj, word_dim + n_filters)
    shapes["projection.bias"] = (proj,)
    return shapes


def expected_encoder(arch: dict) -> dict[str, tuple[int, ...]]:
    """encoder.pkl's tensor names and shapes (every layer reads projection_dim-wide inputs)."""
    enc = arch["encoder"]
    hidden, proj = enc["dim"], enc["projection_dim"]
    shapes: dict[str, tuple[int, ...]] = {}
    for layer in range(enc["n_layers"]):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{layer}"
            shapes[f"{prefix}.input_linearity.weight"] = (4 * hidden, proj)
            shapes[f"{prefix}.state_linearity.weight"] = (4 * hidden, proj)
            shapes[f"{prefix}.state_linearity.bias"] = (4 * hidden,)
            shapes[f"{prefix}.state_projection.weight"] = (proj, hidden)
    return shapes


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:4])
    return shown + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")


def read_state_dict(
    path: str | Path, expected: dict[str, tuple[int, ...]], hints: dict[str, str] | None = None
) -> dict[str, torch.Tensor]:
    """A .pkl state dict loaded with weights_only=True and checked name by name against `expected`."""
    path = Path(path)
    if not path.is_file():
        raise EfmlFormatError(f"{path}: weights file not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        what = f"calls {found.group(1)}" if found else "holds objects other than tensors"
        raise EfmlFormatError(
            f"{path}: refused: the pickle {what}, which would run code when unpickled; a state dict holds only "
            "tensors (loaded with torch.load(weights_only=True))"
        ) from None
    except Exception as err:  # noqa: BLE001 - any failure to parse the file is a broken file, reported in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        raise EfmlFormatError(
            f"{path}: not a readable PyTorch state dict (truncated or corrupt?): {type(err).__name__}: {first}"
        ) from None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        raise EfmlFormatError(f"{path}: expected a state dict of named tensors, found {type(state).__name__}")
    missing = [name for name in expected if name not in state]
    if missing:
        raise EfmlFormatError(
            f"{path}: missing tensor(s) {_names(missing)}; '{missing[0]}' should have shape {list(expected[missing[0]])}"
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
            raise EfmlFormatError(f"{path}: tensor '{name}' has shape {list(tensor.shape)}, expected {list(shape)}{hint}")
        if not tensor.is_floating_point():
            raise EfmlFormatError(f"{path}: tensor '{name}' has dtype {tensor.dtype}, expected floating point")
        bad = int((~torch.isfinite(tensor)).sum())
        if bad:
            raise EfmlFormatError(f"{path}: tensor '{name}' contains {bad} NaN/inf values")
    return dict(state)


def check_efml_directory(path: str | Path) -> tuple[dict, str]:
    """Checks an ELMoForManyLangs model directory without reading its lexicons or weights: its
    architecture is found and supported, and every file the runtime reads is there. Returns
    `read_architecture`'s (architecture, source); every problem is one EfmlFormatError line."""
    directory = Path(path)
    if not directory.is_dir():
        raise EfmlFormatError(f"{directory}: not a directory (an ELMoForManyLangs model is a folder)")
    architecture, source = read_architecture(directory)
    _check_architecture(architecture, source)
    word_dim = architecture["token_embedder"]["word_dim"]
    needed = {
        "char.dic": "character lexicon",
        "word.dic": f"word lexicon (word_dim is {word_dim})",
        "token_embedder.pkl": "token embedder weights",
        "encoder.pkl": "biLSTM weights",
    }
    if word_dim == 0:
        del needed["word.dic"]
    for name, what in needed.items():
        if not (directory / name).is_file():
            raise EfmlFormatError(f"{directory / name}: no such file; expected the ELMoForManyLangs {what}")
    return architecture, source


def read_efml(path: str | Path) -> EfmlDirectory:
    """Reads and validates an ELMoForManyLangs model directory; every problem is one EfmlFormatError line."""
    directory = Path(path)
    architecture, source = check_efml_directory(directory)
    emb = architecture["token_embedder"]
    char_lexicon = read_lexicon(directory / "char.dic", CHAR_SPECIALS)
    word_lexicon = read_lexicon(directory / "word.dic", WORD_SPECIALS) if emb["word_dim"] > 0 else None
    n_words = len(word_lexicon) if word_lexicon is not None else None
    hints = {
        "char_emb_layer.embedding.weight": f"char.dic has {len(char_lexicon)} entries, char_dim is {emb['char_dim']}",
        "word_emb_layer.embedding.weight": f"word.dic has {n_words} entries, word_dim is {emb['word_dim']}",
    }
    token_embedder = read_state_dict(
        directory / "token_embedder.pkl", expected_token_embedder(architecture, len(char_lexicon), n_words), hints
    )
    encoder = read_state_dict(directory / "encoder.pkl", expected_encoder(architecture))
    return EfmlDirectory(directory, architecture, source, char_lexicon, word_lexicon, token_embedder, encoder)


def _ordered(lexicon: dict[str, int], first: list[str], skip: tuple[str, ...] = ()) -> list[str]:
    """`first`, then the other tokens (minus `skip`) in EFML id order."""
    rest = sorted((t for t in lexicon if t not in first and t not in skip), key=lexicon.__getitem__)
    return first + rest


def _lstm_to_tf(weight: torch.Tensor) -> torch.Tensor:
    """AllenNLP [4H] or [4H, in] in gate order (i, f, j, o) → (i, j, f, o), a matrix transposed to x·W."""
    chunks = weight.float().chunk(4, dim=0)
    reordered = torch.cat([chunks[g] for g in _GATES_ALLENNLP_TO_TF], dim=0)
    return reordered.t().contiguous() if reordered.dim() == 2 else reordered


def efml_to_elmo(
    d: EfmlDirectory,
) -> tuple[dict, dict[str, torch.Tensor], dict[str, int], dict[str, int] | None]:
    """(ElmoConfig kwargs, ElmoModel state dict (float32), char lexicon → our ids, word lexicon → our ids or None)."""
    emb, enc = d.architecture["token_embedder"], d.architecture["encoder"]
    te = {k: v.float() for k, v in d.token_embedder.items()}
    word_dim = emb["word_dim"]
    state: dict[str, torch.Tensor] = {}

    # Characters. Our id 2 begins a word and 3 ends it. The runtime writes the id of `<eow>` at a
    # word's start and that of `<bow>` after its end (`bow_id, eow_id = char2id['<eow>'],
    # char2id['<bow>']`), and the released weights were trained so; we follow the runtime: our 2
    # (named `<bow>` in the returned lexicon) gets EFML's `<eow>` row, our 3 (`<eow>`) its `<bow>` row.
    efml_chars = _ordered(d.char_lexicon, ["<pad>", "<eow>", "<bow>", "<bos>", "<eos>", "<oov>"])
    our_name = {"<eow>": "<bow>", "<bow>": "<eow>"}
    char_rows = te["char_emb_layer.embedding.weight"]
    table = torch.zeros(1 + len(efml_chars), emb["char_dim"])  # row 0: padding of whole tokens
    table[1:] = char_rows[torch.tensor([d.char_lexicon[t] for t in efml_chars])]
    state["token_encoder.char_embedding.weight"] = table
    char_lexicon = {our_name.get(t, t): i for i, t in enumerate(efml_chars, start=1)}

    word_lexicon = None
    if word_dim > 0:
        words = _ordered(d.word_lexicon, ["<bos>", "<eos>", "<oov>"], skip=("<pad>",))
        rows = te["word_emb_layer.embedding.weight"]
        state["token_encoder.word_embedding.weight"] = rows[torch.tensor([d.word_lexicon[t] for t in words])].contiguous()
        word_lexicon = {t: i for i, t in enumerate(words)}

    for i in range(len(emb["filters"])):
        for part in ("weight", "bias"):
            state[f"token_encoder.convolutions.{i}.{part}"] = te[f"convolutions.{i}.{part}"].clone()
    for k in range(emb["n_highway"]):
        weight, bias = te[f"highways._layers.{k}.weight"], te[f"highways._layers.{k}.bias"]
        n = weight.shape[1]
        # AllenNLP: y = σ(z)·x + (1 − σ(z))·relu(T x), z = gate half; ours: y = g·relu(T x) + (1 − g)·x,
        # so g = 1 − σ(z) = σ(−z): the gate half negated
        state[f"token_encoder.highways.{k}.transform.weight"] = weight[:n].contiguous()
        state[f"token_encoder.highways.{k}.transform.bias"] = bias[:n].contiguous()
        state[f"token_encoder.highways.{k}.gate.weight"] = (-weight[n:]).contiguous()
        state[f"token_encoder.highways.{k}.gate.bias"] = (-bias[n:]).contiguous()
    # projection(cat([word, chars])) = word_projection(word) + projection(chars)
    projection = te["projection.weight"]
    state["token_encoder.projection.weight"] = projection[:, word_dim:].contiguous()
    state["token_encoder.projection.bias"] = te["projection.bias"].clone()
    if word_dim > 0:
        state["token_encoder.word_projection.weight"] = projection[:, :word_dim].contiguous()

    for layer in range(enc["n_layers"]):
        tensors = {"input_weight": [], "hidden_weight": [], "bias": [], "proj_weight": []}
        for direction in ("forward", "backward"):  # index 0, 1
            prefix = f"{direction}_layer_{layer}"
            tensors["input_weight"].append(_lstm_to_tf(d.encoder[f"{prefix}.input_linearity.weight"]))
            tensors["hidden_weight"].append(_lstm_to_tf(d.encoder[f"{prefix}.state_linearity.weight"]))
            tensors["bias"].append(_lstm_to_tf(d.encoder[f"{prefix}.state_linearity.bias"]))
            tensors["proj_weight"].append(d.encoder[f"{prefix}.state_projection.weight"].float().t())
        for name, values in tensors.items():
            state[f"encoder.layers.{layer}.{name}"] = torch.stack(values).contiguous()

    config = {
        "char_vocab_size": table.shape[0],
        "word_vocab_size": len(word_lexicon) if word_lexicon is not None else 0,
        "word_embedding_dim": word_dim,
        "char_embedding_dim": emb["char_dim"],
        "filters": [list(f) for f in emb["filters"]],
        "n_highway": emb["n_highway"],
        "activation": emb["activation"],
        "max_characters_per_token": emb["max_characters_per_token"],
        "num_layers": enc["n_layers"],
        "lstm_dim": enc["dim"],
        "projection_dim": enc["projection_dim"],
        "cell_clip": None if enc["cell_clip"] is None else float(enc["cell_clip"]),
        "proj_clip": None if enc["proj_clip"] is None else float(enc["proj_clip"]),
        "use_skip_connections": True,
        "forget_bias": 0.0,
    }
    return config, state, char_lexicon, word_lexicon




def load_efml(path: str | Path, lang: str = "xx"):
    """(`ElmoModel` in eval mode, `ElmoTokenizer` with the model's lexicons) from an EFML directory.

    `lang`: the spaCy language whose tokenizer splits raw text for the HF tokenizer (EFML
    directories do not say; "xx" is spaCy's multi-language tokenizer).
    """
    from .modeling_elmo import ElmoModel
    from .configuration_elmo import ElmoConfig
    from .tokenization_elmo import ElmoTokenizer

    config_kwargs, state, char_lexicon, word_lexicon = efml_to_elmo(read_efml(path))
    model = ElmoModel(ElmoConfig(**config_kwargs))
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not k.startswith("scalar_mixes.")]
    if missing or result.unexpected_keys:  # efml_to_elmo and ElmoModel disagree: a bug, not bad input
        raise RuntimeError(f"{path}: mapped weights do not fit the model (missing {missing}, unexpected {result.unexpected_keys})")
    tokenizer = ElmoTokenizer(
        max_characters_per_token=model.config.max_characters_per_token, lang=lang,
        char_vocab=char_lexicon, word_vocab=word_lexicon,
    )
    return model.eval(), tokenizer


__all__ = [
    "CHAR_SPECIALS",
    "KNOWN_ARCHITECTURES",
    "WORD_SPECIALS",
    "EfmlDirectory",
    "EfmlFormatError",
    "check_efml_directory",
    "efml_to_elmo",
    "load_efml",
    "expected_encoder",
    "expected_token_embedder",
    "is_efml_directory",
    "read_architecture",
    "read_efml",
    "read_lexicon",
    "read_state_dict",
]
