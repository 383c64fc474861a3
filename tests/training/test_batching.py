"""One padded-size batcher: pretraining (`training.batches.pack_by_length`) and the spaCy biLM layer
both use spaCy's `minibatch_by_padded_size`: rows × longest row ≤ budget, every sequence once."""

from __future__ import annotations

import random

from spacy_elmo.training.batches import Corpus, pack_by_length
from spacy_elmo.training.vocabulary import SPECIAL_TOKENS, Vocabulary


def test_pretraining_batches_respect_the_padded_budget(tmp_path):
    rng = random.Random(0)
    sequences = [["w"] * rng.randint(1, 60) for _ in range(500)] + [["long"] * 400]
    batches = pack_by_length(sequences, 300)
    assert sorted(map(len, (s for b in batches for s in b))) == sorted(map(len, sequences))
    assert all(len(b) * max(map(len, b)) <= 300 or len(b) == 1 for b in batches)
    assert len(batches) < 200  # similar lengths share batches (the budget is mostly used)
    assert pack_by_length([], 300) == []

    text = tmp_path / "train.txt"
    text.write_text("\n".join(" ".join(s) for s in sequences[:200]) + "\n")
    corpus = Corpus([text], Vocabulary([*SPECIAL_TOKENS, "w"]), batch_tokens=300, max_tokens=100, max_epochs=1)
    shapes = [tuple(b.mask.shape) for b, _ in corpus.batches()] + [tuple(b.mask.shape) for b in corpus.eval_batches()]
    assert shapes and all(rows * steps <= 300 for rows, steps in shapes)
