"""int8 products (opt-in, approximate, CPU): int8 weights times activations quantized at run time,
summed exactly in int32 and dequantized in fp32.  Taken where the CPU multiplies int8 faster than
fp32 (`capabilities.int8_products`, by the table `capabilities.INT8_CPUS`), for products of at least
`MIN_INPUTS` inputs; everything else (and everything elementwise) stays fp32.

The scheme, per product y = x·W (x [rows, K], W [K, N]):

* W per output column n, symmetric: s_w[n] = max_k |W[k, n]| / 127, W_q = round(W / s_w) in
  [-127, 127]; made once and kept beside the weight's owner (a derived-weight cache) until W changes.
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
from torch import nn

from .capabilities import int8_products, pack_int8_weight
from .weights import DerivedWeights, weights_key

# products with fewer inputs (K) stay fp32: int8 and fp32 took the same time there (within noise,
# 1 and 32 rows, K = 16 to 64, on the EPYC of docs/performance.md), and the fp32 product is exact
MIN_INPUTS = 64
LEVELS = 255  # activation levels (u8)
# PyTorch's quantization never picks a smaller activation scale (SMALL_SCALE_THRESHOLD = 6.1e-5)
SMALLEST_SCALE = 6.1e-5

_DERIVED = DerivedWeights()


def takes_int8(inputs: int) -> bool:
    """Whether a product with `inputs` (K) inputs computes in int8 under `precision="int8"`."""
    return inputs >= MIN_INPUTS


def quantize_columns(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[K, N] float weight (x·W orientation) → int8 [K, N] and per-column scales [N] (one float
    temporary the size of the weight: the process keeps the memory its transients took)."""
    scale = torch.maximum(weight.amax(dim=0), weight.amin(dim=0).neg()).div_(127.0).clamp_(min=1e-12)
    return torch.div(weight, scale).round_().clamp_(-127, 127).to(torch.int8), scale.float()


def pack(weight: torch.Tensor, bias: torch.Tensor | None = None):
    """A [K, N] float weight (x·W orientation) quantized per column and packed for `linear`."""
    qweight, scale = quantize_columns(weight.detach().float())
    return pack_int8_weight(qweight.t().contiguous(), scale, None if bias is None else bias.detach().float())


def packed_directions(owner, name: str, weight: torch.Tensor) -> list:
    """The packed int8 copies of a [directions, K, N] weight, one per direction, kept beside `owner`
    until the weight is replaced or modified in place."""
    return _DERIVED.get(owner, "int8_" + name, weights_key(weight), lambda: [pack(w) for w in weight])


def linear(x: torch.Tensor, packed) -> torch.Tensor:
    """x [rows, K] fp32 · a packed int8 weight (+ its bias) → [rows, N] fp32, x quantized per call."""
    return torch.ops.quantized.linear_dynamic(x, packed, False)


def drop_int8(owner) -> None:
    """Frees the int8 copies kept for `owner`."""
    _DERIVED.drop(owner)


class Int8Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) evaluated in int8 (bias in fp32) when no
    gradient is needed and the CPU takes int8 products (one warning line where it does not); exact
    fp32 otherwise. (The model gives this class to linears of at least `MIN_INPUTS` inputs.)"""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        needs_grad = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
        if needs_grad or x.dtype != torch.float32 or not int8_products(x.device.type):
            return super().forward(x)
        key = weights_key(self.weight, self.bias)
        packed = _DERIVED.get(self, "int8", key, lambda: pack(self.weight.t(), self.bias))
        flat = x.reshape(-1, x.shape[-1])
        return linear(flat, packed).reshape(*x.shape[:-1], -1)


__all__ = [
    "LEVELS",
    "MIN_INPUTS",
    "SMALLEST_SCALE",
    "Int8Linear",
    "drop_int8",
    "linear",
    "pack",
    "packed_directions",
    "quantize_columns",
    "takes_int8",
]
