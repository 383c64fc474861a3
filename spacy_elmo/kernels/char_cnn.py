"""The char CNN on distinct words only, sorted by length, with the columns no window can see cut.

Exact: every convolution window that lies entirely in the constant padding after a word gives the
same value, and one such window is always kept, so the max-pool sees the same set of values.
`pooled_convolutions` computes the convolutions and their max-pool as matrix products over the
windows (the same sums; the model uses it when training on a CPU); `pooled_widest_windows`
computes all of them as ONE product over the widest filter's windows (inference on a CPU), as the
decider bound it (`products.decide_product`: fp32, bf16 or int8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from . import int8
from .products import EXACT, WORDS_ROWS_HINT, Product
from .weights import DerivedWeights, weights_key

_DERIVED = DerivedWeights()


def used_columns(char_ids: torch.Tensor) -> torch.Tensor:
    """Per row, 1 + the last column whose id differs from the row's final id (the constant tail)."""
    tail = char_ids[:, -1:]
    position = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)
    return ((char_ids != tail) * position).amax(dim=1)


class full_fp32_convolutions:
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

# words per char-CNN call: on a CPU, keeps each convolution's output (words × filters × columns)
# small enough to be recycled by the allocator instead of page-faulted in afresh (≤ 32 MB); a GPU
# wants few large calls (each call is a handful of kernel launches)
CNN_CHUNK = {"cpu": 128}
CNN_CHUNK_OTHER = 8192


def _at_least(rows: torch.Tensor, count: int) -> torch.Tensor:
    if rows.numel() >= count:
        return rows
    return torch.cat([rows, rows[:1].expand(count - rows.numel())])


def column_plan(char_ids: torch.Tensor, widest_filter: int) -> tuple[torch.Tensor, list[tuple[int, int, int]]]:
    """(order of rows by used length, [(start, stop, columns)] per chunk of `CNN_CHUNK` rows).

    Words whose used length leaves no room for `widest_filter` more columns (within the ids' width)
    are chunked apart from the others, so that whether a word's chunk has that room (what
    `pooled_widest_windows` needs) depends on the word alone, not on the words it came with."""
    n, max_chars = char_ids.shape
    used = used_columns(char_ids)
    order = torch.argsort(used)
    used_sorted = used[order].tolist()
    roomy = sum(1 for u in used_sorted if u + widest_filter <= max_chars)
    chunks = []
    chunk = CNN_CHUNK.get(char_ids.device.type, CNN_CHUNK_OTHER)
    for first, last in ((0, roomy), (roomy, n)):
        for start in range(first, last, chunk):
            stop = min(start + chunk, last)
            chunks.append((start, stop, min(max_chars, int(used_sorted[stop - 1]) + widest_filter)))
    return order, chunks


def widest_windows_fit(char_ids: torch.Tensor, widest_filter: int) -> bool:
    """Whether `pooled_widest_windows` is exact on these (cut) ids: every row's used columns are
    followed by at least `widest_filter` − 1 more, so the widest filter's windows start at every
    position up to the row's used length (the last one all padding)."""
    if char_ids.shape[0] == 0:
        return True
    return char_ids.shape[1] >= int(used_columns(char_ids).max()) + widest_filter


def _widest_weight(weights: Sequence[torch.Tensor], widest: int) -> torch.Tensor:
    """[Σn, dim·widest]: each bank's [n, dim, width] weight with zeros for the taps past its width,
    flattened in the (dim, width) order of `Tensor.unfold`'s windows."""
    dim = weights[0].shape[1]
    full = weights[0].new_zeros(sum(w.shape[0] for w in weights), dim, widest)
    start = 0
    for weight in weights:
        full[start : start + weight.shape[0], :, : weight.shape[2]] = weight.detach()
        start += weight.shape[0]
    return full.reshape(full.shape[0], dim * widest)


def _packed_widest(owner, weights: Sequence[torch.Tensor], widest: int, product: Product):
    """The widest-window weight in the form `product` reads, made once and kept beside `owner` until
    a weight changes: int8-packed, or oneDNN-prepacked fp32 or bf16 ([Σn, K]), or plain ([K, Σn])."""
    key = weights_key(*weights)

    def build():
        full = _widest_weight(weights, widest)
        if product.dtype == "int8":
            return int8.pack(full.t())
        dtype = torch.bfloat16 if product.dtype == "bf16" else torch.float32
        if product.kernel == "onednn":
            return torch.ops.mkldnn._reorder_linear_weight(full.to(dtype).contiguous(), WORDS_ROWS_HINT)
        return full.t().to(dtype).contiguous()

    return _DERIVED.get(owner, f"widest_{product.dtype}_{product.kernel}", key and (key, widest), build)


def drop_widest(owner) -> None:
    """Frees the widest-window weights kept for `owner`."""
    _DERIVED.drop(owner)


def pooled_widest_windows(
    chars: torch.Tensor,
    weights: Sequence[torch.Tensor],
    biases: Sequence[torch.Tensor | None],
    owner,
    product: Product = EXACT,
) -> torch.Tensor:
    """Every bank's `conv1d(chars, weight, bias).amax(positions)`, concatenated: [words, Σn], as ONE
    matrix product over the widest filter's windows (CPU inference).

    `chars` is [words, columns, dim] with `widest_windows_fit` true of its ids. A narrower filter's
    weight is padded with zero taps to the widest width, so each of its sums is the convolution's
    (plus exact zeros, added in another order); a narrower window starting past the last widest
    window starts past the row's used length, so it is all padding and equal to the last widest
    window. The bias is added after the max-pool: rounding is monotonic, so max(a) + b = max(a + b)
    in floats too. The product is as the decider bound it (`products.decide_product`): fp32
    (exact), bf16 (`kernels.bf16`'s bound) or int8 (`kernels.int8`'s bound, one activation scale
    per call).
    """
    words, columns, dim = chars.shape
    widest = max(w.shape[2] for w in weights)
    packed = _packed_widest(owner, weights, widest, product)
    windows = chars.unfold(1, widest, 1).reshape(-1, dim * widest)  # (dim, width) order, as the weight's
    if product.dtype == "int8":
        out = int8.linear(windows, packed)
    else:
        if product.dtype == "bf16":
            windows = windows.to(torch.bfloat16)
        if product.kernel == "onednn":
            out = torch.ops.mkldnn._linear_pointwise(windows, packed, None, "none", [], "")
        else:
            out = windows.mm(packed)
    pooled = out.view(words, columns - widest + 1, -1).amax(dim=1).float()
    bias = [b if b is not None else pooled.new_zeros(w.shape[0]) for w, b in zip(weights, biases)]
    return pooled.add_(torch.cat(bias).detach())


def pooled_convolutions(
    chars: torch.Tensor, weights: Sequence[torch.Tensor], biases: Sequence[torch.Tensor | None]
) -> list[torch.Tensor]:
    """For each filter bank, `conv1d(chars, weight, bias).amax(positions)` computed as one matrix
    product over the bank's windows: [words, n] per bank.

    `chars` is [words, columns, dim] (position-major, as the embedding returns it), each weight
    [n, dim, width] (`nn.Conv1d`, stride 1, no padding).  The windows of a bank are laid out as
    rows of [words·positions, dim·width] (one copy) and multiplied by the flattened weight: the
    same sums as the convolution, added in another order.  Trained on a CPU, forward and backward
    together take less time than oneDNN's convolutions at these small channel counts.
    """
    words, columns, dim = chars.shape
    pooled = []
    for weight, bias in zip(weights, biases):
        n, _, width = weight.shape
        windows = chars.unfold(1, width, 1).reshape(-1, dim * width)  # (dim, width) order, as the weight's
        flat = weight.reshape(n, dim * width).t()
        out = torch.addmm(bias, windows, flat) if bias is not None else windows.mm(flat)
        pooled.append(out.view(words, columns - width + 1, n).amax(dim=1))
    return pooled


def encode_words(
    char_ids: torch.Tensor,
    widest_filter: int,
    char_features: Callable[[torch.Tensor], torch.Tensor],
    token_vectors: Callable[[torch.Tensor], torch.Tensor],
    unique: bool = True,
) -> torch.Tensor:
    """`token_vectors(char_features(ids))` for every row of `char_ids` [N, max_chars].

    Rows are de-duplicated, sorted by used length and run through `char_features` in chunks of
    `CNN_CHUNK` words, each cut to `min(max_chars, longest used length + widest filter)` columns;
    `token_vectors` (highway layers and projection) then runs on all words at once.
    """
    n = char_ids.shape[0]
    if n == 0:
        return token_vectors(char_features(char_ids))
    inverse = None
    if unique and n > 1:
        char_ids, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        n = char_ids.shape[0]
    order, chunks = column_plan(char_ids, widest_filter)
    pieces = []
    for start, stop, columns in chunks:
        rows = _at_least(order[start:stop], MIN_ROWS)
        with full_fp32_convolutions(char_ids.device):
            pieces.append(char_features(char_ids.index_select(0, rows)[:, :columns])[: stop - start])
    features = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
    if n < MIN_ROWS:  # pad with copies of the first row (see MIN_ROWS)
        features = torch.cat([features, features[:1].expand(MIN_ROWS - n, *features.shape[1:])])
    back = torch.argsort(order)  # sorted position of each distinct word
    if inverse is not None:
        back = back[inverse.reshape(-1)]
    return token_vectors(features)[:n].index_select(0, back)
