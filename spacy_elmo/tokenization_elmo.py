"""`ElmoTokenizer`: raw text (split by spaCy's tokenizer) or pre-tokenized sentences → character
ids [batch, tokens, max_chars] + attention mask."""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import torch
from transformers import BatchEncoding, PreTrainedTokenizer

from .characters import BOS_CHAR, BOW_CHAR, EOS_CHAR, EOW_CHAR, PAD_CHAR, batch_to_char_ids


_CHAR_VOCAB = {"<pad>": 0, **{f"<0x{b:02X}>": b + 1 for b in range(256)}}
_CHAR_VOCAB.update(
    {name: char + 1 for name, char in (("<S>", BOS_CHAR), ("</S>", EOS_CHAR), ("<bow>", BOW_CHAR), ("<eow>", EOW_CHAR), ("<cpad>", PAD_CHAR))}
)
_CHAR_NAMES = {i: name for name, i in _CHAR_VOCAB.items()}


class ElmoTokenizer(PreTrainedTokenizer):
    """Character tokenizer for ELMo: raw text or pre-tokenized sentences → character ids.

    Raw text is split into words the way spaCy's tokenizer for `lang` splits it (`spacy.blank(lang)`;
    whitespace tokens are dropped), so the HF face and the spaCy component see the same words.
    Pre-tokenized input (`is_split_into_words=True`, or lists of words) is used as given.
    There is no word vocabulary: every word is spelled as its UTF-8 bytes, so nothing is ever
    unknown. Settings (saved in tokenizer_config.json): `max_characters_per_token`, `lang`.
    """

    model_input_names = ["input_ids", "attention_mask"]
    vocab_files_names: dict = {}

    def __init__(self, max_characters_per_token: int = 50, lang: str = "en", **kwargs):
        if not isinstance(max_characters_per_token, int) or max_characters_per_token < 3:
            raise ValueError(f"max_characters_per_token must be an int >= 3, got {max_characters_per_token!r}")
        if not isinstance(lang, str) or not lang:
            raise ValueError(f"lang must be a spaCy language code such as 'en', got {lang!r}")
        self.max_characters_per_token = max_characters_per_token
        self.lang = lang
        super().__init__(max_characters_per_token=max_characters_per_token, lang=lang, **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(_CHAR_VOCAB)

    def get_vocab(self) -> dict[str, int]:
        """The character id space: 0 pads, bytes are 1..256, then the markers."""
        return dict(_CHAR_VOCAB)

    def split_words(self, text: str) -> list[str]:
        """The words of raw `text`, as spaCy's tokenizer for `lang` splits it (no whitespace tokens)."""
        return spacy_word_splitter(self.lang)(text)

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return self.split_words(text)

    def _convert_token_to_id(self, token: str) -> int:
        return _CHAR_VOCAB.get(token, 0)

    def _convert_id_to_token(self, index: int) -> str:
        return _CHAR_NAMES.get(index, "<pad>")

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return ()  # the character space is fixed; settings live in tokenizer_config.json

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        return_tensors: str | None = "pt",
        is_split_into_words: bool = False,
        **kwargs,
    ) -> BatchEncoding:
        """Encodes one text or a batch. Returns `input_ids` and `attention_mask`.

        - a string: one raw text, split by spaCy's tokenizer for `lang`;
        - a list of strings: a batch of raw texts; with `is_split_into_words=True`, one
          pre-tokenized sentence (its words);
        - a list of lists of strings: a batch of pre-tokenized sentences.
        """
        batch = self._as_batch(text, is_split_into_words)
        ids, mask = batch_to_char_ids(batch, self.max_characters_per_token)
        data = {"input_ids": ids, "attention_mask": mask}
        if return_tensors == "pt":
            data = {k: torch.from_numpy(v) for k, v in data.items()}
        elif return_tensors not in (None, "np"):
            raise ValueError(f"return_tensors must be 'pt', 'np' or None, got {return_tensors!r}")
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


@lru_cache(maxsize=None)
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
