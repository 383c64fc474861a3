"""int8 dynamic quantization (CPU, opt-in, approximate): int8 weights with per-column scales times
int8 activations quantized per row at run time.  Changes outputs; docs/performance.md gives the error."""

from __future__ import annotations

import torch
from torch import nn

from .capabilities import int_mm
from .weights import weights_key


def quantize_columns(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[K, N] float weight (x·W orientation) → int8 [K, N] and per-column scales [N]."""
    scale = (weight.abs().amax(dim=0) / 127.0).clamp(min=1e-12)
    return torch.round(weight / scale).clamp(-127, 127).to(torch.int8), scale.float()


def int8_matmul(x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [M, K] float · (qweight [K, N] int8 × scale [N]) with x quantized per row at run time."""
    x_scale = (x.abs().amax(dim=-1, keepdim=True) / 127.0).clamp(min=1e-12)
    xq = torch.round(x / x_scale).to(torch.int8)
    return int_mm(xq, qweight).float().mul_(x_scale).mul_(scale)


class Int8Weights:
    """int8 copies of named [directions, K, N] matrices, per direction; `refresh` re-quantizes
    whatever changed since the last call."""

    def __init__(self, **weights: torch.Tensor | None):
        self._key: tuple | None = None
        self.mats: dict[str, list] = {}
        self.refresh(**weights)

    def refresh(self, **weights: torch.Tensor | None) -> None:
        key = weights_key(*weights.values())
        if key is not None and key == self._key:
            return
        self._key = key
        self.mats = {
            name: [quantize_columns(w[d].detach().float()) for d in range(w.shape[0])]
            for name, w in weights.items()
            if w is not None
        }

    def bmm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """[D, M, K] · weight[d] per direction → [D, M, N] float."""
        return torch.stack([int8_matmul(x[d], *self.mats[name][d]) for d in range(x.shape[0])])

    def mm(self, x: torch.Tensor, name: str, direction: int) -> torch.Tensor:
        return int8_matmul(x, *self.mats[name][direction])


class Int8Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) evaluated with int8 weights and activations
    when no gradient is needed."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad):
            return super().forward(x)
        version = weights_key(self.weight)
        if version is None or getattr(self, "_q_version", None) != version:
            self._q = quantize_columns(self.weight.detach().float().t())
            self._q_version = version
        flat = x.reshape(-1, x.shape[-1])
        out = int8_matmul(flat, *self._q)
        if self.bias is not None:
            out += self.bias
        return out.reshape(*x.shape[:-1], -1)
