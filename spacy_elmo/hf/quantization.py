"""Opt-in int8 dynamic quantization of an `ElmoModel` (CPU, approximate; docs/performance.md
gives its error): the int8 face of `ElmoModel.set_precision` / `ElmoConfig.precision`.  The math
is in `kernels.int8`; `modeling_elmo.apply_precision` switches a model's layers to it."""

from __future__ import annotations

from torch import nn

from .modeling_elmo import apply_precision


def quantize_int8(model: nn.Module) -> nn.Module:
    """Switches a model (in place) to int8 weights and activations for its LSTM and highway
    matmuls on CPU (`precision="int8"`, recorded in its config, so `save_pretrained` saves it as
    an opt-in quantization and `from_pretrained` applies it again).  Parameters stay fp32, so
    `state_dict`/`save_legacy` are unchanged.  Undo with `dequantize(model)`."""
    return apply_precision(model, "int8")


def dequantize(model: nn.Module) -> nn.Module:
    """Back to exact fp32 evaluation (`precision="fp32"`) after `quantize_int8`."""
    return apply_precision(model, "fp32")


__all__ = ["quantize_int8", "dequantize"]
