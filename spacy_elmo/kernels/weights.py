"""Derived-weight caches (copies of a weight in another layout or dtype) and per-thread scratch buffers.

Derived copies live beside (not inside) the modules, in weak dictionaries keyed by an owner object,
so pickling or deep-copying a model never sees them and they go away with their owner.  A copy is
rebuilt whenever its source tensor is replaced or modified in place (`weights_key`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import torch

from .capabilities import tensor_version


def weights_key(*tensors: torch.Tensor | None) -> tuple | None:
    """Changes whenever one of the tensors is replaced or modified in place; None when that cannot
    be told (no `Tensor._version`): callers then must not cache."""
    key = []
    for t in tensors:
        if t is None:
            continue
        version = tensor_version(t)
        if version is None:
            return None
        key.append((t.data_ptr(), version, t.dtype, t.device))
    return tuple(key)


class DerivedWeights:
    """owner → {name: (key, value)}; `get` rebuilds a value when its key changed (or is None)."""

    def __init__(self):
        self._store: weakref.WeakKeyDictionary[object, dict] = weakref.WeakKeyDictionary()

    def get(self, owner, name: str, key: tuple | None, build: Callable[[], object]):
        if key is None:
            return build()
        entries = self._store.setdefault(owner, {})
        hit = entries.get(name)
        if hit is None or hit[0] != key:
            entries.pop(name, None)  # free the old copy first
            with torch.inference_mode(False):  # normal tensors: usable under no_grad and inference_mode
                hit = entries[name] = (key, build())
        return hit[1]

    def drop(self, owner) -> None:
        self._store.pop(owner, None)

    def cast(self, owner, name: str, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """`tensor` in `dtype` (autocast's, or bf16 precision's), kept as `name` beside `owner` until
        the tensor is replaced or modified in place."""
        key = weights_key(tensor)
        return self.get(owner, name, key and (key, dtype), lambda: tensor.detach().to(dtype))


def tensor_state(tensor: torch.Tensor) -> tuple:
    """A CPU tensor as plain values for pickling: its bytes (a numpy array), dtype and shape. Not the
    tensor itself: torch pickles tensors for other processes through shared memory, whose file
    descriptor goes with a temporary tensor before a spawned worker (`nlp.pipe(n_process=2)`) gets it."""
    flat = tensor.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().copy(), str(flat.dtype).removeprefix("torch."), tuple(tensor.shape)


def from_tensor_state(state: tuple) -> torch.Tensor:
    """The tensor `tensor_state` described."""
    data, dtype, shape = state
    return torch.from_numpy(data).view(getattr(torch, dtype)).reshape(shape)


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
        with torch.inference_mode(False):
            buffer = buffers[key] = torch.empty(numel, device=like.device, dtype=like.dtype)
    return buffer[:numel].view(shape)
