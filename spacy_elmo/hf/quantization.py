"""Opt-in int8 dynamic quantization of an `ElmoModel` (CPU, approximate; docs/performance.md
gives its error).  The math is in `kernels.int8`; this module switches a model's layers to it."""

from __future__ import annotations

from torch import nn

from .. import kernels
from ..kernels.packed_lstm import drop_derived
from .modeling_elmo import ElmoLstmLayer


def quantize_int8(model: nn.Module) -> nn.Module:
    """Switches a model (in place) to int8 weights and activations for its LSTM and highway
    matmuls on CPU.  Parameters stay fp32, so `state_dict`/`save_legacy` are unchanged.  Undo with
    `dequantize(model)`."""
    for module in model.modules():
        if isinstance(module, ElmoLstmLayer):
            module.int8 = kernels.Int8Weights(
                input_weight=module.input_weight, hidden_weight=module.hidden_weight, proj_weight=module.proj_weight
            )
            drop_derived(module)  # the fp32 prepacked copies are not used while quantized
        elif type(module) is nn.Linear and module.in_features >= 64:
            module.__class__ = kernels.Int8Linear
    cache = getattr(model, "token_cache", None)
    if cache is not None:
        cache.clear()
    return model


def dequantize(model: nn.Module) -> nn.Module:
    """Back to exact fp32 evaluation after `quantize_int8`."""
    for module in model.modules():
        if isinstance(module, ElmoLstmLayer):
            module.int8 = None
        elif isinstance(module, kernels.Int8Linear):
            # (back to the plain class, in place: the same parameters)
            module.__class__ = nn.Linear  # type: ignore[assignment]
    cache = getattr(model, "token_cache", None)
    if cache is not None:
        cache.clear()
    return model


__all__ = ["quantize_int8", "dequantize"]
