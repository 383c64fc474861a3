"""The biLM as a thinc layer: Docs in, every Doc's L+1 layers out ([L+1, len(doc), dim] each).

Data flow: Doc → segments (the whole Doc; or, past `max_length` tokens, its sentences when they
are set, else overlapping windows) → batches of segments, longest first, by a padded token
budget → character ids → `PyTorchWrapper` around the torch biLM → all layers, stitched back per
Doc.  Every segment runs from a zero LSTM state, so a Doc's output does not depend on what else
is in the batch.

The torch biLM is loaded lazily from `name` (any model reference: an HF directory, a hub id, legacy
options+weights, ...) on first use, unless weights arrive first (`set_elmo_model`, `from_bytes`): a
saved pipeline therefore never needs the original files.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy
import srsly
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

from .layer_cache import LayerCache, doc_cache_key
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


# --- serialization of the torch biLM: one HF directory, as files or as bytes ---------------------
#
# On disk the biLM is a model directory (`model_directory.save_model_directory`: config.json,
# model.safetensors, the tokenizer with its settings and lexicons; no model card); it is read back
# by `ElmoModel.from_pretrained` (local files, safetensors only, and that method's strict checks:
# unknown config fields, missing or mis-shaped tensors, NaN/inf) and `ElmoTokenizer.from_pretrained`.
# As bytes it is the same files, {name: content} in msgpack: no pickle, no archive.


def save_bilm(elmo, tokenizer, path: str | Path) -> None:
    """Writes the biLM and its tokenizer as a model directory (no model card: it lives inside a pipeline)."""
    from ...hf.model_directory import save_model_directory

    save_model_directory(path, elmo, tokenizer, card=False)


def load_bilm(path: str | Path, device: torch.device | None = None):
    """(biLM in eval mode, tokenizer) from the local model directory `path` (safetensors only).

    A broken directory raises `ElmoLoadError` naming the file and the problem. A directory
    without tokenizer files (written by 0.1.0) gets the UTF-8 tokenizer.
    """
    from ...hf.model_directory import default_tokenizer
    from ...hf.modeling_elmo import ElmoModel
    from ...hf.tokenization_elmo import ElmoTokenizer

    elmo = ElmoModel.from_pretrained(str(path), local_files_only=True, use_safetensors=True)
    has_tokenizer = (Path(path) / "tokenizer_config.json").is_file()
    tokenizer = ElmoTokenizer.from_pretrained(str(path)) if has_tokenizer else default_tokenizer(elmo)
    return elmo.to(device or get_torch_default_device()).eval(), tokenizer


def bilm_to_bytes(elmo, tokenizer) -> bytes:
    """msgpack({"files": {name: content}}) of the directory `save_bilm` writes ({"files": None} for no biLM)."""
    if elmo is None:
        return srsly.msgpack_dumps({"files": None})
    with tempfile.TemporaryDirectory() as tmp:
        save_bilm(elmo, tokenizer, tmp)
        files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir()) if p.is_file()}
    return srsly.msgpack_dumps({"files": files})


def bilm_from_bytes(data: bytes, device: torch.device | None = None):
    """(biLM, tokenizer) serialized by `bilm_to_bytes` ((None, None) if it held none), read by `load_bilm`.

    Also reads release 0.1.0's bytes, {"config": config.json text, "weights": safetensors}.
    """
    from ...hf.model_directory import ElmoLoadError

    msg = srsly.msgpack_loads(data)
    if not isinstance(msg, dict) or not ("files" in msg or "config" in msg):
        raise ElmoLoadError("elmo bytes: not a serialized biLM (expected msgpack with 'files')")
    if "files" in msg:
        files = msg["files"]
    elif msg["config"] is None:
        files = None
    else:
        files = {"config.json": msg["config"].encode("utf8"), "model.safetensors": msg.get("weights", b"")}
    if files is None:
        return None, None
    with tempfile.TemporaryDirectory() as tmp:
        for name, content in files.items():
            if not isinstance(name, str) or name in ("", ".", "..") or Path(name).name != name:
                raise ElmoLoadError(f"elmo bytes: invalid file name {name!r}")
            (Path(tmp) / name).write_bytes(content)
        try:
            return load_bilm(tmp, device)
        except (ElmoLoadError, OSError) as err:  # name the bytes, not the temporary directory
            raise ElmoLoadError(str(err).replace(tmp, "elmo bytes")) from None


def _serialize_stack(stack: ElmoLayerStack) -> bytes:
    return bilm_to_bytes(stack.elmo, stack.tokenizer)


def _deserialize_stack(stack: ElmoLayerStack, data: bytes, device) -> ElmoLayerStack:
    elmo, tokenizer = bilm_from_bytes(data, device)
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


# --- segmentation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """Tokens [start, end) of Doc `doc` run as one biLM sequence; [keep_start, keep_end) is used."""

    doc: int
    start: int
    end: int
    keep_start: int
    keep_end: int

    def __len__(self) -> int:
        return self.end - self.start


def window_spans(start: int, end: int, size: int, overlap: int) -> list[tuple[int, int, int, int]]:
    """(start, end, keep_start, keep_end) windows of at most `size` tokens covering [start, end).

    Neighbouring windows share `overlap` tokens (more for the last one, which is moved back to be
    full length); each shared token is kept from the window where it is further from the edge.
    """
    if end - start <= size:
        return [(start, end, start, end)]
    starts = list(range(start, end - size + 1, size - overlap))
    if starts[-1] + size < end:
        starts.append(end - size)
    spans = []
    for i, s in enumerate(starts):
        keep_start = start if i == 0 else (s + starts[i - 1] + size) // 2
        keep_end = end if i == len(starts) - 1 else (starts[i + 1] + s + size) // 2
        spans.append((s, s + size, keep_start, keep_end))
    return spans


def _splits_by_sentence(doc: Doc, max_length: int) -> bool:
    return len(doc) > max_length and doc.has_annotation("SENT_START")


def plan_segments(docs: Sequence[Doc], max_length: int, overlap: int) -> list[Segment]:
    """Segments for each Doc: itself, or (past `max_length`) its sentences / overlapping windows."""
    segments = []
    for i, doc in enumerate(docs):
        if len(doc) == 0:
            continue
        parts = [(s.start, s.end) for s in doc.sents] if _splits_by_sentence(doc, max_length) else [(0, len(doc))]
        for start, end in parts:
            for span in window_spans(start, end, max_length, overlap):
                segments.append(Segment(i, *span))
    return segments


def doc_key(model: Model, doc: Doc):
    """Cache key of `doc` for this biLM layer: the token texts (+ sentence starts if they split it)."""
    words = [t.text for t in doc]
    if _splits_by_sentence(doc, model.attrs["max_length"]):
        return doc_cache_key(words, [s.start for s in doc.sents])
    return doc_cache_key(words)


# --- the thinc layer ----------------------------------------------------------------------------


def build_bilm(
    name: str | None,
    *,
    max_batch_tokens: int = 4096,
    max_length: int = 256,
    window_overlap: int = 64,
    mixed_precision: bool = False,
    grad_scaler_config: dict[str, Any] | None = None,
) -> Model[list[Doc], list[Floats3d]]:
    """Docs → one [L+1, len(doc), dim] array per Doc from the biLM found at `name` (loaded lazily)."""
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if not 0 <= window_overlap < max_length:
        raise ValueError(f"window_overlap must be in [0, max_length), got {window_overlap} (max_length={max_length})")
    if max_batch_tokens < 1:
        raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
    scaler_cfg = dict(grad_scaler_config or {})
    scaler_cfg.setdefault("enabled", mixed_precision)
    # thinc's PyTorchWrapper_v3, with the shim that writes optimizer steps in place (torch_shim.py)
    wrapper: Model[Any, Any] = Model(
        "pytorch",
        pytorch_forward,
        attrs={"convert_inputs": _convert_inputs, "convert_outputs": _convert_outputs},
        shims=[
            InPlaceUpdateShim(
                ElmoLayerStack(),
                mixed_precision=mixed_precision,
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
            "name": name,
            "max_batch_tokens": int(max_batch_tokens),
            "max_length": int(max_length),
            "window_overlap": int(window_overlap),
        },
    )


def _stack(model: Model) -> ElmoLayerStack:
    return model.layers[0].shims[0]._model


def set_elmo_model(model: Model, elmo, tokenizer=None) -> None:
    """Puts a loaded `ElmoModel` (and its tokenizer; default: the one it has, or the UTF-8 one)
    into the layer (on the current thinc device) and sets nO / nL."""
    from ...hf.model_directory import default_tokenizer

    stack = _stack(model)
    if tokenizer is None:
        tokenizer = stack.tokenizer if stack.tokenizer is not None and stack.elmo is elmo else default_tokenizer(elmo)
    tokenizer.check_model(elmo.config)
    stack.elmo, stack.tokenizer = elmo.to(get_torch_default_device()).eval(), tokenizer
    model.set_dim("nO", int(elmo.config.output_dim), force=True)
    model.set_dim("nL", int(elmo.config.num_layers) + 1, force=True)


def get_elmo_model(model: Model, load: bool = True):
    """The torch `ElmoModel` inside the layer, loading it from `name` first if needed (`load`)."""
    stack = _stack(model)
    if stack.elmo is None and load:
        set_elmo_model(model, *_load(model))
    elif stack.elmo is not None and not model.has_dim("nO"):
        set_elmo_model(model, stack.elmo, stack.tokenizer)
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


def _name(model: Model) -> str:
    name = model.attrs.get("name")
    if not name:
        raise ElmoSettingError(title=f"elmo: no biLM: {_SETTING} is not set")
    return str(name)


def check_source(model: Model) -> None:
    """Checks cheaply (no weights read, no download, no network) what the layer's `name` names
    that is here: an existing path must hold a valid model, a URL must be well formed, a hub id in
    the local cache must be an ELMo model. A name of nothing here (no such path, a hub id not
    cached) passes: a saved pipeline's config keeps naming the files its biLM came from after they
    are gone, and its weights come from `from_disk` / `from_bytes`; the layer cannot tell that
    leftover from a typo, so the typo fails when the weights are first needed (`get_elmo_model`).
    Raises `ElmoSettingError`, one line naming the setting."""
    from ...formats.references import ModelAbsentError, ModelNotFoundError, parse_reference

    if _stack(model).elmo is not None:
        return
    name = _name(model)
    try:
        parse_reference(name).check()
    except ModelAbsentError:
        pass
    # ValueError: broken legacy files (LegacyFormatError); OSError: a malformed URL (DownloadError)
    except (ModelNotFoundError, ValueError, OSError) as err:
        raise ElmoSettingError(title=f"{_SETTING}: {err}") from None


def _load(model: Model):
    """(model, tokenizer) of the layer's `name` (`references.load_pretrained`); a name of nothing
    (or of no valid model) is one `ElmoSettingError` line naming the setting."""
    from ...formats.references import ModelNotFoundError, load_pretrained

    try:
        return load_pretrained(_name(model))
    except ModelNotFoundError as err:
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
    segments = plan_segments(docs, model.attrs["max_length"], model.attrs["window_overlap"])
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
    "Segment",
    "build_bilm",
    "bilm_from_bytes",
    "bilm_to_bytes",
    "check_source",
    "get_elmo_model",
    "get_tokenizer",
    "load_bilm",
    "save_bilm",
    "plan_segments",
    "predict_cached",
    "set_elmo_model",
    "window_spans",
]
