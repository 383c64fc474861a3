"""`ElmoListener`: the biLM layers of an upstream `elmo` component, inside a downstream model.

spaCy's listener pattern (as `Tok2VecListener`): while the `elmo` component is updated, it hands
every listener the batch's layers and a backprop callback (`receive`); the listener returns them
for the same batch of Docs, and only then does a gradient reach the biLM. Otherwise (prediction,
or training with `elmo` frozen and in `annotating_components`) the layers are read from
`doc._.elmo`, set by the component. Docs that reach the listener without them (the component
did not run on them: `spacy debug model`, which updates only the component it analyses, or a
component's own `update` or `predict` called on fresh Docs) get them from the connected component's
`predict`, the function that sets `doc._.elmo`, with its cache: the same values, and no gradient,
as a frozen or annotating `elmo` gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats3d

from ..doc_data import register_extensions

register_extensions()


class ElmoListener(Model):
    """Outputs each Doc's biLM layers [L+1, len(doc), dim], as computed by the upstream `elmo`.

    `grad_factor` scales the gradient sent back to the biLM (0 = never fine-tune it from here).
    """

    name = "elmo-listener"

    def __init__(self, upstream_name: str = "*", grad_factor: float = 1.0) -> None:
        Model.__init__(
            self,
            name=self.name,
            forward=listener_forward,
            init=listener_init,
            dims={"nO": None, "nL": None},
            attrs={"grad_factor": float(grad_factor)},
        )
        self.upstream_name = upstream_name
        self._upstream = None  # the `elmo` component (ElmoComponent), set by ElmoComponent.add_listener
        self._batch_id: int | None = None
        self._outputs: list[Floats3d] | None = None
        self._backprop: Callable[[list[Floats3d]], list[Doc]] | None = None

    @property
    def grad_factor(self) -> float:
        return self.attrs["grad_factor"]

    @classmethod
    def get_batch_id(cls, inputs: Iterable[Doc]) -> int:
        """A content hash of a batch of Docs, to check the received batch is the one asked for."""
        return sum(sum(token.orth for token in doc) for doc in inputs)

    def connect(self, upstream) -> None:
        """Remember the upstream component (used for the layer sizes at initialization)."""
        self._upstream = upstream

    def receive(self, batch_id: int, outputs: list[Floats3d], backprop: Callable[[list[Floats3d]], list[Doc]]) -> None:
        """Stores the upstream's training output for a batch and its backprop callback."""
        self._batch_id = batch_id
        self._outputs = outputs
        self._backprop = backprop

    def verify_inputs(self, inputs) -> bool:
        if self._batch_id is None and self._outputs is None:
            raise ValueError("ElmoListener: no batch received from the upstream 'elmo' component")
        batch_id = self.get_batch_id(inputs)
        if batch_id != self._batch_id:
            raise ValueError(
                f"ElmoListener: mismatched batch (got {batch_id}, the 'elmo' component sent {self._batch_id})"
            )
        return True


def listener_init(model: ElmoListener, X: list[Doc] | None = None, Y=None) -> None:
    if model.has_dim("nO") and model.has_dim("nL"):
        return
    if model._upstream is not None:
        n_layers, width = model._upstream.layer_dims()
    else:
        data = next((doc._.elmo for doc in X or [] if doc.has_extension("elmo") and doc._.elmo is not None), None)
        if data is None:
            raise ValueError(
                "ElmoListener is not connected to an 'elmo' component: add the 'elmo' component "
                "before this one in the pipeline (or set the listener's `upstream` to its name)."
            )
        n_layers, width = data.num_layers, data.width
    model.set_dim("nL", n_layers, force=True)
    model.set_dim("nO", width, force=True)


def listener_forward(model: ElmoListener, docs: list[Doc], is_train: bool) -> tuple[list[Floats3d], Callable]:
    if is_train and model._batch_id is not None:
        model.verify_inputs(docs)
        factor = model.grad_factor
        outputs, upstream_backprop = model._outputs, model._backprop
        assert outputs is not None and upstream_backprop is not None, "receive() sets them with the batch id"

        def backprop(d_layers: list[Floats3d]) -> list[Doc]:
            return upstream_backprop([d * factor for d in d_layers] if factor != 1.0 else d_layers)

        return outputs, backprop
    found: list[Floats3d | None] = [None] * len(docs)
    for i, doc in enumerate(docs):
        data = doc._.elmo
        if data is not None and len(data) == len(doc):
            found[i] = model.ops.asarray3f(data.layers, dtype=None)
    missing = [i for i, layers in enumerate(found) if layers is None]
    if missing and model._upstream is not None:
        # what the component would store on these Docs (ElmoComponent.set_annotations keeps its predict's
        # layers as they are); nothing flows back, as from layers read off the Docs
        for i, layers in zip(missing, model._upstream.predict([docs[i] for i in missing])):
            found[i] = model.ops.asarray3f(layers, dtype=None)
    elif missing and is_train:
        raise ValueError(
            "ElmoListener: the Docs have no `doc._.elmo` layers and the listener is not connected to an "
            "'elmo' component: add the 'elmo' component before this one in the pipeline."
        )
    elif missing:  # a listener outside a pipeline, given a sample to infer its shapes: no information
        for i in missing:
            found[i] = model.ops.alloc3f(model.get_dim("nL"), len(docs[i]), model.get_dim("nO"))
    return cast(list[Floats3d], found), no_gradient


def no_gradient(d_outputs) -> list[Doc]:  # module level, so it pickles
    """The backprop callback of outputs that take no gradient (layers read from the Docs, a frozen
    or only predicting biLM): nothing flows back, and Docs have no gradient of their own."""
    return []


__all__ = ["ElmoListener", "no_gradient"]
