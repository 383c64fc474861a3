"""Registered thinc architectures of the spaCy integration (entry point `spacy_architectures`), and
the segmenters the biLM layer can use (`registry.misc`, entry point `spacy_misc`).

- `spacy-elmo.ElmoBiLM.v2`: the `elmo` component's model — Docs → all biLM layers per Doc, each
  Doc cut into the sequences the biLM runs by a registered `segmenter`.
- `spacy-elmo.ElmoBiLM.v1`: the same layer with the default segmenter's settings as its own
  arguments and autocast called `mixed_precision`.
- `spacy-elmo.ElmoListener.v1`: tok2vec for downstream components, listening to `elmo`.
- `spacy-elmo.ElmoTok2Vec.v1`: tok2vec with its own biLM (no shared `elmo` component).
- `spacy-elmo.ElmoEmbed.v1`: an `embed` block for spacy.Tok2Vec.v2 — ELMo enters *below* the
  context encoder (as spaCy's static vectors do), so the encoder's windows see neighbours' ELMo.
- `spacy-elmo.ScalarMix.v1`: the learned scalar mix on its own.
- `spacy-elmo.sentences_or_windows.v1` (the default) and `spacy-elmo.windows.v1`: segmenters
  (`layers/segmentation.py`).

The `elmo` factory and the `spacy-elmo.training_layer_cache.v1` callback are registered in
`component.py`, beside the component they make and set up.
"""

from __future__ import annotations

from typing import Any

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Maxout, Model, chain, with_array
from thinc.types import Floats2d, Floats3d

from ..constants import MAX_BATCH_TOKENS, MAX_LENGTH, WINDOW_OVERLAP
from .layers.bilm import build_bilm
from .layers.listener import ElmoListener
from .layers.scalar_mix import build_scalar_mix
from .layers.segmentation import Segmenter, SentencesOrWindows, Windows
from .layers.tok2vec import BiLMLayers, build_elmo_features


@registry.architectures("spacy-elmo.ElmoBiLM.v2")
def ElmoBiLM_v2(
    name: str | None = None,
    max_batch_tokens: int = MAX_BATCH_TOKENS,
    segmenter: Segmenter | None = None,
    autocast: bool = False,
    # {} (not None): the default is what spaCy fills into configs; it is only read (build_bilm copies it)
    grad_scaler_config: dict[str, Any] = {},  # noqa: B006
) -> Model[list[Doc], list[Floats3d]]:
    """The biLM (a thinc `PyTorchWrapper` on the device of thinc's current ops).

    name: an HF directory, a hub id, a legacy "options.json,weights.hdf5" pair (or a directory
        holding both), an ELMoForManyLangs directory or a URL; loaded on first use unless the
        pipeline brings its own saved weights.
    max_batch_tokens: padded tokens per biLM batch (sequences are sorted by length first).
    segmenter: `Doc → segments`, a function from `registry.misc` (null:
        `spacy-elmo.sentences_or_windows.v1` with its defaults).
    autocast: torch autocast in the biLM (on GPU; with a gradient scaler configured by
        grad_scaler_config). Not the inference precision: that is the `elmo` component's `precision`.
    """
    return build_bilm(
        name,
        max_batch_tokens=max_batch_tokens,
        segmenter=segmenter,
        autocast=autocast,
        grad_scaler_config=grad_scaler_config,
    )


@registry.architectures("spacy-elmo.ElmoBiLM.v1")
def ElmoBiLM_v1(
    name: str | None = None,
    max_batch_tokens: int = MAX_BATCH_TOKENS,
    max_length: int = MAX_LENGTH,
    window_overlap: int = WINDOW_OVERLAP,
    mixed_precision: bool = False,
    # {} (not None): the default is what spaCy fills into configs; it is only read (build_bilm copies it)
    grad_scaler_config: dict[str, Any] = {},  # noqa: B006
) -> Model[list[Doc], list[Floats3d]]:
    """`spacy-elmo.ElmoBiLM.v2` with the segmenter `spacy-elmo.sentences_or_windows.v1`.

    max_length: longer Docs run sentence by sentence (if sentences are set) or in windows.
    window_overlap: tokens shared by neighbouring windows.
    mixed_precision: v2's `autocast`.
    """
    return build_bilm(
        name,
        max_batch_tokens=max_batch_tokens,
        segmenter=SentencesOrWindows(max_length, window_overlap),
        autocast=mixed_precision,
        grad_scaler_config=grad_scaler_config,
    )


@registry.architectures("spacy-elmo.ElmoListener.v1")
def ElmoListener_v1(
    upstream: str = "*",
    grad_factor: float = 1.0,
    dropout: float = 0.0,
    l2: float = 0.001,
    tok2vec: Model[list[Doc], list[Floats2d]] | None = None,
) -> Model[list[Doc], list[Floats2d]]:
    """Token vectors from the upstream `elmo` component, mixed with this component's own weights.

    upstream: name of the `elmo` component ("*" = any).
    grad_factor: scale of the gradient sent into the biLM (only used when `elmo` is trained,
        i.e. not in [training] frozen_components); 0 keeps the biLM fixed.
    dropout: dropout on the mixed ELMo vectors while training.
    l2: λ of the λ‖s‖² penalty on the layer weights s.
    tok2vec: optional extra features (e.g. spacy.Tok2Vec.v2 with MultiHashEmbed and
        MaxoutWindowEncoder), concatenated after the ELMo vector.
    """
    source = ElmoListener(upstream, grad_factor=grad_factor)
    return build_elmo_features(source, build_scalar_mix(dropout=dropout, l2=l2), tok2vec)


@registry.architectures("spacy-elmo.ElmoTok2Vec.v1")
def ElmoTok2Vec_v1(
    bilm: Model[list[Doc], list[Floats3d]],
    freeze: bool = True,
    cache_mb: float = 0.0,
    dropout: float = 0.0,
    l2: float = 0.001,
    tok2vec: Model[list[Doc], list[Floats2d]] | None = None,
) -> Model[list[Doc], list[Floats2d]]:
    """Token vectors from a biLM owned by this component (`bilm`: a spacy-elmo.ElmoBiLM.v2 or v1 block).

    freeze: never update the biLM (and allow the `cache_mb` layer cache, in MB).
    dropout, l2, tok2vec: as in spacy-elmo.ElmoListener.v1.
    """
    source = BiLMLayers(bilm, freeze=freeze, cache_mb=cache_mb)
    return build_elmo_features(source, build_scalar_mix(dropout=dropout, l2=l2), tok2vec)


@registry.architectures("spacy-elmo.ElmoEmbed.v1")
def ElmoEmbed_v1(
    width: int,
    embed: Model[list[Doc], list[Floats2d]],
    upstream: str = "*",
    grad_factor: float = 1.0,
    dropout: float = 0.0,
    l2: float = 0.001,
) -> Model[list[Doc], list[Floats2d]]:
    """[ELMo_k ; embed_k] → Maxout(width) per token, for the `embed` slot of spacy.Tok2Vec.v2.

    Like MultiHashEmbed's `include_static_vectors`, but with the token's learned mix of the
    upstream `elmo` component's layers: the encoder that follows (e.g. MaxoutWindowEncoder) then
    combines neighbouring tokens' ELMo vectors. upstream, grad_factor, dropout, l2: as in
    spacy-elmo.ElmoListener.v1; width: the output width (the encoder's width).
    """
    source = ElmoListener(upstream, grad_factor=grad_factor)
    features = build_elmo_features(source, build_scalar_mix(dropout=dropout, l2=l2), embed)
    model = chain(features, with_array(Maxout(nO=width, nP=3, dropout=0.0, normalize=True)))
    model.set_dim("nO", width)
    return model


@registry.architectures("spacy-elmo.ScalarMix.v1")
def ScalarMix_v1(dropout: float = 0.0, l2: float = 0.001) -> Model[list[Floats3d], list[Floats2d]]:
    """γ · Σ_j softmax(s)_j · layer_j per Doc: [L+1, n, dim] → [n, dim]."""
    return build_scalar_mix(dropout=dropout, l2=l2)


@registry.misc("spacy-elmo.sentences_or_windows.v1")
def sentences_or_windows_v1(max_length: int = MAX_LENGTH, window_overlap: int = WINDOW_OVERLAP) -> Segmenter:
    """The default segmenter: the whole Doc up to `max_length` tokens; past it, its sentences when
    they are set, else the Doc, each cut into windows of `max_length` overlapping by `window_overlap`."""
    return SentencesOrWindows(max_length, window_overlap)


@registry.misc("spacy-elmo.windows.v1")
def windows_v1(max_length: int = MAX_LENGTH, window_overlap: int = WINDOW_OVERLAP) -> Segmenter:
    """Windows of `max_length` tokens overlapping by `window_overlap`, ignoring sentences."""
    return Windows(max_length, window_overlap)


__all__ = [
    "ElmoBiLM_v1",
    "ElmoBiLM_v2",
    "ElmoListener_v1",
    "ElmoTok2Vec_v1",
    "ElmoEmbed_v1",
    "ScalarMix_v1",
    "sentences_or_windows_v1",
    "windows_v1",
]
