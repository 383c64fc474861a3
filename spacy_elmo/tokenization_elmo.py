"""`ElmoTokenizer`: pre-tokenized sentences → character ids [batch, tokens, max_chars] + attention mask."""

from __future__ import annotations

from typing import Sequence

import torch
from transformers import BatchEncoding, PreTrainedTokenizer

from .characters import BOS_CHAR, BOW_CHAR, EOS_CHAR, EOW_CHAR, PAD_CHAR, batch_to_char_ids


_CHAR_VOCAB = {"<pad>": 0, **{f"<0x{b:02X}>": b + 1 for b in range(256)}}
_CHAR_VOCAB.update(
    {name: char + 1 for name, char in (("<S>", BOS_CHAR), ("</S>", EOS_CHAR), ("<bow>", BOW_CHAR), ("<eow>", EOW_CHAR), ("<cpad>", PAD_CHAR))}
)
_CHAR_NAMES = {i: name for name, i in _CHAR_VOCAB.items()}


class ElmoTokenizer(PreTrainedTokenizer):
    """Character tokenizer for ELMo. Takes lists of words (or strings, split on whitespace).

    There is no word vocabulary: every word is spelled as its UTF-8 bytes, so nothing is ever
    unknown. The only setting is `max_characters_per_token` (saved in tokenizer_config.json).
    """

    model_input_names = ["input_ids", "attention_mask"]
    vocab_files_names: dict = {}

    def __init__(self, max_characters_per_token: int = 50, **kwargs):
        if not isinstance(max_characters_per_token, int) or max_characters_per_token < 3:
            raise ValueError(f"max_characters_per_token must be an int >= 3, got {max_characters_per_token!r}")
        self.max_characters_per_token = max_characters_per_token
        super().__init__(max_characters_per_token=max_characters_per_token, **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(_CHAR_VOCAB)

    def get_vocab(self) -> dict[str, int]:
        """The character id space: 0 pads, bytes are 1..256, then the markers."""
        return dict(_CHAR_VOCAB)

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        return text.split()

    def _convert_token_to_id(self, token: str) -> int:
        return _CHAR_VOCAB.get(token, 0)

    def _convert_id_to_token(self, index: int) -> str:
        return _CHAR_NAMES.get(index, "<pad>")

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        return ()  # the character space is fixed; settings live in tokenizer_config.json

    def __call__(
        self,
        sentences: str | Sequence[str] | Sequence[Sequence[str]],
        return_tensors: str | None = "pt",
        **kwargs,
    ) -> BatchEncoding:
        """Encodes one sentence or a batch: a string is split on whitespace; a list of strings is one
        tokenized sentence; a list of lists is a batch. Returns `input_ids` and `attention_mask`."""
        batch = _as_batch(sentences)
        ids, mask = batch_to_char_ids(batch, self.max_characters_per_token)
        data = {"input_ids": ids, "attention_mask": mask}
        if return_tensors == "pt":
            data = {k: torch.from_numpy(v) for k, v in data.items()}
        elif return_tensors not in (None, "np"):
            raise ValueError(f"return_tensors must be 'pt', 'np' or None, got {return_tensors!r}")
        return BatchEncoding(data)


def _as_batch(sentences) -> list[list[str]]:
    if isinstance(sentences, str):
        return [sentences.split()]
    sentences = list(sentences)
    if not sentences:
        return []
    if all(isinstance(s, str) for s in sentences):
        return [sentences]
    batch = []
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str):
            sentence = sentence.split()
        sentence = list(sentence)
        for word in sentence:
            if not isinstance(word, str):
                raise ValueError(f"sentence {i}: tokens must be str, got {type(word).__name__} ({word!r})")
        batch.append(sentence)
    return batch


__all__ = ["ElmoTokenizer"]
