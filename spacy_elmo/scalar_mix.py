"""ELMo's task-specific combination of the biLM layers (Peters et al., 2018, §3.2, eq. 1):
γ · Σ_j softmax(s)_j · h_j over the L+1 layers, and the λ‖s‖² penalty on the layer weights (§3.3).

`scalar_mix` / `scalar_mix_penalty` are the one definition, used by `ScalarMix` (the torch module
`ElmoModel` keeps for `num_output_representations`) and by the thinc layer `spacy-elmo.ScalarMix.v1`
(`layers/scalar_mix.py`, which runs them on its own parameters through torch).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def scalar_mix(
    layers: Sequence[torch.Tensor] | torch.Tensor, scalar_parameters: torch.Tensor, gamma: torch.Tensor
) -> torch.Tensor:
    """γ · Σ_j softmax(s)_j · h_j (paper eq. 1): the one definition of the mix, for `ScalarMix` and
    the thinc layer `spacy-elmo.ScalarMix.v1` (which runs it on its own parameters through torch)."""
    if len(layers) != scalar_parameters.shape[0]:
        raise ValueError(f"ScalarMix has {scalar_parameters.shape[0]} weights but got {len(layers)} layers")
    mixed = 0.0
    for weight, layer in zip(torch.softmax(scalar_parameters, dim=0), layers):
        mixed = mixed + weight * layer
    return gamma * mixed


def scalar_mix_penalty(scalar_parameters: torch.Tensor, l2: float) -> torch.Tensor:
    """λ‖s‖²: the paper's λ‖w‖²₂ (§3.3; §5.1 on λ) on the *unnormalized* layer weights s.

    This is what the reference code penalizes: bilm-tf's `weight_layers` regularizes its `ELMo_W`
    variable (the logits, softmax-normalized afterwards) with `l2_coef · Σ W²`, and AllenNLP's
    configs put an L2 regularizer (alpha · Σ p²) on `scalar_parameters`. γ is not penalized.
    Pulling s toward 0 pulls softmax(s) toward the equal average of the layers; the gradient is 2λs.
    """
    return l2 * (scalar_parameters * scalar_parameters).sum()


class ScalarMix(nn.Module):
    """γ · Σ_j softmax(s)_j · h_j over the L+1 biLM layers (`scalar_mix`, paper eq. 1).

    With `layer_norm=True`, each layer is first normalized with the mean and variance over all real
    tokens *of its own sentence* (keeps outputs independent of the rest of the batch).
    """

    def __init__(self, num_layers: int, layer_norm: bool = False, initial_weights: Sequence[float] | None = None):
        super().__init__()
        weights = torch.zeros(num_layers) if initial_weights is None else torch.tensor(list(initial_weights))
        if weights.shape != (num_layers,):
            raise ValueError(f"ScalarMix expects {num_layers} initial weights, got {weights.shape[0]}")
        self.scalar_parameters = nn.Parameter(weights.float())
        self.gamma = nn.Parameter(torch.ones(1))
        self.layer_norm = layer_norm

    @property
    def weights(self) -> torch.Tensor:
        """The normalized layer weights softmax(s)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def forward(self, layers: Sequence[torch.Tensor] | torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.layer_norm:
            layers = [_masked_sentence_norm(layer, mask) for layer in layers]
        return scalar_mix(layers, self.scalar_parameters, self.gamma)

    def regularization(self, l2_coef: float) -> torch.Tensor:
        """λ‖s‖² on the unnormalized layer weights (`scalar_mix_penalty`): add it to the loss."""
        return scalar_mix_penalty(self.scalar_parameters, l2_coef)


def _masked_sentence_norm(layer: torch.Tensor, mask: torch.Tensor | None, eps: float = 1e-12) -> torch.Tensor:
    """Normalizes [batch, time, dim] by each sentence's mean/variance over its real tokens."""
    if mask is None:
        mask = torch.ones(layer.shape[:2], dtype=torch.bool, device=layer.device)
    keep = mask.unsqueeze(-1).to(layer.dtype)
    count = (keep.sum(dim=(1, 2), keepdim=True) * layer.shape[-1]).clamp(min=1.0)
    mean = (layer * keep).sum(dim=(1, 2), keepdim=True) / count
    var = (((layer - mean) * keep) ** 2).sum(dim=(1, 2), keepdim=True) / count
    return (layer - mean) / torch.sqrt(var + eps) * keep


__all__ = ["ScalarMix", "scalar_mix", "scalar_mix_penalty"]
