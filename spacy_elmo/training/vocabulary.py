"""What pretraining derives from the text beside the word vocabulary (`spacy_elmo.vocabulary`, which
the tools share): a character lexicon, and the unigram perplexity that a trained biLM should beat by far."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy

from ..vocabulary import EOS_ID, UNK_ID, Vocabulary


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


__all__ = ["build_char_lexicon", "unigram_perplexity"]
