"""What the `elmo` component stores on a Doc: all biLM layers (`doc._.elmo`, and its span/token
views) and similarity by its vectors.

`ElmoDocData` is the value of `doc._.elmo`. It serializes with msgpack (so `Doc.to_bytes`,
`DocBin(store_user_data=True)` and `nlp.pipe(n_process=2)` work) and with pickle. `span._.elmo`
is an `ElmoDocData` of the span's tokens; `token._.elmo` an `ElmoTokenData`, [L+1, dim].
`set_similarity_hooks` makes `doc/span/token.similarity` the cosine of their `.vector`s (the
component's `doc.tensor`), without spaCy's warning about missing static vectors, and an empty span's
`.vector` zeros of the Doc's width (as an empty Doc's, which the component sets). spaCy does not
serialize a Doc's hooks, so a Doc that comes back from bytes (`nlp.pipe(n_process=2)`,
`Doc.from_bytes`, `DocBin`) gets them back by that one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy
import srsly
from thinc.api import get_array_module
from thinc.types import Floats1d, Floats2d, Floats3d

if TYPE_CHECKING:  # the annotations only: this module imports spaCy inside the functions that use it
    from spacy.tokens import Doc


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

    def __getitem__(self, index) -> ElmoDocData:
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
    def from_dict(cls, msg: dict) -> ElmoDocData:
        return cls(cast(Floats3d, numpy.asarray(msg["layers"])))  # the layers to_dict wrote


@dataclass
class ElmoTokenData:
    """The L+1 biLM layers of one token, `layers`: [L+1, dim] (layer 0 = its token vector)."""

    layers: Floats2d

    @property
    def num_layers(self) -> int:
        return int(self.layers.shape[0])

    @property
    def width(self) -> int:
        return int(self.layers.shape[1])

    def mix(self, weights: Floats1d, gamma: float = 1.0) -> Floats1d:
        """γ · Σ_j w_j · layers[j] → [dim]."""
        xp = get_array_module(self.layers)
        weights = xp.asarray(weights, dtype=self.layers.dtype)
        return (gamma * xp.tensordot(weights, self.layers, axes=1)).astype(self.layers.dtype, copy=False)


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
    """`doc._.elmo`, `span._.elmo` (`ElmoDocData`) and `token._.elmo` (`ElmoTokenData`): the layers."""
    from spacy.tokens import Doc, Span, Token

    if not Doc.has_extension("elmo"):
        Doc.set_extension("elmo", default=None)
    if not Span.has_extension("elmo"):
        Span.set_extension("elmo", getter=_span_layers)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=_token_layers)


def _span_layers(span) -> ElmoDocData | None:
    data = span.doc._.elmo
    return None if data is None else data[span.start : span.end]


def _token_layers(token) -> ElmoTokenData | None:
    data = token.doc._.elmo
    return None if data is None else ElmoTokenData(data.layers[:, token.i])


def vector_similarity(obj, other) -> float:
    """Cosine of `obj.vector` and `other.vector` (0.0 if either is all zeros), as spaCy computes it."""
    if obj.vector_norm == 0 or other.vector_norm == 0:
        return 0.0
    xp = get_array_module(obj.vector)
    return float(xp.dot(obj.vector, other.vector) / (obj.vector_norm * other.vector_norm))


def span_vector(span) -> Floats1d:
    """`span.vector` as spaCy computes it, the mean of its tokens' vectors; for an empty span, zeros of the
    Doc's width (its `doc.tensor`'s, else its layers'), as the component gives an empty Doc, where spaCy
    gives zeros of its static vectors' width (0 here), which do not stack with the other spans' vectors."""
    if len(span):
        return sum(token.vector for token in span) / len(span)
    doc = span.doc
    xp = get_array_module(doc.tensor)
    if doc.tensor.ndim == 2:
        width = doc.tensor.shape[1]
    elif doc._.elmo is not None:  # a Doc read back without its tensor (a DocBin keeps the layers only)
        width = doc._.elmo.width
    else:
        width = doc.vocab.vectors_length
    return xp.zeros((width,), dtype="float32")


def set_similarity_hooks(doc: Doc) -> Doc:
    """`doc.similarity`, `span.similarity` and `token.similarity` by `vector_similarity`: the vectors
    are the component's (doc.tensor), so spaCy's warning W007 (no static vectors) does not apply, and
    two tokens of the same text in different contexts are not taken as equal (spaCy's default gives
    1.0); and `span.vector` by `span_vector` (an empty span's, and an empty Doc's `vector`, as wide as
    the others). The component sets them; call this on a Doc that comes back from bytes, which drops
    hooks and an empty Doc's vector (as the Docs of `nlp.pipe(texts, n_process=2)` do: docs/spacy.md).
    Returns `doc`."""
    doc.user_hooks["similarity"] = vector_similarity
    doc.user_span_hooks["similarity"] = vector_similarity
    doc.user_token_hooks["similarity"] = vector_similarity
    doc.user_span_hooks["vector"] = span_vector
    if not len(doc):  # spaCy's own: zeros of its static vectors' width (0), which bytes bring back
        doc.vector = span_vector(doc[0:0])
    return doc
