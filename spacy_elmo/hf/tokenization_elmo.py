"""`ElmoTokenizer`: raw text (split by spaCy's tokenizer) or pre-tokenized sentences → character
ids [batch, tokens, max_chars] + attention mask (+ word ids for models with a word embedding)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from functools import cache

import numpy
import torch
from transformers import BatchEncoding, PreTrainedTokenizer

from ..characters import (
    BOS_CHAR,
    BOW_CHAR,
    EOS_CHAR,
    EOW_CHAR,
    PAD_CHAR,
    LexiconCharacters,
    LexiconError,
    TokenEncoder,
    Utf8Characters,
    WordLexicon,
)
from ..constants import CHAR_VOCAB_FILE, WORD_VOCAB_FILE

_UTF8_VOCAB = {"<pad>": 0, **{f"<0x{b:02X}>": b + 1 for b in range(256)}}
_UTF8_VOCAB.update(
    {
        name: char + 1
        for name, char in (
            ("<S>", BOS_CHAR),
            ("</S>", EOS_CHAR),
            ("<bow>", BOW_CHAR),
            ("<eow>", EOW_CHAR),
            ("<cpad>", PAD_CHAR),
        )
    }
)
# what `__call__` takes besides the text (HF's names and meanings); anything else is refused
_PADDING = {True: "longest", "longest": "longest", "max_length": "max_length"}
_TRUNCATION = {True: True, "longest_first": True, "only_first": True, False: False, "do_not_truncate": False}


def _read_vocab(path: str | os.PathLike, what: str) -> dict[str, int]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LexiconError(f"{path}: cannot read the {what} ({err})") from None
    if not isinstance(data, dict):
        raise LexiconError(f"{path}: the {what} must be a JSON object of token → id")
    return data


class ElmoTokenizer(PreTrainedTokenizer):
    """Character tokenizer for ELMo: raw text or pre-tokenized sentences → character ids.

    Raw text is split into words the way spaCy's tokenizer for `lang` splits it (`spacy.blank(lang)`;
    whitespace tokens are dropped), so the HF face and the spaCy component see the same words.
    Pre-tokenized input (`is_split_into_words=True`, or lists of words) is used as given.

    Characters are UTF-8 bytes (nothing is ever unknown), or, for models with a character lexicon
    (ELMoForManyLangs), ids from `char_vocab` (`char_vocab.json`; unknown characters → `<oov>`).
    Models with a word embedding also get `input_word_ids` from `word_vocab` (`word_vocab.json`).
    Settings (saved in tokenizer_config.json): `max_characters_per_token`, `lang`.
    """

    model_input_names = ["input_ids", "attention_mask", "input_word_ids"]
    vocab_files_names = {"char_vocab_file": CHAR_VOCAB_FILE, "word_vocab_file": WORD_VOCAB_FILE}

    def __init__(
        self,
        max_characters_per_token: int = 50,
        lang: str = "en",
        char_vocab: Mapping[str, int] | None = None,
        word_vocab: Mapping[str, int] | None = None,
        char_vocab_file: str | None = None,
        word_vocab_file: str | None = None,
        **kwargs,
    ):
        if not isinstance(max_characters_per_token, int) or max_characters_per_token < 3:
            raise ValueError(f"max_characters_per_token must be an int >= 3, got {max_characters_per_token!r}")
        if not isinstance(lang, str) or not lang:
            raise ValueError(f"lang must be a spaCy language code such as 'en', got {lang!r}")
        if char_vocab is None and char_vocab_file is not None:
            char_vocab = _read_vocab(char_vocab_file, "character lexicon")
        if word_vocab is None and word_vocab_file is not None:
            word_vocab = _read_vocab(word_vocab_file, "word lexicon")
        self.max_characters_per_token = max_characters_per_token
        self.lang = lang
        characters = (
            Utf8Characters(max_characters_per_token)
            if char_vocab is None
            else LexiconCharacters(char_vocab, max_characters_per_token)
        )
        words = None if word_vocab is None else WordLexicon(word_vocab, max_characters_per_token)
        self.encoder = TokenEncoder(characters, words)
        super().__init__(max_characters_per_token=max_characters_per_token, lang=lang, **kwargs)

    @property
    def char_vocab(self) -> dict[str, int] | None:
        """The character lexicon (None: UTF-8 bytes)."""
        return self.encoder.characters.lexicon

    @property
    def word_vocab(self) -> dict[str, int] | None:
        """The word lexicon (None: the model has no word embedding)."""
        return None if self.encoder.words is None else self.encoder.words.lexicon

    @property
    def vocab_size(self) -> int:
        return len(self.get_vocab())

    def get_vocab(self) -> dict[str, int]:
        """The character id space: 0 pads a token; UTF-8 bytes and markers, or the lexicon."""
        lexicon = self.char_vocab
        return dict(_UTF8_VOCAB) if lexicon is None else {"<token-pad>": 0, **lexicon}

    def check_model(self, config) -> None:
        """Raises `ValueError` when this tokenizer cannot feed a model with `config`."""
        problems = []
        if config.max_characters_per_token != self.max_characters_per_token:
            problems.append(
                f"max_characters_per_token {self.max_characters_per_token} "
                f"vs the model's {config.max_characters_per_token}"
            )
        lexicon = self.char_vocab
        if (lexicon is not None) != bool(config.char_vocab_size) or (
            lexicon is not None and len(lexicon) + 1 != config.char_vocab_size
        ):
            have = "UTF-8 bytes" if lexicon is None else f"a character lexicon of {len(lexicon)} + 1 ids"
            want = (
                "UTF-8 bytes" if not config.char_vocab_size else f"a character lexicon of {config.char_vocab_size} ids"
            )
            problems.append(f"characters: {have} vs the model's {want}")
        words = self.word_vocab
        if (len(words) if words is not None else 0) != config.word_vocab_size:
            n_words = len(words) if words is not None else 0
            problems.append(f"word lexicon of {n_words} words vs the model's {config.word_vocab_size}")
        if problems:
            raise ValueError("the tokenizer does not fit the model: " + "; ".join(problems))

    def split_words(self, text: str) -> list[str]:
        """The words of raw `text`, as spaCy's tokenizer for `lang` splits it (no whitespace tokens)."""
        return spacy_word_splitter(self.lang)(text)

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return self.split_words(text)

    def _convert_token_to_id(self, token: str) -> int:
        return self.get_vocab().get(token, 0)

    def _convert_id_to_token(self, index: int) -> str:
        return {i: name for name, i in self.get_vocab().items()}.get(index, "<pad>")

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """The lexicons as JSON (token → id); nothing for UTF-8 bytes without a word embedding."""
        written = []
        for name, lexicon in ((CHAR_VOCAB_FILE, self.char_vocab), (WORD_VOCAB_FILE, self.word_vocab)):
            if lexicon is not None:
                path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + name)
                with open(path, "w", encoding="utf-8") as handle:
                    json.dump(lexicon, handle, ensure_ascii=False, indent=0)
                written.append(path)
        return tuple(written)

    def encode_words(self, sentences: Sequence[Sequence[str]]) -> dict[str, numpy.ndarray]:
        """Pre-tokenized sentences → {"input_ids", "attention_mask"[, "input_word_ids"]} as numpy
        arrays padded to the longest sentence (what the spaCy layer and the tools use)."""
        ids, mask, word_ids = self.encoder(sentences)
        data = {"input_ids": ids, "attention_mask": mask}
        if word_ids is not None:
            data["input_word_ids"] = word_ids
        return data

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        return_tensors: str | None = "pt",
        is_split_into_words: bool = False,
        padding: bool | str = True,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        **kwargs,
    ) -> BatchEncoding:
        """Encodes one text or a batch. Returns `input_ids`, `attention_mask` (and `input_word_ids`).

        - a string: one raw text, split by spaCy's tokenizer for `lang`;
        - a list of strings: a batch of raw texts; with `is_split_into_words=True`, one
          pre-tokenized sentence (its words);
        - a list of lists of strings: a batch of pre-tokenized sentences.

        As HF tokenizers: `padding` True / "longest" (the default: to the longest sentence) or
        "max_length"; `truncation` True / "longest_first" to cut sentences to `max_length` words;
        `pad_to_multiple_of`; `return_tensors` "pt" (default), "np" or None (numpy).
        """
        unknown = sorted(set(kwargs) - {"return_attention_mask", "add_special_tokens", "verbose"})
        if unknown:
            raise TypeError(
                f"ElmoTokenizer got unexpected argument(s) {unknown}; it takes text, is_split_into_words, padding, "
                "truncation, max_length, pad_to_multiple_of and return_tensors"
            )
        if return_tensors not in ("pt", "np", None):
            raise ValueError(f"return_tensors must be 'pt', 'np' or None, got {return_tensors!r}")
        if padding not in _PADDING:
            raise ValueError(
                f"padding={padding!r}: ElmoTokenizer always pads (character ids form one [batch, tokens, chars] "
                "array); use True / 'longest' or 'max_length'"
            )
        if truncation is not None and truncation not in _TRUNCATION:
            raise ValueError(
                f"truncation must be True, False, 'longest_first' or 'do_not_truncate', got {truncation!r}"
            )
        if max_length is not None and (not isinstance(max_length, int) or max_length < 1):
            raise ValueError(f"max_length must be a positive int, got {max_length!r}")
        if pad_to_multiple_of is not None and (not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1):
            raise ValueError(f"pad_to_multiple_of must be a positive int, got {pad_to_multiple_of!r}")
        truncate, pad_to_max = _TRUNCATION.get(truncation, False), _PADDING[padding] == "max_length"
        if (truncate or pad_to_max) and max_length is None:
            raise ValueError("truncation=True and padding='max_length' need max_length (words per sentence)")
        if max_length is not None and not (truncate or pad_to_max):
            raise ValueError("max_length has an effect only with truncation=True or padding='max_length'")
        batch = self._as_batch(text, is_split_into_words)
        if truncate:
            batch = [sentence[:max_length] for sentence in batch]
        data = self.encode_words(batch)
        length = data["attention_mask"].shape[1]
        target = max(length, max_length) if pad_to_max else length
        if pad_to_multiple_of:
            target = math.ceil(target / pad_to_multiple_of) * pad_to_multiple_of
        if target > length:
            data = {k: numpy.pad(v, [(0, 0), (0, target - length)] + [(0, 0)] * (v.ndim - 2)) for k, v in data.items()}
        if return_tensors == "pt":
            return BatchEncoding({k: torch.from_numpy(v) for k, v in data.items()})
        return BatchEncoding(data)

    def _as_batch(self, text, is_split_into_words: bool) -> list[list[str]]:
        if isinstance(text, str):
            if is_split_into_words:
                raise ValueError("is_split_into_words=True expects a list of words (or a batch of them), got a str")
            return [self.split_words(text)]
        items = list(text)
        if all(isinstance(item, str) for item in items):
            return [items] if is_split_into_words and items else [self.split_words(t) for t in items]
        batch = []
        for i, sentence in enumerate(items):
            if isinstance(sentence, str):
                raise ValueError(
                    f"item {i}: a str in a batch of word lists; pass all raw texts (list of str) or all "
                    "pre-tokenized sentences (list of lists of words)"
                )
            sentence = list(sentence)
            for word in sentence:
                if not isinstance(word, str):
                    raise ValueError(f"sentence {i}: tokens must be str, got {type(word).__name__} ({word!r})")
            batch.append(sentence)
        return batch


@cache
def spacy_word_splitter(lang: str = "en") -> Callable[[str], list[str]]:
    """Raw text → words with `spacy.blank(lang).tokenizer` (built once per language), whitespace
    tokens dropped. Used by `ElmoTokenizer` and by pretraining/embedding with `format = "text"`."""
    import spacy

    try:
        tokenizer = spacy.blank(lang).tokenizer
    except ImportError as error:  # spaCy's E048: no such language
        raise ValueError(f"lang {lang!r}: not a language spaCy knows ({error})") from None

    def split(text: str) -> list[str]:
        return [t.text for t in tokenizer(text) if not t.is_space]

    return split


__all__ = ["ElmoTokenizer", "spacy_word_splitter"]
