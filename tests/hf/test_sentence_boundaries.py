"""The sentence boundaries and the LM targets over them (paper §3.1; modeling_elmo's "sentence
boundaries" section), on a ragged batch, against values written out by hand from the definition:
each row is read as `<S>` w1 … wN `</S>`, then padding; the forward LM at position k predicts the
token at k + 1, the backward LM the one at k − 1; nothing predicts from or into padding."""

from __future__ import annotations

import torch

from spacy_elmo.hf.modeling_elmo import add_sentence_boundaries, lm_targets

X = -100  # no target
JUNK = 99  # what padded positions hold in the inputs: never read
LENGTHS = (3, 1, 5)
# word ids 0 = <S>, 1 = </S>; the sentences' words are 10 11 12 | 20 | 30 31 32 33 34
WORDS = torch.tensor(
    [
        [10, 11, 12, JUNK, JUNK],
        [20, JUNK, JUNK, JUNK, JUNK],
        [30, 31, 32, 33, 34],
    ]
)
MASK = torch.tensor([[i < n for i in range(5)] for n in LENGTHS])
# the boundary-wrapped rows, 7 positions:  <S> w… </S> (padding)
WRAPPED_MASK = [
    [True, True, True, True, True, False, False],
    [True, True, True, False, False, False, False],
    [True, True, True, True, True, True, True],
]


def test_boundaries_wrap_each_sentence_at_its_own_length():
    max_chars = 5
    # a word's character row is its word id repeated (enough to tell the rows apart)
    chars = WORDS.unsqueeze(-1).expand(-1, -1, max_chars).clone()
    wrapped, mask, words = add_sentence_boundaries(chars, MASK, WORDS)
    assert mask.tolist() == WRAPPED_MASK
    assert words is not None
    # <S> = 0 and </S> = 1 at each row's own ends; padding is 0 (the mask says it is not a token)
    assert words.tolist() == [
        [0, 10, 11, 12, 1, 0, 0],
        [0, 20, 1, 0, 0, 0, 0],
        [0, 30, 31, 32, 33, 34, 1],
    ]
    # UTF-8 character rows (+1 shifted): begin-of-word 259, <S> 257 / </S> 258, end-of-word 260,
    # in-word padding 261; a padding token is all 0 (the embedding's zero row)
    start, end, pad = [259, 257, 260, 261, 261], [259, 258, 260, 261, 261], [0] * max_chars
    expected = [
        [start, [10] * 5, [11] * 5, [12] * 5, end, pad, pad],
        [start, [20] * 5, end, pad, pad, pad, pad],
        [start, [30] * 5, [31] * 5, [32] * 5, [33] * 5, [34] * 5, end],
    ]
    assert wrapped.tolist() == expected


def test_lm_targets_of_a_ragged_batch():
    forward, backward = lm_targets(WORDS, MASK)
    # forward: <S> predicts w1, …, wN predicts </S>; </S> and padding predict nothing
    assert forward.tolist() == [
        [10, 11, 12, 1, X, X, X],
        [20, 1, X, X, X, X, X],
        [30, 31, 32, 33, 34, 1, X],
    ]
    # backward: w1 predicts <S>, …, </S> predicts wN; <S> and padding predict nothing (the first
    # padding position, right after </S>, must not predict </S>)
    assert backward.tolist() == [
        [X, 0, 10, 11, 12, X, X],
        [X, 0, 20, X, X, X, X],
        [X, 0, 30, 31, 32, 33, 34],
    ]
    # both LMs predict only from real positions, the same number of targets (N + 1 per sentence)
    padded = ~torch.tensor(WRAPPED_MASK)
    for targets in (forward, backward):
        assert (targets[padded] == X).all()
        assert int((targets != X).sum()) == sum(n + 1 for n in LENGTHS)
