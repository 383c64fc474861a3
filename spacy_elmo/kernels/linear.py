"""The fp32 precision's linear layer: `x·Wᵀ + b` through oneDNN at CPU inference (exact).

torch's `nn.Linear` runs on MKL, whose kernels on AMD EPYC ran the token encoder's shapes 1.2-2×
slower than oneDNN's (the highway's [words, 2048]·[2048, 2048] and the projections, 1 to 800 rows,
measured interleaved on the EPYC of docs/performance.md). oneDNN takes the plain weight (reordered
per call, no kept copy: memory as before). The same sums in another order: float32 rounding only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .capabilities import onednn_linear_available


class Fp32Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) evaluated by oneDNN (`capabilities`' checked
    `_linear_pointwise`) when no gradient is needed and the input is fp32 on a CPU; `F.linear` otherwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        needs_grad = torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad)
        if needs_grad or x.dtype != torch.float32 or x.device.type != "cpu" or not onednn_linear_available():
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(-1, x.shape[-1])
        out = torch.ops.mkldnn._linear_pointwise(flat, self.weight.detach(), self.bias, "none", [], "")
        return out.reshape(*x.shape[:-1], -1)


__all__ = ["Fp32Linear"]
