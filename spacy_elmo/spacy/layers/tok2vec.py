"""Token vectors for downstream components: biLM layers → learned scalar mix (→ ‖ other features).

`build_elmo_features` combines a source of layers (an `ElmoListener`, or `BiLMLayers` running a
biLM of its own), a scalar mix, and optionally spaCy's own tok2vec (e.g. MultiHashEmbed +
MaxoutWindowEncoder), concatenated per token: [ELMo_k ; x_k].
"""

from __future__ import annotations

from collections.abc import Callable

from spacy.tokens import Doc
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from .bilm import get_elmo_model, predict_cached
from .layer_cache import LayerCache
from .listener import no_gradient


class BiLMLayers(Model):
    """A biLM's layers for one downstream model (no shared `elmo` component).

    `freeze=True`: the biLM only predicts (no gradient, weights never change) and, with
    `cache_mb > 0`, each text's layers are computed once and kept in an LRU cache.
    `freeze=False`: the biLM is fine-tuned with the downstream model.
    """

    name = "elmo-bilm-layers"

    def __init__(self, bilm: Model, freeze: bool = True, cache_mb: float = 0.0) -> None:
        Model.__init__(
            self,
            name=self.name,
            forward=bilm_layers_forward,
            init=bilm_layers_init,
            layers=[bilm],
            dims={"nO": None, "nL": None},
            attrs={"freeze": bool(freeze)},
        )
        self.cache = LayerCache(int(cache_mb * 2**20) if freeze else 0)


def bilm_layers_init(model: BiLMLayers, X=None, Y=None) -> None:
    bilm = model.layers[0]
    bilm.initialize()
    model.set_dim("nL", bilm.get_dim("nL"), force=True)
    model.set_dim("nO", bilm.get_dim("nO"), force=True)


def bilm_layers_forward(model: BiLMLayers, docs: list[Doc], is_train: bool) -> tuple[list[Floats3d], Callable]:
    bilm = model.layers[0]
    get_elmo_model(bilm)
    if model.attrs["freeze"] or not is_train:
        if not model.attrs["freeze"]:
            model.cache.clear()
        return predict_cached(bilm, docs, model.cache), no_gradient
    model.cache.clear()  # the weights are about to change
    return bilm(docs, is_train=True)


def build_elmo_features(
    source: Model[list[Doc], list[Floats3d]],
    mix: Model[list[Floats3d], list[Floats2d]],
    tok2vec: Model[list[Doc], list[Floats2d]] | None = None,
) -> Model[list[Doc], list[Floats2d]]:
    """Docs → [mix(layers) ; tok2vec(doc)] per token; nO = biLM width (+ tok2vec width).

    This is concatenate(chain(source, mix), tok2vec), but as one node over [source, mix, tok2vec]:
    a saved downstream model stores its thinc nodes in order, and thinc's combinators would add a
    node, so models trained with the v1 architectures would no longer load
    (tests/hf/test_serialization.py::test_downstream_models_trained_by_0_1_load_with_the_same_scores).

    Its name holds its `tok2vec`'s, as thinc's `concatenate` names a node by its layers' names
    ("elmo-features|transformer-listener"): `spacy debug model` finds which upstream component to
    update (a `transformer`) by the listener's name in the name of the model's tok2vec.
    """
    layers: list[Model] = [source, mix]
    name = "elmo-features"
    if tok2vec is not None:
        layers.append(tok2vec)
        name = f"{name}|{tok2vec.name}"
    return Model(name, features_forward, init=features_init, layers=layers, dims={"nO": None})


def features_init(model: Model, X: list[Doc] | None = None, Y=None) -> None:
    source, mix = model.layers[:2]
    source.initialize(X=X)
    mix.set_dim("nL", source.get_dim("nL"), force=True)
    mix.set_dim("nO", source.get_dim("nO"), force=True)
    mix.initialize()
    width = mix.get_dim("nO")
    if len(model.layers) == 3:
        tok2vec = model.layers[2]
        tok2vec.initialize(X=X)
        width += tok2vec.get_dim("nO")
    model.set_dim("nO", width, force=True)


def features_forward(model: Model, docs: list[Doc], is_train: bool) -> tuple[list[Floats2d], Callable]:
    source, mix = model.layers[:2]
    layers, backprop_source = source(docs, is_train)
    mixed, backprop_mix = mix(layers, is_train)
    if len(model.layers) == 2:
        return mixed, lambda d_mixed: backprop_source(backprop_mix(d_mixed))
    features, backprop_features = model.layers[2](docs, is_train)
    xp = model.ops.xp
    width = mix.get_dim("nO")
    outputs = [xp.hstack((m, f)) for m, f in zip(mixed, features)]

    def backprop(d_outputs: list[Floats2d]) -> list[Doc]:
        backprop_features([model.ops.as_contig(d[:, width:]) for d in d_outputs])
        backprop_source(backprop_mix([model.ops.as_contig(d[:, :width]) for d in d_outputs]))
        return []

    return outputs, backprop


__all__ = ["BiLMLayers", "build_elmo_features"]
