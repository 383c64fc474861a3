"""A model directory: its one writer (weights, config, tokenizer and model card, together), and the
checks a directory passes when it is read.

`save_model_directory(directory, model, tokenizer, card=...)` writes

- config.json + model.safetensors (`PreTrainedModel.save_pretrained`, without progress bars),
- the tokenizer files (tokenizer_config.json with every setting: max_characters_per_token, lang;
  char_vocab.json / word_vocab.json for a model with a character or word lexicon),
- README.md, the model card (`model_card.render_model_card`; `card=False` for directories that
  only this package reads, e.g. the biLM inside a spaCy pipeline or a checkpoint),

The files it creates get the mode any new file gets there (0644 under umask 022: a system-wide
install or a `spacy package` archive must be readable by other users; safetensors writes its file
0600), and a file it replaces keeps the mode it had; other files in the folder are left alone. A
README.md that this package did not write (no `model_card.CARD_MARK` line) is kept, with one logged line.
`ElmoModel.save_pretrained` / `push_to_hub`, `spacy-elmo convert`, pretraining, its checkpoints and
the spaCy component all write through it.

`load_strict` makes `ElmoModel.from_pretrained` strict: a config.json with unknown fields or another
model type, weights files that are truncated or not safetensors, missing or mis-shaped tensors and
NaN/inf weights raise `ElmoLoadError` naming the file; `check_loading_arguments` refuses, before
anything is read, an argument the loader does not honour.

`check_directory` is the cheap check of a local model directory (no weights read: a safetensors file
is 8 bytes of header length, a JSON header giving each tensor's dtype, shape and offsets, then the
data, so the header tells whether the file is whole and what it holds): config.json is a valid
`ElmoConfig`, every weights file is whole with floating-point tensors of the names and shapes that
config describes, and the tokenizer files are JSON objects. The spaCy component makes it when it is
added (`formats.references.HfFolder.check`), as for legacy and ELMoForManyLangs files.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import stat
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError

from .. import compat
from ..compat import CONFIG_KEYS_OF_EITHER_LINE, base_config_fields
from ..constants import (
    CARD_FILE,
    CONFIG_FILE,
    PICKLED_WEIGHTS_FILE,
    SPECIAL_TOKENS_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILES,
    WEIGHTS_FILE,
    WEIGHTS_INDEX,
)
from ..files import check_input_file
from ..precision import check_precision
from ..quiet import quiet_hf
from .configuration_elmo import ElmoConfig, config_error_message, read_json_object
from .model_card import write_model_card


def _files(directory: Path) -> dict[str, os.stat_result]:
    return {p.name: p.stat() for p in directory.iterdir() if p.is_file()}


def _new_file_mode(directory: Path) -> int:
    """The mode a file created in `directory` gets (0o666 less the umask), read without changing
    the process umask: from /proc/self/status on Linux, else from a file created and removed here."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    probe = directory / f".mode-probe-{uuid.uuid4().hex}"
    fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    try:
        return stat.S_IMODE(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
        os.unlink(probe)


def _set_modes(directory: Path, before: dict[str, os.stat_result]) -> None:
    """Gives the files this save created (new names, or names replaced by a new file) the mode a new
    file gets here, or the mode of the file each replaced; files it rewrote in place keep theirs."""
    created = {
        name: st for name, st in _files(directory).items() if name not in before or before[name].st_ino != st.st_ino
    }
    default = _new_file_mode(directory) if created else 0
    for name, st in created.items():
        mode = stat.S_IMODE(before[name].st_mode) if name in before else default
        if stat.S_IMODE(st.st_mode) != mode:
            os.chmod(directory / name, mode)


def default_tokenizer(model, directory: Path | None = None):
    """The tokenizer a model is saved with when none is given: the one already in `directory` if
    it fits the model, else the UTF-8 tokenizer (models without a lexicon only)."""
    from .tokenization_elmo import ElmoTokenizer

    config = model.config
    if directory is not None and (directory / TOKENIZER_CONFIG_FILE).is_file():
        tokenizer = ElmoTokenizer.from_pretrained(str(directory))
        try:
            tokenizer.check_model(config)
            return tokenizer
        except ValueError:
            pass
    if config.char_vocab_size or config.word_vocab_size:
        raise ValueError(
            "this model has a character or word lexicon, which its tokenizer holds: pass the tokenizer "
            "(model.save_pretrained(directory, tokenizer=tokenizer))"
        )
    return ElmoTokenizer(max_characters_per_token=config.max_characters_per_token)


def save_model_directory(
    directory, model, tokenizer=None, *, card: dict | Literal[False] | None = None, **save_kwargs
) -> Path:
    """Writes a complete model directory (see the module docstring); returns its path.

    tokenizer: an `ElmoTokenizer` that fits `model` (default: `default_tokenizer`); card: settings
    for `model_card.render_model_card` (license, language, source, training, reference; the source is
    by default the model's `converted_from`), or False for no README.md; save_kwargs: for
    `PreTrainedModel.save_pretrained` (e.g. max_shard_size).
    """
    from transformers import PreTrainedModel

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer if tokenizer is not None else default_tokenizer(model, directory)
    tokenizer.check_model(model.config)
    before = _files(directory)
    with quiet_hf():
        PreTrainedModel.save_pretrained(model, str(directory), **save_kwargs)
        tokenizer.save_pretrained(str(directory))
    if compat.SPECIAL_TOKENS_MAP and SPECIAL_TOKENS_FILE not in before:
        (directory / SPECIAL_TOKENS_FILE).unlink(missing_ok=True)  # `{}`: an ElmoTokenizer has none
    if card is not False:
        info: dict[str, Any] = dict(card or {})
        info.setdefault("language", tokenizer.lang)
        info.setdefault("source", model.converted_from)
        write_model_card(directory, model, **info)
    _set_modes(directory, before)
    return directory


# --- the save/push methods of ElmoPreTrainedModel -------------------------------------------------


def save_pretrained(
    self,
    save_directory,
    *args,
    tokenizer=None,
    model_card: dict | Literal[False] | None = None,
    push_to_hub: bool = False,
    **kwargs,
):
    """`PreTrainedModel.save_pretrained` writing a complete directory (`save_model_directory`): also
    the tokenizer (`tokenizer`, or the one already there, or the UTF-8 one) and the README.md card
    (`model_card` adds `render_model_card` settings; False skips it)."""
    hub = {k: kwargs.pop(k) for k in ("repo_id", "commit_message", "private", "token", "create_pr") if k in kwargs}
    if kwargs.get("is_main_process", True):
        save_model_directory(save_directory, self, tokenizer, card=model_card, **kwargs)
    if push_to_hub:
        self.push_to_hub(
            hub.pop("repo_id", Path(save_directory).name), tokenizer=tokenizer, model_card=model_card, **hub
        )


def push_to_hub(
    self,
    repo_id: str,
    *,
    tokenizer=None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    private: bool | None = None,
    token: bool | str | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    max_shard_size: int | str | None = "50GB",
    tags: Sequence[str] | None = None,
    model_card: dict | Literal[False] | None = None,
):
    """Uploads the complete model directory (`save_model_directory`: config.json, model.safetensors,
    the tokenizer files and this model's README.md card) in one commit, with huggingface_hub's
    public `create_repo` and `create_commit`."""
    from huggingface_hub import CommitOperationAdd, HfApi, ModelCard

    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    card: dict[str, Any] | Literal[False] = (
        {"reference": repo_id, **(model_card or {})} if model_card is not False else False
    )
    with tempfile.TemporaryDirectory() as tmp:
        save_model_directory(tmp, self, tokenizer, card=card, max_shard_size=max_shard_size)
        if tags and card is not False:
            written = ModelCard.load(os.path.join(tmp, CARD_FILE))
            written.data.tags = list(dict.fromkeys([*(written.data.tags or []), *tags]))
            written.save(os.path.join(tmp, CARD_FILE))
        operations = [
            CommitOperationAdd(path_in_repo=p.name, path_or_fileobj=str(p)) for p in sorted(Path(tmp).iterdir())
        ]
        return api.create_commit(
            repo_id,
            operations,
            commit_message=commit_message or "Upload model",
            commit_description=commit_description,
            revision=revision,
            create_pr=create_pr,
        )


# --- the checks of a model directory being read (ElmoPreTrainedModel.from_pretrained) ------------


class ElmoLoadError(ValueError):
    """A saved model (config.json + safetensors) is invalid or incomplete."""


def check_config_file(source: str) -> None:
    """Rejects a local config.json with unknown fields or the wrong model type, naming the file."""
    path = Path(source) / CONFIG_FILE
    if not path.is_file():
        return
    data = read_json_object(path, ElmoLoadError)
    if data.get("model_type", "elmo") != "elmo":
        raise ElmoLoadError(f"{path}: model_type is {data.get('model_type')!r}, expected 'elmo'")
    known = {f.name for f in dataclasses.fields(ElmoConfig)} | base_config_fields() | CONFIG_KEYS_OF_EITHER_LINE
    known.add("model_type")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ElmoLoadError(f"{path}: unknown field(s) {unknown}; known ELMo fields are {sorted(known)}")


def weights_name(source: str, variant: str | None = None) -> str:
    """The weights file of a local directory (what an error should name), else `source` itself."""
    for name in (WEIGHTS_FILE, WEIGHTS_INDEX):
        if (Path(source) / with_variant(name, variant)).is_file():
            return str(Path(source) / with_variant(name, variant))
    return source


def ignore_patterns(prefixes: Sequence[str]) -> list[str] | None:
    """`_keys_to_ignore_on_load_missing` for the tensors under these name prefixes (None where transformers
    would leave them on the meta device, `compat.IGNORE_MISSING_PATTERNS`: `load_strict` filters them)."""
    return [rf"^{re.escape(prefix)}" for prefix in prefixes] if compat.IGNORE_MISSING_PATTERNS else None


# what the model's tensors may be stored as (transformers casts them to the model's dtype); an integer
# tensor would be cast silently into nonsense
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")


def _not_a_file(path: Path, what: str) -> ElmoLoadError:
    if path.is_dir():
        return ElmoLoadError(f"{path}: is a directory, expected {what}")
    return ElmoLoadError(f"{path}: no such file; expected {what}")


def with_variant(name: str, variant: str | None) -> str:
    """HF's name of a weights file of a variant: model.safetensors → model.VARIANT.safetensors."""
    if not variant:
        return name
    *stem, suffix = name.split(".")
    return ".".join([*stem, variant, suffix])


def weights_files(directory: Path, variant: str | None = None) -> list[Path]:
    """The safetensors files of a local model directory: model.safetensors, or the shards its
    index lists (of `variant`, as HF names them: model.VARIANT.safetensors), or [] for a directory
    holding only pickled weights, which HF reads with `weights_only=True`. `ElmoLoadError` naming
    what is missing."""
    single = directory / with_variant(WEIGHTS_FILE, variant)
    index = directory / with_variant(WEIGHTS_INDEX, variant)
    if single.is_file():
        return [single]
    if index.is_file():
        weight_map = read_json_object(index, ElmoLoadError).get("weight_map")
        if not (isinstance(weight_map, dict) and weight_map and all(isinstance(v, str) for v in weight_map.values())):
            raise ElmoLoadError(f"{index}: expected a 'weight_map' of tensor name → shard file")
        shards = [directory / name for name in sorted(set(weight_map.values()))]
        for shard in shards:
            if not shard.is_file():
                raise _not_a_file(shard, f"a shard of the weights ({index.name} lists it)")
        return shards
    if not single.exists() and (directory / with_variant(PICKLED_WEIGHTS_FILE, variant)).is_file():
        return []
    raise _not_a_file(single, "the weights (an ELMo model folder holds config.json and model.safetensors)")


def _safetensors_problem(path: Path, size: int) -> str | None:
    """Why a safetensors file does not open, where its sizes tell (None: they do not)."""
    import json

    if size < 8:
        return f"truncated: {size} bytes, less than the 8 bytes of its header length"
    with open(path, "rb") as handle:
        length = int.from_bytes(handle.read(8), "little")
        if length > size - 8:
            return f"truncated or not safetensors: its header length says {length:,} bytes, {size - 8:,} follow"
        header = handle.read(length)
    try:
        entries = json.loads(header)
        end = max((e["data_offsets"][1] for k, e in entries.items() if k != "__metadata__"), default=0)
        described = 8 + length + int(end)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "its header is not the JSON of a safetensors file (corrupt?)"
    if described > size:
        return f"truncated: its header describes {described:,} bytes, the file has {size:,}"
    if described < size:
        return f"{size - described:,} bytes more than its header describes (corrupt?)"
    return None


def read_safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor name: (dtype, shape)} of a safetensors file, from its header alone (safetensors'
    own parser, which checks that the header is valid and the data covers the file exactly); no
    tensor is read. `ElmoLoadError` naming the file and what is wrong."""
    from safetensors import SafetensorError, safe_open

    if not path.is_file():
        raise _not_a_file(path, "the weights")
    try:
        check_input_file(path)  # (safetensors reports an unreadable file as "No such file or directory")
    except OSError as err:
        raise ElmoLoadError(str(err)) from None
    try:
        with safe_open(str(path), framework="pt") as handle:
            return {
                name: (piece.get_dtype(), tuple(piece.get_shape()))
                for name in handle.keys()
                for piece in (handle.get_slice(name),)
            }
    except SafetensorError as err:
        why = _safetensors_problem(path, path.stat().st_size) or " ".join(str(err).split())
        raise ElmoLoadError(f"{path}: not a readable safetensors file: {why}") from None
    except OSError as err:
        raise ElmoLoadError(f"{path}: cannot read it: {err.strerror or err}") from None


def check_weights(directory: Path, variant: str | None = None) -> dict[str, tuple[Path, tuple[int, ...]]]:
    """The weights files of a local directory, checked from their headers (`read_safetensors_header`):
    whole, valid, floating-point tensors. {tensor name: (its file, shape)}."""
    tensors: dict[str, tuple[Path, tuple[int, ...]]] = {}
    for path in weights_files(directory, variant):
        for name, (dtype, shape) in read_safetensors_header(path).items():
            if dtype not in FLOAT_DTYPES:
                expected = f"expected a floating-point one ({', '.join(FLOAT_DTYPES)})"
                raise ElmoLoadError(f"{path}: tensor '{name}' has dtype {dtype}, {expected}")
            tensors[name] = (path, shape)
    return tensors


def shapes_mismatch(weights, rows: Sequence[tuple[str, Sequence[int], Sequence[int]]]) -> ElmoLoadError:
    """The error for tensors whose shapes differ from what config.json describes: (name, file's, config's)."""
    shapes = [f"{name}: file {tuple(found)}, config.json {tuple(want)}" for name, found, want in sorted(rows)[:4]]
    return ElmoLoadError(f"{weights}: weight shapes do not match config.json ({'; '.join(shapes)})")


def tensors_missing(weights, names: Sequence[str]) -> ElmoLoadError:
    return ElmoLoadError(f"{weights}: the weights file lacks tensors {sorted(names)[:8]} required by config.json")


def read_config(directory: Path) -> ElmoConfig:
    """config.json of a local model directory as an `ElmoConfig` (`check_config_file`, then the
    config's own checks), or `ElmoLoadError` naming the file."""
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise _not_a_file(path, "the model's config.json")
    check_config_file(str(directory))
    try:
        return ElmoConfig.from_dict(read_json_object(path, ElmoLoadError))
    except (StrictDataclassClassValidationError, StrictDataclassFieldValidationError, ValueError, TypeError) as err:
        if isinstance(err, ElmoLoadError):
            raise
        raise ElmoLoadError(f"{directory}: invalid config.json: {config_error_message(err)}") from None


# the tensors that count what config.json counts: {field: (pattern of their names, what they are)}
COUNTED_TENSORS = {
    "num_layers": (re.compile(r"^encoder\.layers\.(\d+)\."), "LSTM layers"),
    "n_highway": (re.compile(r"^token_encoder\.highways\.(\d+)\."), "highway layers"),
    "filters": (re.compile(r"^token_encoder\.convolutions\.(\d+)\."), "convolutions"),
}


def _check_counts(config: ElmoConfig, names, weights, config_file) -> None:
    """The layers, highway layers and convolutions the weights hold are those config.json counts."""
    counts = {"num_layers": config.num_layers, "n_highway": config.n_highway, "filters": len(config.filters)}
    for field, (pattern, what) in COUNTED_TENSORS.items():
        found = {int(m.group(1)) for name in names if (m := pattern.match(name))}
        held = max(found) + 1 if found else 0
        if held != counts[field]:
            raise ElmoLoadError(
                f"{weights}: holds {held} {what}, field '{field}' of {config_file} says {counts[field]} "
                "(do config.json and the weights belong together?)"
            )


def unexpected_tensors(weights, config_file, names: Sequence[str]) -> ElmoLoadError:
    return ElmoLoadError(
        f"{weights}: holds tensor(s) {sorted(names)[:4]} that {config_file} does not describe "
        "(do config.json and the weights belong together?)"
    )


def _same_sizes(config: ElmoConfig, other: ElmoConfig) -> bool:
    return all(getattr(config, f) == getattr(other, f) for f in CONFIG_FIELDS - RUNTIME_CONFIG_FIELDS)


def check_directory(
    directory, model_class, variant: str | None = None, config: ElmoConfig | None = None, *, tokenizer: bool = True
) -> None:
    """The cheap check of a local model directory (see the module docstring): no tensor is read;
    the names and shapes config.json implies come from `model_class` built on the meta device.
    Every tensor config.json describes is there, of its shape, and every tensor there is described
    (the optional ones, `_optional_weights` and `_keys_to_ignore_on_load_unexpected`: scalar mixes and
    the LM head, may be absent and may be more than config.json describes). `ElmoLoadError`, one
    line naming the file. `config`: the one the model is built from, when given (AutoModel's, read
    from the folder's config.json: errors name the file when they agree); `tokenizer`: check the
    tokenizer's files too (the model alone does not read them)."""
    directory = Path(directory)
    config_file: Path | str = directory / CONFIG_FILE
    if config is None:
        config = read_config(directory)
    elif not (Path(config_file).is_file() and _same_sizes(config, read_config(directory))):
        config_file = "the config given"
    tensors = check_weights(directory, variant)
    for name in TOKENIZER_FILES if tokenizer else ():
        path = directory / name
        if path.is_dir():
            raise _not_a_file(path, "a tokenizer file")
        if path.exists():
            read_json_object(path, ElmoLoadError)
    if not tensors:  # pickled weights only: HF reads them (weights_only=True) and load_strict checks them
        return
    with torch.device("meta"):  # shapes without memory or initialization
        expected = {name: tuple(t.shape) for name, t in model_class(config).state_dict().items()}
    ignored = tuple(getattr(model_class, "_keys_to_ignore_on_load_unexpected", None) or ())
    prefix = f"{model_class.base_model_prefix}."
    found: dict[str, tuple[Path, tuple[int, ...]]] = {}
    for name, entry in tensors.items():
        if any(re.search(pattern, name) for pattern in ignored):
            continue
        # HF maps a model's base (e.g. ElmoForBidirectionalLM's `elmo.`) onto the bare model's names
        bare = name[len(prefix) :] if name.startswith(prefix) and name not in expected else name
        found[bare] = entry
    optional = tuple(getattr(model_class, "_optional_weights", ()))
    files = sorted({path for path, _ in tensors.values()})
    weights = files[0] if len(files) == 1 else directory / with_variant(WEIGHTS_INDEX, variant)
    bare_names = [name[len(prefix) :] if name.startswith(prefix) else name for name in found]
    _check_counts(config, bare_names, weights, config_file)
    missing = [name for name in expected if name not in found and not name.startswith(optional)]
    if missing:
        raise tensors_missing(weights, missing)
    extra = [name for name in found if name not in expected and not name.startswith(optional)]
    if extra:
        raise unexpected_tensors(weights, config_file, extra)
    wrong = [
        (name, found[name][1], shape) for name, shape in expected.items() if name in found and found[name][1] != shape
    ]
    if wrong:
        raise shapes_mismatch(found[sorted(wrong)[0][0]][0], wrong)


# The keyword arguments of `from_pretrained` this loader honours, besides overrides of `ElmoConfig`'s own
# fields. Anything else HF's `from_pretrained` takes is refused rather than passed on: HF drops some
# silently (low_cpu_mem_usage, from_tf, ...), others have nothing to act on in an LSTM (attn_implementation,
# quantization_config, generation_config, ...) or need what this package does not install (device_map:
# accelerate), and an error from deep inside HF would surface as "invalid config.json".
LOADING_ARGUMENTS = (
    # where the files come from (HF's download settings; AutoModel passes them on)
    "cache_dir",
    "force_download",
    "local_files_only",
    "proxies",
    "revision",
    "subfolder",
    "token",
    # how they are read
    "config",
    "dtype",
    "torch_dtype",
    "use_safetensors",
    "variant",
    "disable_mmap",
    "key_mapping",
    "weights_only",
    "ignore_mismatched_sizes",
    "output_loading_info",
    # what AutoModel and pipelines pass along
    "trust_remote_code",  # (this package's own class: there is no remote code to trust or refuse)
    "adapter_kwargs",
    "_from_auto",
    "_from_pipeline",
)
# arguments honoured at one setting only: {name: (the values taken, why no other)}
ONLY_AT: dict[str, tuple[tuple[Any, ...], str]] = {
    "ignore_mismatched_sizes": ((False,), "mis-shaped tensors are always refused (ElmoLoadError)"),
    "weights_only": ((True,), "weights are read without running pickled code"),
    "adapter_kwargs": ((None, {}), "PEFT adapters are not supported"),
}
# the fields an ElmoConfig adds to HF's; the base fields (output_hidden_states, return_dict, ...) are not read
CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(ElmoConfig)) - base_config_fields()
# those that change how the model computes, not which tensors it has
RUNTIME_CONFIG_FIELDS = frozenset({"lstm_implementation", "precision"})


def check_loading_arguments(what: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Refuses, in one line naming it, an argument of `what` (e.g. "ElmoModel.from_pretrained") that the
    strict loader does not honour: positional arguments after the path (the model takes only its
    config), a name outside `LOADING_ARGUMENTS` and the config's fields (`TypeError`), a setting
    `ONLY_AT` refuses, an invalid `precision`, or field overrides beside a config object, which HF
    would not apply to it (`ValueError`)."""
    if args:
        raise TypeError(f"{what} takes no positional arguments after the model path, got {len(args)}")
    unknown = sorted(set(kwargs) - set(LOADING_ARGUMENTS) - CONFIG_FIELDS)
    if unknown:
        # (the _ ones are what AutoModel and pipelines add, not the caller's)
        public = [name for name in LOADING_ARGUMENTS if not name.startswith("_")]
        raise TypeError(
            f"{what} does not support {', '.join(unknown)}; it takes {', '.join(public)} "
            "and ElmoConfig fields (e.g. num_output_representations, lstm_implementation)"
        )
    for name, (values, why) in ONLY_AT.items():
        if name in kwargs and not any(kwargs[name] == value for value in values):
            raise ValueError(f"{what}: {name}={kwargs[name]!r} is not supported: {why}")
    if "precision" in kwargs:  # the one check of a precision (one line), not the config's validation
        check_precision(kwargs["precision"], f"{what}: precision")
    overrides = sorted(set(kwargs) & CONFIG_FIELDS)
    if overrides and isinstance(kwargs.get("config"), ElmoConfig):
        raise ValueError(
            f"{what}: {', '.join(overrides)} would not change the config= given; set them on that ElmoConfig instead"
        )


def load_strict(
    load: Callable[..., Any],
    source: str,
    optional_weights: Sequence[str],
    variant: str | None = None,
    *,
    model_class=None,
    arguments: dict[str, Any] | None = None,
    checked: bool = False,
) -> tuple[Any, dict]:
    """(model, loading info) from `load(output_loading_info=True, ignore_mismatched_sizes=True)`
    (HF's `from_pretrained`: safetensors, `weights_only=True`), made strict: a bad config.json,
    tensors missing (other than those under the `optional_weights` prefixes), mis-shaped or not
    described by the config, and NaN/inf weights raise `ElmoLoadError` naming `source` or its weights
    file; so do weights files that are not whole safetensors. A local folder passes the cheap checks
    first, before any weight is read (`check_directory` for `model_class`, its config.json against
    its weights; without a `model_class`, or where the loading `arguments` give a config or change
    its sizes, the weights' headers alone: the loading info is checked after); `checked`: the folder
    passed `check_directory` already (a model reference's check), so it is not checked again."""
    from safetensors import SafetensorError
    from transformers.utils import logging as hf_logging

    if not checked:
        check_config_file(source)
    if Path(source).is_dir() and not checked:
        arguments = arguments or {}
        given = arguments.get("config")
        sized = set(arguments) & (CONFIG_FIELDS - RUNTIME_CONFIG_FIELDS)  # (checked in the loading info)
        if model_class is not None and not sized and (given is not None or (Path(source) / CONFIG_FILE).is_file()):
            config = given if isinstance(given, ElmoConfig) else None
            check_directory(source, model_class, variant, config=config, tokenizer=False)
        else:
            check_weights(Path(source), variant)

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its LOAD REPORT table: the errors below say it in one line
    try:
        # mis-shaped tensors are reported in the loading info (and refused below), not raised
        with quiet_hf():
            model, info = load(output_loading_info=True, ignore_mismatched_sizes=True)
    except (StrictDataclassClassValidationError, StrictDataclassFieldValidationError, ValueError, TypeError) as err:
        if isinstance(err, ElmoLoadError):
            raise
        raise ElmoLoadError(f"{source}: invalid config.json: {config_error_message(err)}") from None
    except SafetensorError as err:  # a download (a hub id) that is not whole: HF reads no header first
        raise ElmoLoadError(
            f"{weights_name(source, variant)}: not a readable safetensors file: {' '.join(str(err).split())}"
        ) from None
    except (OSError, pickle.UnpicklingError) as err:
        # a pickled weights file (pytorch_model.bin) that torch.load(weights_only=True) refused: transformers 4.x
        # wraps the refusal in an OSError about TF checkpoints, 5.x raises it as it is
        refusal: BaseException | None = err
        while refusal is not None and not isinstance(refusal, pickle.UnpicklingError):
            refusal = refusal.__cause__ or refusal.__context__
        if refusal is None:
            raise
        reason = str(refusal).splitlines()[0] if str(refusal) else type(refusal).__name__
        raise ElmoLoadError(f"{source}: a pickled weights file, refused by weights_only loading ({reason})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    weights = weights_name(source, variant)
    if info.get("mismatched_keys"):
        raise shapes_mismatch(weights, compat.mismatched_shapes(info, model, Path(weights)))
    missing = [k for k in info["missing_keys"] if not k.startswith(tuple(optional_weights))]
    if missing:
        raise tensors_missing(weights, missing)
    extra = [k for k in info.get("unexpected_keys", ()) if not k.startswith(tuple(optional_weights))]
    if extra:
        raise unexpected_tensors(weights, "the config", extra)
    bad = [name for name, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise ElmoLoadError(f"{weights}: weights contain NaN/inf values in {bad[:8]}")
    return model, info


__all__ = [
    "save_model_directory",
    "default_tokenizer",
    "save_pretrained",
    "push_to_hub",
    "ElmoLoadError",
    "check_config_file",
    "weights_name",
    "with_variant",
    "weights_files",
    "read_safetensors_header",
    "check_weights",
    "read_config",
    "check_directory",
    "shapes_mismatch",
    "tensors_missing",
    "unexpected_tensors",
    "ignore_patterns",
    "check_loading_arguments",
    "load_strict",
]
