"""Kept for `training/pretrain.py`'s `from .distributed import Distributed`: the torchrun/device
set-up lives in `spacy_elmo.devices` (shared with the tools); new code imports it from there."""

from ..devices import DEVICES, Distributed, pick_device

__all__ = ["Distributed", "DEVICES", "pick_device"]
