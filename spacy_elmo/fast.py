"""Inference machinery behind `ElmoModel`: how the biLM of `modeling_elmo` is *evaluated* fast.

Everything here computes the same function as the readable forward pass in `modeling_elmo.py`
(up to float rounding, ~1e-7) unless it says otherwise:

* `encode_words` – the char CNN on unique words only, sorted by length, in chunks whose character
  columns are cut after the longest word of the chunk plus the widest filter.  Exact: every
  convolution window that lies entirely in the constant padding after a word gives the same value,
  and one such window is always kept, so the max-pool sees the same set of values.
* `TokenEmbeddingCache` – a bounded LRU of token vectors (char CNN + highway + projection output)
  keyed by the word's character ids; invalidated when the encoder's weights change.
* `bilstm_inference` – the biLSTM over a *packed* batch (rows sorted by length, time-major, only
  the rows still inside their sentence at each step: no padding is computed and no `torch.where`
  bookkeeping is needed for the final state), input projections for many steps in one batched
  matmul per layer (both directions in one `baddbmm`), recurrent products with oneDNN-prepacked
  weights, every step working in place on preallocated buffers.
* `quantize_int8` – the opt-in approximation: int8 weights with dynamic (per-row) int8 activations
  for the LSTM and highway matmuls on CPU.  Changes outputs; see docs/performance.md for its error.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable

import numpy
import torch
from torch import nn

# ---------------------------------------------------------------------------------------------
# instrumentation: what the encoder actually executed (the benchmark reads this to report the
# fraction of the roofline against executed, not nominal, work)
# ---------------------------------------------------------------------------------------------

STATS = {"words_encoded": 0, "char_cnn_flops": 0.0, "lstm_positions": 0}


def reset_stats() -> None:
    for key in STATS:
        STATS[key] = 0


# ---------------------------------------------------------------------------------------------
# char CNN: unique words, sorted by length, columns cut to what the max-pool can see
# ---------------------------------------------------------------------------------------------


def used_columns(char_ids: torch.Tensor) -> torch.Tensor:
    """Per row, 1 + the last column whose id differs from the row's final id (the constant tail)."""
    tail = char_ids[:, -1:]
    position = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)
    return ((char_ids != tail) * position).amax(dim=1)


class _full_fp32_convolutions:
    """cuDNN may run fp32 convolutions as TF32 (~1e-3 relative error); the exact path does not."""

    def __init__(self, device: torch.device):
        self.active = device.type == "cuda" and not torch.is_autocast_enabled("cuda")

    def __enter__(self):
        if self.active:
            self.saved = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False

    def __exit__(self, *exc):
        if self.active:
            torch.backends.cudnn.allow_tf32 = self.saved
        return False


# Every char-CNN and highway call gets at least this many rows (short calls are padded with
# repeats of their first row): below it, MKL/oneDNN pick other kernels whose rounding differs, and
# a word's vector would then depend (in the last bit) on how many other words came with it.  With
# it, a word's vector is the same bit for bit whatever batch computed it, so cached vectors equal
# freshly computed ones.
MIN_ROWS = 16


def _at_least(rows: torch.Tensor, count: int) -> torch.Tensor:
    if rows.numel() >= count:
        return rows
    return torch.cat([rows, rows[:1].expand(count - rows.numel())])


# words per char-CNN call: keeps each convolution's output (words × filters × columns) small
# enough to be recycled by the allocator instead of page-faulted in afresh (≤ 32 MB)
CNN_CHUNK = 128


def encode_words(encoder: nn.Module, char_ids: torch.Tensor, unique: bool = True) -> torch.Tensor:
    """`ElmoCharacterEncoder` token vectors for every row of `char_ids` [N, max_chars].

    Rows are de-duplicated, sorted by used length and run through the char CNN in chunks of
    `CNN_CHUNK` words, each cut to `min(max_chars, longest used length + widest filter)` columns
    (see the module docstring); highway layers and projection then run on all words at once.
    """
    n, max_chars = char_ids.shape
    if n == 0:
        return encoder.token_vectors(encoder.char_features(char_ids))
    inverse = None
    if unique and n > 1:
        char_ids, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        n = char_ids.shape[0]
    filters = encoder.filters
    widest = max(width for width, _ in filters)
    used = used_columns(char_ids)
    order = torch.argsort(used)
    used_sorted = used[order].tolist()
    pieces = []
    per_column = 2.0 * encoder.char_embedding.embedding_dim
    for start in range(0, n, CNN_CHUNK):
        stop = min(start + CNN_CHUNK, n)
        columns = min(max_chars, int(used_sorted[stop - 1]) + widest)
        rows = _at_least(order[start:stop], MIN_ROWS)
        with _full_fp32_convolutions(char_ids.device):
            pieces.append(encoder.char_features(char_ids.index_select(0, rows)[:, :columns])[: stop - start])
        STATS["char_cnn_flops"] += (stop - start) * sum(
            per_column * max(columns - width + 1, 0) * width * num for width, num in filters
        )
    STATS["words_encoded"] += n
    features = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
    if n < MIN_ROWS:  # pad with copies of the first row (see MIN_ROWS)
        features = torch.cat([features, features[:1].expand(MIN_ROWS - n, *features.shape[1:])])
    back = torch.argsort(order)  # sorted position of each distinct word
    if inverse is not None:
        back = back[inverse.reshape(-1)]
    return encoder.token_vectors(features)[:n].index_select(0, back)


# ---------------------------------------------------------------------------------------------
# token-embedding cache
# ---------------------------------------------------------------------------------------------


def _weights_key(*tensors: torch.Tensor | None) -> tuple:
    """Changes whenever one of the tensors is replaced or modified in place (for derived-weight caches)."""
    return tuple((t.data_ptr(), t._version, t.dtype, t.device) for t in tensors if t is not None)


def _prepack_directions(weight: torch.Tensor) -> list:
    """oneDNN-prepacked copies of a [2, in, out] weight, one per direction."""
    prepack = torch.ops.mkldnn._reorder_linear_weight
    return [prepack(w.detach().t().contiguous(), 32) for w in weight]


def _fingerprint(module: nn.Module) -> tuple:
    return _weights_key(*module.parameters())


class TokenEmbeddingCache:
    """Bounded LRU of context-independent token vectors, keyed by a word's character ids.

    Lives on an `ElmoModel` (`model.token_cache`); used only in eval mode without gradients.
    Any change to the character encoder's weights (in-place update, reload, `.to()`) clears it.
    """

    def __init__(self, max_words: int = 20_000):
        if max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {max_words}")
        self.max_words = int(max_words)
        self.hits = self.misses = 0
        self.clear()

    def clear(self) -> None:
        self._slots: OrderedDict[bytes, int] = OrderedDict()
        self._free: list[int] = []
        self._store: torch.Tensor | None = None
        self._fingerprint: tuple | None = None

    def __len__(self) -> int:
        return len(self._slots)

    def _grow(self, needed: int, like: torch.Tensor) -> None:
        size = 0 if self._store is None else self._store.shape[0]
        if needed <= size:
            return
        new_size = min(self.max_words, max(needed, 2 * size, 1024))
        with torch.inference_mode(False):  # a normal tensor: usable under no_grad and inference_mode
            store = torch.empty(new_size, like.shape[-1], device=like.device, dtype=like.dtype)
            if self._store is not None:
                store[:size] = self._store
        self._free.extend(range(new_size - 1, size - 1, -1))
        self._store = store

    def lookup(self, encoder: nn.Module, char_ids: torch.Tensor, compute: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """Token vectors for `char_ids` [N, max_chars]; misses are computed by `compute` (one call)."""
        fingerprint = _fingerprint(encoder)
        if fingerprint != self._fingerprint:
            self.clear()
            self._fingerprint = fingerprint
        n = char_ids.shape[0]
        if n == 0 or int(char_ids.min()) < 0 or int(char_ids.max()) > 32767:
            return compute(char_ids)
        array = char_ids.to("cpu", torch.int16).numpy()
        keys = numpy.ascontiguousarray(array).view(numpy.dtype((numpy.void, 2 * array.shape[1]))).ravel().tolist()
        slots = self._slots
        hit_pos, hit_slot, first = [], [], []
        missing: dict[bytes, int] = {}
        miss_pos, miss_idx = [], []
        for pos, key in enumerate(keys):
            slot = slots.get(key)
            if slot is not None:
                slots.move_to_end(key)
                hit_pos.append(pos)
                hit_slot.append(slot)
                continue
            index = missing.get(key)
            if index is None:
                index = missing[key] = len(first)
                first.append(pos)
            miss_pos.append(pos)
            miss_idx.append(index)
        self.hits += len(hit_pos)
        self.misses += len(first)
        device = char_ids.device
        if not first:
            return self._store.index_select(0, torch.tensor(hit_slot, device=device))
        fresh = compute(char_ids.index_select(0, torch.tensor(first, device=device)))
        out = fresh.new_empty(n, fresh.shape[-1])
        if hit_pos:
            out[torch.tensor(hit_pos, device=device)] = self._store.index_select(0, torch.tensor(hit_slot, device=device))
        out[torch.tensor(miss_pos, device=device)] = fresh.index_select(0, torch.tensor(miss_idx, device=device))
        # insert the new words, evicting the least recently used ones not seen in this batch
        protected = len(set(hit_slot))
        room = self.max_words - protected
        new_keys = list(missing)[: max(room, 0)]
        if new_keys:
            self._grow(min(self.max_words, len(slots) + len(new_keys)), fresh)
            new_slots = []
            for key in new_keys:
                if not self._free:
                    _, slot = slots.popitem(last=False)
                    self._free.append(slot)
                slot = self._free.pop()
                slots[key] = slot
                new_slots.append(slot)
            self._store[torch.tensor(new_slots, device=device)] = fresh[: len(new_keys)]
        return out


# ---------------------------------------------------------------------------------------------
# int8 dynamic quantization (CPU, opt-in, approximate)
# ---------------------------------------------------------------------------------------------


def _quantize_columns(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[K, N] float weight (x·W orientation) → int8 [K, N] and per-column scales [N]."""
    scale = (weight.abs().amax(dim=0) / 127.0).clamp(min=1e-12)
    return torch.round(weight / scale).clamp(-127, 127).to(torch.int8), scale.float()


def int8_matmul(x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x [M, K] float · (qweight [K, N] int8 × scale [N]) with x quantized per row at run time."""
    x_scale = (x.abs().amax(dim=-1, keepdim=True) / 127.0).clamp(min=1e-12)
    xq = torch.round(x / x_scale).to(torch.int8)
    return torch._int_mm(xq, qweight).float().mul_(x_scale).mul_(scale)


class Int8Weights:
    """int8 copies of an `ElmoLstmLayer`'s matrices, per direction; refreshed when weights change."""

    def __init__(self, layer: nn.Module):
        self.layer = layer
        self._version = None
        self.refresh()

    def refresh(self) -> None:
        layer = self.layer
        version = _weights_key(*layer.parameters())
        if version == self._version:
            return
        self._version = version
        self.mats = {}
        for name in ("input_weight", "hidden_weight", "proj_weight"):
            weight = getattr(layer, name)
            if weight is not None:
                self.mats[name] = [_quantize_columns(weight[d].detach().float()) for d in range(weight.shape[0])]

    def bmm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        """[2, M, K] · weight[d] per direction → [2, M, N] float."""
        return torch.stack([int8_matmul(x[d], *self.mats[name][d]) for d in range(x.shape[0])])


class Int8Linear(nn.Linear):
    """nn.Linear (same parameters and state-dict keys) evaluated with int8 weights and activations."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and self.weight.requires_grad:
            return super().forward(x)
        version = _weights_key(self.weight)
        if getattr(self, "_q_version", None) != version:
            self._q = _quantize_columns(self.weight.detach().float().t())
            self._q_version = version
        flat = x.reshape(-1, x.shape[-1])
        out = int8_matmul(flat, *self._q)
        if self.bias is not None:
            out += self.bias
        return out.reshape(*x.shape[:-1], -1)


def quantize_int8(model: nn.Module) -> nn.Module:
    """Switches an `ElmoModel` (in place) to int8 dynamic quantization for its LSTM and highway
    matmuls on CPU.  Approximate (see docs/performance.md); parameters are kept in fp32 so
    `state_dict`/`save_legacy` are unchanged.  Undo with `dequantize(model)`."""
    from .modeling_elmo import ElmoLstmLayer

    for module in model.modules():
        if isinstance(module, ElmoLstmLayer):
            module.int8 = Int8Weights(module)
            _PREPACKED.pop(module, None)  # the fp32 prepacked copies are not used while quantized
            _PREPACKED_INPUT.pop(module, None)
        elif type(module) is nn.Linear and module.in_features >= 64:
            module.__class__ = Int8Linear
    if hasattr(model, "token_cache") and getattr(model, "token_cache") is not None:
        model.token_cache.clear()
    return model


def dequantize(model: nn.Module) -> nn.Module:
    """Back to exact fp32 evaluation after `quantize_int8`."""
    from .modeling_elmo import ElmoLstmLayer

    for module in model.modules():
        if isinstance(module, ElmoLstmLayer):
            module.int8 = None
        elif isinstance(module, Int8Linear):
            module.__class__ = nn.Linear
    if getattr(model, "token_cache", None) is not None:
        model.token_cache.clear()
    return model


# ---------------------------------------------------------------------------------------------
# packed biLSTM inference
# ---------------------------------------------------------------------------------------------


class PackedLayout:
    """Rows sorted by length (longest first), laid out time-major: step t holds `counts[t]` rows.

    `forward_index` / `backward_index` give, for each packed position, the flat [batch·time]
    position of its token in the forward and in the (within-length reversed) backward direction.
    """

    def __init__(self, lengths: torch.Tensor, steps: int):
        batch = lengths.shape[0]
        self.batch, self.steps = batch, steps
        sorted_lengths, self.order = torch.sort(lengths, descending=True, stable=True)
        longest = int(sorted_lengths[0]) if batch else 0
        time = torch.arange(longest, device=lengths.device)
        active = torch.arange(batch, device=lengths.device).unsqueeze(0) < (
            sorted_lengths.unsqueeze(0) > time.unsqueeze(1)
        ).sum(dim=1, keepdim=True)
        self.counts = active.sum(dim=1).tolist()
        self.offsets = [0]
        for count in self.counts:
            self.offsets.append(self.offsets[-1] + count)
        t, rank = active.nonzero(as_tuple=True)
        rows = self.order[rank]
        self.forward_index = rows * steps + t
        self.backward_index = rows * steps + lengths[rows] - 1 - t
        self.sorted_lengths = sorted_lengths
        self.size = self.offsets[-1]

    def pack(self, tokens: torch.Tensor) -> torch.Tensor:
        """[batch, steps, dim] → [2, packed, dim] (direction 1 reversed within each length)."""
        flat = tokens.reshape(-1, tokens.shape[-1])
        return torch.stack([flat.index_select(0, self.forward_index), flat.index_select(0, self.backward_index)])

    def unpack(self, packed: torch.Tensor) -> torch.Tensor:
        """[2, packed, dim] → [batch, steps, 2·dim], zero at padding."""
        dim = packed.shape[-1]
        out = packed.new_zeros(self.batch * self.steps, 2, dim)
        out[:, 0].index_copy_(0, self.forward_index, packed[0])
        out[:, 1].index_copy_(0, self.backward_index, packed[1])
        return out.view(self.batch, self.steps, 2 * dim)

    def final_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """For each sorted rank with length > 0: (rank, packed position of its last step)."""
        lengths = self.sorted_lengths.tolist()
        ranks = [r for r, length in enumerate(lengths) if length > 0]
        where = [self.offsets[lengths[r] - 1] + r for r in ranks]
        device = self.order.device
        return torch.tensor(ranks, device=device, dtype=torch.long), torch.tensor(where, device=device, dtype=torch.long)


# rows (per direction) of packed input projections computed by one matmul; bounds scratch memory
PROJECTION_ROWS = 512
# the recurrent products of at least this many rows use oneDNN with prepacked weights on CPU
# (≈2x MKL for the skinny [rows, 512]·[512, 16384] shapes); fewer rows are matrix-vector-like
# and memory bound, where MKL's plain GEMM is faster
PREPACKED_MIN_ROWS = 8
USE_PREPACKED = True


def _onednn_available() -> bool:
    try:
        return hasattr(torch.ops.mkldnn, "_linear_pointwise") and torch.backends.mkldnn.is_available()
    except (AttributeError, RuntimeError):
        return False


_ONEDNN = _onednn_available()


class Prepacked:
    """oneDNN-prepacked copies of a layer's recurrent matrices (hidden_weight, proj_weight) per
    direction, for CPU fp32 inference.  Costs one extra copy of those weights in memory."""

    def __init__(self, layer: nn.Module):
        self.key = self.key_of(layer)
        self.hidden = _prepack_directions(layer.hidden_weight)
        self.proj = _prepack_directions(layer.proj_weight) if layer.proj_weight is not None else None

    @staticmethod
    def key_of(layer: nn.Module) -> tuple:
        return _weights_key(layer.hidden_weight, layer.proj_weight)


def prepacked(layer: nn.Module) -> Prepacked | None:
    """The layer's prepacked weights (built on first use, rebuilt after any weight change)."""
    if not (USE_PREPACKED and _ONEDNN) or layer.hidden_weight.device.type != "cpu" or layer.hidden_weight.dtype != torch.float32:
        return None
    cached = _PREPACKED.get(layer)
    if cached is None or cached.key != Prepacked.key_of(layer):
        _PREPACKED.pop(layer, None)  # free the old copy first
        try:
            _PREPACKED[layer] = cached = Prepacked(layer)
        except RuntimeError:
            return None
    return cached


# derived weight copies live beside (not inside) the modules, so pickling/deep-copying a model
# never sees them, and they go away with their layer
_PREPACKED: "weakref.WeakKeyDictionary[nn.Module, Prepacked]" = weakref.WeakKeyDictionary()
_LOW_PRECISION: "weakref.WeakKeyDictionary[nn.Module, dict]" = weakref.WeakKeyDictionary()


_local = threading.local()


def scratch(name: str, shape: tuple, like: torch.Tensor) -> torch.Tensor:
    """A reusable per-thread buffer of `shape` (contents undefined).  Large temporaries are
    recycled across calls: a fresh multi-MB allocation is page-faulted in at every call."""
    numel = 1
    for size in shape:
        numel *= size
    buffers = _local.__dict__.setdefault("buffers", {})
    key = (name, like.device, like.dtype)
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < numel:
        buffers[key] = None  # release the smaller one first
        with torch.inference_mode(False):  # a normal tensor: usable under no_grad and inference_mode
            buffer = buffers[key] = torch.empty(numel, device=like.device, dtype=like.dtype)
    return buffer[:numel].view(shape)


def release_scratch() -> None:
    """Frees this thread's recycled buffers (they are re-created on the next call)."""
    _local.__dict__.pop("buffers", None)


def _tanh_(x: torch.Tensor) -> torch.Tensor:
    """In-place tanh as 2·σ(2x) − 1 (same values within ~1e-7; PyTorch's CPU sigmoid is ~6x faster)."""
    return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0)


# batches with fewer packed rows than this (batch 1, a few short sentences) run their input
# projection through oneDNN with prepacked input weights (MKL is ~2x slower at so few rows); they
# are packed on first use only, so workloads without such small batches never pay their memory
PREPACKED_INPUT_MAX_ROWS = 128
_PREPACKED_INPUT: "weakref.WeakKeyDictionary[nn.Module, tuple]" = weakref.WeakKeyDictionary()


def _prepacked_input(layer: nn.Module):
    key = _weights_key(layer.input_weight)
    cached = _PREPACKED_INPUT.get(layer)
    if cached is None or cached[0] != key:
        _PREPACKED_INPUT.pop(layer, None)
        cached = _PREPACKED_INPUT[layer] = (key, _prepack_directions(layer.input_weight))
    return cached[1]


def _input_projection(layer: nn.Module, x: torch.Tensor, bias: torch.Tensor, exact: bool, small: bool):
    """[2, rows, in] → [2, rows, 4·hidden] gate pre-activations from the inputs (+ bias)."""
    if exact and small and prepacked(layer) is not None:
        packed = _prepacked_input(layer)
        linear = torch.ops.mkldnn._linear_pointwise
        return [linear(x[d], packed[d], bias[d], "none", [], "") for d in range(x.shape[0])]
    if exact:
        out = scratch("gates", (x.shape[0], x.shape[1], layer.input_weight.shape[-1]), x)
        return torch.baddbmm(bias.unsqueeze(1), x, layer.input_weight, out=out)
    return _matmul(layer, "input_weight", x).float().add_(bias.unsqueeze(1))


def _low_precision_weight(layer: nn.Module, name: str, dtype: torch.dtype) -> torch.Tensor:
    """`layer.<name>` cast to the autocast dtype, cached until the weight changes (autocast itself
    re-casts per-direction views at every call)."""
    weight = getattr(layer, name)
    cache = _LOW_PRECISION.setdefault(layer, {})
    key = (_weights_key(weight), dtype)
    hit = cache.get(name)
    if hit is None or hit[0] != key:
        cache[name] = None
        with torch.inference_mode(False):
            hit = cache[name] = (key, weight.detach().to(dtype))
    return hit[1]


def _matmul(layer: nn.Module, name: str, x: torch.Tensor, direction: int | None = None) -> torch.Tensor:
    """x · layer.<name> for both directions ([2, rows, in]) or one (`direction`, [rows, in]):
    int8 when the layer was quantized (CPU), else in the autocast dtype."""
    int8 = getattr(layer, "int8", None)
    if int8 is not None and x.device.type == "cpu":
        if direction is None:
            return int8.bmm(x, name)
        return int8_matmul(x, *int8.mats[name][direction])
    dtype = torch.get_autocast_dtype(x.device.type)
    weight = _low_precision_weight(layer, name, dtype)
    x = x.to(dtype)
    return torch.bmm(x, weight) if direction is None else torch.mm(x, weight[direction])


def run_layer_packed(
    layer: nn.Module, x: torch.Tensor, layout: PackedLayout, h0: torch.Tensor, c0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One `ElmoLstmLayer` over packed inputs x [2, packed, input_dim].

    h0 [2, batch, proj] / c0 [2, batch, hidden] are in sorted row order.  Returns the packed
    outputs [2, packed, proj] and the final cells [2, batch, hidden] (each row's, after its last
    step; rows that stop early simply stop being updated).
    """
    n_dir = x.shape[0]
    hidden = layer.bias.shape[-1] // 4
    has_projection = layer.proj_weight is not None
    int8 = getattr(layer, "int8", None) is not None and x.device.type == "cpu"
    if int8:
        layer.int8.refresh()
    exact = not (int8 or torch.is_autocast_enabled(x.device.type))
    packed = prepacked(layer) if exact and x.dtype == torch.float32 else None
    linear = torch.ops.mkldnn._linear_pointwise if packed is not None else None
    bias = layer.gate_bias().detach().to(x.dtype)
    proj_dim = layer.proj_weight.shape[-1] if has_projection else hidden
    out = x.new_empty(n_dir, layout.size, proj_dim)
    c = c0.to(x.dtype).clone()
    cell_out = x.new_empty(n_dir, layout.batch, hidden)
    h_prev = h0.to(x.dtype)
    cell_clip, proj_clip = layer.cell_clip, layer.proj_clip
    steps = len(layout.counts)
    small_batch = layout.size < PREPACKED_INPUT_MAX_ROWS
    t = 0
    while t < steps:
        # input projections for a block of steps in one batched matmul (both directions at once)
        start = layout.offsets[t]
        end_t = t + 1
        while end_t < steps and layout.offsets[end_t + 1] - start <= PROJECTION_ROWS:
            end_t += 1
        block = _input_projection(layer, x[:, start : layout.offsets[end_t]], bias, exact, small_batch)
        for step in range(t, end_t):
            n = layout.counts[step]
            offset = layout.offsets[step]
            for d in range(n_dir):
                gates = block[d][offset - start : offset - start + n]  # [n, 4·hidden], contiguous
                h = h_prev[d, :n]
                if packed is not None and n >= PREPACKED_MIN_ROWS:
                    gates = linear.binary(h, gates, packed.hidden[d], None, "add")
                elif exact:
                    gates.addmm_(h, layer.hidden_weight[d])
                else:
                    gates.add_(_matmul(layer, "hidden_weight", h, d))
                i, j, f = gates[:, :hidden], gates[:, hidden : 2 * hidden], gates[:, 2 * hidden : 3 * hidden]
                i.sigmoid_()
                gates[:, 2 * hidden :].sigmoid_()  # f and o together
                _tanh_(j)
                cell = c[d, :n]
                cell.mul_(f).addcmul_(i, j)
                if cell_clip:
                    cell.clamp_(-cell_clip, cell_clip)
                m = cell_out[d, :n]
                _tanh_(m.copy_(cell)).mul_(gates[:, 3 * hidden :])
                h_new = out[d, offset : offset + n]
                if has_projection:
                    if packed is not None and n >= PREPACKED_MIN_ROWS:
                        projected = linear(m, packed.proj[d], None, "none", [], "")
                    elif exact:
                        projected = torch.mm(m, layer.proj_weight[d], out=h_new)
                    else:
                        projected = _matmul(layer, "proj_weight", m, d)
                    if projected.dtype != h_new.dtype:  # autocast: low-precision product
                        projected = h_new.copy_(projected)
                    if proj_clip:
                        torch.clamp(projected, -proj_clip, proj_clip, out=h_new)
                    elif projected is not h_new:
                        h_new.copy_(projected)
                else:
                    h_new.copy_(m)
            h_prev = out[:, offset : offset + n]
        t = end_t
    return out, c


def bilstm_inference(bilstm: nn.Module, tokens: torch.Tensor, mask: torch.Tensor, initial_state, return_state: bool):
    """`ElmoBiLstm.forward` without autograd: packed, sorted, preallocated (same outputs)."""
    from .modeling_elmo import ElmoState

    batch, steps, dim = tokens.shape
    lengths = mask.sum(dim=1)
    layout = PackedLayout(lengths, steps)
    STATS["lstm_positions"] += layout.size
    order = layout.order
    h0, c0 = bilstm.zero_state(batch, tokens) if initial_state is None else initial_state.rows(order)
    x = layout.pack(tokens)
    outputs, finals_h, finals_c = [], [], []
    if return_state:
        ranks, where = layout.final_rows()  # the same rows for every layer
    for index, layer in enumerate(bilstm.layers):
        out, c = run_layer_packed(layer, bilstm.dropout(x), layout, h0[index], c0[index])
        if return_state:
            h = h0[index].to(out.dtype).clone()
            if ranks.numel():
                h[:, ranks] = out[:, where]
            finals_h.append(h)
            finals_c.append(c)
        if bilstm.use_skip_connections and index > 0:
            out += x
        outputs.append(out)
        x = out
    layers = [layout.unpack(out) for out in outputs]
    state = None
    if return_state:
        unsort = torch.argsort(order)
        state = ElmoState(torch.stack(finals_h), torch.stack(finals_c)).rows(unsort)
    return layers, state


__all__ = [
    "STATS",
    "reset_stats",
    "encode_words",
    "TokenEmbeddingCache",
    "quantize_int8",
    "dequantize",
    "Int8Linear",
    "PackedLayout",
    "run_layer_packed",
    "bilstm_inference",
    "release_scratch",
]
