"""bf16 inference products (opt-in, approximate): bf16 copies of the weights made once
(`products.convert`: prepacked for oneDNN on a CPU that has it, `PrepackedBf16`, else plain; held by
the module in place of its fp32 weight once that is released, else kept in a derived-weight cache
until the weight changes), each product's input rounded to bf16, fp32
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

from .weights import from_tensor_state, tensor_state

UNIT_ROUNDOFF = 2.0**-8  # bf16: 8 significant bits, round to nearest
FP32_ROUNDOFF = 2.0**-24


def product_bound(terms: int) -> float:
    """c_K above: the bf16 product's error as a fraction of Σ|x_k|·|w_k| (K = `terms`)."""
    u = UNIT_ROUNDOFF
    return 3 * u + 3 * u * u + 1.01 * terms * FP32_ROUNDOFF * (1 + u) ** 2


def widened_matmul(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """a·b with both operands in `dtype` and the result widened to fp32 (the training kernels' bf16
    products; None: a·b as it is)."""
    return torch.matmul(a, b) if dtype is None else torch.matmul(a.to(dtype), b.to(dtype)).float()


class PrepackedBf16:
    """A bf16 weight prepacked for oneDNN's linear ([N, K], `mkldnn._reorder_linear_weight` for calls
    of about `rows_hint` rows): opaque to torch, so pickled (and deep-copied) as its plain bf16
    values (`weights.tensor_state`), prepacked again when read back."""

    __slots__ = ("weight", "rows_hint")

    def __init__(self, weight: torch.Tensor, rows_hint: int):
        self.weight = torch.ops.mkldnn._reorder_linear_weight(weight, rows_hint)
        self.rows_hint = rows_hint

    def __getstate__(self) -> dict:
        return {"weight": tensor_state(self.weight.to_dense()), "rows_hint": self.rows_hint}

    def __setstate__(self, state: dict) -> None:
        self.__init__(from_tensor_state(state["weight"]), state["rows_hint"])  # type: ignore[misc]

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """x [rows, K] · the weight in bf16 (fp32 accumulation), the result in bf16."""
        return torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), self.weight, None, "none", [], "")


__all__ = ["UNIT_ROUNDOFF", "PrepackedBf16", "product_bound", "widened_matmul"]
