"""The biLM's linear layers (highway, projections): `x·Wᵀ + b` with the product the decider bound
(`products.decide_product`: fp32, bf16 or int8, and its kernel).

fp32 on a CPU goes through oneDNN: torch's `nn.Linear` runs on MKL, whose kernels on AMD EPYC ran
the token encoder's shapes 1.2-2× slower than oneDNN's (the highway's [words, 2048]·[2048, 2048] and
the projections, 1 to 800 rows, measured interleaved on the EPYC of docs/performance.md). oneDNN
takes the plain weight (reordered per call, no kept copy: memory as before). The same sums in
another order: float32 rounding only. bf16 and int8 read a converted weight (`products.convert`):
in place of the fp32 weight once it is released, else kept beside the layer until it changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from . import int8
from .products import (
    EXACT,
    WORDS_ROWS_HINT,
    Capabilities,
    ConvertsWeights,
    Product,
    RowProducts,
    convert,
    decide_product,
)


class ProductLinear(nn.Linear, ConvertsWeights):
    """nn.Linear (same parameters and state-dict keys) whose product computes as bound
    (`bind_products`: the decider's answer for its input count). A gradient, or an input that is not
    fp32, takes the exact `F.linear` (training is fp32 whatever the precision)."""

    product: Product = EXACT  # until bound: the definition's product

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.converted = {}

    def bind_products(self, precision: str, device_type: str, capabilities: Capabilities) -> None:
        """Asks the decider how this layer's product computes under `precision` on `device_type`;
        drops the converted weights kept for the previous answer."""
        self.product = decide_product(precision, device_type, self.in_features, capabilities=capabilities)
        self.drop_converted()

    def weight_products(self) -> Mapping[str, RowProducts]:
        return {"weight": RowProducts(self.product, self.product)}

    def weight_xw(self, name: str) -> torch.Tensor:
        return self.weight.detach().t()

    def convert_weight(self, name: str, weight: torch.Tensor) -> Any:
        bias = self.bias if self.product.dtype == "int8" else None  # (int8's packed weight adds it)
        return convert(weight, self.product, bias, WORDS_ROWS_HINT)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        product = self.product
        if "weight" not in self.converted:  # the fp32 weight is here
            needs_grad = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
            if needs_grad or x.dtype != torch.float32 or product.kernel == "torch" and product.dtype == "fp32":
                return F.linear(x, self.weight, self.bias)
            if product.dtype == "fp32":  # oneDNN, the plain weight
                flat = x.reshape(-1, x.shape[-1])
                out = torch.ops.mkldnn._linear_pointwise(flat, self.weight.detach(), self.bias, "none", [], "")
                return out.reshape(*x.shape[:-1], -1)
        weight = self.converted_form("weight")
        flat = x.reshape(-1, x.shape[-1]).float()
        if product.dtype == "int8":
            out = int8.linear(flat, weight)  # (the bias inside)
        else:
            out = (weight.linear(flat) if product.kernel == "onednn" else flat.to(torch.bfloat16).mm(weight)).float()
            if self.bias is not None:
                out += self.bias
        return out.reshape(*x.shape[:-1], -1)


__all__ = ["ProductLinear"]
