"""spacy_elmo: ELMo deep contextualized word representations for spaCy 3 and Hugging Face transformers."""

import re

from transformers import AutoConfig, AutoModel, AutoTokenizer

from . import model_card as _model_card

from .configuration_elmo import ElmoConfig
from .legacy import LegacyFormatError, load_legacy, save_legacy
from .modeling_elmo import (
    ElmoForBidirectionalLM,
    ElmoLoadError,
    ElmoModel,
    ElmoModelOutput,
    ElmoPreTrainedModel,
    ElmoState,
    ScalarMix,
)
from .tokenization_elmo import ElmoTokenizer

__version__ = "0.1.0"

# save_pretrained / push_to_hub also write the README.md model card (spacy_elmo.model_card)
_model_card.install(ElmoPreTrainedModel)
# Checkpoints may lack the optional scalar-mix weights (they are initialized on purpose, e.g. by
# `from_pretrained(path, num_output_representations=2)`): no "LOAD REPORT ... MISSING" table for them.
ElmoPreTrainedModel._keys_to_ignore_on_load_missing = [f"^{re.escape(p)}" for p in ElmoPreTrainedModel._optional_weights]

AutoConfig.register("elmo", ElmoConfig, exist_ok=True)
AutoModel.register(ElmoConfig, ElmoModel, exist_ok=True)
AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=ElmoTokenizer, exist_ok=True)

__all__ = [
    "ElmoConfig",
    "ElmoModel",
    "ElmoForBidirectionalLM",
    "ElmoLoadError",
    "ElmoModelOutput",
    "ElmoPreTrainedModel",
    "ElmoState",
    "ElmoTokenizer",
    "ScalarMix",
    "LegacyFormatError",
    "load_legacy",
    "save_legacy",
]
