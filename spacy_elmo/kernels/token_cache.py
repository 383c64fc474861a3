"""A bounded LRU of context-independent token vectors, keyed by a word's character ids."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import cast

import numpy
import torch

from .weights import weights_key


class TokenEmbeddingCache:
    """Token vectors (char CNN + highway + projection output) per distinct word.

    Used by `ElmoModel` only in eval mode without gradients.  Any change to the tensors the vectors
    were computed from (in-place update, reload, `.to()`) clears it; where such changes cannot be
    detected, nothing is cached.
    """

    def __init__(self, max_words: int = 20_000):
        if max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {max_words}")
        self.max_words = int(max_words)
        self.hits = self.misses = 0
        self.clear()

    def clear(self) -> None:
        self._slots: OrderedDict[bytes, int] = OrderedDict()
        self._free: list[int] = []
        self._store: torch.Tensor | None = None
        self._fingerprint: tuple | None = None

    def __len__(self) -> int:
        return len(self._slots)

    def _grow(self, needed: int, like: torch.Tensor) -> None:
        size = 0 if self._store is None else self._store.shape[0]
        if needed <= size:
            return
        new_size = min(self.max_words, max(needed, 2 * size, 1024))
        with torch.inference_mode(False):  # a normal tensor: usable under no_grad and inference_mode
            store = torch.empty(new_size, like.shape[-1], device=like.device, dtype=like.dtype)
            if self._store is not None:
                store[:size] = self._store
        self._free.extend(range(new_size - 1, size - 1, -1))
        self._store = store

    def lookup(
        self, weights: Sequence[torch.Tensor], char_ids: torch.Tensor, compute: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """Token vectors for `char_ids` [N, max_chars] computed from `weights`; misses go through
        `compute` (one call)."""
        fingerprint = weights_key(*weights)
        if fingerprint is None or fingerprint != self._fingerprint:
            self.clear()
            self._fingerprint = fingerprint
            if fingerprint is None:
                return compute(char_ids)
        n = char_ids.shape[0]
        if n == 0 or int(char_ids.min()) < 0 or int(char_ids.max()) > 32767:
            return compute(char_ids)
        array = char_ids.to("cpu", torch.int16).numpy()
        # one bytes object per row (tolist of a void array)
        keys = cast(
            list[bytes],
            numpy.ascontiguousarray(array).view(numpy.dtype((numpy.void, 2 * array.shape[1]))).ravel().tolist(),
        )
        slots = self._slots
        hit_pos: list[int] = []
        hit_slot: list[int] = []
        first: list[int] = []
        missing: dict[bytes, int] = {}
        miss_pos: list[int] = []
        miss_idx: list[int] = []
        for pos, key in enumerate(keys):
            slot = slots.get(key)
            if slot is not None:
                slots.move_to_end(key)
                hit_pos.append(pos)
                hit_slot.append(slot)
                continue
            index = missing.get(key)
            if index is None:
                index = missing[key] = len(first)
                first.append(pos)
            miss_pos.append(pos)
            miss_idx.append(index)
        self.hits += len(hit_pos)
        self.misses += len(first)
        device = char_ids.device
        if not first:
            assert self._store is not None, "every word was a hit: stored"
            return self._store.index_select(0, torch.tensor(hit_slot, device=device))
        fresh = compute(char_ids.index_select(0, torch.tensor(first, device=device)))
        out = fresh.new_empty(n, fresh.shape[-1])
        if hit_pos:
            assert self._store is not None, "hits are stored"
            out[torch.tensor(hit_pos, device=device)] = self._store.index_select(
                0, torch.tensor(hit_slot, device=device)
            )
        out[torch.tensor(miss_pos, device=device)] = fresh.index_select(0, torch.tensor(miss_idx, device=device))
        # insert the new words, evicting the least recently used ones not seen in this batch
        protected = len(set(hit_slot))
        room = self.max_words - protected
        new_keys = list(missing)[: max(room, 0)]
        if new_keys:
            self._grow(min(self.max_words, len(slots) + len(new_keys)), fresh)
            new_slots = []
            for key in new_keys:
                if not self._free:
                    _, slot = slots.popitem(last=False)
                    self._free.append(slot)
                slot = self._free.pop()
                slots[key] = slot
                new_slots.append(slot)
            assert self._store is not None, "_grow made it"
            self._store[torch.tensor(new_slots, device=device)] = fresh[: len(new_keys)]
        return out
