"""`spacy-elmo similar MODEL WORD`: nearest vocabulary words by cosine over context-independent token vectors.

Token vectors are the biLM's layer 0 (char CNN + highway + projection), so any word, in the
vocabulary or not, gets a vector; the candidates are the words of the model's `vocab.txt` (saved by
`spacy-elmo pretrain`) or of a `--vocab` file.
"""

from __future__ import annotations

from pathlib import Path

import numpy
import torch

from ..characters import word_to_char_ids
from .data import SPECIAL_TOKENS, Vocabulary


def find_vocab(model_ref: str | Path, vocab_file: str | Path | None = None) -> Vocabulary:
    """`vocab_file`, else `vocab.txt` next to the model (HF directory or legacy directory)."""
    if vocab_file is not None:
        return Vocabulary.load(vocab_file)
    text = str(model_ref)
    candidates = [Path(text) / "vocab.txt"]
    if "," in text:  # "OPTIONS.json,WEIGHTS.hdf5"
        candidates.append(Path(text.split(",", 1)[0]).parent / "vocab.txt")
    for path in candidates:
        if path.is_file():
            return Vocabulary.load(path)
    raise FileNotFoundError(f"{model_ref} has no vocab.txt; pass the word list with --vocab FILE")


@torch.no_grad()
def token_vectors(model, words: list[str], batch_size: int = 2048) -> torch.Tensor:
    """[len(words), projection_dim] context-independent vectors (float32, CPU)."""
    max_chars = model.config.max_characters_per_token
    device = next(model.parameters()).device
    parts = []
    for start in range(0, len(words), batch_size):
        ids = numpy.stack([word_to_char_ids(w, max_chars) for w in words[start : start + batch_size]])
        parts.append(model.embed_tokens(torch.from_numpy(ids).to(device)).float().cpu())
    return torch.cat(parts) if parts else torch.zeros(0, model.config.projection_dim)


def most_similar(model, word: str, vocab: Vocabulary, n: int = 10) -> list[tuple[str, float]]:
    """The `n` vocabulary words closest to `word` by cosine similarity (the word itself excluded)."""
    candidates = [w for w in vocab.words if w not in SPECIAL_TOKENS and w != word]
    if not candidates:
        return []
    vectors = torch.nn.functional.normalize(token_vectors(model, candidates), dim=-1)
    query = torch.nn.functional.normalize(token_vectors(model, [word]), dim=-1)[0]
    scores = vectors @ query
    top = torch.topk(scores, min(n, len(candidates)))
    return [(candidates[i], float(s)) for s, i in zip(top.values.tolist(), top.indices.tolist())]


__all__ = ["find_vocab", "token_vectors", "most_similar"]
