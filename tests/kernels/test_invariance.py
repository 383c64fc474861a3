"""Guarantees about batching, as the README states them: a sentence's vectors do not depend on the
other sentences in its batch, their order or the padding (HF and spaCy faces), and a long spaCy
document's stitched vectors are the per-window model outputs."""

from __future__ import annotations

import random

import numpy
import pytest
import spacy
import torch

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo.characters import batch_to_char_ids
from spacy_elmo.formats.references import load_model
from spacy_elmo.spacy.layers.segmentation import window_spans


def _close(got, want, exact, config) -> None:
    """Another evaluation order (batch, padding) than `want`'s rounds differently: `got` is as close
    to the exact (float64) vectors as `want` is, up to float32_error's factor."""
    assert_float32_error(numpy.asarray(exact), numpy.asarray(want), numpy.asarray(got), terms=forward_terms(config))


def _sentences(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = ["the", "cat", "sat", "on", "mat", "Obama", "Berlin", "é", "x" * 70, "<S>", ",", "."]
    return [[rng.choice(words) for _ in range(rng.randint(0, 14))] for _ in range(count)]


def _layers(model, sentences, width: int | None = None) -> list[numpy.ndarray]:
    ids, mask = batch_to_char_ids(sentences)
    ids, mask = torch.from_numpy(ids), torch.from_numpy(mask)
    if width is not None and width > ids.shape[1]:  # extra padding columns
        ids = torch.cat([ids, ids.new_zeros(ids.shape[0], width - ids.shape[1], ids.shape[2])], dim=1)
        mask = torch.cat([mask, mask.new_zeros(mask.shape[0], width - mask.shape[1])], dim=1)
    with torch.no_grad():
        out = torch.stack(model(ids, mask).hidden_states, dim=1).numpy()
    return [out[i, :, : len(s)] for i, s in enumerate(sentences)]


@pytest.mark.parametrize("implementation", ["packed", "eager"])
def test_hf_vectors_ignore_batch_order_and_padding(tiny_model, implementation):
    tiny_model.config.lstm_implementation = implementation
    try:
        sentences = _sentences(17, seed=0)
        alone = [_layers(tiny_model, [s])[0] for s in sentences]
        exact = [_layers(exact_copy(tiny_model), [s])[0] for s in sentences]
        order = list(range(len(sentences)))
        for seed in range(3):
            random.Random(seed).shuffle(order)
            permuted = _layers(tiny_model, [sentences[i] for i in order], width=40 + seed)
            for position, index in enumerate(order):
                _close(permuted[position], alone[index], exact[index], tiny_model.config)
    finally:
        tiny_model.config.lstm_implementation = "auto"


def test_spacy_vectors_ignore_batch_order_and_batch_size(tiny_model_dir, one_torch_thread):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    texts = [" ".join(s) for s in _sentences(40, seed=1)]
    reference = {text: doc._.elmo.layers for text, doc in zip(texts, nlp.pipe(texts, batch_size=1))}
    model = load_model(tiny_model_dir)
    exact_model = exact_copy(model)
    exact = {text: _layers(exact_model, [[t.text for t in nlp.make_doc(text)]])[0] for text in texts}
    shuffled = texts[:]
    random.Random(2).shuffle(shuffled)
    for batch_size in (3, 64):
        for text, doc in zip(shuffled, nlp.pipe(shuffled, batch_size=batch_size)):
            _close(doc._.elmo.layers, reference[text], exact[text], model.config)


def _from_cut(token: int, start: int, end: int, length: int) -> float:
    return min(token - start if start > 0 else float("inf"), end - 1 - token if end < length else float("inf"))


def test_long_documents_are_stitched_from_the_per_window_outputs(tiny_model_dir, one_torch_thread):
    """Each token's vectors come from the window where it is furthest from an edge."""
    size, overlap = 24, 8
    nlp = spacy.blank("en")
    nlp.add_pipe(
        "elmo",
        config={
            "model": {
                "@architectures": "spacy-elmo.ElmoBiLM.v1",
                "name": str(tiny_model_dir),
                "max_length": size,
                "window_overlap": overlap,
            }
        },
    )
    rng = random.Random(3)
    words = [rng.choice(["the", "cat", "sat", "on", "a", "mat", "and", "then", "slept", ","]) for _ in range(101)]
    doc = nlp(" ".join(words))
    assert len(doc) == len(words)
    model = load_model(tiny_model_dir)
    exact_model = exact_copy(model)
    spans = window_spans(0, len(words), size, overlap)
    assert len(spans) > 3
    expected = numpy.zeros_like(doc._.elmo.layers)
    exact = numpy.zeros(expected.shape)
    for start, end, keep_start, keep_end in spans:
        for out, bilm in ((expected, model), (exact, exact_model)):
            window = _layers(bilm, [words[start:end]])[0]
            out[:, keep_start:keep_end] = window[:, keep_start - start : keep_end - start]
        # a token is kept from the window where it is furthest from a cut (the document's own
        # start and end are no cuts)
        for token in range(keep_start, keep_end):
            assert _from_cut(token, start, end, len(words)) == max(
                _from_cut(token, s, e, len(words)) for s, e, _, _ in spans if s <= token < e
            )
    _close(doc._.elmo.layers, expected, exact, model.config)
