"""CUDA graphs of a tensor function, one per input signature (inference).

A recurrent loop issues a few kernels per time step; on a GPU those launches, not the arithmetic,
bound a batch.  Capturing the whole loop once per (shape, dtype, autocast) signature and replaying
it issues one launch per call.  The captured function is run as written, so the results are those
of the function itself (exact).  Inputs are padded by the caller to a few bucketed shapes so that
few graphs are captured.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence

import torch

# graphs kept per owner (least recently used dropped first): each holds its own activation memory
MAX_GRAPHS = 8


class _Graphs:
    def __init__(self):
        self.entries: OrderedDict[tuple, tuple] = OrderedDict()


_OWNERS: weakref.WeakKeyDictionary[object, _Graphs] = weakref.WeakKeyDictionary()


def bucket(size: int, multiple: int = 8) -> int:
    """`size` rounded up to a multiple of `multiple` (at least `multiple`)."""
    return max(multiple, -(-size // multiple) * multiple)


def graphed_call(
    owner,
    key: tuple,
    fn: Callable[..., Sequence[torch.Tensor]],
    inputs: Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """`fn(*inputs)` (a list of tensors) through a CUDA graph captured for `key`.

    `key` must identify everything `fn` depends on besides the *values* of `inputs`: shapes, dtypes,
    autocast state and the addresses of the weights it reads (a moved or replaced weight needs a new
    graph).  Returns fresh copies of the outputs.
    """
    graphs = _OWNERS.get(owner)
    if graphs is None:
        graphs = _OWNERS[owner] = _Graphs()
    entry = graphs.entries.get(key)
    if entry is None:
        while len(graphs.entries) >= MAX_GRAPHS:
            graphs.entries.popitem(last=False)
        static_inputs = [t.clone() for t in inputs]
        autocast = torch.is_autocast_enabled("cuda")
        dtype = torch.get_autocast_dtype("cuda") if autocast else None

        def run():
            if autocast:  # cached casts would live outside the graph's memory pool
                with torch.autocast("cuda", dtype=dtype, cache_enabled=False):
                    return list(fn(*static_inputs))
            return list(fn(*static_inputs))

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()  # warm-up: lazy initialisation must not happen during capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_outputs = run()
        entry = graphs.entries[key] = (graph, static_inputs, static_outputs)
    else:
        graphs.entries.move_to_end(key)
    graph, static_inputs, static_outputs = entry
    for static, value in zip(static_inputs, inputs):
        static.copy_(value)
    graph.replay()
    return [t.clone() for t in static_outputs]
