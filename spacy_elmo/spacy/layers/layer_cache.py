"""A bounded least-recently-used cache of a Doc's biLM layers, keyed by its token texts and segments.

Lets a frozen biLM skip text it has already run on (e.g. the training corpus in epochs 2+ of
`spacy train`); the `elmo` component clears it whenever the biLM's weights may change.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable

import numpy


def doc_cache_key(words: Iterable[str], segments: Iterable[Hashable] | None = None) -> Hashable:
    """The cache key of a Doc: its token texts, plus the segments the biLM runs it in (the biLM
    layer's `doc_key`: its layers are a function of both)."""
    key = tuple(words)
    return key if segments is None else (key, tuple(segments))


class LayerCache:
    """Least-recently-used map from a cache key to host-memory layers, bounded by bytes.

    `max_bytes=0` disables it. Stored arrays are made read-only, since the same array may be
    handed to several Docs.
    """

    def __init__(self, max_bytes: int = 0):
        self.max_bytes = int(max_bytes)
        self._data: OrderedDict[Hashable, numpy.ndarray] = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> numpy.ndarray | None:
        value = self._data.get(key)
        if value is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: Hashable, layers) -> None:
        if not self.enabled:
            return
        if not isinstance(layers, numpy.ndarray):
            layers = layers.get()
        if layers.nbytes > self.max_bytes:
            return
        if key in self._data:
            self.nbytes -= self._data.pop(key).nbytes
        layers = numpy.array(layers, copy=True)  # never alias an array a caller may change
        layers.flags.writeable = False
        self._data[key] = layers
        self.nbytes += layers.nbytes
        while self.nbytes > self.max_bytes:
            _, old = self._data.popitem(last=False)
            self.nbytes -= old.nbytes

    def clear(self) -> None:
        self._data.clear()
        self.nbytes = 0

    def __getstate__(self):  # a pickled pipeline ships an empty cache
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state):
        type(self).__init__(self, state["max_bytes"])


__all__ = ["LayerCache", "doc_cache_key"]
