"""The `elmo` pipeline component: runs the biLM over Docs and stores what it computes.

Data flow: Doc → (layer cache, or the biLM: char ids → L+1 layers) → `doc._.elmo` (all layers,
`ElmoDocData`) and `doc.tensor` (a fixed mix of them, so `token.vector`, `doc.vector` and
`similarity` work without static vectors). Downstream components read the layers through
`spacy-elmo.ElmoListener.v1` and learn their own mix.

Training: if `elmo` is updated, it broadcasts each batch's layers and a backprop callback to its
listeners (spaCy's listener pattern) and the biLM is fine-tuned. With `elmo` in
`[training] frozen_components` (and `annotating_components`, so listeners can read `doc._.elmo`),
the biLM never changes; then a layer cache for that training run only
(`spacy-elmo.training_layer_cache.v1` in `[initialize.after_init]`) lets epochs 2+ skip it.

A wrong `model` fails in one line, an `ElmoSettingError` (a `ConfigValidationError`, which
spaCy's CLI prints without a traceback). What is here is checked when the component is built,
cheaply (no weights read, no network): an existing path must hold a valid model, a URL must be well
formed, a cached hub id must be an ELMo model. A name of nothing here fails only when the weights
are first needed (`initialize`, the first Doc): a saved pipeline's config keeps naming the files
its biLM came from after they are gone (its weights come from its own files), and the factory
cannot tell that leftover name from a typo (`layers.bilm.check_source`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy
import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer
from thinc.types import Floats1d

from ..precision import Precision, check_precision
from .architectures import ElmoBiLM_v2
from .deferred_step import DeferredStep
from .doc_data import ElmoDocData, register_extensions, set_similarity_hooks
from .layers.bilm import (
    ElmoSettingError,
    check_source,
    get_elmo_model,
    get_tokenizer,
    install_bilm,
    predict_cached,
    set_layer_precision,
)
from .layers.bilm_files import bilm_from_bytes, bilm_to_bytes, load_bilm, save_bilm
from .layers.layer_cache import LayerCache
from .layers.listener import ElmoListener, no_gradient

DEFAULT_CONFIG_STR = """
[elmo]
layers = null
layer_weights = null
store_layers = true
cache_mb = 0
fine_tune_layers = null
precision = null

[elmo.model]
@architectures = "spacy-elmo.ElmoBiLM.v2"
name = null

[elmo.model.segmenter]
@misc = "spacy-elmo.sentences_or_windows.v1"
"""
# (the layer's and the segmenter's other settings: their registered functions' defaults, which spaCy
# fills in; `spacy_elmo.constants` holds them)
DEFAULT_CONFIG = Config().from_str(DEFAULT_CONFIG_STR)

register_extensions()


@Language.factory(
    "elmo",
    default_config=DEFAULT_CONFIG["elmo"],
    assigns=["doc.tensor", "doc._.elmo"],
)
def make_elmo(
    nlp: Language,
    name: str,
    model: Model | str,
    layers: list[int] | None,
    layer_weights: list[float] | None,
    store_layers: bool,
    cache_mb: float,
    fine_tune_layers: int | None,
    precision: str | None,
) -> ElmoComponent:
    """The `elmo` component.

    model: a spacy-elmo.ElmoBiLM.v2 (or v1) block, or just the biLM's location (an HF directory, a
        hub id, "options.json,weights.hdf5", ...) for the default settings.
    layers: the layers averaged into `doc.tensor` (null = all L+1; e.g. [2] = the top layer).
    layer_weights: weights of those layers (null = equal weights).
    store_layers: keep all layers on `doc._.elmo` (needed by listeners).
    fine_tune_layers: when the biLM is fine-tuned (`elmo` not in `frozen_components`), only its top
        `fine_tune_layers` biLSTM layers train (null: every weight; 0: none).
    cache_mb: size in MB of the layer cache at inference (0 = off); see `ElmoComponent`. Training runs
        size theirs in `[initialize.components.elmo] cache_mb`.
    precision: how the biLM computes at inference: "fp32" (exact), "bf16" (bf16 products, fp32
        state and outputs; on a CPU without native bf16, one warning line and fp32) or "int8"
        (dynamic quantization, CPU), set on the biLM as it is loaded (`ElmoModel.set_precision`);
        null (the default): the biLM's own (its `config.json`'s, fp32 unless it says otherwise).
        The biLM's config holds it (saved in `bilm/config.json`); training (gradients) stays fp32.

    An unset or bad `model` or `precision` raises `ElmoSettingError` here; a `model` that names
    nothing here, when the weights are first needed (see the module docstring).
    """
    bilm = ElmoBiLM_v2(name=model) if isinstance(model, str) else model
    check_source(bilm)
    return ElmoComponent(
        nlp.vocab,
        bilm,
        name,
        layers=layers,
        layer_weights=layer_weights,
        store_layers=store_layers,
        cache_mb=cache_mb,
        fine_tune_layers=fine_tune_layers,
        precision=precision,
    )


def _check_precision(precision: str) -> Precision:
    """The component's `precision`, checked where it enters (`spacy_elmo.precision`): one line."""
    try:
        return check_precision(precision, "elmo: precision")
    except ValueError as err:
        raise ElmoSettingError(title=str(err)) from None


class ElmoComponent(TrainablePipe):
    """Sets `doc._.elmo` (all biLM layers) and `doc.tensor` (their mix) and feeds `ElmoListener`s.

    `doc.similarity` (and a span's or token's) is the cosine of these vectors, through the Doc's
    user hooks, so spaCy does not warn that it has no static vectors.

    The layer cache maps a Doc's token texts to its layers, least recently used out first. It is
    sized by `cache_mb` (default 0: off, as a served pipeline sees new text), or for one training
    run by `spacy-elmo.training_layer_cache.v1` (`spacy train` runs a frozen biLM over the same
    sentences every epoch). It is only read by `predict` (no gradient)
    and is cleared whenever the biLM's weights may change (a gradient update, `from_disk`,
    `from_bytes`), so cached layers always equal what the biLM would compute now.
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "elmo",
        *,
        layers: Sequence[int] | None = None,
        layer_weights: Sequence[float] | None = None,
        store_layers: bool = True,
        fine_tune_layers: int | None = None,
        cache_mb: float = 0.0,
        precision: str | None = None,
    ) -> None:
        if layer_weights is not None and layers is not None and len(layer_weights) != len(layers):
            raise ValueError(f"elmo: {len(layer_weights)} layer_weights for {len(layers)} layers")
        if cache_mb < 0:
            raise ValueError(f"elmo: cache_mb must be >= 0, got {cache_mb}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.layers = None if layers is None else [int(i) for i in layers]
        self.layer_weights = None if layer_weights is None else [float(w) for w in layer_weights]
        self.store_layers = bool(store_layers)
        if fine_tune_layers is not None and fine_tune_layers < 0:
            raise ValueError(f"elmo: fine_tune_layers must be >= 0 or null, got {fine_tune_layers}")
        self.fine_tune_layers = fine_tune_layers
        self.cache = LayerCache(int(cache_mb * 2**20))
        if precision is not None:
            self.precision = precision
        self._weights_may_change = False  # set by a gradient update, until the step is applied
        # spaCy calls finish_update before the listeners' gradient arrives: the step waits for it
        self._step: DeferredStep[Optimizer] = DeferredStep(self._apply_step)
        self.listener_map: dict[str, list[ElmoListener]] = {}
        self.cfg: dict[str, Any] = {}

    # --- listeners (spaCy's ListenedToComponent protocol) ---------------------------------------

    @property
    def listeners(self) -> list[ElmoListener]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> list[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: ElmoListener, component_name: str) -> None:
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        listener.connect(self)
        if not self.store_layers:
            warnings.warn(
                f"'{component_name}' listens to '{self.name}', which has store_layers=false: "
                "listeners read doc._.elmo at prediction time, so set store_layers=true.",
                stacklevel=1,  # about the pipeline's config, not about a caller (spaCy, wiring listeners)
            )

    def remove_listener(self, listener: ElmoListener, component_name: str) -> bool:
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component) -> None:
        """Registers every `ElmoListener` in `component`'s model whose upstream is "*" or this name."""
        names = ("*", self.name)
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if isinstance(node, ElmoListener) and node.upstream_name in names:
                    self.add_listener(node, component.name)

    # --- the biLM -----------------------------------------------------------------------------------

    @property
    def precision(self) -> Precision:
        """How the biLM computes at inference (see `make_elmo`): its `config.precision` (the biLM is
        loaded first if it is not). Setting it checks it (one `ElmoSettingError` line) and sets it
        on the biLM (`ElmoModel.set_precision`): now if it is loaded, else as it is loaded; cached
        layers are dropped."""
        return get_elmo_model(self.model).config.precision

    @precision.setter
    def precision(self, precision: str) -> None:
        set_layer_precision(self.model, _check_precision(precision))
        self.cache.clear()

    @property
    def elmo_model(self):
        """The torch `ElmoModel` (loaded on first access)."""
        return get_elmo_model(self.model)

    def layer_dims(self) -> tuple[int, int]:
        """(L+1, width) of the biLM's layers."""
        get_elmo_model(self.model)
        return self.model.get_dim("nL"), self.model.get_dim("nO")

    def tensor_weights(self) -> numpy.ndarray:
        """Per-layer weights of the mix written to `doc.tensor` (length L+1)."""
        n_layers = self.layer_dims()[0]
        chosen = list(range(n_layers)) if self.layers is None else self.layers
        for i in chosen:
            if not -n_layers <= i < n_layers:
                raise ValueError(f"elmo: layer {i} does not exist (the biLM has {n_layers} layers: 0..{n_layers - 1})")
        given = self.layer_weights
        if given is None:
            given = [1.0 / len(chosen)] * len(chosen)
        elif len(given) != len(chosen):
            raise ValueError(f"elmo: {len(given)} layer_weights for {len(chosen)} layers")
        weights = numpy.zeros(n_layers, dtype="float32")
        for i, w in zip(chosen, given):
            weights[i] += w
        return weights

    # --- prediction ---------------------------------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> list:
        """All layers per Doc, [L+1, len(doc), width] (from the cache where possible)."""
        return predict_cached(self.model, list(docs), self.cache)

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128, similarity_hooks: bool = True) -> Iterator[Doc]:
        """Annotates the Docs in batches (as spaCy's `TrainablePipe.pipe`). `similarity_hooks=False`
        sets no similarity hooks: for `nlp.pipe(texts, n_process=N, component_cfg={"elmo":
        {"similarity_hooks": False}})`, whose workers send every Doc back as bytes, which cannot
        carry hooks (spaCy warns W109 for each worker); `set_similarity_hooks` gives them back."""
        error_handler = self.get_error_handler()
        for docs in util.minibatch(stream, size=batch_size):
            try:
                self.set_annotations(docs, self.predict(docs), similarity_hooks=similarity_hooks)
                yield from docs
            except Exception as e:
                error_handler(self.name, self, docs, e)

    def set_annotations(self, docs: Sequence[Doc], layers_per_doc: Sequence, *, similarity_hooks: bool = True) -> None:
        weights = self.model.ops.asarray(cast(Floats1d, self.tensor_weights()))  # (thinc's type for it)
        xp = self.model.ops.xp
        for doc, layers in zip(docs, layers_per_doc):
            if layers.shape[1] != len(doc):
                raise ValueError(f"elmo: {layers.shape[1]} token vectors for a Doc of {len(doc)} tokens")
            doc.tensor = xp.ascontiguousarray(xp.tensordot(weights, layers, axes=1), dtype="float32")
            if self.store_layers:
                doc._.elmo = ElmoDocData(layers)
            if similarity_hooks:  # (an empty Doc's vector among them)
                set_similarity_hooks(doc)
            elif not len(doc):  # spaCy's own: zeros of its static vectors' width (0), not the biLM's
                doc.vector = xp.zeros((layers.shape[2],), dtype="float32")

    # --- training -----------------------------------------------------------------------------------

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optimizer | None = None,
        losses: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """Runs the biLM on the batch and hands its layers (and a backprop callback) to the listeners.

        When no listener sends gradients back (all have grad_factor 0), the biLM only predicts,
        so the cache applies and nothing is fine-tuned.

        `nlp.update` calls `finish_update` right after this, before the listeners' components have
        run and sent their gradients; the step is then applied when the last gradient arrives, in
        the same `nlp.update` (applied at once, it would find no gradient, and would change weights
        that this batch's backward pass still reads): see `DeferredStep`.
        """
        if losses is None:
            losses = {}
        self._step.start_batch()
        validate_examples(examples, "ElmoComponent.update")
        losses.setdefault(self.name, 0.0)
        listeners = self.listeners
        if not listeners:
            return losses
        docs = [eg.predicted for eg in examples]
        batch_id = ElmoListener.get_batch_id(docs)
        if not any(listener.grad_factor for listener in listeners):
            outputs = self.predict(docs)
            for listener in listeners:
                listener.receive(batch_id, outputs, no_gradient)
            return losses
        self.cache.clear()  # the weights are about to change
        self._weights_may_change = True
        self._choose_trainable_weights()
        outputs, backprop_bilm = self.model.begin_update(docs)
        self._step.expect_gradient()
        d_outputs = [self.model.ops.alloc(x.shape, dtype="f") for x in outputs]

        def accumulate_gradient(one_d_outputs):
            """Adds one listener's gradient; passed to all listeners but the last."""
            for i, d in enumerate(one_d_outputs):
                d_outputs[i] += d
                losses[self.name] += float((d**2).sum())
            return []

        def backprop(one_d_outputs):
            """Adds the last listener's gradient and backpropagates into the biLM."""
            accumulate_gradient(one_d_outputs)
            backprop_bilm(d_outputs)
            self._step.gradient_arrived(sgd)
            return []

        for listener in listeners[:-1]:
            listener.receive(batch_id, outputs, accumulate_gradient)
        listeners[-1].receive(batch_id, outputs, backprop)
        return losses

    def _choose_trainable_weights(self) -> None:
        """With `fine_tune_layers` = k, only the top k biLSTM layers take gradients (the rest of the
        biLM gets none, so its weights stay as they are); null leaves every weight trainable."""
        if self.fine_tune_layers is None:
            return
        elmo = get_elmo_model(self.model)
        layers = elmo.encoder.layers
        if self.fine_tune_layers > len(layers):
            raise ValueError(
                f"elmo: fine_tune_layers is {self.fine_tune_layers}, the biLM has {len(layers)} biLSTM layers"
            )
        trainable = {id(p) for layer in list(layers)[len(layers) - self.fine_tune_layers :] for p in layer.parameters()}
        for parameter in elmo.parameters():
            parameter.requires_grad_(id(parameter) in trainable)

    def finish_update(self, sgd: Optimizer) -> None:
        """Applies the biLM's gradients; drops cached layers computed with the old weights. Called
        while a batch's gradient is still on its way (see `update`), it applies it on arrival."""
        self._step.request(sgd)

    def _apply_step(self, sgd: Optimizer) -> None:
        """The optimizer step on the biLM, then the cache cleared if its weights may have changed."""
        self.model.finish_update(sgd)
        if self._weights_may_change:
            self.cache.clear()
            self._weights_may_change = False

    def get_loss(self, examples, scores) -> None:
        return None

    def initialize(
        self, get_examples: Callable[[], Iterable[Example]] | None = None, *, nlp: Language | None = None
    ) -> None:
        """Loads the biLM (nothing is learned from the examples): a `model` that names nothing
        fails here, in one line (`ElmoSettingError`), before training starts."""
        get_elmo_model(self.model)

    def add_label(self, label: str) -> int:
        raise NotImplementedError("The elmo component has no labels")

    # --- serialization ------------------------------------------------------------------------------

    # The biLM is written one way: `bilm/` is its model directory (config.json, model.safetensors,
    # the tokenizer files), read by `from_pretrained` with its strict checks; the bytes are the
    # same files (layers.bilm_files.bilm_to_bytes).

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = tuple()) -> None:
        """Writes `bilm/` (a model directory: config.json, model.safetensors, the tokenizer files,
        the bound precision in config.json) and `cfg`."""
        serialize = {
            "cfg": lambda p: srsly.write_json(p, self.cfg),
            "bilm": lambda p: save_bilm(get_elmo_model(self.model), get_tokenizer(self.model), p),
        }
        util.to_disk(path, serialize, exclude)

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = tuple()) -> ElmoComponent:
        """Reads `bilm/` with `ElmoModel.from_pretrained`: a bad file fails here, naming it."""
        deserialize = {
            "cfg": lambda p: self.cfg.update(srsly.read_json(p)),
            "bilm": lambda p: install_bilm(self.model, *load_bilm(p)),
        }
        util.from_disk(path, deserialize, exclude)
        self.cache.clear()
        return self

    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        serialize = {
            "cfg": lambda: srsly.json_dumps(self.cfg),
            "bilm": lambda: bilm_to_bytes(get_elmo_model(self.model), get_tokenizer(self.model)),
        }
        return util.to_bytes(serialize, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()) -> ElmoComponent:
        def load_bilm(data: bytes) -> None:
            elmo, tokenizer = bilm_from_bytes(data)
            if elmo is not None:
                install_bilm(self.model, elmo, tokenizer)

        deserialize = {"cfg": lambda b: self.cfg.update(srsly.json_loads(b)), "bilm": load_bilm}
        util.from_bytes(bytes_data, deserialize, exclude)
        self.cache.clear()
        return self


@util.registry.callbacks("spacy-elmo.training_layer_cache.v1")
def training_layer_cache_v1(cache_mb: float = 2048) -> Callable[[Language], Language]:
    """`[initialize.after_init]`: a layer cache of `cache_mb` MB in every `elmo` component, for this
    training run. `spacy train` runs a frozen biLM over the same sentences every epoch; the cache
    lets epochs 2+ (and repeated dev evaluations) reuse their layers. A saved pipeline keeps its
    component's own `cache_mb` (0 by default): `spacy.load` does not run `[initialize]`.
    """
    if cache_mb < 0:
        raise ValueError(f"spacy-elmo.training_layer_cache.v1: cache_mb must be >= 0, got {cache_mb}")

    def set_training_cache(nlp: Language) -> Language:
        for _, component in nlp.components:  # disabled (frozen) components included
            if isinstance(component, ElmoComponent):
                component.cache = LayerCache(int(cache_mb * 2**20))
        return nlp

    return set_training_cache


__all__ = ["DEFAULT_CONFIG", "ElmoComponent", "ElmoSettingError", "make_elmo", "training_layer_cache_v1"]
