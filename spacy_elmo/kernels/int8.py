"""int8 products (opt-in, approximate, CPU): int8 weights times activations quantized at run time,
summed exactly in int32 and dequantized in fp32.  Taken where the decider (`products.decide_product`)
says: a CPU that multiplies int8 faster than fp32 (`capabilities.int8_products`, by the table
`capabilities.INT8_CPUS`), products of at least `products.MIN_INT8_INPUTS` inputs; everything else
(and everything elementwise) stays fp32.

The scheme, per product y = x·W (x [rows, K], W [K, N]):

* W per output column n, symmetric: s_w[n] = max_k |W[k, n]| / 127, W_q = round(W / s_w) in
  [-127, 127]; made once (`pack`) and held by the weight's module in place of W once W is released
  (`products.ConvertsWeights`), else kept beside it (a derived-weight cache) until W changes.
* x per call, one scale for the whole [rows, K] tensor multiplied (a block of packed LSTM rows, one
  step's rows, a chunk of words), unsigned 8-bit with a zero point:
  s_x = max((max(x, 0) − min(x, 0)) / 255, SMALLEST_SCALE), z = round(−min(x, 0) / s_x),
  x_q = clamp(round(x / s_x) + z, 0, 255).
* ŷ = s_x · s_w[n] · Σ_k (x_q,k − z)·W_q[k, n] (+ bias), the sum exact in int32.

Error bound, elementwise: x̂ = s_x·(x_q − z) is within s_x/2 of x and Ŵ = s_w·W_q within s_w/2 of W,
and ŷ = Σ_k x̂_k·Ŵ_k up to the fp32 dequantization (a few ε of |ŷ|), so

    |ŷ − y| ≤ s_w[n]/2 · Σ_k |x̂_k| + s_x/2 · Σ_k |W[k, n]|

s_x is the whole call's, so a row's error (and so its output, within this bound) depends on the
rows multiplied with it: the other sentences of a batch.  int8 outputs are therefore not
batch-invariant, unlike fp32's, and the token cache keeps a word's vector as first computed.

The products are torch's quantized dynamic linear (fbgemm or oneDNN, VNNI; packed by
`capabilities.pack_int8_weight`), whose activation parameters are the ones above (PyTorch's
`ChooseQuantizationParams` over 0..255, without `reduce_range`: VNNI has no int16 step to saturate).
"""

from __future__ import annotations

import torch

from .capabilities import pack_int8_weight
from .weights import from_tensor_state, tensor_state

LEVELS = 255  # activation levels (u8)
# PyTorch's quantization never picks a smaller activation scale (SMALL_SCALE_THRESHOLD = 6.1e-5)
SMALLEST_SCALE = 6.1e-5


def quantize_columns(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[K, N] float weight (x·W orientation) → int8 [K, N] and per-column scales [N] (one float
    temporary the size of the weight: the process keeps the memory its transients took)."""
    scale = torch.maximum(weight.amax(dim=0), weight.amin(dim=0).neg()).div_(127.0).clamp_(min=1e-12)
    return torch.div(weight, scale).round_().clamp_(-127, 127).to(torch.int8), scale.float()


class PackedInt8:
    """An int8 weight ([N, K], per-row scales, and a bias or None) packed for `linear`: pickled (and
    deep-copied) as those values (`weights.tensor_state`) and packed again when read back."""

    __slots__ = ("packed",)

    def __init__(self, qweight: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None):
        self.packed = pack_int8_weight(qweight, scales, bias)

    def __getstate__(self) -> dict:
        qweight, bias = self.packed.unpack()
        tensors = {"qweight": qweight.int_repr(), "scales": qweight.q_per_channel_scales(), "bias": bias}
        return {name: None if t is None else tensor_state(t) for name, t in tensors.items()}

    def __setstate__(self, state: dict) -> None:
        tensors = {name: None if s is None else from_tensor_state(s) for name, s in state.items()}
        self.__init__(tensors["qweight"], tensors["scales"], tensors["bias"])  # type: ignore[misc]


def pack(weight: torch.Tensor, bias: torch.Tensor | None = None) -> PackedInt8:
    """A [K, N] float weight (x·W orientation) quantized per column and packed for `linear`."""
    qweight, scale = quantize_columns(weight.detach().float())
    return PackedInt8(qweight.t().contiguous(), scale, None if bias is None else bias.detach().float())


def linear(x: torch.Tensor, weight: PackedInt8) -> torch.Tensor:
    """x [rows, K] fp32 · a packed int8 weight (+ its bias) → [rows, N] fp32, x quantized per call."""
    return torch.ops.quantized.linear_dynamic(x, weight.packed, False)


__all__ = ["LEVELS", "SMALLEST_SCALE", "PackedInt8", "linear", "pack", "quantize_columns"]
