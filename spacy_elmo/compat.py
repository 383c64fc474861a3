"""What differs between the transformers and huggingface_hub releases this package supports, in one place.

Supported (setup.cfg): transformers 4.46.1 through 4.x and 5.13 through the latest 5.x (5.0-5.3: huggingface_hub's
`@strict` refuses their config base, whose `validate_rope` takes arguments; 5.4-5.12 load other weights than the
file's), huggingface_hub 0.32 through the latest; `make test-compat` runs the oldest (and transformers 4.53.2,
beside spacy-transformers 1.4.0), `make test` the newest. The rest of the package imports the names below instead
of asking which release is installed. Each entry says which release changed what; when the oldest supported release
has the new behaviour, its entry goes.

transformers
- 4.50 stopped writing `_name_or_path` (the folder a config was read from) into config.json
  (`SAVES_NAME_OR_PATH`: `ElmoConfig.to_dict` leaves it out before);
- 4.51 through 4.x return only the names of mismatched tensors in the loading info, 4.50 and 5.0 their shapes too
  (`mismatched_shapes`);
- 4.56 renamed the loading argument `torch_dtype` to `dtype` (and config.json's key with it): both are taken
  (`loading_arguments`, `CONFIG_KEYS_OF_EITHER_LINE`);
- 5.0 renamed `PretrainedConfig` to `PreTrainedConfig` (keeping the old name as an alias);
- 5.0 moves the tensors `_keys_to_ignore_on_load_missing` names off the meta device; 4.x leaves them there,
  unusable (`IGNORE_MISSING_PATTERNS`: without the patterns, `model_directory.load_strict` filters them);
- 5.0's AutoTokenizer makes the model's config before it looks a tokenizer class up, and making an `ElmoConfig`
  registers the tokenizer (`hf.register_auto_classes`); 4.x looks tokenizer_config.json's `tokenizer_class` up
  first, so the tokenizer is registered at import there (`REGISTER_TOKENIZER_AT_IMPORT`);
- 5.0 stopped writing special_tokens_map.json; 4.x writes `{}` for a tokenizer without special tokens, which the
  model directory's writer removes (`SPECIAL_TOKENS_MAP`);
- 5.4 (supported from 5.13) made `PreTrainedConfig` a `@strict` dataclass whose subclasses become dataclasses that
  pass unknown keyword arguments to `__post_init__`. `ElmoConfig` is written that way; before 5.4,
  `PreTrainedConfig` below is a base that does the same over the old `__init__(**kwargs)` config
  (`CONFIGS_ARE_DATACLASSES`: the supported releases without it are the 4.x ones);
- 5.4 added `logging.set_tqdm_hook` (`TQDM_HOOK`): before it, `quiet.quiet_hf` turns transformers' progress
  bars off with its global switch;
- not an entry to act on: 4.x initializes a module's parameters after its children's, 5.x before, so the same
  seed draws other initial weights for a new model (a pretraining run) under the two lines; saved weights load
  the same.

huggingface_hub
- 1.0's `@strict` validates `X | Y` annotations; 0.x only `typing.Union` (`Number`, `OptionalNumber`: the
  annotations of the configs);
- 1.0's `get_hf_file_metadata` retries a failed request only when asked (`retry_on_errors`); 0.x retries
  network errors five times, 23 s against a dead network (`ask_hub_once`);
- 1.x added `is_offline_mode()`; `hub_offline` reads the constant it returns, which every release has.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any, Union

import transformers
from huggingface_hub import __version__ as _hub_version
from packaging.version import Version

TRANSFORMERS_VERSION = Version(transformers.__version__)
HUB_VERSION = Version(_hub_version)

CONFIGS_ARE_DATACLASSES = TRANSFORMERS_VERSION >= Version("5.4.0.dev0")
TQDM_HOOK = TRANSFORMERS_VERSION >= Version("5.4.0.dev0")
IGNORE_MISSING_PATTERNS = TRANSFORMERS_VERSION >= Version("5.0.0.dev0")
SPECIAL_TOKENS_MAP = TRANSFORMERS_VERSION < Version("5.0.0.dev0")
MISMATCHED_NAMES_ONLY = Version("4.51.0.dev0") <= TRANSFORMERS_VERSION < Version("5.0.0.dev0")
SAVES_NAME_OR_PATH = TRANSFORMERS_VERSION < Version("4.50.0.dev0")
REGISTER_TOKENIZER_AT_IMPORT = TRANSFORMERS_VERSION < Version("5.0.0.dev0")
DTYPE_ARGUMENT = "dtype" if TRANSFORMERS_VERSION >= Version("4.56.0.dev0") else "torch_dtype"

# (typing.Union, not `X | Y`: huggingface_hub 0.x's @strict validates only the former)
Number = Union[float, int]  # noqa: UP007
OptionalNumber = Union[float, int, None]  # noqa: UP007

# keys of config.json that the base config of either line writes besides a model's own fields (the dtype
# under its two names, the version and architectures) and that a config.json may therefore hold
CONFIG_KEYS_OF_EITHER_LINE = frozenset({"dtype", "torch_dtype", "transformers_version", "architectures"})


if CONFIGS_ARE_DATACLASSES:
    PreTrainedConfig = transformers.PreTrainedConfig
else:

    def _accept_kwargs(cls):
        """The dataclass `__init__` of `cls` taking keywords only, the unknown ones passed to `__post_init__`
        (as transformers 5.4's `PreTrainedConfig.__init_subclass__` makes it)."""
        names = [f.name for f in dataclasses.fields(cls)]

        @functools.wraps(cls.__init__)
        def __init__(self, *args, **kwargs: Any) -> None:
            if args:
                raise ValueError(f"{cls.__name__} takes keyword arguments only, got {len(args)} positional")
            for f in dataclasses.fields(cls):
                if f.name in kwargs:
                    value = kwargs[f.name]
                elif f.default is not dataclasses.MISSING:
                    value = f.default
                elif f.default_factory is not dataclasses.MISSING:
                    value = f.default_factory()
                else:
                    raise TypeError(f"{cls.__name__}: missing field {f.name!r}")
                setattr(self, f.name, value)
            self.__post_init__(**{k: v for k, v in kwargs.items() if k not in names})

        cls.__init__ = __init__
        return cls

    @dataclasses.dataclass(repr=False, eq=False)
    class PreTrainedConfig(transformers.PretrainedConfig):  # type: ignore[no-redef]
        """transformers' config base before 5.4, made a dataclass with no fields of its own (as 5.4's
        has no fields a model's config reads): a subclass's annotated fields are set first, then the old
        `__init__` takes every other keyword (return_dict, dtype, architectures, ...) in `__post_init__`."""

        def __post_init__(self, **kwargs):
            transformers.PretrainedConfig.__init__(self, **kwargs)

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            _accept_kwargs(dataclasses.dataclass(cls, repr=False, kw_only=True))


@functools.cache
def base_config_fields() -> frozenset[str]:
    """The settings of transformers' own config base, which a model's config.json may hold: its dataclass
    fields from transformers 5.4, before it the keys of a default config's dict."""
    if CONFIGS_ARE_DATACLASSES:
        return frozenset(f.name for f in dataclasses.fields(PreTrainedConfig))
    return frozenset(transformers.PretrainedConfig().to_dict()) - {"model_type"}


def loading_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`from_pretrained`'s keyword arguments with the dtype under the name this release reads."""
    other = "torch_dtype" if DTYPE_ARGUMENT == "dtype" else "dtype"
    if other in kwargs:
        kwargs = dict(kwargs)
        value = kwargs.pop(other)
        kwargs.setdefault(DTYPE_ARGUMENT, value)
    return kwargs


def mismatched_shapes(info: dict, model, weights: Path) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(name, shape in the file, shape the model's config gives) of each tensor `from_pretrained(...,
    output_loading_info=True, ignore_mismatched_sizes=True)` did not load for its shape. Where the loading info
    holds only names, the file's shapes are read from `weights` (a local model.safetensors; () where it cannot be)."""
    if not MISMATCHED_NAMES_ONLY:
        return [(name, tuple(found), tuple(want)) for name, found, want in info["mismatched_keys"]]
    found: dict[str, tuple[int, ...]] = {}
    if weights.suffix == ".safetensors" and weights.is_file():
        from safetensors import safe_open

        with safe_open(str(weights), "pt") as handle:
            for key in handle.keys():  # noqa: SIM118  (a safetensors handle is no dict)
                shape = tuple(handle.get_slice(key).get_shape())
                found[key] = found[key.partition(".")[2]] = shape  # with and without a base model prefix
    state = model.state_dict()
    return [(name, found.get(name, ()), tuple(state[name].shape)) for name in info["mismatched_keys"]]


def ask_hub_once(url: str, timeout: float, token=None) -> str | None:
    """One HEAD request for a hub file, without retries (`token`: huggingface_hub's, None for the saved one): the
    commit the hub serves it from (its X-Repo-Commit header; None where the answer has none). Raises
    huggingface_hub's errors (RepositoryNotFoundError, EntryNotFoundError, HfHubHTTPError) or the network's."""
    if HUB_VERSION >= Version("1.0.0.dev0"):
        from huggingface_hub import get_hf_file_metadata

        return get_hf_file_metadata(url, token=token, timeout=timeout).commit_hash
    from huggingface_hub.constants import HUGGINGFACE_HEADER_X_REPO_COMMIT
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    response = get_session().head(url, headers=build_hf_headers(token=token), timeout=timeout)
    hf_raise_for_status(response)
    return response.headers.get(HUGGINGFACE_HEADER_X_REPO_COMMIT)


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set, as huggingface_hub read it at import."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


__all__ = [
    "TRANSFORMERS_VERSION",
    "HUB_VERSION",
    "CONFIGS_ARE_DATACLASSES",
    "TQDM_HOOK",
    "DTYPE_ARGUMENT",
    "Number",
    "OptionalNumber",
    "CONFIG_KEYS_OF_EITHER_LINE",
    "PreTrainedConfig",
    "base_config_fields",
    "loading_arguments",
    "mismatched_shapes",
    "IGNORE_MISSING_PATTERNS",
    "SPECIAL_TOKENS_MAP",
    "REGISTER_TOKENIZER_AT_IMPORT",
    "MISMATCHED_NAMES_ONLY",
    "SAVES_NAME_OR_PATH",
    "ask_hub_once",
    "hub_offline",
]
