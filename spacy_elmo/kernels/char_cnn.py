"""The char CNN on distinct words only, sorted by length, with the columns no window can see cut.

Exact: every convolution window that lies entirely in the constant padding after a word gives the
same value, and one such window is always kept, so the max-pool sees the same set of values.
`pooled_convolutions` computes the convolutions and their max-pool as matrix products over the
windows (the same sums; the model uses it when training on a CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


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
    """(order of rows by used length, [(start, stop, columns)] per chunk of `CNN_CHUNK` rows)."""
    n, max_chars = char_ids.shape
    used = used_columns(char_ids)
    order = torch.argsort(used)
    used_sorted = used[order].tolist()
    chunks = []
    chunk = CNN_CHUNK.get(char_ids.device.type, CNN_CHUNK_OTHER)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        chunks.append((start, stop, min(max_chars, int(used_sorted[stop - 1]) + widest_filter)))
    return order, chunks


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
