"""Thinc layers of the spaCy integration: the biLM layer, the listener, the scalar mix, features."""

from .bilm import build_bilm, get_elmo_model, predict_cached, set_elmo_model
from .listener import ElmoListener
from .scalar_mix import build_scalar_mix
from .tok2vec import BiLMLayers, build_elmo_features

__all__ = [
    "BiLMLayers",
    "ElmoListener",
    "build_bilm",
    "build_elmo_features",
    "build_scalar_mix",
    "get_elmo_model",
    "predict_cached",
    "set_elmo_model",
]
