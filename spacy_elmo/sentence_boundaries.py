"""The sentence start / end tokens the biLM runs over (Peters et al., 2018, §3.1: the forward LM
predicts each next token, the backward LM each previous one, across `<S>` w_1 … w_N `</S>`).

`add_sentence_boundaries` wraps a batch of character ids (and word ids) in them before the biLM
reads it; `lm_targets` lays out, over the same wrapped positions, what each direction predicts.
The ids themselves (UTF-8 `<S>` / `</S>`, a lexicon's `<bos>` / `<eos>`, the word lexicon's 0 and
1) are `characters.py`'s.
"""

from __future__ import annotations

import torch

from .characters import WORD_BOS, WORD_EOS, sentence_boundaries


def add_sentence_boundaries(
    char_ids: torch.Tensor, mask: torch.Tensor, word_ids: torch.Tensor | None = None, char_lexicon: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Wraps each row in sentence start / end tokens: [batch, time, chars] → [batch, time + 2, chars]
    (`<S>` … `</S>` in UTF-8 character ids, or the lexicon's `<bos>` … `<eos>`); word ids
    [batch, time] likewise, with the word lexicon's sentence start / end ids."""
    batch, steps, max_chars = char_ids.shape
    lengths = mask.sum(dim=1)
    rows = torch.arange(batch, device=char_ids.device)
    start, end = (torch.from_numpy(ids).to(char_ids) for ids in sentence_boundaries(char_lexicon, max_chars))
    out = char_ids.new_zeros(batch, steps + 2, max_chars)
    out[:, 1 : steps + 1] = char_ids * mask.unsqueeze(-1).to(char_ids.dtype)
    out[:, 0] = start
    out[rows, lengths + 1] = end
    new_mask = torch.arange(steps + 2, device=mask.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)
    if word_ids is not None:
        words = word_ids.new_zeros(batch, steps + 2)
        words[:, 1 : steps + 1] = word_ids * mask.to(word_ids.dtype)
        words[:, 0] = WORD_BOS
        words[rows, lengths + 1] = WORD_EOS
        word_ids = words
    return out, new_mask, word_ids


def lm_targets(
    word_ids: torch.Tensor, mask: torch.Tensor, bos: int = WORD_BOS, eos: int = WORD_EOS
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward and backward LMs' targets over the boundary-wrapped sequence ([batch, tokens + 2],
    −100 = none) for [batch, tokens] word ids: position k predicts k + 1 (forward), k − 1 (backward)."""
    batch, steps = word_ids.shape
    lengths = mask.sum(dim=1)
    rows = torch.arange(batch, device=word_ids.device)
    full = word_ids.new_full((batch, steps + 2), -100)
    full[:, 1 : steps + 1] = torch.where(mask.bool(), word_ids, torch.full_like(word_ids, -100))
    full[:, 0] = bos
    full[rows, lengths + 1] = eos
    fwd = full.new_full(full.shape, -100)
    bwd = full.new_full(full.shape, -100)
    fwd[:, :-1] = full[:, 1:]  # position k predicts k + 1
    bwd[:, 1:] = full[:, :-1]  # position k predicts k − 1
    # only real positions (<S> … </S>) predict: the padding right after </S> must not predict </S>
    inside = torch.arange(steps + 2, device=word_ids.device).unsqueeze(0) <= (lengths + 1).unsqueeze(1)
    bwd = bwd.masked_fill(~inside, -100)
    return fwd, bwd


__all__ = ["add_sentence_boundaries", "lm_targets"]
