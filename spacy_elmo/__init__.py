"""spacy_elmo: ELMo deep contextualized word representations for spaCy 3 and Hugging Face transformers.

`import spacy_elmo` registers the `elmo` model type with transformers' Auto classes (AutoConfig,
AutoModel, AutoTokenizer, so `pipeline()` works too): AutoConfig at once, the model and tokenizer
classes with the first `ElmoConfig` (which every Auto path makes first), so that the import does not
pay for transformers' modeling code (`hf.register_auto_classes`). It imports neither spaCy nor the
model; the public names below are imported on first use.

The package's folders (docs/architecture.md has the map):

- `hf/`: the model and its Hugging Face face: configuration, modeling (the biLM's math, one file),
  tokenization, the model directory and its card, the choice of kernel, opt-in int8.
- `formats/`: other ways in: legacy options.json + hdf5, ELMoForManyLangs folders, URLs (the
  download cache), and the typed model reference that tells them apart.
- `spacy/`: the spaCy face: the `elmo` component, the registered architectures, thinc layers, Doc data.
- `kernels/`: fast exact kernels the model chooses from explicitly.
- `training/`, `tools/`, `cli/`: pretraining, what the commands do with a biLM, the command line.
"""

from __future__ import annotations

import importlib

from .constants import VERSION as __version__  # noqa: F401  (the package's version, as Python packages name it)

_EXPORTS = {
    "ElmoConfig": "hf.configuration_elmo",
    "ElmoModel": "hf.modeling_elmo",
    "ElmoForBidirectionalLM": "hf.modeling_elmo",
    "ElmoLoadError": "hf.modeling_elmo",
    "ElmoModelOutput": "hf.modeling_elmo",
    "ElmoPreTrainedModel": "hf.modeling_elmo",
    "ElmoState": "hf.modeling_elmo",
    "ScalarMix": "hf.modeling_elmo",
    "ElmoTokenizer": "hf.tokenization_elmo",
    "LegacyFormatError": "formats.legacy",
    "load_legacy": "formats.legacy",
    "save_legacy": "formats.legacy",
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


# after the names above: the model modules registered later read this package's __version__
from .hf import register_auto_classes  # noqa: E402

register_auto_classes()
