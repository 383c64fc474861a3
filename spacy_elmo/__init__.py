"""spacy_elmo: ELMo deep contextualized word representations for spaCy 3 and Hugging Face transformers."""

from transformers import AutoConfig, AutoModel, AutoTokenizer

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
