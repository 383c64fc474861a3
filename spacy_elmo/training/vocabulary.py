"""What pretraining derives from the text: the LM's word vocabulary (bilm-tf's vocab.txt: `<S>`,
`</S>`, `<UNK>`, then words by falling frequency; `similar` reads it for its candidate words), a
character lexicon, and the unigram perplexity that a trained biLM should beat by far."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy

from ..files import write_text_atomic
from ..hf.modeling_elmo import ElmoForBidirectionalLM

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


def build_char_lexicon(sequences: Iterable[Sequence[str]], max_chars: int, min_count: int = 1) -> dict[str, int]:
    """A character lexicon (`spacy_elmo.characters` layout: the reserved names at ids 1-6, then the
    characters of the words, as cut to `max_chars - 2`, seen `min_count` times, by falling frequency)."""
    from ..characters import LEXICON_SPECIALS

    counter: Counter = Counter()
    for sequence in sequences:
        for word in sequence:
            counter.update(word[: max_chars - 2])
    ranked = sorted((item for item in counter.items() if item[1] >= min_count), key=lambda cc: (-cc[1], cc[0]))
    lexicon = dict(LEXICON_SPECIALS)
    for char, _ in ranked:
        if char not in lexicon:
            lexicon[char] = len(lexicon) + 1
    return lexicon


def unigram_perplexity(vocab: Vocabulary, sequences: Iterable[Sequence[str]]) -> float:
    """Perplexity of `sequences` under the training unigram distribution of a built vocabulary.

    Scored like the biLM: each direction predicts the words plus one boundary (`</S>` or `<S>`),
    so this is the baseline a trained model's bidirectional perplexity should beat by far.
    """
    if vocab.counts is None:
        raise ValueError("unigram_perplexity needs a vocabulary built from data (with counts)")
    counts = numpy.asarray(vocab.counts, dtype=numpy.float64)
    counts[UNK_ID] += 1.0  # unseen words must not get probability 0
    log_p = numpy.log(counts) - math.log(counts[EOS_ID] + counts[UNK_ID:].sum())
    nll, n = 0.0, 0
    for sequence in sequences:
        ids = vocab.encode(sequence)
        nll -= float(log_p[ids].sum()) + float(log_p[EOS_ID])
        n += len(ids) + 1
    return math.exp(nll / max(n, 1))


__all__ = ["SPECIAL_TOKENS", "BOS_ID", "EOS_ID", "UNK_ID", "Vocabulary", "build_char_lexicon", "unigram_perplexity"]
