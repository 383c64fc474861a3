"""CUDA graphs of a tensor function, one per input signature (inference).

A recurrent loop issues a few kernels per time step; on a GPU those launches, not the arithmetic,
bound a batch.  Capturing the whole loop once per (shape, dtype, autocast) signature and replaying
it issues one launch per call.  The captured function is run as written, so the results are those
of the function itself (exact).  Inputs are padded by the caller to a few bucketed shapes so that
few graphs are captured.

The bookkeeping (which graphs an owner keeps, the static inputs a replay reads, the copies of its
outputs) is `graphed_call`'s; how a function is captured and replayed is a `GraphCapture`'s:
`CUDA_GRAPHS` on a GPU. The capture is an argument, so that a test can drive the same bookkeeping
with a capture that replays by running the function again on the CPU (tests/kernels/test_cuda_graphs.py).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from .capabilities import autocast_dtype

# graphs kept per owner (least recently used dropped first): each holds its own activation memory
MAX_GRAPHS = 8

Replay = Callable[[], None]


class GraphCapture(Protocol):
    """Captures a function once and replays it: `capture(run)` returns the replay and the tensors `run`
    returned while captured, which every replay rewrites in place from the tensors `run` read."""

    device_type: str  # the device whose autocast state a capture records

    def capture(self, run: Callable[[], list[torch.Tensor]]) -> tuple[Replay, list[torch.Tensor]]: ...


class CudaGraphs:
    """`torch.cuda.CUDAGraph`: a warm-up run on a side stream (lazy initialisation must not happen during
    capture), then the capture; a replay relaunches the captured kernels."""

    device_type = "cuda"

    def capture(self, run: Callable[[], list[torch.Tensor]]) -> tuple[Replay, list[torch.Tensor]]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = run()
        return graph.replay, outputs


CUDA_GRAPHS = CudaGraphs()


class _Graphs:
    def __init__(self):
        # (capture, key) → (replay, static inputs, static outputs), least recently used first
        self.entries: OrderedDict[tuple, tuple[Replay, list[torch.Tensor], list[torch.Tensor]]] = OrderedDict()


_OWNERS: weakref.WeakKeyDictionary[object, _Graphs] = weakref.WeakKeyDictionary()


def bucket(size: int, multiple: int = 8) -> int:
    """`size` rounded up to a multiple of `multiple` (at least `multiple`)."""
    return max(multiple, -(-size // multiple) * multiple)


def graphs_of(owner) -> list[tuple]:
    """The keys of the graphs kept for `owner`, least recently used first."""
    graphs = _OWNERS.get(owner)
    return [key for _, key in graphs.entries] if graphs is not None else []


def graphed_call(
    owner,
    key: tuple,
    fn: Callable[..., Sequence[torch.Tensor]],
    inputs: Sequence[torch.Tensor],
    graphs: GraphCapture = CUDA_GRAPHS,
) -> list[torch.Tensor]:
    """`fn(*inputs)` (a list of tensors) through a graph captured by `graphs` for `key`.

    `key` must identify everything `fn` depends on besides the *values* of `inputs`: shapes, dtypes,
    autocast state and the addresses of the weights it reads (a moved or replaced weight needs a new
    graph).  Returns fresh copies of the outputs.
    """
    kept = _OWNERS.get(owner)
    if kept is None:
        kept = _OWNERS[owner] = _Graphs()
    entry_key = (graphs, key)
    entry = kept.entries.get(entry_key)
    if entry is None:
        while len(kept.entries) >= MAX_GRAPHS:
            kept.entries.popitem(last=False)
        static_inputs = [t.clone() for t in inputs]
        device_type = graphs.device_type
        autocast = torch.is_autocast_enabled(device_type)
        dtype = autocast_dtype(device_type) if autocast else None

        def run() -> list[torch.Tensor]:
            if autocast:  # cached casts would live outside the graph's memory pool
                with torch.autocast(device_type, dtype=dtype, cache_enabled=False):
                    return list(fn(*static_inputs))
            return list(fn(*static_inputs))

        replay, static_outputs = graphs.capture(run)
        entry = kept.entries[entry_key] = (replay, static_inputs, static_outputs)
    else:
        kept.entries.move_to_end(entry_key)
    replay, static_inputs, static_outputs = entry
    for static, value in zip(static_inputs, inputs):
        static.copy_(value)
    replay()
    return [t.clone() for t in static_outputs]


__all__ = ["CUDA_GRAPHS", "MAX_GRAPHS", "CudaGraphs", "GraphCapture", "bucket", "graphed_call", "graphs_of"]
