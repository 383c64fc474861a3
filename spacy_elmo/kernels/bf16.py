"""bf16 inference products (opt-in, approximate): bf16 copies of the weights made once (kept in a
derived-weight cache until the weight changes), each product's input rounded to bf16, fp32
accumulation (oneDNN / cuBLAS), the result widened back to fp32.  Everything around the products
(biases, gates, the LSTM cell state, clipping, highway mixing, outputs) stays fp32: autocast's
semantics, without autocast re-casting the weights at every call.

Error bound, per product y = x·W with K-term rows (u = 2^-8, bf16's unit roundoff; ε = 2^-24,
fp32's): rounding x and W to bf16 changes each term x_k·w_k by at most (2u + u²)|x_k·w_k|, the
fp32 sum adds at most γ_K ≈ K·ε of Σ|x̂_k·ŵ_k|, and the bf16 result one more u, so

    |ŷ − y| ≤ c_K · Σ_k |x_k|·|w_k|,   c_K = 3u + 3u² + 1.01·K·ε (1 + u)²   (`product_bound`)

elementwise (|y| ≤ Σ|x_k||w_k|).  Through the biLM these per-product errors propagate by the
usual running-error rules (σ is 1/4-Lipschitz, tanh, relu and the clips are 1-Lipschitz, a product
a·b moves by |a|δb + |b|δa + δaδb); tests/kernels/test_precision_paths.py propagates them alongside
the float64 definition and checks the kernels against that bound over the configuration space.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .capabilities import bf16_products
from .weights import DerivedWeights

UNIT_ROUNDOFF = 2.0**-8  # bf16: 8 significant bits, round to nearest
FP32_ROUNDOFF = 2.0**-24

_DERIVED = DerivedWeights()


def product_bound(terms: int) -> float:
    """c_K above: the bf16 product's error as a fraction of Σ|x_k|·|w_k| (K = `terms`)."""
    u = UNIT_ROUNDOFF
    return 3 * u + 3 * u * u + 1.01 * terms * FP32_ROUNDOFF * (1 + u) ** 2


def widened_matmul(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """a·b with both operands in `dtype` and the result widened to fp32 (the training kernels' bf16
    products; None: a·b as it is)."""
    return torch.matmul(a, b) if dtype is None else torch.matmul(a.to(dtype), b.to(dtype)).float()


def bf16_copy(owner, name: str, weight: torch.Tensor) -> torch.Tensor:
    """`weight` in bf16, made once and kept (beside `owner`) until the weight is replaced or
    modified in place."""
    return _DERIVED.cast(owner, "bf16_" + name, weight, torch.bfloat16)


def drop_bf16(owner) -> None:
    """Frees the bf16 copies kept for `owner`."""
    _DERIVED.drop(owner)


class Bf16Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) whose product runs in bf16 (fp32 in and out,
    fp32 bias) when no gradient is needed and the device has native bf16 products; exact fp32
    otherwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        needs_grad = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
        if needs_grad or x.dtype != torch.float32 or not bf16_products(x.device.type):
            return super().forward(x)
        weight = bf16_copy(self, "weight", self.weight)
        out = F.linear(x.to(torch.bfloat16), weight).float()
        if self.bias is not None:
            out += self.bias
        return out


__all__ = ["UNIT_ROUNDOFF", "Bf16Linear", "bf16_copy", "drop_bf16", "product_bound", "widened_matmul"]
