"""The ELMo biLM (Peters et al., 2018, §3) in PyTorch, with its Hugging Face face: one model's math,
readable top to bottom.

Data flow: character ids → `<S>` … `</S>` added around each sentence → char CNN + highway +
projection (context-independent token vectors x_k) → L-layer forward and backward LSTMs with cell
projection (h_{k,j}) → optional scalar mixes γ·Σ_j softmax(s)_j·h_{k,j}.  Weights follow the
bilm-tf layout (TF gate order i, j, f, o; x·W).

The model is stateless: every call starts the LSTMs from zeros unless the caller passes
`initial_state`, and `return_state=True` hands back each row's final state so a caller can chain
batches explicitly (this is how the reference outputs of the original stateful implementations are
reproduced).

In order: what the model hands back (`ElmoState`, `ElmoModelOutput`, `ElmoLMOutput`); the scalar
mix (§3.2, eq. 1: `scalar_mix`, `scalar_mix_penalty`, `ScalarMix`); the sentence boundaries and the
LM targets over them (§3.1); the character encoder, the biLSTM (its definition
`ElmoBiLstm.run_layers`), `ElmoModel` and `ElmoForBidirectionalLM`. Beside it:
`lstm_implementations.py` chooses the kernel that evaluates the biLSTM (all compute
`run_layers`), and `model_directory.py` writes a model directory and checks one being read
(`from_pretrained`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from .. import compat, kernels
from ..characters import WORD_BOS, WORD_EOS, WORD_UNK, sentence_boundaries
from ..precision import Precision, check_precision
from . import fp32_weights, model_directory, sources
from .configuration_elmo import ElmoConfig
from .lstm_implementations import LSTM_IMPLEMENTATIONS, resolve_lstm_implementation
from .model_directory import ElmoLoadError


# --- what the model hands back (as HF's modeling_outputs) ---
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


# --- the scalar mix of the layers (§3.2, eq. 1) and its penalty (§3.3) ---
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


# --- sentence boundaries: the biLM's inputs and the LM targets over them (§3.1) ---
def add_sentence_boundaries(
    char_ids: torch.Tensor, mask: torch.Tensor, word_ids: torch.Tensor | None = None, char_lexicon: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Wraps each row in sentence start / end tokens: [batch, time, chars] → [batch, time + 2, chars]
    (`<S>` … `</S>` in UTF-8 character ids, or the lexicon's `<bos>` … `<eos>`); word ids
    [batch, time] likewise, with the word lexicon's sentence start / end ids."""
    batch, steps, max_chars = char_ids.shape
    lengths = mask.sum(dim=1)
    rows = torch.arange(batch, device=char_ids.device)
    start, end = (torch.from_numpy(ids).to(char_ids) for ids in sentence_boundaries(char_lexicon, max_chars))
    out = char_ids.new_zeros(batch, steps + 2, max_chars)
    out[:, 1 : steps + 1] = char_ids * mask.unsqueeze(-1).to(char_ids.dtype)
    out[:, 0] = start
    out[rows, lengths + 1] = end
    new_mask = torch.arange(steps + 2, device=mask.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)
    if word_ids is not None:
        words = word_ids.new_zeros(batch, steps + 2)
        words[:, 1 : steps + 1] = word_ids * mask.to(word_ids.dtype)
        words[:, 0] = WORD_BOS
        words[rows, lengths + 1] = WORD_EOS
        word_ids = words
    return out, new_mask, word_ids


def lm_targets(
    word_ids: torch.Tensor, mask: torch.Tensor, bos: int = WORD_BOS, eos: int = WORD_EOS
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward and backward LMs' targets over the boundary-wrapped sequence ([batch, tokens + 2],
    −100 = none) for [batch, tokens] word ids: position k predicts k + 1 (forward), k − 1 (backward)."""
    batch, steps = word_ids.shape
    lengths = mask.sum(dim=1)
    rows = torch.arange(batch, device=word_ids.device)
    full = word_ids.new_full((batch, steps + 2), -100)
    full[:, 1 : steps + 1] = torch.where(mask.bool(), word_ids, torch.full_like(word_ids, -100))
    full[:, 0] = bos
    full[rows, lengths + 1] = eos
    fwd = full.new_full(full.shape, -100)
    bwd = full.new_full(full.shape, -100)
    fwd[:, :-1] = full[:, 1:]  # position k predicts k + 1
    bwd[:, 1:] = full[:, :-1]  # position k predicts k − 1
    # only real positions (<S> … </S>) predict: the padding right after </S> must not predict </S>
    inside = torch.arange(steps + 2, device=word_ids.device).unsqueeze(0) <= (lengths + 1).unsqueeze(1)
    bwd = bwd.masked_fill(~inside, -100)
    return fwd, bwd


# --- the biLM ---
class Highway(nn.Module):
    """y = g ⊙ relu(x·W_t + b_t) + (1 − g) ⊙ x with gate g = σ(x·W_carry + b_carry)."""

    def __init__(self, dim: int):
        super().__init__()
        # (nn.Linear whose product the inference precision binds: `kernels.ProductLinear`)
        self.transform = kernels.ProductLinear(dim, dim)
        self.gate = kernels.ProductLinear(dim, dim)
        self.gate.is_highway_gate = True  # type: ignore[assignment]  # a flag, not a tensor or module: _init_weights starts it near the identity

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = torch.sigmoid(self.gate(x))
        return gate * F.relu(self.transform(x)) + (1.0 - gate) * x


class ElmoCharacterEncoder(nn.Module):
    """Context-independent token vectors x_k: char CNN + highway over each word's character ids,
    concatenated with a word embedding when the model has one (ELMoForManyLangs), then projected
    to projection_dim.

    The projection of the concatenation [word vector; char features] is written as the sum of its
    two blocks, `projection(char features) + word_projection(word vector)`: the same linear map,
    and the char part then depends on a word's spelling only, so it is computed once per distinct
    spelling (and cached at inference) while the word part is a lookup per token.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__()
        # id 0 pads whole tokens (a zero row); the rest are the UTF-8 bytes and markers, or a lexicon
        self.char_embedding = nn.Embedding(config.char_embedding_rows, config.char_embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, num, width) for width, num in config.filters
        )
        self.activation = torch.tanh if config.activation == "tanh" else F.relu
        self.highways = nn.ModuleList(Highway(config.n_filters) for _ in range(config.n_highway))
        has_words = config.word_embedding_dim > 0
        # bilm-tf has no projection when the filters already give projection_dim features
        self.projection = (
            kernels.ProductLinear(config.n_filters, config.projection_dim)
            if config.n_filters != config.projection_dim or has_words
            else nn.Identity()
        )
        self.word_embedding = nn.Embedding(config.word_vocab_size, config.word_embedding_dim) if has_words else None
        self.word_projection = (
            kernels.ProductLinear(config.word_embedding_dim, config.projection_dim, bias=False) if has_words else None
        )
        self.widest_filter = max(width for width, _ in config.filters)
        # how the char CNN's product over the widest windows computes at inference (`bind_products`)
        self.products: kernels.Product = kernels.products.EXACT

    def bind_products(self, precision: str, device_type: str, capabilities: kernels.Capabilities) -> None:
        """Asks the decider how the char CNN's product (`char_embedding_dim · widest_filter` inputs)
        computes under `precision` on `device_type` (the linears ask for theirs)."""
        inputs = self.char_embedding.embedding_dim * self.widest_filter
        self.products = kernels.decide_product(precision, device_type, inputs, capabilities=capabilities)
        kernels.char_cnn.drop_widest(self)

    def forward(
        self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None, unique: bool = True
    ) -> torch.Tensor:
        """[..., max_chars] character ids (and [...] word ids) → [..., projection_dim]."""
        return self.add_word_vectors(self.spelling_vectors(char_ids, unique), word_ids)

    def spelling_vectors(self, char_ids: torch.Tensor, unique: bool = True) -> torch.Tensor:
        """[..., max_chars] ids → [..., projection_dim]: `token_vectors(char_features(ids))`, the part
        of x_k that depends on the spelling alone.

        Evaluated by `kernels.encode_words`: each distinct word once (`unique`), with the character
        columns that no convolution window can tell apart from the padding dropped (exact).
        """
        shape = char_ids.shape[:-1]
        flat = char_ids.reshape(-1, char_ids.shape[-1])
        x = kernels.encode_words(flat, self.widest_filter, self.char_features, self.token_vectors, unique)
        return x.reshape(*shape, x.shape[-1])

    def add_word_vectors(self, spelled: torch.Tensor, word_ids: torch.Tensor | None) -> torch.Tensor:
        """x_k = spelling part + the word embedding's block of the projection (models with one)."""
        if self.word_embedding is None or self.word_projection is None:  # (made together)
            return spelled
        if word_ids is None:
            raise ValueError("this model has a word embedding: pass input_word_ids (ElmoTokenizer returns them)")
        return spelled + self.word_projection(self.word_embedding(word_ids))

    def char_features(self, char_ids: torch.Tensor) -> torch.Tensor:
        """[words, chars] ids → [words, n_filters]: char CNN, max-pool over positions, activation.

        When gradients flow on a CPU (training), the convolutions run as matrix products over their
        windows (`kernels.pooled_convolutions`: the same sums, faster to train; under bf16 autocast
        the products take autocast's bf16, as the convolutions would). At inference on a CPU, in
        fp32, all of them run as one product over the widest filter's windows where the ids leave
        room for them (`kernels.pooled_widest_windows`: the same sums; its product as bound,
        `bind_products`)."""
        chars = self.char_embedding(char_ids)
        convolutions = cast(list[nn.Conv1d], self.convolutions)
        if self._convolutions_as_products(chars):
            pooled = kernels.pooled_convolutions(
                chars, [c.weight for c in convolutions], [c.bias for c in convolutions]
            )
        elif self._one_product(char_ids, chars):
            weights, biases = [c.weight for c in convolutions], [c.bias for c in convolutions]
            return self.activation(kernels.pooled_widest_windows(chars, weights, biases, self, self.products))
        else:
            chars = chars.transpose(1, 2)
            # max-pool over character positions, then the activation (as bilm-tf)
            pooled = [conv(chars).amax(dim=-1) for conv in self.convolutions]
        return torch.cat([self.activation(p) for p in pooled], dim=-1)

    def _convolutions_as_products(self, chars: torch.Tensor) -> bool:
        needs_grad = torch.is_grad_enabled() and (
            chars.requires_grad or any(c.weight.requires_grad for c in self.convolutions)
        )
        return needs_grad and chars.device.type == "cpu"

    def _one_product(self, char_ids: torch.Tensor, chars: torch.Tensor) -> bool:
        """Inference (nothing needs a gradient, no autocast) on a CPU in fp32, on ids that leave the
        widest filter room (`kernels.widest_windows_fit`)."""
        needs_grad = torch.is_grad_enabled() and (
            chars.requires_grad or any(c.weight.requires_grad for c in self.convolutions)
        )
        return (
            not needs_grad
            and chars.device.type == "cpu"
            and chars.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu")
            and kernels.widest_windows_fit(char_ids, self.widest_filter)
        )

    def token_vectors(self, features: torch.Tensor) -> torch.Tensor:
        """[words, n_filters] → [words, projection_dim]: highway layers, then the projection."""
        x = features
        for highway in self.highways:
            x = highway(x)
        return self.projection(x)


class ElmoLstmLayer(kernels.ConvertsWeights):
    """One LSTM layer for both directions at once, with cell clipping and a projected (clipped) output.

    Parameters are stacked over the two directions (index 0 forward, 1 backward) and kept in TF
    orientation (x·W) with TF gate order i, j, f, o, so both directions run as one batched matmul.
    At inference its products compute as bound (`bind_products`); the `packed` kernel reads the
    weights converted for low-precision ones (`kernels.ConvertsWeights`).
    """

    def __init__(self, input_dim: int, config: ElmoConfig):
        super().__init__()
        self.converted = {}
        self.products: dict[str, kernels.RowProducts] = {}  # per weight; absent: exact (unbound)
        self.device_type = "cpu"  # the device its products are bound for
        hidden, proj = config.lstm_dim, config.projection_dim
        self.input_dim, self.hidden_dim, self.proj_dim = input_dim, hidden, proj
        self.has_projection = proj != hidden
        self.cell_clip = config.cell_clip
        self.proj_clip = config.proj_clip if self.has_projection else None
        self.forget_bias = float(config.forget_bias)
        self.input_weight = nn.Parameter(torch.empty(2, input_dim, 4 * hidden))
        self.hidden_weight = nn.Parameter(torch.empty(2, proj, 4 * hidden))
        self.bias = nn.Parameter(torch.zeros(2, 4 * hidden))
        self.proj_weight = nn.Parameter(torch.empty(2, hidden, proj)) if self.has_projection else None

    def gate_bias(self) -> torch.Tensor:
        """[2, 4·lstm_dim] gate biases with the forget gate's `forget_bias` added (TF adds it at run time)."""
        hidden = self.bias.shape[-1] // 4
        bias = self.bias.clone()
        bias[:, 2 * hidden : 3 * hidden] += self.forget_bias
        return bias

    def shape_of(self, name: str) -> tuple[int, ...]:
        """The [2, K, N] shape of a weight, held or released."""
        hidden, proj = self.hidden_dim, self.proj_dim
        return {"input_weight": (2, self.input_dim, 4 * hidden), "hidden_weight": (2, proj, 4 * hidden),
                "proj_weight": (2, hidden, proj)}[name]  # fmt: skip

    def bind_products(self, precision: str, device_type: str, capabilities: kernels.Capabilities) -> None:
        """Asks the decider how each of this layer's products computes under `precision` on
        `device_type` (a recurrent one by its step's rows: one, or several); drops the derived
        copies made for the previous answer. The layer's products go by the fewest inputs any of them
        has (int8 takes all or none of them, as since int8 was added)."""
        inputs = min(self.input_dim, self.proj_dim, self.hidden_dim)
        first = kernels.decide_product(precision, device_type, inputs, capabilities=capabilities)
        self.products = {"input_weight": kernels.RowProducts(first, first)}  # (blocks of rows: never one)
        for name in self.weight_names()[1:]:
            _, k, n = self.shape_of(name)
            self.products[name] = kernels.row_products(precision, device_type, inputs, k * n * 4, capabilities)
        self.device_type = device_type
        self.drop_converted()
        kernels.packed_lstm.drop_derived(self)  # prepacked fp32 or autocast copies: rebuilt as needed

    def weight_names(self) -> list[str]:
        return ["input_weight", "hidden_weight"] + (["proj_weight"] if self.has_projection else [])

    def weight_products(self) -> Mapping[str, kernels.RowProducts]:
        return {name: self.products.get(name, kernels.products.EXACT_ROWS) for name in self.weight_names()}

    def weight_xw(self, name: str) -> torch.Tensor:
        return getattr(self, name).detach()

    def releasable(self) -> list[str]:
        """Only on a CPU: the `packed` kernel reads the converted weights (CUDA's read fp32 ones)."""
        return super().releasable() if self.device_type == "cpu" else []

    def kernel_weights(self) -> kernels.LstmWeights:
        """This layer's tensors for the kernels (plain tensors; the layer keys their caches), with
        how its products compute (`bind_products`) and the converted weights the low-precision ones
        read (made here, on the calling thread, where the layer keeps its fp32 weights)."""
        tensors: dict[str, torch.Tensor] = {}
        for name in self.weight_names():
            held = self._parameters.get(name)  # a released weight by its shape only (a meta tensor)
            tensors[name] = held if held is not None else torch.empty(self.shape_of(name), device="meta")
        products = self.weight_products()
        converted = {name: self.converted_form(name) for name, p in products.items() if p.one_row.low or p.rows.low}
        return kernels.LstmWeights(
            tensors["input_weight"], tensors["hidden_weight"], tensors.get("proj_weight"), self.gate_bias().detach(),
            self.cell_clip, self.proj_clip, owner=self, products=products, converted=converted,
        )  # fmt: skip

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor], lengths: torch.Tensor | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: [2, batch, time, input_dim] (backward direction already reversed within each length).

        Returns outputs [2, batch, time, projection_dim] and the state after each row's last
        real step (`lengths`, or the full time axis when None).
        """
        n_dir, batch, steps, _ = x.shape
        hidden = self.bias.shape[-1] // 4
        bias = self.gate_bias()
        # every step's input projection in one matmul per direction
        x_proj = torch.baddbmm(bias.unsqueeze(1), x.reshape(n_dir, batch * steps, -1), self.input_weight)
        x_proj = x_proj.view(n_dir, batch, steps, 4 * hidden)
        h, c = state
        final_h, final_c = h, c
        last = None if lengths is None else (lengths - 1).view(1, batch, 1)
        outputs = []
        # one view per step (unbind): indexing x_proj[:, :, t] would make backward build a full-size
        # zero gradient for every step
        for t, x_t in enumerate(x_proj.unbind(dim=2)):
            gates = torch.baddbmm(x_t, h, self.hidden_weight)
            i, j, f, o = gates.chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
            if self.cell_clip:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = torch.sigmoid(o) * torch.tanh(c)
            if self.proj_weight is not None:
                h = torch.bmm(h, self.proj_weight)
                if self.proj_clip:
                    h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
            if last is not None:
                done = last == t
                final_h = torch.where(done, h, final_h)
                final_c = torch.where(done, c, final_c)
        if last is None:
            final_h, final_c = h, c
        if outputs:
            out = torch.stack(outputs, dim=2)
        else:
            out = x.new_zeros(n_dir, batch, 0, h.shape[-1])
        return out, (final_h, final_c)

    def forward_fused(
        self,
        x: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor],
        lengths: torch.Tensor | None,
        product_dtype: torch.dtype | str | None = "autocast",
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """`forward` as one autograd Function (`kernels.lstm_layer_fused`): same values and gradients;
        its matrix products in `product_dtype` (bf16: within `kernels.bf16.product_bound`)."""
        return kernels.lstm_layer_fused(
            x, state[0], state[1], self.input_weight, self.hidden_weight, self.bias, self.proj_weight,
            lengths, self.forget_bias, self.cell_clip, self.proj_clip, product_dtype,
        )  # fmt: skip


def _reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """[batch, steps] positions that reverse each row within its length and leave padding in place."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(0)
    rev = lengths.unsqueeze(1) - 1 - t
    return torch.where(rev >= 0, rev, t)


class ElmoBiLstm(nn.Module):
    """L-layer forward and backward LSTM LMs; residual connections from layer 1 up when configured."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(ElmoLstmLayer(config.projection_dim, config) for _ in range(config.num_layers))
        self.use_skip_connections = config.use_skip_connections
        self.dropout = nn.Dropout(config.dropout)

    def zero_state(self, batch: int, like: torch.Tensor) -> ElmoState:
        cfg = self.config
        return ElmoState(
            like.new_zeros(cfg.num_layers, 2, batch, cfg.projection_dim),
            like.new_zeros(cfg.num_layers, 2, batch, cfg.lstm_dim),
        )

    def implementation(self, tokens: torch.Tensor, initial_state: ElmoState | None = None) -> str:
        """The kernel `forward` uses for these inputs (`resolve_lstm_implementation` of the model's
        choice, given whether anything here can need a gradient)."""
        needs_grad = torch.is_grad_enabled() and (
            tokens.requires_grad
            or any(p.requires_grad for p in self.parameters())
            or (initial_state is not None and any(t.requires_grad for t in initial_state))
        )
        return resolve_lstm_implementation(
            self.config.lstm_implementation, needs_grad=needs_grad, training=self.training,
            autocast=torch.is_autocast_enabled(tokens.device.type), device_type=tokens.device.type,
        )  # fmt: skip

    def forward(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor,
        initial_state: ElmoState | None = None,
        return_state: bool = False,
    ) -> tuple[list[torch.Tensor], ElmoState | None]:
        """tokens: [batch, time, dim]; mask: [batch, time] (rows are left-aligned).

        Returns one [batch, time, 2·projection_dim] output per layer (zero at padding) and,
        if asked, the state after each row's last token. Computed by the kernel
        `LSTM_IMPLEMENTATIONS[self.implementation(...)]`; all of them compute `run_layers`.
        """
        implementation = self.implementation(tokens, initial_state)
        if implementation != "packed" and any(layer.converted for layer in self.layers):  # (not via ElmoModel)
            raise RuntimeError(
                f"lstm_implementation {implementation!r} computes from the biLSTM's fp32 weights, released when "
                f"it was bound to {self.config.precision} in eval mode (`packed` reads the converted ones)"
            )
        state = initial_state if initial_state is not None else self.zero_state(tokens.shape[0], tokens)
        return LSTM_IMPLEMENTATIONS[implementation](self, tokens, mask, state, return_state)

    def run_layers(
        self,
        tokens: torch.Tensor,
        mask: torch.Tensor,
        state: ElmoState,
        return_state: bool,
        fused: bool = False,
        product_dtype: torch.dtype | str | None = "autocast",
    ) -> tuple[list[torch.Tensor], ElmoState | None]:
        """The definition (the "eager" kernel): both directions step by step (the backward one over
        each row reversed within its length), layer after layer, with residual connections from
        layer 1 up.  With `fused`, each layer runs as one autograd Function (`ElmoLstmLayer.forward_fused`),
        its products in `product_dtype` ("autocast": autocast's bf16 where it is on, else fp32)."""
        batch, steps, _ = tokens.shape
        lengths = mask.sum(dim=1)
        rev = _reverse_index(lengths, steps)
        gather = rev.unsqueeze(-1).expand(-1, -1, tokens.shape[-1])
        x = torch.stack([tokens, tokens.gather(1, gather)])
        finals_h, finals_c, outputs = [], [], []
        for index, layer in enumerate(cast(list[ElmoLstmLayer], self.layers)):
            layer_state, layer_lengths = (state.h[index], state.c[index]), lengths if return_state else None
            if fused:  # the same function
                out, (h, c) = layer.forward_fused(self.dropout(x), layer_state, layer_lengths, product_dtype)
            else:
                out, (h, c) = layer(self.dropout(x), layer_state, layer_lengths)
            if self.use_skip_connections and index > 0:
                out = out + x
            outputs.append(out)
            finals_h.append(h)
            finals_c.append(c)
            x = out
        keep = mask.unsqueeze(-1).to(tokens.dtype)
        gather = rev.unsqueeze(-1).expand(-1, -1, self.config.projection_dim)
        layers = [torch.cat([out[0], out[1].gather(1, gather)], dim=-1) * keep for out in outputs]
        final = ElmoState(torch.stack(finals_h), torch.stack(finals_c)) if return_state else None
        return layers, final


# --- inference precision (`spacy_elmo.precision`): `config.precision`, bound when it is set ---
def bind_precision(model: nn.Module, precision: Precision) -> nn.Module:
    """Every biLM inside `model` computes inference in the checked `precision`: recorded in its
    `config.precision` and bound (`ElmoModel.set_precision`, for a value checked where it entered)."""
    for module in model.modules():
        if isinstance(module, ElmoModel):
            module.config.precision = precision
            module._bind_precision(explicit=True)
    return model


def apply_precision(model: nn.Module, precision: str) -> nn.Module:
    """`bind_precision` of a value checked here (`spacy_elmo.precision.check_precision`): every biLM
    inside `model` computes inference in `precision` ("fp32" | "bf16" | "int8")."""
    return bind_precision(model, check_precision(precision))


def _weights_files(folder: sources.ModelFolder | None, variant: str | None) -> list:
    """The safetensors files a model was read from ([] where there are none: a state dict, pickled weights)."""
    if folder is None:
        return []
    try:
        return model_directory.weights_files(folder.path, variant)
    except ElmoLoadError:
        return []


class ElmoPreTrainedModel(PreTrainedModel):
    """Shared HF machinery: config class, weight init, safetensors save/load."""

    config_class = ElmoConfig
    config: ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    # tensors a checkpoint may lack: they are (re)initialized on purpose (no "LOAD REPORT ... MISSING"
    # table for them), never silently for the biLM itself; e.g. new scalar mixes from
    # `from_pretrained(path, num_output_representations=2)`
    _optional_weights: tuple[str, ...] = ("scalar_mixes.", "elmo.scalar_mixes.")
    _keys_to_ignore_on_load_missing = model_directory.ignore_patterns(_optional_weights)
    # save_pretrained / push_to_hub write a complete model directory (spacy_elmo.hf.model_directory)
    save_pretrained = model_directory.save_pretrained
    push_to_hub = model_directory.push_to_hub  # type: ignore[assignment]  # (adds tokenizer=, model_card=: not HF's signature)
    # a pretrained directory may carry the LM head; the encoder alone ignores it quietly
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """HF loading (safetensors, `weights_only=True`) made strict (`model_directory.load_strict`):
        a bad config.json, missing or mis-shaped tensors and NaN/inf weights raise `ElmoLoadError`
        naming the source. `lstm_implementation=` chooses the biLSTM kernel (a run-time setting,
        never read from the file). An argument it does not honour raises a one-line `TypeError` /
        `ValueError` before anything is read (`model_directory.check_loading_arguments`). The name is
        resolved once (`sources.resolve`): a folder as it is, a hub id to its snapshot in the local
        cache after one request to the hub; a name of no model is one line (no such folder; a hub id
        not cached when the hub cannot be asked). The loaded biLM binds its `config.precision` (eval
        mode: a low precision releases the fp32 weights it converts, which it reads back from these
        files when needed)."""
        model_directory.check_loading_arguments(f"{cls.__name__}.from_pretrained", args, kwargs)
        folder = sources.resolve(pretrained_model_name_or_path, **kwargs)
        return cls._from_folder(folder, kwargs, checked=False)

    @classmethod
    def from_checked_folder(cls, folder: sources.ModelFolder, **kwargs):
        """`from_pretrained` of a folder a model reference resolved and checked already
        (`formats.references`: `model_directory.check_directory` for `ElmoModel`), read without
        checking it again; where the files came from (`sources.HUB_ARGUMENTS`) is settled."""
        model_directory.check_loading_arguments(f"{cls.__name__}.from_pretrained", (), kwargs)
        return cls._from_folder(folder, kwargs, checked=True)

    @classmethod
    def _from_folder(cls, folder: sources.ModelFolder | None, kwargs: dict, *, checked: bool):
        """The model of a resolved folder (None: a config and a state dict given instead of files)."""
        want_info = kwargs.pop("output_loading_info", False)
        kwargs.pop("ignore_mismatched_sizes", None)  # False (checked): load_strict passes True, then refuses
        reading = {name: value for name, value in kwargs.items() if name not in sources.HUB_ARGUMENTS}
        # what messages name: a local folder as the user wrote it, a hub snapshot's path in the cache
        source = (
            None if folder is None else folder.local_text(kwargs) if folder.repo_folder is None else str(folder.path)
        )
        load = functools.partial(super().from_pretrained, source, **compat.loading_arguments(reading))
        try:
            model, info = model_directory.load_strict(
                load,
                str(source),
                cls._optional_weights,
                kwargs.get("variant"),
                model_class=cls,
                arguments=kwargs,
                checked=checked,
            )
        except ElmoLoadError as err:
            raise (err if folder is None else folder.damaged(err)) from None
        files = _weights_files(folder, kwargs.get("variant"))
        for prefix, module in model.named_modules():
            if isinstance(module, ElmoModel):
                names = fp32_weights.weight_names(module)
                found = fp32_weights.SafetensorsFiles.find(files, names, prefix + "." if prefix else "")
                module.attach_weights_files(found, "its weights were not loaded from safetensors files")
                module._bind_precision(explicit=True)
        if folder is not None:  # the name the user gave, not the folder it resolved to (a hub snapshot)
            model.name_or_path = model.config.name_or_path = folder.name
        return (model, info) if want_info else model

    @property
    def converted_from(self) -> str | None:
        """What a converter built this biLM from (`load_legacy`, `load_efml`: the files' names, as a
        model card shows them), the card's source when save_pretrained is given none; None for any
        other model. The loader's record of its files answers (`attach_weights_files`)."""
        elmo = next((module for module in self.modules() if isinstance(module, ElmoModel)), None)
        files = elmo._fp32_state.files if elmo is not None else None
        return files.converted_from if files is not None else None

    @torch.no_grad()
    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, ElmoLstmLayer):
            for p in (module.input_weight, module.hidden_weight, module.proj_weight):
                if p is not None:
                    nn.init.uniform_(p, -0.05, 0.05)
            module.bias.zero_()
        elif isinstance(module, Highway):
            nn.init.normal_(module.transform.weight, std=std)
            nn.init.normal_(module.gate.weight, std=std)
            module.transform.bias.zero_()
            module.gate.bias.fill_(-2.0)  # start close to the identity (bilm-tf's init)
        elif isinstance(module, nn.Conv1d):
            nn.init.uniform_(module.weight, -0.05, 0.05)
            if module.bias is not None:  # (the char CNN's have one)
                module.bias.zero_()
        elif isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -1.0, 1.0)
            if module.padding_idx is not None:  # the character table's row 0 pads whole tokens
                module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.Linear):
            # HF initializes parents before children, so the gate's −2 bias is set here, not above
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                module.bias.fill_(-2.0 if getattr(module, "is_highway_gate", False) else 0.0)
        elif isinstance(module, ScalarMix):
            module.scalar_parameters.zero_()
            module.gamma.fill_(1.0)
        elif isinstance(module, ElmoLMHead):
            nn.init.normal_(module.weight, std=1.0 / module.weight.shape[1] ** 0.5)
            module.bias.zero_()


class ElmoModel(ElmoPreTrainedModel):
    """The biLM: character ids in, all L+1 contextual layers (and optional scalar mixes) out."""

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.token_encoder = ElmoCharacterEncoder(config)
        self.encoder = ElmoBiLstm(config)
        self.scalar_mixes = nn.ModuleList(
            ScalarMix(config.num_output_layers, config.scalar_mix_layer_norm)
            for _ in range(config.num_output_representations)
        )
        self.post_init()
        self._fp32_state = fp32_weights.Fp32State()
        self._bound: tuple[str, str] | None = None  # (precision, device type) the products are bound for
        self._bind_precision(explicit=False)  # (from a config or config.json; checked by ElmoConfig)

    def set_precision(self, precision: str) -> ElmoModel:
        """Inference in `precision`: "fp32" (exact, the default), "bf16" (bf16 products, fp32 state
        and outputs, on a device with native bf16; elsewhere one warning line, then fp32) or "int8"
        (dynamic quantization, CPU). Checked, recorded in `config.precision` (so `save_pretrained`
        saves it and `from_pretrained` binds it again; `from_pretrained(path, precision=...)` sets it
        while loading) and bound: the one way to change a built model's precision (setting
        `model.config.precision` changes what is saved, not how the model computes).

        In eval mode, bf16 and int8 release the fp32 weights they convert (`hf.fp32_weights`: what
        needs them later reads them back from the model's files, or refuses in one line where it
        has none). Error bounds: `kernels.bf16`, `kernels.int8`, docs/performance.md."""
        apply_precision(self, precision)
        return self

    def _bind_precision(self, *, explicit: bool) -> None:
        """Binds `config.precision` to this biLM on the device its weights are on: the decider
        (`kernels.products.decide_product`) answers once for each product (the char CNN's, every
        linear's, each LSTM weight's), and in eval mode a low precision releases the fp32 weights
        it converted (`fp32_weights.release`; `explicit`: a precision was set, not only eval()).
        Nothing re-reads it per call."""
        device_type = self.token_encoder.char_embedding.weight.device.type
        if device_type == "meta":  # (transformers builds on meta, then loads: `from_pretrained` binds)
            return
        key = (self.config.precision, device_type)
        if key != self._bound:
            if self._bound is not None:  # a converted weight cannot become another precision's
                what = f"set_precision({self.config.precision!r})"
                fp32_weights.restore(self, self._fp32_state, what, self._bound[0])
            capabilities = kernels.device_capabilities(*key)
            for module in self.modules():
                if isinstance(module, (ElmoCharacterEncoder, ElmoLstmLayer, kernels.ProductLinear)):
                    module.bind_products(*key, capabilities)
            if self.token_cache is not None:
                self.token_cache.clear()
            self._bound = key
        if not self.training and key[0] != "fp32":
            fp32_weights.release(self, self._fp32_state, explicit=explicit)

    def attach_weights_files(self, files: fp32_weights.WeightsFiles | None, why: str = "") -> None:
        """Where this biLM's fp32 weights, as they are now, can be read back from once a low precision
        released them (its loaders call it: `from_pretrained`, `load_legacy`, `load_efml`); None: from
        nowhere, for `why` (one line's end): weights released already are read back first and kept
        (e.g. a biLM read from bytes through a temporary folder)."""
        if files is None and self._bound is not None:
            fp32_weights.restore(self, self._fp32_state, "detaching its files", self._bound[0])
        fp32_weights.attach(self, self._fp32_state, files, why)

    def train(self, mode: bool = True) -> ElmoModel:
        """As `nn.Module.train`; training reads released fp32 weights back first (from the model's
        files; one line where it has none), and eval mode at a low precision releases them while
        they are still their files' (`fp32_weights`)."""
        state = getattr(self, "_fp32_state", None)  # (None while __init__ runs)
        if mode and state is not None and self._bound is not None:
            fp32_weights.restore(self, state, "train()", self._bound[0])
        super().train(mode)
        if not mode and state is not None and self._bound is not None and self._bound[0] != "fp32":
            fp32_weights.release(self, state, explicit=False)
        return self

    def _apply(self, fn, recurse: bool = True):
        """`nn.Module.to` / `cuda` / `half` / ...: released fp32 weights are read back first where the
        parameters move or change dtype (the converted ones belong to the device they were made
        for), and the precision is bound again for a new device."""
        state = getattr(self, "_fp32_state", None)
        if state is not None and fp32_weights.is_released(state) and self._bound is not None:
            probe = self.token_encoder.char_embedding.weight
            with torch.no_grad():
                moves = fn(probe) is not probe
            if moves:
                fp32_weights.restore(self, state, "moving or casting the model", self._bound[0])
        result = super()._apply(fn, recurse)
        if state is not None and self._bound is not None:
            self._bind_precision(explicit=False)
        return result

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """As `nn.Module.state_dict`, with any released fp32 weights read back from the model's files
        (so `save_pretrained` and a pipeline's `to_disk` save fp32 weights); the model is unchanged."""
        state = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        if self._bound is None or not fp32_weights.is_released(self._fp32_state):
            return state
        what = "state_dict (saving the model)"
        released = fp32_weights.read_released(self, self._fp32_state, what, self._bound[0])
        entries = {key: state.pop(key) for key in [key for key in state if key.startswith(prefix)]}
        entries.update((prefix + name, tensor) for name, tensor in released.items())
        for module_name, module in self.named_modules():  # in nn.Module.state_dict's order
            here = prefix + (module_name + "." if module_name else "")
            persistent = [n for n in module._buffers if n not in module._non_persistent_buffers_set]
            for key in [here + n for n in module._parameters] + [here + n for n in persistent]:
                if key in entries:
                    state[key] = entries.pop(key)
        state.update(entries)
        return state

    def embed_tokens(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Context-independent token vectors x_k for [..., max_chars] character ids (and [...] word
        ids, for a model with a word embedding)."""
        return self.token_encoder(char_ids, word_ids)

    # Inference keeps an LRU of token vectors per distinct word (exact; cleared whenever the
    # character encoder's weights change; never used in training mode or when gradients flow).
    token_cache_size: int = 20_000
    token_cache: kernels.TokenEmbeddingCache | None = None

    def enable_token_cache(self, max_words: int = 20_000) -> None:
        """Sets the size (in words) of the automatic inference token-embedding cache."""
        self.token_cache_size = int(max_words)
        self.token_cache = kernels.TokenEmbeddingCache(max_words)

    def disable_token_cache(self) -> None:
        """Turns the inference token-embedding cache off (every word goes through the char CNN)."""
        self.token_cache_size = 0
        self.token_cache = None

    def _embed_real_tokens(self, char_ids: torch.Tensor, word_ids: torch.Tensor | None) -> torch.Tensor:
        """Token vectors for [words, max_chars] ids (and [words] word ids); the spelling part goes
        through the cache when inferring."""
        encoder = self.token_encoder
        weights = [
            p for name, p in encoder.named_parameters() if not name.startswith(("word_embedding.", "word_projection."))
        ]
        needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in encoder.parameters())
        autocast = torch.is_autocast_enabled(char_ids.device.type)  # cache only exact fp32 vectors
        if self.training or needs_grad or autocast or self.token_cache_size <= 0:
            return encoder(char_ids, word_ids)
        if self.token_cache is None or self.token_cache.max_words != self.token_cache_size:
            self.token_cache = kernels.TokenEmbeddingCache(self.token_cache_size)
        spelled = self.token_cache.lookup(weights, char_ids, lambda ids: encoder.spelling_vectors(ids, unique=False))
        return encoder.add_word_vectors(spelled, word_ids)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        input_word_ids: torch.Tensor | None = None,
        initial_state: ElmoState | None = None,
        return_state: bool = False,
        keep_sentence_boundaries: bool = False,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ElmoModelOutput:
        """input_ids: [batch, tokens, max_chars] character ids (from `ElmoTokenizer`), without the
        sentence start / end tokens; input_word_ids: [batch, tokens] word ids (models with a word
        embedding only).

        `initial_state` / `return_state` carry the LSTM state explicitly (shapes in `ElmoState`);
        states refer to sequences *with* the boundary tokens, as in the original implementations.
        """
        if input_ids.dim() != 3:
            raise ValueError(
                f"input_ids must be [batch, tokens, max_chars] character ids, got shape {tuple(input_ids.shape)}"
            )
        if input_ids.shape[-1] != self.config.max_characters_per_token:
            raise ValueError(
                f"input_ids last dimension is {input_ids.shape[-1]} but the model expects "
                f"max_characters_per_token={self.config.max_characters_per_token}"
            )
        if attention_mask is None:
            attention_mask = (input_ids > 0).any(dim=-1)
        mask = attention_mask.bool()
        if input_ids.shape[0] == 0:  # empty batch: empty layers of the right width
            empty = self.token_encoder.char_embedding.weight.new_zeros(0, input_ids.shape[1], self.config.output_dim)
            return ElmoModelOutput(
                last_hidden_state=empty,
                hidden_states=(empty,) * self.config.num_output_layers,
                attention_mask=mask,
                mixed_representations=tuple(empty for _ in self.scalar_mixes) or None,
            )
        lengths = mask.sum(dim=1)
        if bool((mask != (torch.arange(mask.shape[1], device=mask.device) < lengths.unsqueeze(1))).any()):
            raise ValueError("attention_mask must be left-aligned (real tokens first, padding after)")
        if (input_word_ids is not None) != (self.token_encoder.word_embedding is not None):
            raise ValueError(
                "this model has a word embedding: pass input_word_ids (ElmoTokenizer returns them)"
                if input_word_ids is None
                else "input_word_ids given, but this model has no word embedding"
            )
        if input_word_ids is not None and tuple(input_word_ids.shape) != tuple(input_ids.shape[:2]):
            raise ValueError(
                f"input_word_ids has shape {tuple(input_word_ids.shape)}, expected {tuple(input_ids.shape[:2])}"
            )
        char_ids, full_mask, word_ids = add_sentence_boundaries(
            input_ids, mask, input_word_ids, self.config.uses_char_lexicon
        )
        # the char CNN runs on real tokens only; padding positions stay zero
        real = self._embed_real_tokens(char_ids[full_mask], None if word_ids is None else word_ids[full_mask])
        tokens = real.new_zeros(*full_mask.shape, real.shape[-1])
        tokens[full_mask] = real
        if initial_state is not None:
            initial_state = ElmoState(*initial_state)
        if fp32_weights.is_released(self._fp32_state) and self._bound is not None:
            implementation = self.encoder.implementation(tokens, initial_state)
            if implementation != "packed":  # a kernel that reads the fp32 weights: back from the files
                what = f"lstm_implementation {implementation!r} (a gradient or an explicit choice)"
                fp32_weights.restore(self, self._fp32_state, what, self._bound[0])
        lstm_layers, state = self.encoder(tokens, full_mask, initial_state, return_state)
        layers = [torch.cat([tokens, tokens], dim=-1)] + lstm_layers
        if not keep_sentence_boundaries:
            steps = input_ids.shape[1]
            keep = mask.unsqueeze(-1).to(tokens.dtype)
            layers = [layer[:, 1 : steps + 1] * keep for layer in layers]
            out_mask = mask
        else:
            out_mask = full_mask
        mixes = tuple(mix(layers, out_mask) for mix in self.scalar_mixes) or None
        return ElmoModelOutput(
            last_hidden_state=layers[-1],
            hidden_states=tuple(layers),
            attention_mask=out_mask,
            mixed_representations=mixes,
            state=state,
        )


class ElmoLMHead(nn.Module):
    """Softmax over the word vocabulary, shared by the forward and backward LMs."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(config.vocab_size, config.projection_dim))
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.weight, self.bias)


class ElmoForBidirectionalLM(ElmoPreTrainedModel):
    """The biLM with its LM head: the forward LM predicts the next word, the backward LM the previous one.

    Word ids follow the pretraining vocabulary: 0 = `<S>`, 1 = `</S>`, 2 = `<UNK>`.
    """

    BOS_ID, EOS_ID, UNK_ID = WORD_BOS, WORD_EOS, WORD_UNK
    # an encoder-only checkpoint can seed LM training: the head then starts fresh
    _optional_weights = ElmoPreTrainedModel._optional_weights + ("lm_head.",)
    _keys_to_ignore_on_load_missing = model_directory.ignore_patterns(_optional_weights)

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        if config.vocab_size < 3:
            raise ValueError("ElmoForBidirectionalLM needs config.vocab_size >= 3 (<S>, </S>, <UNK> + words)")
        self.elmo = ElmoModel(config)
        self.lm_head = ElmoLMHead(config)
        self.dropout = nn.Dropout(config.dropout)
        self.post_init()

    def targets(self, word_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward targets over the boundary-wrapped sequence ([batch, tokens + 2], −100 = none)."""
        return lm_targets(word_ids, mask, self.BOS_ID, self.EOS_ID)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        softmax_fn=None,
        input_word_ids: torch.Tensor | None = None,
        **kwargs,
    ) -> ElmoLMOutput:
        """labels: [batch, tokens] word ids of the input tokens. `softmax_fn(hidden, targets) -> summed loss`
        replaces the full softmax (e.g. a sampled softmax while training)."""
        if attention_mask is None:
            attention_mask = (input_ids > 0).any(dim=-1)
        out = self.elmo(input_ids, attention_mask, input_word_ids, keep_sentence_boundaries=True)
        top = self.dropout(out.last_hidden_state)
        proj = self.config.projection_dim
        if labels is None:
            return ElmoLMOutput(hidden_states=out.hidden_states)
        fwd_targets, bwd_targets = self.targets(labels, attention_mask)
        losses = []
        for hidden, targets in ((top[..., :proj], fwd_targets), (top[..., proj:], bwd_targets)):
            keep = targets >= 0
            h, y = hidden[keep], targets[keep]
            if softmax_fn is None:
                losses.append(F.cross_entropy(self.lm_head(h), y, reduction="sum"))
            else:
                losses.append(softmax_fn(h, y))
        n = (fwd_targets >= 0).sum()
        fwd, bwd = losses[0] / n.clamp(min=1), losses[1] / n.clamp(min=1)
        return ElmoLMOutput(
            loss=(fwd + bwd) / 2,
            forward_loss=fwd,
            backward_loss=bwd,
            num_targets=n,
            hidden_states=out.hidden_states,
        )


__all__ = [
    "ElmoState",
    "ElmoModelOutput",
    "ElmoLMOutput",
    "ScalarMix",
    "scalar_mix",
    "scalar_mix_penalty",
    "ElmoLoadError",
    "ElmoPreTrainedModel",
    "ElmoModel",
    "ElmoForBidirectionalLM",
    "add_sentence_boundaries",
    "apply_precision",
    "bind_precision",
    "LSTM_IMPLEMENTATIONS",
    "resolve_lstm_implementation",
    "lm_targets",
]
