"""What the biLM hands back, as HF keeps its output classes in `modeling_outputs.py`: `ElmoModelOutput`,
`ElmoLMOutput`, and `ElmoState`, the LSTM state a caller may pass in and get back to chain batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from transformers.utils import ModelOutput


class ElmoState(NamedTuple):
    """LSTM state per layer and direction: `h` is [L, 2, batch, projection_dim], `c` [L, 2, batch, lstm_dim].

    Direction 0 is the forward LM, 1 the backward LM. Index rows with `state.rows(index)`.
    """

    h: torch.Tensor
    c: torch.Tensor

    def rows(self, index) -> ElmoState:
        return ElmoState(self.h[:, :, index], self.c[:, :, index])

    def detach(self) -> ElmoState:
        return ElmoState(self.h.detach(), self.c.detach())


@dataclass
class ElmoModelOutput(ModelOutput):
    """Output of `ElmoModel`.

    last_hidden_state: top biLM layer, [batch, tokens, 2·projection_dim].
    hidden_states: all L+1 layers (layer 0 = token vectors duplicated for both directions).
    attention_mask: [batch, tokens] bool, True at real tokens.
    mixed_representations: one scalar mix per `config.num_output_representations`.
    state: final LSTM state (only with `return_state=True`).
    """

    last_hidden_state: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attention_mask: torch.Tensor | None = None
    mixed_representations: tuple[torch.Tensor, ...] | None = None
    state: ElmoState | None = None


@dataclass
class ElmoLMOutput(ModelOutput):
    """Output of `ElmoForBidirectionalLM`: mean of forward and backward token losses (nats)."""

    loss: torch.Tensor | None = None
    forward_loss: torch.Tensor | None = None
    backward_loss: torch.Tensor | None = None
    num_targets: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None


__all__ = ["ElmoState", "ElmoModelOutput", "ElmoLMOutput"]
