"""Words to ELMo character ids: UTF-8 bytes framed by begin/end-of-word markers, +1 shifted so 0 pads."""

from __future__ import annotations

from typing import Sequence

import numpy

# Raw (unshifted) ids of the bilm-tf character vocabulary: bytes are 0..255.
BOS_CHAR = 256  # begin of sentence
EOS_CHAR = 257  # end of sentence
BOW_CHAR = 258  # begin of word
EOW_CHAR = 259  # end of word
PAD_CHAR = 260  # padding inside a word
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _special(char: int, max_chars: int) -> numpy.ndarray:
    ids = numpy.full(max_chars, PAD_CHAR + 1, dtype=numpy.int64)
    ids[:3] = (BOW_CHAR + 1, char + 1, EOW_CHAR + 1)
    return ids


def word_to_char_ids(word: str, max_chars: int = 50) -> numpy.ndarray:
    """Character ids of one word (already +1 shifted): `<S>`/`</S>` map to the sentence markers.

    Words are encoded as UTF-8 (unpaired surrogates are replaced) and cut to `max_chars - 2` bytes.
    """
    if word == BOS_TOKEN:
        return _special(BOS_CHAR, max_chars)
    if word == EOS_TOKEN:
        return _special(EOS_CHAR, max_chars)
    data = word.encode("utf-8", errors="replace")[: max_chars - 2]
    ids = numpy.full(max_chars, PAD_CHAR + 1, dtype=numpy.int64)
    ids[0] = BOW_CHAR + 1
    ids[1 : 1 + len(data)] = numpy.frombuffer(data, dtype=numpy.uint8).astype(numpy.int64) + 1
    ids[1 + len(data)] = EOW_CHAR + 1
    return ids


def batch_to_char_ids(
    sentences: Sequence[Sequence[str]], max_chars: int = 50, cache: dict[str, numpy.ndarray] | None = None
) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Pads a batch of tokenized sentences to `[batch, max_len, max_chars]` ids and a `[batch, max_len]` mask.

    `cache` (word → ids) is filled and reused, e.g. across the batches of a corpus.
    """
    max_len = max((len(s) for s in sentences), default=0)
    ids = numpy.zeros((len(sentences), max_len, max_chars), dtype=numpy.int64)
    mask = numpy.zeros((len(sentences), max_len), dtype=bool)
    cache = {} if cache is None else cache
    for i, sentence in enumerate(sentences):
        for j, word in enumerate(sentence):
            if word not in cache:
                cache[word] = word_to_char_ids(word, max_chars)
            ids[i, j] = cache[word]
        mask[i, : len(sentence)] = True
    return ids, mask
