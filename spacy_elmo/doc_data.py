"""What the `elmo` component stores on a Doc: all biLM layers (`doc._.elmo`, and its span/token views).

`ElmoDocData` is the value of `doc._.elmo`. It serializes with msgpack (so `Doc.to_bytes`,
`DocBin(store_user_data=True)` and `nlp.pipe(n_process=2)` work) and with pickle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy
import srsly
from thinc.types import Floats3d


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
