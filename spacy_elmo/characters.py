"""Words to the ids the biLM reads: each word's character ids, and (for models with a word
embedding) its word id. numpy only.

Two character sets, both with id 0 padding whole tokens (a zero embedding row):

* UTF-8 bytes (bilm-tf, AllenNLP): a word is its UTF-8 bytes cut to `max_chars - 2`, framed by
  begin/end-of-word markers and padded with the in-word padding marker, +1 shifted: bytes are
  1..256, then `<S>` 257, `</S>` 258, begin-of-word 259, end-of-word 260, padding 261. The words
  `<S>` and `</S>` are the sentence markers.
* A character lexicon (ELMoForManyLangs; `char_vocab.json` of the tokenizer): 1 = in-word
  padding, 2 = begin-of-word, 3 = end-of-word, 4 = sentence start, 5 = sentence end, 6 = unknown
  character, 7… the lexicon's characters (char_vocab.json names the reserved ids `<pad>`, `<bow>`,
  `<eow>`, `<bos>`, `<eos>`, `<oov>`). A word is cut to `max_chars - 2` *characters*; the words
  `<bos>` and `<eos>` are the sentence markers (as in ELMoForManyLangs).

A word lexicon (`word_vocab.json`) maps words to the rows of the model's word embedding: 0 =
sentence start, 1 = sentence end, 2 = unknown word (the LM vocabulary's `<S>`, `</S>`, `<UNK>`
ids), 3… words. A word is looked up as cut to `max_chars - 2` characters, as EFML's runtime does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy

# Raw (unshifted) ids of the bilm-tf character vocabulary: bytes are 0..255.
BOS_CHAR = 256  # begin of sentence
EOS_CHAR = 257  # end of sentence
BOW_CHAR = 258  # begin of word
EOW_CHAR = 259  # end of word
PAD_CHAR = 260  # padding inside a word
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"

# Character-lexicon ids (as the model reads them) and their names in char_vocab.json
LEXICON_PAD, LEXICON_BOW, LEXICON_EOW, LEXICON_BOS, LEXICON_EOS, LEXICON_OOV = 1, 2, 3, 4, 5, 6
LEXICON_SPECIALS = {"<pad>": 1, "<bow>": 2, "<eow>": 3, "<bos>": 4, "<eos>": 5, "<oov>": 6}
LEXICON_SENTENCE_MARKERS = {"<bos>": LEXICON_BOS, "<eos>": LEXICON_EOS}  # these words are the markers
# Word-lexicon ids (the LM vocabulary's <S>, </S>, <UNK>)
WORD_BOS, WORD_EOS, WORD_UNK = 0, 1, 2


class LexiconError(ValueError):
    """A character or word lexicon that does not follow the layout above."""


def _marked(chars: Sequence[int] | numpy.ndarray, size: int, bow: int, eow: int, pad: int) -> numpy.ndarray:
    ids = numpy.full(size, pad, dtype=numpy.int64)
    ids[0] = bow
    ids[1 : 1 + len(chars)] = chars
    ids[1 + len(chars)] = eow
    return ids


def word_to_char_ids(word: str, max_chars: int = 50) -> numpy.ndarray:
    """UTF-8 character ids of one word (already +1 shifted): `<S>`/`</S>` map to the sentence markers.

    Words are encoded as UTF-8 (unpaired surrogates are replaced) and cut to `max_chars - 2` bytes.
    """
    data: Sequence[int] | numpy.ndarray
    if word in (BOS_TOKEN, EOS_TOKEN):
        data = [(BOS_CHAR if word == BOS_TOKEN else EOS_CHAR) + 1]
    else:
        data = (
            numpy.frombuffer(word.encode("utf-8", errors="replace")[: max_chars - 2], dtype=numpy.uint8).astype(
                numpy.int64
            )
            + 1
        )
    return _marked(data, max_chars, BOW_CHAR + 1, EOW_CHAR + 1, PAD_CHAR + 1)


class Utf8Characters:
    """Words → UTF-8 character ids (the bilm-tf character set)."""

    lexicon = None

    def __init__(self, max_chars: int = 50):
        self.max_chars = max_chars

    def encode(self, word: str) -> numpy.ndarray:
        return word_to_char_ids(word, self.max_chars)

    def sentence_boundaries(self) -> tuple[numpy.ndarray, numpy.ndarray]:
        return self.encode(BOS_TOKEN), self.encode(EOS_TOKEN)


def check_lexicon(lexicon: Mapping[str, int], reserved: Mapping[str, int], first_id: int, what: str) -> None:
    """A lexicon's ids are first_id.. without gaps or repeats, with `reserved` names at their ids."""
    if not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in lexicon.items()):
        raise LexiconError(f"{what}: expected a mapping of strings to integer ids")
    ids = sorted(lexicon.values())
    if ids != list(range(first_id, first_id + len(ids))):
        seen, repeated = set(), None
        for i in ids:
            if i in seen:
                repeated = i
                break
            seen.add(i)
        problem = (
            f"id {repeated} is used twice"
            if repeated is not None
            else f"ids must be {first_id}..{first_id + len(ids) - 1} without gaps"
        )
        raise LexiconError(f"{what}: {problem}")
    for name, index in reserved.items():
        found = [k for k, v in lexicon.items() if v == index]
        if found != [name]:
            raise LexiconError(f"{what}: id {index} must be {name!r}, found {found[0] if found else 'nothing'!r}")


class LexiconCharacters:
    """Words → character-lexicon ids (ELMoForManyLangs-style models)."""

    def __init__(self, lexicon: Mapping[str, int], max_chars: int = 50):
        check_lexicon(lexicon, LEXICON_SPECIALS, 1, "char_vocab")
        self.lexicon = dict(lexicon)
        self.max_chars = max_chars

    @property
    def size(self) -> int:
        """Rows of the model's character embedding: the lexicon plus the token-padding row 0."""
        return len(self.lexicon) + 1

    def encode(self, word: str) -> numpy.ndarray:
        marker = LEXICON_SENTENCE_MARKERS.get(word)
        if marker is not None:
            chars = [marker]
        else:
            get = self.lexicon.get
            chars = [get(c, LEXICON_OOV) for c in word[: self.max_chars - 2]]
        return _marked(chars, self.max_chars, LEXICON_BOW, LEXICON_EOW, LEXICON_PAD)

    def sentence_boundaries(self) -> tuple[numpy.ndarray, numpy.ndarray]:
        return lexicon_sentence_boundaries(self.max_chars)


def lexicon_sentence_boundaries(max_chars: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """The character rows of the sentence start and end tokens of a character-lexicon model."""
    start, end = (
        _marked([marker], max_chars, LEXICON_BOW, LEXICON_EOW, LEXICON_PAD) for marker in (LEXICON_BOS, LEXICON_EOS)
    )
    return start, end


def sentence_boundaries(char_lexicon: bool, max_chars: int) -> tuple[numpy.ndarray, numpy.ndarray]:
    """The character rows of the sentence start / end tokens for a model's character set."""
    return lexicon_sentence_boundaries(max_chars) if char_lexicon else Utf8Characters(max_chars).sentence_boundaries()


class WordLexicon:
    """Words → rows of the model's word embedding (unknown words → 2)."""

    def __init__(self, lexicon: Mapping[str, int], max_chars: int = 50):
        check_lexicon(lexicon, {}, 0, "word_vocab")
        if len(lexicon) < 3:
            raise LexiconError(
                "word_vocab: needs at least the sentence start, sentence end and unknown-word entries (ids 0-2)"
            )
        self.lexicon = dict(lexicon)
        self.max_chars = max_chars

    @property
    def size(self) -> int:
        return len(self.lexicon)

    def encode(self, word: str) -> int:
        return self.lexicon.get(word[: self.max_chars - 2], WORD_UNK)


class TokenEncoder:
    """Batches of words → padded character ids [batch, tokens, max_chars], mask [batch, tokens] and,
    with a word lexicon, word ids [batch, tokens] (0 at padding). Remembers up to `cache_size`
    encoded words."""

    def __init__(
        self,
        characters: Utf8Characters | LexiconCharacters,
        words: WordLexicon | None = None,
        cache_size: int = 200_000,
    ):
        self.characters, self.words, self.cache_size = characters, words, cache_size
        self._cache: OrderedDict[str, tuple[numpy.ndarray, int]] = OrderedDict()

    @property
    def max_chars(self) -> int:
        return self.characters.max_chars

    def encode_word(self, word: str) -> tuple[numpy.ndarray, int]:
        hit = self._cache.get(word)
        if hit is None:
            hit = (self.characters.encode(word), self.words.encode(word) if self.words is not None else 0)
            if len(self._cache) >= self.cache_size:
                self._cache.popitem(last=False)
            self._cache[word] = hit
        return hit

    def __call__(self, sentences: Sequence[Sequence[str]]) -> tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray | None]:
        max_len = max((len(s) for s in sentences), default=0)
        ids = numpy.zeros((len(sentences), max_len, self.max_chars), dtype=numpy.int64)
        mask = numpy.zeros((len(sentences), max_len), dtype=bool)
        word_ids = numpy.zeros((len(sentences), max_len), dtype=numpy.int64) if self.words is not None else None
        for i, sentence in enumerate(sentences):
            for j, word in enumerate(sentence):
                ids[i, j], word_id = self.encode_word(word)
                if word_ids is not None:
                    word_ids[i, j] = word_id
            mask[i, : len(sentence)] = True
        return ids, mask, word_ids


def batch_to_char_ids(sentences: Sequence[Sequence[str]], max_chars: int = 50) -> tuple[numpy.ndarray, numpy.ndarray]:
    """UTF-8 character ids [batch, max_len, max_chars] and mask [batch, max_len] of tokenized
    sentences (`TokenEncoder` over `Utf8Characters`)."""
    ids, mask, _ = TokenEncoder(Utf8Characters(max_chars))(sentences)
    return ids, mask


__all__ = [
    "BOS_TOKEN",
    "EOS_TOKEN",
    "LEXICON_SPECIALS",
    "LexiconCharacters",
    "LexiconError",
    "TokenEncoder",
    "Utf8Characters",
    "WordLexicon",
    "batch_to_char_ids",
    "check_lexicon",
    "sentence_boundaries",
    "word_to_char_ids",
]
