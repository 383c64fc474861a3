"""spacy_elmo: ELMo deep contextualized word representations for spaCy 3 and Hugging Face transformers.

`import spacy_elmo` registers the `elmo` model type with transformers' Auto classes (AutoConfig,
AutoModel, AutoTokenizer, so `pipeline()` works too). The public names below are imported on first
use, and the package's own command line (`spacy-elmo`, `python -m spacy_elmo ...`) skips the
registration, which needs transformers and torch: `spacy-elmo --help` starts in a fraction of a
second and each command imports only what it uses.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

__version__ = "0.1.0"

_EXPORTS = {
    "ElmoConfig": "configuration_elmo",
    "ElmoModel": "modeling_elmo",
    "ElmoForBidirectionalLM": "modeling_elmo",
    "ElmoLoadError": "modeling_elmo",
    "ElmoModelOutput": "modeling_elmo",
    "ElmoPreTrainedModel": "modeling_elmo",
    "ElmoState": "modeling_elmo",
    "ScalarMix": "scalar_mix",
    "ElmoTokenizer": "tokenization_elmo",
    "LegacyFormatError": "legacy",
    "load_legacy": "legacy",
    "save_legacy": "legacy",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    """`spacy_elmo.ElmoModel` etc.: the defining module is imported on first access."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


def register_auto_classes() -> None:
    """Makes transformers' AutoConfig / AutoModel / AutoTokenizer know the `elmo` model type."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from .configuration_elmo import ElmoConfig
    from .modeling_elmo import ElmoModel
    from .tokenization_elmo import ElmoTokenizer

    AutoConfig.register("elmo", ElmoConfig, exist_ok=True)
    AutoModel.register(ElmoConfig, ElmoModel, exist_ok=True)
    AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=ElmoTokenizer, exist_ok=True)


def _running_own_command_line() -> bool:
    """Whether this process is `spacy-elmo ...` or `python -m spacy_elmo[.module] ...`.

    While `python -m X` locates X, `sys.argv[0]` is "-m" and only X's parent packages are
    imported, so "-m" here means X is this package or one of its modules.

    The command line is the only signal there is: both ways in run this `__init__` before any code
    of the command, and `import spacy_elmo` alone must register (`AutoModel.from_pretrained` is
    transformers' code). Registering later, when transformers is imported, would run inside the
    model modules' own imports (they import `transformers.models.auto`), a circular import.
    """
    first = sys.argv[0] if sys.argv else ""
    return first == "-m" or Path(first).name.split(".")[0] in ("spacy-elmo", "spacy-elmo-script")


if not _running_own_command_line():
    register_auto_classes()
