"""What the `elmo` component stores: all biLM layers of one Doc, and a bounded cache of them.

`ElmoDocData` is the value of `doc._.elmo`. It serializes with msgpack (so `Doc.to_bytes`,
`DocBin(store_user_data=True)` and `nlp.pipe(n_process=2)` work) and with pickle.
`LayerCache` maps a Doc's token texts to its layers, so a frozen biLM never runs twice on the
same text (e.g. on the training corpus in epochs 2+).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable, Iterable, Optional

import numpy
import srsly
from thinc.api import get_array_module
from thinc.types import Floats1d, Floats2d, Floats3d


@dataclass
class ElmoDocData:
    """The L+1 biLM layers of a Doc (or span), `layers`: [L+1, tokens, dim] (layer 0 = token vectors)."""

    layers: Floats3d

    @property
    def num_layers(self) -> int:
        return int(self.layers.shape[0])

    @property
    def width(self) -> int:
        return int(self.layers.shape[2])

    def __len__(self) -> int:
        return int(self.layers.shape[1])

    def __getitem__(self, index) -> "ElmoDocData":
        """Token slice (`data[start:end]`), keeping the layer axis."""
        if not isinstance(index, slice):
            raise TypeError("ElmoDocData supports slices of tokens only, e.g. data[2:5]")
        return ElmoDocData(self.layers[:, index])

    def mix(self, weights: Floats1d, gamma: float = 1.0) -> Floats2d:
        """γ · Σ_j w_j · layers[j] → [tokens, dim]."""
        xp = get_array_module(self.layers)
        weights = xp.asarray(weights, dtype=self.layers.dtype)
        return (gamma * xp.tensordot(weights, self.layers, axes=1)).astype(self.layers.dtype, copy=False)

    def to_dict(self) -> dict:
        layers = self.layers
        if not isinstance(layers, numpy.ndarray):  # cupy → host memory for serialization
            layers = layers.get()
        return {"layers": numpy.ascontiguousarray(layers)}

    @classmethod
    def from_dict(cls, msg: dict) -> "ElmoDocData":
        return cls(numpy.asarray(msg["layers"]))


_MSGPACK_KEY = "__spacy_elmo_doc_data__"


@srsly.msgpack_encoders.register("spacy_elmo_doc_data")
def _encode_doc_data(obj, chain=None):
    if isinstance(obj, ElmoDocData):
        return {_MSGPACK_KEY: obj.to_dict()}
    return obj if chain is None else chain(obj)


@srsly.msgpack_decoders.register("spacy_elmo_doc_data")
def _decode_doc_data(obj, chain=None):
    if isinstance(obj, dict) and _MSGPACK_KEY in obj:
        return ElmoDocData.from_dict(obj[_MSGPACK_KEY])
    return obj if chain is None else chain(obj)


def doc_cache_key(words: Iterable[str], sent_starts: Optional[Iterable[int]] = None) -> Hashable:
    """The cache key of a Doc: its token texts, plus its sentence starts when those split it."""
    key = tuple(words)
    return key if sent_starts is None else (key, tuple(sent_starts))


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

    def get(self, key: Hashable) -> Optional[numpy.ndarray]:
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
        self.__init__(state["max_bytes"])


def register_extensions() -> None:
    """`doc._.elmo`, `span._.elmo`, `token._.elmo`: the layers (`ElmoDocData`) of the Doc / its slice."""
    from spacy.tokens import Doc, Span, Token

    if not Doc.has_extension("elmo"):
        Doc.set_extension("elmo", default=None)
    if not Span.has_extension("elmo"):
        Span.set_extension("elmo", getter=_span_layers)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=_token_layers)


def _span_layers(span) -> Optional[ElmoDocData]:
    data = span.doc._.elmo
    return None if data is None else data[span.start : span.end]


def _token_layers(token) -> Optional[ElmoDocData]:
    data = token.doc._.elmo
    return None if data is None else data[token.i : token.i + 1]
