"""The LM's word vocabulary (bilm-tf's vocab.txt: `<S>`, `</S>`, `<UNK>`, then words by falling
frequency): built by pretraining, read by `similar` for its candidate words."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from .atomic_files import write_text_atomic
from .modeling_elmo import ElmoForBidirectionalLM

# the LM head's fixed ids (ElmoForBidirectionalLM): the sentence markers and the unknown word
BOS_ID, EOS_ID, UNK_ID = ElmoForBidirectionalLM.BOS_ID, ElmoForBidirectionalLM.EOS_ID, ElmoForBidirectionalLM.UNK_ID
SPECIAL_TOKENS = ("<S>", "</S>", "<UNK>")


class Vocabulary:
    """Word ↔ id for the LM softmax: `<S>`, `</S>`, `<UNK>` first, then words by falling frequency.

    `counts` (only for a vocabulary built from data) holds each id's training count; `<S>`/`</S>`
    count the sequences and `<UNK>` the words left out, which is what `unigram_perplexity` needs.
    """

    def __init__(self, words: Sequence[str], counts: Sequence[int] | None = None):
        words = list(words)
        if tuple(words[:3]) != SPECIAL_TOKENS:
            raise ValueError(f"a vocabulary must start with {SPECIAL_TOKENS}, got {words[:3]}")
        self.words = words
        self.index = {word: i for i, word in enumerate(words)}
        if len(self.index) != len(words):
            raise ValueError("vocabulary has duplicate words")
        self.counts = None if counts is None else [int(c) for c in counts]

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def encode(self, tokens: Sequence[str]) -> list[int]:
        get = self.index.get
        return [get(token, UNK_ID) for token in tokens]

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_count: int = 1, max_size: int = 0) -> Vocabulary:
        """Counts words in `sentences`; keeps those seen `min_count` times, at most `max_size` ids in all."""
        counter: Counter = Counter()
        n_sequences = 0
        for sentence in sentences:
            counter.update(sentence)
            n_sequences += 1
        for token in SPECIAL_TOKENS:  # the markers are never words of the text
            counter.pop(token, None)
        ranked = sorted((item for item in counter.items() if item[1] >= min_count), key=lambda wc: (-wc[1], wc[0]))
        if max_size:
            ranked = ranked[: max(0, max_size - len(SPECIAL_TOKENS))]
        kept = sum(count for _, count in ranked)
        counts = [n_sequences, n_sequences, sum(counter.values()) - kept] + [count for _, count in ranked]
        return cls(list(SPECIAL_TOKENS) + [word for word, _ in ranked], counts)

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        """Reads a bilm-tf vocab.txt (one word per line); `<S>`, `</S>`, `<UNK>` are moved (or added) to the front."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"vocabulary file not found: {path}")
        with open(path, encoding="utf-8", errors="replace") as handle:
            words = [line.strip() for line in handle]
        words = [w for w in dict.fromkeys(words) if w and w not in SPECIAL_TOKENS]
        if not words:
            raise ValueError(f"{path}: the vocabulary file has no words")
        return cls(list(SPECIAL_TOKENS) + words)

    def save(self, path: str | Path) -> Path:
        """Writes one word per line (bilm-tf / AllenNLP format), atomically."""
        return write_text_atomic(path, "\n".join(self.words) + "\n")


__all__ = ["SPECIAL_TOKENS", "BOS_ID", "EOS_ID", "UNK_ID", "Vocabulary"]
