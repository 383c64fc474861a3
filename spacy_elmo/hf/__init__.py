"""The biLM and its Hugging Face face, as a transformers model's folder holds it.

- `configuration_elmo`: `ElmoConfig`, every size and switch of a biLM (`@strict`), options.json ↔ config.
- `modeling_elmo`: the biLM's math, readable top to bottom (outputs, scalar mix, sentence boundaries,
  char encoder, biLSTM, `ElmoModel`, `ElmoForBidirectionalLM`).
- `tokenization_elmo`: `ElmoTokenizer`, sentences → character ids + mask (+ word ids).
- `model_directory`, `model_card`: a model directory's one writer and the checks on reading one; its card.
- `lstm_implementations`: which kernel evaluates the biLSTM (as HF's attention implementations).
- `quantization`: opt-in int8 on a loaded model.
"""

from __future__ import annotations


def register_auto_classes() -> None:
    """Makes transformers' AutoConfig / AutoModel / AutoTokenizer know the `elmo` model type.

    AutoConfig at once; AutoModel and AutoTokenizer when the first `ElmoConfig` is made (as every
    Auto path makes one before it looks up a model or tokenizer class), because `ElmoModel` builds on
    transformers' `PreTrainedModel`, whose import takes seconds that `import spacy_elmo` need not."""
    from transformers import AutoConfig

    from ..compat import REGISTER_TOKENIZER_AT_IMPORT
    from .configuration_elmo import ON_FIRST_CONFIG, ElmoConfig

    AutoConfig.register("elmo", ElmoConfig, exist_ok=True)
    if REGISTER_TOKENIZER_AT_IMPORT:
        register_tokenizer_class()
    if register_model_classes not in ON_FIRST_CONFIG:
        ON_FIRST_CONFIG.append(register_model_classes)


def register_model_classes() -> None:
    """AutoModel → `ElmoModel`, AutoTokenizer → `ElmoTokenizer` (idempotent)."""
    from transformers import AutoModel

    from .configuration_elmo import ElmoConfig
    from .modeling_elmo import ElmoModel

    AutoModel.register(ElmoConfig, ElmoModel, exist_ok=True)
    register_tokenizer_class()


def register_tokenizer_class() -> None:
    """AutoTokenizer → `ElmoTokenizer` (idempotent)."""
    from transformers import AutoTokenizer

    from .configuration_elmo import ElmoConfig
    from .tokenization_elmo import ElmoTokenizer

    AutoTokenizer.register(ElmoConfig, slow_tokenizer_class=ElmoTokenizer, exist_ok=True)


__all__ = ["register_auto_classes", "register_model_classes", "register_tokenizer_class"]
