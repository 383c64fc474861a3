"""The biLSTM over a *packed* batch, without autograd (inference).

Rows are sorted by length and laid out time-major, so step t computes only the rows still inside
their sentence: no padding is computed and no `torch.where` bookkeeping is needed for the final
state.  Input projections for many steps run as one matmul per block of rows and direction;
recurrent products use oneDNN-prepacked weights on CPU; every step works in place on
preallocated buffers; a layer's two directions run at the same time on two threads when the
caller has two or more (`parallel_directions`).  Computes what `ElmoLstmLayer` / `ElmoBiLstm`
compute (≤ 1e-6).

Opt-in approximations, weight by weight as the decider bound them (`LstmWeights.products`,
`products.decide_product`): the matrix products in int8 (`kernels.int8`: weights quantized and packed
once, activations quantized per call) or in bf16 (`kernels.bf16`: weights converted once, products'
inputs rounded to bf16, their results widened to fp32), reading the weights' converted forms
(`LstmWeights.converted`); the gates, the cell state and the outputs in fp32 either way; their error
bounds are in those modules. A recurrent product's answer depends on the step's rows (one, or
several: `products.RowProducts`).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from . import int8 as int8_kernel
from .capabilities import autocast_dtype, per_thread_intraop_threads, set_thread_intraop_threads
from .products import EXACT_ROWS, Product, RowProducts
from .weights import DerivedWeights, scratch, weights_key


class LstmWeights(NamedTuple):
    """One layer of the biLSTM for both directions (index 0 forward, 1 backward), TF orientation
    (x·W) and gate order i, j, f, o.  `bias` already holds the forget bias.  `owner` keys the
    derived-weight caches (any weak-referenceable object that lives as long as the weights).

    A weight whose every product is low precision may be given by its shape only (a tensor on the
    meta device: its module holds it converted only); `converted` then has it."""

    input_weight: torch.Tensor  # [2, input_dim, 4·hidden]
    hidden_weight: torch.Tensor  # [2, proj, 4·hidden]
    proj_weight: torch.Tensor | None  # [2, hidden, proj] or None (no cell projection)
    bias: torch.Tensor  # [2, 4·hidden]
    cell_clip: float | None
    proj_clip: float | None
    owner: object
    # weight name → how its products compute (the decider's answers, `products.RowProducts`; absent:
    # exact fp32), and → its converted form per direction, for each weight with a low-precision product
    products: Mapping[str, RowProducts] | None = None
    converted: Mapping[str, Sequence[Any]] | None = None

    def product(self, name: str) -> RowProducts:
        return (self.products or {}).get(name, EXACT_ROWS)


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
        return torch.tensor(ranks, device=device, dtype=torch.long), torch.tensor(
            where, device=device, dtype=torch.long
        )


# rows (per direction) of packed input projections computed by one matmul; bounds the memory of
# their outputs (each direction's thread holds one block: 128 rows are 8 MiB for original, and as
# fast as 256 or 512 rows within the noise, measured interleaved at batch 32)
PROJECTION_ROWS = 128
# The fp32 products the decider gives oneDNN (kernel "onednn": a CPU with it) follow these shape
# rules, all exact (measured on one thread, a direction's weight read between two of the other's, on
# the AMD EPYC of docs/performance.md; `USE_PREPACKED = False` hands every fp32 product to MKL):
# - the recurrent products of at least this many rows use oneDNN with prepacked weights (2-3x MKL
#   at 3-4 rows, ≈ at 2, ≈2x at 32 for the [rows, 512]·[512, 16384] and [rows, 128]·[128, 4096]
#   shapes); one row is a matrix-vector product, memory bound, where MKL's plain GEMM is ~1.3-1.5x
#   faster. The prepacked copy is made only once a batch has such a step.
PREPACKED_MIN_ROWS = 2
# - the cell projection uses oneDNN too, except at one row with a weight of at most
#   MKL_PROJECTION_MAX_BYTES: MKL's x·W matrix-vector product reads a large weight slower than
#   oneDNN's (original's [1, 4096]·[4096, 512], 8 MB: 1.4x), a cache-sized one faster (small's
#   [1, 1024]·[1024, 128], 0.5 MB: 1.7x; medium's 2 MB: equal)
MKL_PROJECTION_MAX_BYTES = 2**20
# - the input projections always use oneDNN (MKL is ~2x slower at a few rows and ~1.1-1.5x slower
#   at PROJECTION_ROWS on the benchmark machine; one kernel for every batch size also keeps a
#   sentence's gate inputs independent of its batch).  Batches with fewer packed rows than
#   PREPACKED_INPUT_MAX_ROWS use input weights prepacked once (kept: +128 MiB for the original
#   architecture, only once such a batch was seen); larger ones hand oneDNN the plain weight,
#   reordered per call (same values; the reorder is ~5% of a 512-row product, and no copy is kept)
PREPACKED_INPUT_MAX_ROWS = 128
USE_PREPACKED = True

_DERIVED = DerivedWeights()

# Direction parallelism: the forward and the backward LSTM of a layer are independent, so with
# two or more intra-op threads they can run at the same time on two threads of a pool, each with
# half the intra-op threads, instead of every small product being split over all threads (with a
# barrier per product).  Each direction then runs the same operations in the same order as when
# the directions run one after the other (outputs bitwise equal).  Rule (`parallel_directions`):
# exact fp32 (or explicit bf16 products) on CPU with at least 2 intra-op threads on the calling
# thread; False switches it off.
# Measured on the 2-core benchmark machine (original architecture, whole model, interleaved):
# batch 32 ~14% faster; batch 1 ~25% faster when the machine is quiet, within noise (±5%) under
# a load of 2-3 from other processes.
PARALLEL_DIRECTIONS = True


def _prepack_directions(weight: torch.Tensor) -> list:
    """oneDNN-prepacked fp32 copies of a [2, in, out] weight, one per direction (straight into the
    transposed layout: one transient of a direction's size)."""
    prepack = torch.ops.mkldnn._reorder_linear_weight
    return [prepack(w.detach().t().contiguous(), 32) for w in weight]


def _prepacked(weights: LstmWeights, name: str) -> list | None:
    tensor = getattr(weights, name)
    if tensor is None:
        return None
    return _DERIVED.get(weights.owner, "prepacked_" + name, weights_key(tensor), lambda: _prepack_directions(tensor))


def drop_derived(owner) -> None:
    """Frees the derived copies (oneDNN-prepacked, autocast's) kept for `owner`."""
    _DERIVED.drop(owner)


def _autocast_matmul(weights: LstmWeights, name: str, x: torch.Tensor, direction: int) -> torch.Tensor:
    """x · weights.<name>[direction] in the autocast dtype (the weight cast once and cached until it
    changes: autocast itself re-casts per-direction views at every call)."""
    dtype = autocast_dtype(x.device.type)
    weight = _DERIVED.cast(weights.owner, f"{name}_{dtype}", getattr(weights, name), dtype)
    return torch.mm(x.to(dtype), weight[direction])


def _low_product(form: Any, product: Product, x: torch.Tensor) -> torch.Tensor:
    """x [rows, K] · a weight in its converted `form` (one direction's) in `product`'s precision:
    fp32 for int8 (dequantized), bf16 for bf16."""
    if product.dtype == "int8":
        return int8_kernel.linear(x, form)
    if product.kernel == "onednn":
        return form.linear(x)  # oneDNN-prepacked bf16 (kernels.bf16.PrepackedBf16)
    return torch.mm(x.to(torch.bfloat16), form)


def parallel_directions(x: torch.Tensor, exact: bool) -> bool:
    """Whether `run_layer_packed` runs the two directions at the same time (the rule above)."""
    return (
        PARALLEL_DIRECTIONS
        and exact
        and x.device.type == "cpu"
        and x.shape[0] == 2
        and torch.get_num_threads() >= 2
        and _direction_pool() is not None
    )


# a worker's task: (fn, its argument, inference mode, the queue for its error or None)
_Task = tuple[Callable[[int], None], int, bool, "queue.SimpleQueue[BaseException | None]"]


class _DirectionPool:
    """Two long-lived threads, each with `threads` intra-op threads, that run one direction each.

    The intra-op thread count is per thread with torch's OpenMP backend (checked when the pool
    is made: `per_thread_intraop_threads`); the workers run in the caller's grad/inference mode.
    """

    def __init__(self, threads: int):
        self.threads = threads
        self._lock = threading.Lock()
        self._tasks: list[queue.SimpleQueue[_Task]] = [queue.SimpleQueue() for _ in range(2)]
        ready: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._workers = [
            threading.Thread(target=self._work, args=(k, ready), name=f"spacy_elmo-direction-{k}", daemon=True)
            for k in range(2)
        ]
        for worker in self._workers:
            worker.start()
        self.counts = [ready.get() for _ in self._workers]

    def _work(self, k: int, ready) -> None:
        set_thread_intraop_threads(self.threads)
        ready.put(torch.get_num_threads())
        tasks = self._tasks[k]
        while True:
            fn, arg, inference, done = tasks.get()
            try:
                with torch.inference_mode(inference), torch.no_grad():
                    fn(arg)
                done.put(None)
            except BaseException as err:  # noqa: BLE001 - handed to the caller
                done.put(err)

    def run(self, fn: Callable[[int], None], n: int) -> bool:
        """fn(0), ..., fn(n - 1) (n ≤ 2) at the same time, one per worker; raises what they raised.
        False (nothing run) while another thread's call is using the pool."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            inference = torch.is_inference_mode_enabled()
            done: queue.SimpleQueue[BaseException | None] = (
                queue.SimpleQueue()
            )  # this call's own: a call interrupted while waiting leaves no stale results
            for k in range(n):
                self._tasks[k].put((fn, k, inference, done))
            errors = [done.get() for _ in range(n)]
        finally:
            self._lock.release()
        for err in errors:
            if err is not None:
                raise err
        return True


_POOLS: dict[int, _DirectionPool | None] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    """A forked child has none of the parent's threads: it makes its own pools when it needs them."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _direction_pool() -> _DirectionPool | None:
    """The pool for the calling thread's intra-op thread count (made once per count), or None
    where intra-op thread counts are not per thread (then the directions run in turn)."""
    if not per_thread_intraop_threads():
        return None
    threads = max(torch.get_num_threads() // 2, 1)
    with _POOLS_LOCK:
        if threads not in _POOLS:
            pool = _DirectionPool(threads)
            _POOLS[threads] = pool if pool.counts == [threads, threads] else None
        return _POOLS[threads]


def run_layer_packed(
    weights: LstmWeights,
    x: torch.Tensor,
    layout: PackedLayout,
    h0: torch.Tensor,
    c0: torch.Tensor,
    directions_in_parallel: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM layer (both directions) over packed inputs x [2, packed, input_dim].

    h0 [2, batch, proj] / c0 [2, batch, hidden] are in sorted row order.  Returns the packed
    outputs [2, packed, proj] and the final cells [2, batch, hidden] (each row's, after its last
    step; rows that stop early simply stop being updated).

    The two directions are independent: they run one after the other here, or at the same time
    on two threads (`directions_in_parallel`; None: `parallel_directions(...)` decides).  Each
    direction computes the same operations in the same order either way.
    """
    n_dir = x.shape[0]
    hidden = weights.bias.shape[-1] // 4
    # how each product computes was bound by the caller (`products.decide_product`, per weight);
    # torch autocast (a per-call context) takes the products only of a layer bound to fp32 throughout
    products = {name: weights.product(name) for name in ("input_weight", "hidden_weight", "proj_weight")}
    low = any(p.low for rows in products.values() for p in rows)
    if low:
        x = x.float()
    autocast = not low and torch.is_autocast_enabled(x.device.type)
    # fp32 products given to oneDNN, where this call's inputs and weights are fp32
    onednn = (
        USE_PREPACKED and not autocast and x.dtype == torch.float32 and weights.hidden_weight.dtype == torch.float32
    )

    def on_onednn(product: Product) -> bool:
        return onednn and product.dtype == "fp32" and product.kernel == "onednn"

    # derived weights are built here, on the calling thread, never by two threads at once
    if on_onednn(products["input_weight"].rows) and layout.size < PREPACKED_INPUT_MAX_ROWS:
        input_weight = _prepacked(weights, "input_weight")
    elif on_onednn(products["input_weight"].rows):
        input_weight = [w.detach().t() for w in weights.input_weight]  # [4·hidden, input_dim] views
    else:
        input_weight = None
    rows = layout.counts[0] if layout.counts else 0  # the most rows of any step
    several = rows >= PREPACKED_MIN_ROWS
    hidden_rows, proj_rows = products["hidden_weight"], products["proj_weight"]
    packed_hidden = _prepacked(weights, "hidden_weight") if several and on_onednn(hidden_rows.rows) else None
    proj = weights.proj_weight
    mkl_proj = proj is not None and proj[0].numel() * proj.element_size() <= MKL_PROJECTION_MAX_BYTES
    prepack_proj = several and on_onednn(proj_rows.rows) or not mkl_proj and on_onednn(proj_rows.one_row)
    packed_proj = _prepacked(weights, "proj_weight") if proj is not None and prepack_proj else None
    proj_dim = weights.proj_weight.shape[-1] if weights.proj_weight is not None else hidden
    run = _LayerRun(
        weights=weights,
        x=x,
        layout=layout,
        h0=h0.to(x.dtype),
        c=c0.to(x.dtype).clone(),
        out=x.new_empty(n_dir, layout.size, proj_dim),
        cell_out=x.new_empty(n_dir, layout.batch, hidden),
        bias=weights.bias.detach().to(x.dtype),
        hidden=hidden,
        products=products,
        autocast=autocast,
        onednn=onednn,
        onednn_input=input_weight,
        packed_hidden=packed_hidden,
        packed_proj=packed_proj,
        mkl_proj=mkl_proj,
    )
    if directions_in_parallel is None:
        directions_in_parallel = parallel_directions(x, not autocast)
    # (bf16 and int8 products hold no thread-local state, unlike autocast: their directions run in
    # parallel too)
    pool = _direction_pool() if directions_in_parallel and n_dir == 2 and not autocast else None
    if pool is None or not pool.run(run.direction, n_dir):
        for d in range(n_dir):
            run.direction(d)
    return run.out, run.c


class _LayerRun(NamedTuple):
    """The buffers and weights of one layer's run; `direction(d)` computes direction d into them."""

    weights: LstmWeights
    x: torch.Tensor
    layout: PackedLayout
    h0: torch.Tensor
    c: torch.Tensor
    out: torch.Tensor
    cell_out: torch.Tensor
    bias: torch.Tensor
    hidden: int
    products: dict[str, RowProducts]  # per weight, as bound (`products.decide_product`)
    autocast: bool  # the products in the autocast dtype (a layer bound to fp32 throughout)
    onednn: bool  # fp32 products on oneDNN (kernel "onednn") where this call's inputs allow
    onednn_input: list | None  # per direction, prepacked or a plain [out, in] view
    packed_hidden: list | None
    packed_proj: list | None
    mkl_proj: bool  # the cell projection of a one-row step through MKL (MKL_PROJECTION_MAX_BYTES)

    def low_product(self, name: str, product: Product, x: torch.Tensor, d: int) -> torch.Tensor:
        """x · weights.<name>[d] in low precision (int8 or bf16), from the weight's converted form."""
        assert self.weights.converted is not None  # (the caller gives every low-precision weight's)
        return _low_product(self.weights.converted[name][d], product, x)

    def input_projection(self, d: int, start: int, end: int) -> torch.Tensor:
        """[rows, 4·hidden] gate pre-activations of direction d's packed rows start:end (+ bias)."""
        weights, x = self.weights, self.x[d, start:end]
        product = self.products["input_weight"].rows
        if self.onednn_input is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.onednn_input[d], self.bias[d], "none", [], "")
        if self.autocast:
            out = _autocast_matmul(weights, "input_weight", x, d)
        elif not product.low:
            out = scratch("gates", (x.shape[0], weights.input_weight.shape[-1]), x)
            return torch.addmm(self.bias[d], x, weights.input_weight[d], out=out)
        else:
            out = self.low_product("input_weight", product, x, d)
        if out.dtype == torch.float32:
            return out.add_(self.bias[d])
        # widened into the thread's gate buffer (as the exact path's), not into a fresh allocation
        gates = scratch("gates", (x.shape[0], weights.input_weight.shape[-1]), self.bias)
        return torch.add(out, self.bias[d], out=gates)

    def direction(self, d: int) -> None:
        weights, layout, hidden = self.weights, self.layout, self.hidden
        autocast, onednn = self.autocast, self.onednn
        # (Any: torch.ops resolves its operators at run time; the prepacked lists are None unless onednn)
        linear: Any = torch.ops.mkldnn._linear_pointwise if onednn else None
        packed_hidden = self.packed_hidden[d] if self.packed_hidden is not None else None
        packed_proj = self.packed_proj[d] if self.packed_proj is not None else None
        hidden_weight = weights.hidden_weight[d]
        proj_weight = weights.proj_weight[d] if weights.proj_weight is not None else None
        hidden_products, proj_products = self.products["hidden_weight"], self.products["proj_weight"]
        cell_clip, proj_clip = weights.cell_clip, weights.proj_clip
        c, cell_out, out = self.c[d], self.cell_out[d], self.out[d]
        h_prev = self.h0[d]
        steps = len(layout.counts)
        # the rows still running at each step are the first n: their cells' views, made once per row count
        cells = {n: c[:n] for n in set(layout.counts)}
        cell_outs = {n: cell_out[:n] for n in set(layout.counts)}
        t = 0
        while t < steps:
            # input projections for a block of steps in one matmul
            start = layout.offsets[t]
            end_t = t + 1
            while end_t < steps and layout.offsets[end_t + 1] - start <= PROJECTION_ROWS:
                end_t += 1
            end = layout.offsets[end_t]
            block = self.input_projection(d, start, end)
            # every step's views made by three calls per block, not by slicing at every step: at one row a
            # step's own work is a few microseconds per operation, and each slice cost about as much
            counts = layout.counts[t:end_t]
            step_gates = block.split(counts)  # [n, 4·hidden] each, contiguous
            step_quarters = [q.split(counts) for q in block.unflatten(1, (4, hidden)).unbind(1)]  # i, j, f, o
            step_out = out[start:end].split(counts)
            for k, n in enumerate(counts):
                gates = step_gates[k]
                h = h_prev if h_prev.shape[0] == n else h_prev[:n]
                product = hidden_products.one_row if n == 1 else hidden_products.rows
                if autocast:
                    gates.add_(_autocast_matmul(weights, "hidden_weight", h, d))
                elif product.low:
                    gates.add_(self.low_product("hidden_weight", product, h, d))
                elif packed_hidden is not None and n >= PREPACKED_MIN_ROWS and product.kernel == "onednn":
                    gates = linear.binary(h, gates, packed_hidden, None, "add")  # a new tensor
                else:
                    gates.addmm_(h, hidden_weight)
                if gates is step_gates[k]:
                    i, j, f, o = (quarter[k] for quarter in step_quarters)
                else:
                    i, j, f = gates[:, :hidden], gates[:, hidden : 2 * hidden], gates[:, 2 * hidden : 3 * hidden]
                    o = gates[:, 3 * hidden :]
                # tanh(x) computed as 2·σ(2x) − 1 (within ~1e-7; PyTorch's CPU sigmoid is ~6x faster
                # than its tanh), so one sigmoid covers all four gates; 2x as x + x (the same value, exactly,
                # in a call that costs a third of a multiplication by a Python number at one row)
                j.add_(j)
                gates.sigmoid_()
                j.add_(j).sub_(1.0)
                cell = cells[n]
                cell.mul_(f).addcmul_(i, j)
                if cell_clip:
                    cell.clamp_(-cell_clip, cell_clip)
                m = cell_outs[n]
                torch.add(cell, cell, out=m).sigmoid_()
                m.add_(m).sub_(1.0).mul_(o)  # tanh(c)·o
                h_new = step_out[k]
                if proj_weight is not None:
                    product = proj_products.one_row if n == 1 else proj_products.rows
                    if autocast:
                        projected = _autocast_matmul(weights, "proj_weight", m, d)
                    elif product.low:
                        projected = self.low_product("proj_weight", product, m, d)
                    elif (
                        packed_proj is not None
                        and product.kernel == "onednn"
                        and not (n < PREPACKED_MIN_ROWS and self.mkl_proj)
                    ):
                        projected = linear(m, packed_proj, None, "none", [], "")
                    else:
                        projected = torch.mm(m, proj_weight, out=h_new)
                    if projected.dtype != h_new.dtype:  # a low-precision product
                        projected = h_new.copy_(projected)
                    if proj_clip:
                        torch.clamp(projected, -proj_clip, proj_clip, out=h_new)
                    elif projected is not h_new:
                        h_new.copy_(projected)
                else:
                    h_new.copy_(m)
                h_prev = h_new
            t = end_t


def bilstm_packed(
    layers: Sequence[LstmWeights],
    tokens: torch.Tensor,
    mask: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    *,
    skip_connections: bool,
    dropout: Callable[[torch.Tensor], torch.Tensor] | None = None,
    return_state: bool = False,
) -> tuple[list[torch.Tensor], tuple[torch.Tensor, torch.Tensor] | None]:
    """The L-layer biLSTM over tokens [batch, time, dim] (left-aligned rows, `mask` [batch, time]).

    h0 [L, 2, batch, proj] / c0 [L, 2, batch, hidden] are the initial states.  Returns one
    [batch, time, 2·proj] output per layer (zero at padding) and, with `return_state`, the final
    (h, c) of each row after its last real step.
    """
    batch, steps, _ = tokens.shape
    lengths = mask.sum(dim=1)
    layout = PackedLayout(lengths, steps)
    order = layout.order
    h0, c0 = h0[:, :, order], c0[:, :, order]
    x = layout.pack(tokens)
    outputs, finals_h, finals_c = [], [], []
    if return_state:
        ranks, where = layout.final_rows()  # the same rows for every layer
    for index, weights in enumerate(layers):
        out, c = run_layer_packed(weights, dropout(x) if dropout is not None else x, layout, h0[index], c0[index])
        if return_state:
            h = h0[index].to(out.dtype).clone()
            if ranks.numel():
                h[:, ranks] = out[:, where]
            finals_h.append(h)
            finals_c.append(c)
        if skip_connections and index > 0:
            out += x
        outputs.append(out)
        x = out
    result = [layout.unpack(out) for out in outputs]
    if not return_state:
        return result, None
    unsort = torch.argsort(order)
    return result, (torch.stack(finals_h)[:, :, unsort], torch.stack(finals_c)[:, :, unsort])


__all__ = ["LstmWeights", "PackedLayout", "run_layer_packed", "bilstm_packed", "drop_derived"]
