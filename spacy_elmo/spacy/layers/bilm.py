"""The biLM as a thinc layer: Docs in, every Doc's L+1 layers out ([L+1, len(doc), dim] each).

Data flow: Doc → segments (the layer's segmenter, `segmentation.py`: by default the whole Doc; or,
past `max_length` tokens, its sentences when they are set, else overlapping windows) → batches of
segments, longest first, by a padded token budget → character ids → `PyTorchWrapper` around the
torch biLM → all layers, stitched back per Doc.  Every segment runs from a zero LSTM state, so a
Doc's output does not depend on what else is in the batch.

The layer holds its model reference parsed once (`attrs["reference"]`, beside the text it was given,
`attrs["name"]`, which is what a saved config names): the component checks it cheaply when it is
built (`check_source`, keeping what the check found in `attrs["checked"]`), and the torch biLM is
loaded from it lazily on first use (`formats.references`: the biLM with its tokenizer fitted, its
files read without being checked again), unless weights arrive first
(`set_elmo_model`, `from_bytes`, `bilm_files`): a saved pipeline therefore never needs the
original files. The inference precision is the biLM's own (`config.precision`, read from its files
and changed only by `set_precision`); a precision the component sets before the biLM is loaded waits
in `attrs["load_precision"]` and is set as the biLM enters the layer (`install_bilm`), after which
the biLM's config alone holds it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy
import torch
from confection import ConfigValidationError
from spacy.tokens import Doc
from spacy.training.batchers import minibatch_by_padded_size
from thinc.api import (
    ArgsKwargs,
    Model,
    PyTorchGradScaler,
    PyTorchShim,
    get_torch_default_device,
    torch2xp,
    xp2torch,
)
from thinc.layers.pytorchwrapper import forward as pytorch_forward
from thinc.types import Floats3d

from ...constants import MAX_BATCH_TOKENS
from . import bilm_files, segmentation
from .layer_cache import LayerCache, doc_cache_key
from .segmentation import Segmenter, SentencesOrWindows, doc_segments
from .torch_shim import InPlaceUpdateShim


class ElmoLayerStack(torch.nn.Module):
    """Holds the `ElmoModel` and its `ElmoTokenizer` (None until loaded); returns all the model's
    layers stacked, [L+1, B, T, dim]."""

    def __init__(self, elmo: torch.nn.Module | None = None, tokenizer=None):
        super().__init__()
        self.elmo = elmo
        self.tokenizer = tokenizer

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, input_word_ids: torch.Tensor | None = None
    ) -> torch.Tensor:
        assert self.elmo is not None, "the biLM is loaded (get_elmo_model) before it runs"
        out = self.elmo(input_ids, attention_mask, input_word_ids)
        return torch.stack([h.float() for h in out.hidden_states])


# the shim's bytes (a downstream component with its own biLM): the model directory of `bilm_files`
def _serialize_stack(stack: ElmoLayerStack) -> bytes:
    return bilm_files.bilm_to_bytes(stack.elmo, stack.tokenizer)


def _deserialize_stack(stack: ElmoLayerStack, data: bytes, device) -> ElmoLayerStack:
    elmo, tokenizer = bilm_files.bilm_from_bytes(data, device)
    if elmo is not None:
        stack.elmo, stack.tokenizer = elmo, tokenizer
    return stack


# --- thinc <-> torch conversions ----------------------------------------------------------------


def _convert_inputs(model: Model, X: dict[str, numpy.ndarray], is_train: bool):
    """Host (numpy) character ids, mask (and word ids) → torch tensors on the biLM's device."""
    device = cast(PyTorchShim, model.shims[0]).device
    kwargs = {name: torch.as_tensor(array, device=device) for name, array in X.items()}
    return ArgsKwargs(args=(), kwargs=kwargs), lambda d_inputs: None  # ids take no gradient


def _convert_outputs(model: Model, X_Ytorch, is_train: bool):
    _, Ytorch = X_Ytorch
    Y = torch2xp(Ytorch)

    def backprop(dY) -> ArgsKwargs:
        dYtorch = xp2torch(dY, device=Ytorch.device).to(Ytorch.dtype)
        return ArgsKwargs(args=((Ytorch,),), kwargs={"grad_tensors": (dYtorch,)})

    return Y, backprop


# --- segmentation and the cache key ----------------------------------------------------------------


def doc_key(model: Model, doc: Doc):
    """Cache key of `doc` for this biLM layer: its token texts and the segments the layer's
    segmenter makes of it (the layers are a function of both, for given weights)."""
    return doc_cache_key([t.text for t in doc], doc_segments(model.attrs["segmenter"], doc))


# --- the thinc layer ----------------------------------------------------------------------------


def build_bilm(
    name: str | None,
    *,
    max_batch_tokens: int = MAX_BATCH_TOKENS,
    segmenter: Segmenter | None = None,
    autocast: bool = False,
    grad_scaler_config: dict[str, Any] | None = None,
) -> Model[list[Doc], list[Floats3d]]:
    """Docs → one [L+1, len(doc), dim] array per Doc from the biLM found at `name` (loaded lazily).

    name: a model reference (`formats.references`), parsed here, once; segmenter: `Doc → segments`
    (`segmentation.py`; default `spacy-elmo.sentences_or_windows.v1` with its defaults); autocast:
    torch autocast in the biLM (GPU), with a gradient scaler configured by `grad_scaler_config`."""
    from ...formats.references import parse_reference

    if max_batch_tokens < 1:
        raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
    scaler_cfg = dict(grad_scaler_config or {})
    scaler_cfg.setdefault("enabled", autocast)
    # thinc's PyTorchWrapper_v3, with the shim that writes optimizer steps in place (torch_shim.py)
    wrapper: Model[Any, Any] = Model(
        "pytorch",
        pytorch_forward,
        attrs={"convert_inputs": _convert_inputs, "convert_outputs": _convert_outputs},
        shims=[
            InPlaceUpdateShim(
                ElmoLayerStack(),
                mixed_precision=autocast,  # (thinc's name for torch autocast)
                grad_scaler=PyTorchGradScaler(**scaler_cfg),
                serialize_model=_serialize_stack,
                deserialize_model=_deserialize_stack,
            )
        ],
        dims={"nI": None, "nO": None},
    )
    return Model(
        "elmo-bilm",
        bilm_forward,
        init=bilm_init,
        layers=[wrapper],
        dims={"nO": None, "nL": None},
        attrs={
            "name": name,  # the text, as configs and saved layers name it
            # (text, its parsed reference): not msgpack, so never in a saved layer's bytes
            "reference": (name, parse_reference(name)) if name else None,
            # what `check_source` found (`references.Checked`), for the load to read without checking again
            "checked": None,
            "max_batch_tokens": int(max_batch_tokens),
            "segmenter": segmenter if segmenter is not None else SentencesOrWindows(),
            # the `elmo` component's precision for a biLM not loaded yet (None: the biLM's own)
            "load_precision": None,
        },
    )


def _stack(model: Model) -> ElmoLayerStack:
    return model.layers[0].shims[0]._model


def install_bilm(model: Model, elmo, tokenizer) -> None:
    """Puts a biLM and the tokenizer fitted to it (as `formats.references` and `bilm_files` load
    them) into the layer, on the current thinc device and in eval mode; sets the precision the
    component asked for before it was loaded (`attrs["load_precision"]`, then cleared: the biLM's
    config holds it from here), and sets nO / nL."""
    from ...hf.modeling_elmo import bind_precision

    stack = _stack(model)
    elmo = elmo.to(get_torch_default_device()).eval()
    wanted = model.attrs.get("load_precision")
    model.attrs["load_precision"] = None
    if wanted is not None and elmo.config.precision != wanted:
        bind_precision(elmo, wanted)
    stack.elmo, stack.tokenizer = elmo, tokenizer
    model.set_dim("nO", int(elmo.config.output_dim), force=True)
    model.set_dim("nL", int(elmo.config.num_output_layers), force=True)


def set_elmo_model(model: Model, elmo, tokenizer=None) -> None:
    """Puts a loaded `ElmoModel` (and its tokenizer; default: the one it has, or the UTF-8 one)
    into the layer (on the current thinc device) and sets nO / nL. A tokenizer that does not fit
    the biLM is a one-line `ValueError` (`references.fit_tokenizer`)."""
    from ...formats.references import fit_tokenizer

    stack = _stack(model)
    if tokenizer is None and stack.tokenizer is not None and stack.elmo is elmo:
        tokenizer = stack.tokenizer
    install_bilm(model, elmo, fit_tokenizer(elmo, tokenizer))


def set_layer_precision(model: Model, precision) -> None:
    """The precision (checked: `spacy_elmo.precision`) the biLM computes in: set now
    (`ElmoModel.set_precision`'s binding) if it is loaded, else as it enters the layer."""
    from ...hf.modeling_elmo import bind_precision

    elmo = cast(Any, _stack(model).elmo)  # an ElmoModel (or None)
    if elmo is None:
        model.attrs["load_precision"] = precision
    elif elmo.config.precision != precision:
        bind_precision(elmo, precision)


def get_elmo_model(model: Model, load: bool = True):
    """The torch `ElmoModel` inside the layer, loading it from its reference first if needed (`load`)."""
    stack = _stack(model)
    if stack.elmo is None and load:
        install_bilm(model, *_load(model))
    elif stack.elmo is not None and not model.has_dim("nO"):
        install_bilm(model, stack.elmo, stack.tokenizer)
    return stack.elmo


def get_tokenizer(model: Model):
    """The `ElmoTokenizer` of the biLM inside the layer (loading the biLM first if needed)."""
    get_elmo_model(model)
    return _stack(model).tokenizer


class ElmoSettingError(ConfigValidationError):
    """A biLM `name` (the `elmo` component's `model`) that names no model: one line, raised when
    the component is built (a bad one) or when the weights are first needed (a missing one:
    `initialize`, the first Doc). spaCy's CLI prints a `ConfigValidationError` as its message
    instead of a traceback."""

    def __str__(self) -> str:
        return self.text.strip()


# short: spaCy's CLI wraps its error lines at 80 columns, colour codes included
_SETTING = "elmo `model` (paths.elmo)"


def _reference(model: Model):
    """The layer's model reference, parsed when the layer was built (or, for a name that came
    with a saved layer's bytes since, from that name)."""
    from ...formats.references import parse_reference

    name = model.attrs.get("name")
    if not name:
        raise ElmoSettingError(title=f"elmo: no biLM: {_SETTING} is not set")
    parsed = model.attrs.get("reference")
    if parsed is None or parsed[0] != name:
        parsed = model.attrs["reference"] = (name, parse_reference(name))
    return parsed[1]


def check_source(model: Model) -> None:
    """Checks cheaply (no weights read, no download, no network) what the layer's reference names
    that is here: an existing path must hold a valid model, a URL must be well formed, a hub id in
    the local cache must be an ELMo model. A name of nothing here (no such path, a hub id not
    cached) passes: a saved pipeline's config keeps naming the files its biLM came from after they
    are gone, and its weights come from `from_disk` / `from_bytes`; the layer cannot tell that
    leftover from a typo, so the typo fails when the weights are first needed (`get_elmo_model`).
    Raises `ElmoSettingError`, one line naming the setting."""
    from ...formats.references import ModelAbsentError, ModelNotFoundError

    if _stack(model).elmo is not None:
        return
    reference = _reference(model)
    try:
        model.attrs["checked"] = reference.check()
    except ModelAbsentError:
        pass
    # ValueError: broken legacy files (LegacyFormatError); OSError: a malformed URL (DownloadError)
    except (ModelNotFoundError, ValueError, OSError) as err:
        raise ElmoSettingError(title=f"{_SETTING}: {err}") from None


def _load(model: Model):
    """(model, tokenizer fitted to it) of the layer's reference (`ModelReference.load`, handed what
    `check_source` found, so the files are checked once); a reference to nothing, or to files that
    turn out broken when read (each reader's one-line error naming the file), is one
    `ElmoSettingError` line naming the setting."""
    reference = _reference(model)
    checked, model.attrs["checked"] = model.attrs.get("checked"), None
    try:
        return reference.load(checked=checked if checked is not None and checked.reference == reference else None)
    # as in check_source: ModelNotFoundError and the readers' errors (ValueError), a download (OSError)
    except (ValueError, OSError) as err:
        raise ElmoSettingError(title=f"{_SETTING}: {err}") from None


def bilm_init(model: Model, X=None, Y=None) -> None:
    get_elmo_model(model)


_PROCESS_ID = os.getpid()


def _fork_safe_threads() -> None:
    """In a forked child (e.g. `nlp.pipe(n_process=2)`), use one torch thread.

    A child forked after the parent ran torch's OpenMP/MKL thread pool hangs in its first
    parallel op; each worker process is the unit of parallelism anyway.
    """
    global _PROCESS_ID
    if os.getpid() != _PROCESS_ID:
        _PROCESS_ID = os.getpid()
        torch.set_num_threads(1)


def bilm_forward(model: Model, docs: list[Doc], is_train: bool) -> tuple[list[Floats3d], Callable]:
    _fork_safe_threads()
    get_elmo_model(model)
    tokenizer = _stack(model).tokenizer
    wrapper = model.layers[0]
    ops = model.ops
    n_layers, width = model.get_dim("nL"), model.get_dim("nO")
    segments = segmentation.plan_segments(docs, model.attrs["segmenter"])
    words = [[t.text for t in doc] for doc in docs]
    outputs = [ops.alloc3f(n_layers, len(doc), width) for doc in docs]
    callbacks = []
    # spaCy's padded-size batcher over all segments at once: rows × longest row ≤ max_batch_tokens
    # (a longer segment runs alone), similar lengths together
    for segs in minibatch_by_padded_size(segments, model.attrs["max_batch_tokens"], buffer=max(1, len(segments))):
        inputs = tokenizer.encode_words([words[s.doc][s.start : s.end] for s in segs])
        Y, backprop_batch = wrapper(inputs, is_train=is_train)
        for row, s in enumerate(segs):
            outputs[s.doc][:, s.keep_start : s.keep_end] = Y[:, row, s.keep_start - s.start : s.keep_end - s.start]
        if is_train:
            callbacks.append((segs, Y.shape, backprop_batch))

    def backprop(d_outputs: list[Floats3d]) -> list[Doc]:
        for segs, shape, backprop_batch in callbacks:
            dY = ops.alloc(shape, dtype="f")
            for row, s in enumerate(segs):
                dY[:, row, s.keep_start - s.start : s.keep_end - s.start] = d_outputs[s.doc][
                    :, s.keep_start : s.keep_end
                ]
            backprop_batch(dY)
        return []

    return outputs, backprop


def predict_cached(model: Model, docs: Sequence[Doc], cache: LayerCache | None) -> list[Floats3d]:
    """`model.predict(docs)` that looks every Doc up in `cache` first and only runs the misses.

    Only for frozen weights: the caller clears the cache whenever the biLM's weights may change.
    """
    if cache is None or not cache.enabled:
        return model.predict(list(docs))
    keys = [doc_key(model, doc) for doc in docs]
    outputs: list[Floats3d | None] = [None] * len(docs)
    missing = []
    for i, key in enumerate(keys):
        hit = cache.get(key)
        if hit is None:
            missing.append(i)
        else:
            # the cache holds host copies of Floats3d outputs
            outputs[i] = model.ops.asarray3f(cast(Floats3d, hit), dtype=None)
    if missing:
        for i, layers in zip(missing, model.predict([docs[i] for i in missing])):
            cache.put(keys[i], layers)
            outputs[i] = layers
    return outputs  # type: ignore[return-value]


__all__ = [
    "ElmoLayerStack",
    "ElmoSettingError",
    "set_layer_precision",
    "build_bilm",
    "check_source",
    "doc_key",
    "get_elmo_model",
    "get_tokenizer",
    "install_bilm",
    "predict_cached",
    "set_elmo_model",
]
