"""Reference parity: our biLM reproduces the outputs stored with the AllenNLP and bilm-tf fixtures."""

from __future__ import annotations

import json

import h5py
import numpy
import pytest
import torch

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import load_legacy
from spacy_elmo.characters import batch_to_char_ids

CASES = {"allennlp": ("allennlp_elmo", "sentences.json"), "bilm_tf": ("bilm_tf/model", "lm_embeddings_sentences.json")}
# The layers each fixture holds reference values for (tests/fixtures/*/README.md): both hold the top layer (2)
# of the 30 sentences (`lm_embeddings_{k}.hdf5`); AllenNLP's also holds the token layer (0) of every word in
# them (`elmo_token_embeddings.hdf5`, rows of `vocab_test.txt`). Neither holds layer 1.
HELD_LAYERS = {"allennlp": (0, 2), "bilm_tf": (2,)}


def _reference(fixtures_dir, name):
    """(folder, model, sentences[k][i]) of one reference fixture."""
    folder, sentence_file = CASES[name]
    d = fixtures_dir / folder
    return d, load_legacy(d / "options.json", d / "lm_weights.hdf5"), json.loads((d / sentence_file).read_text())


def _expected_layers(d, name):
    """{layer: function (k, i, words) -> [len(words), 2 * projection] reference} for the layers the fixture holds."""
    top = [h5py.File(d / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    layers = {2: lambda k, i, words: numpy.concatenate(list(top[k][str(i)][...]), axis=-1)}  # [forward; backward]
    if (d / "elmo_token_embeddings.hdf5").is_file():
        rows = (d / "vocab_test.txt").read_text().split("\n")
        table = h5py.File(d / "elmo_token_embeddings.hdf5", "r")["embedding"][...]
        vectors = {word: table[r] for r, word in enumerate(rows)}
        # layer 0 is the context-independent token vector, the same for both directions
        layers[0] = lambda k, i, words: numpy.stack([numpy.concatenate([vectors[w], vectors[w]]) for w in words])
    return layers


@pytest.mark.parametrize("implementation", ["eager", "packed"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_all_30_sentences_match_every_layer_the_fixtures_hold(fixtures_dir, name, implementation):
    """Both LSTM kernels reproduce every reference layer of every sentence, with state carried per row."""
    d, model, sentences = _reference(fixtures_dir, name)
    model.config.lstm_implementation = implementation
    expected = _expected_layers(d, name)
    assert sorted(expected) == list(HELD_LAYERS[name])
    state, compared, worst = None, {layer: 0 for layer in expected}, 0.0
    for i in range(10):  # batch i = row k of each list, run in order with per-row state carried
        batch = [sentences[k][i].split() for k in range(3)]
        ids, mask = batch_to_char_ids(batch)
        with torch.no_grad():
            out = model(torch.from_numpy(ids), torch.from_numpy(mask), initial_state=state, return_state=True)
        state = out.state
        assert out.attention_mask.sum(1).tolist() == [len(s) for s in batch]
        assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
        for k in range(3):
            for layer, reference in expected.items():
                ref = reference(k, i, batch[k])
                got = out.hidden_states[layer][k, : len(batch[k])].numpy()
                assert got.shape == ref.shape
                worst = max(worst, float(numpy.abs(got - ref).max()))
                compared[layer] += 1
    assert compared == {layer: 30 for layer in HELD_LAYERS[name]}
    assert worst <= 1e-5, worst


@pytest.mark.parametrize("name", sorted(CASES))
def test_without_state_only_first_batch_matches(fixtures_dir, name):
    """Stateless default: batch 0 (zero initial state) matches; later batches need the carried state."""
    d, model, sentences = _reference(fixtures_dir, name)
    ref_file = h5py.File(d / "lm_embeddings_0.hdf5", "r")
    errors = []
    for i in (0, 5):
        words = sentences[0][i].split()
        ids, mask = batch_to_char_ids([words])
        with torch.no_grad():
            got = model(torch.from_numpy(ids)).last_hidden_state[0].numpy()
        ref = numpy.concatenate(list(ref_file[str(i)][...]), axis=-1)
        errors.append(float(numpy.abs(got - ref).max()))
    assert errors[0] <= 1e-5
    assert errors[1] > 1e-3


def test_all_458_token_embeddings_match(allennlp_dir, tiny_model):
    words = (allennlp_dir / "vocab_test.txt").read_text().split("\n")
    assert len(words) == 458
    expected = h5py.File(allennlp_dir / "elmo_token_embeddings.hdf5", "r")["embedding"][...]
    ids, _ = batch_to_char_ids([words])
    with torch.no_grad():
        got = tiny_model.embed_tokens(torch.from_numpy(ids[0])).numpy()
    assert got.shape == (458, 16)
    assert numpy.abs(got - expected).max() <= 1e-5


def test_boundary_tokens_equal_explicit_tokens(tiny_model):
    """The boundary vectors the model inserts are the char CNN's for explicit `<S>`/`</S>` tokens
    (another path through the char CNN: within float32 rounding of the float64 vectors, as those are)."""
    ids, _ = batch_to_char_ids([["<S>", "a", "</S>"]])
    with torch.no_grad():
        explicit = tiny_model.embed_tokens(torch.from_numpy(ids[0]))
        exact = exact_copy(tiny_model).embed_tokens(torch.from_numpy(ids[0]))
        out = tiny_model(torch.from_numpy(ids[:, 1:2]), keep_sentence_boundaries=True)
    layer0 = out.hidden_states[0][0, :, :16]
    for row in (0, 2):
        assert_float32_error(
            exact[row], explicit[row], layer0[row], terms=forward_terms(tiny_model.config), what=f"row {row}"
        )


def test_batch_invariance_and_padding(tiny_model, fixtures_dir):
    sentences = json.loads((fixtures_dir / "allennlp_elmo" / "sentences.json").read_text())
    batch = [s.split() for s in sentences[0] + sentences[1]]
    ids, mask = batch_to_char_ids(batch)
    exact_model = exact_copy(tiny_model)
    with torch.no_grad():
        together = tiny_model(torch.from_numpy(ids), torch.from_numpy(mask)).hidden_states
        for i, words in enumerate(batch):
            alone_ids, _ = batch_to_char_ids([words])
            alone = tiny_model(torch.from_numpy(alone_ids)).hidden_states
            exact = exact_model(torch.from_numpy(alone_ids)).hidden_states
            # another CPU's GEMM kernels round differently per row count: each layer is as close to
            # the float64 one as the sentence run alone is
            assert_float32_error(
                [layer[0] for layer in exact],
                [layer[0] for layer in alone],
                [layer[i, : len(words)] for layer in together],
                terms=forward_terms(tiny_model.config),
                what=f"sentence {i}",
            )
            for layer_t in together:
                assert torch.all(layer_t[i, len(words) :] == 0)


def test_keep_sentence_boundaries_shapes(tiny_model):
    ids, mask = batch_to_char_ids([["a", "b", "c"], ["d"]])
    with torch.no_grad():
        plain = tiny_model(torch.from_numpy(ids), torch.from_numpy(mask))
        kept = tiny_model(torch.from_numpy(ids), torch.from_numpy(mask), keep_sentence_boundaries=True)
    assert plain.last_hidden_state.shape == (2, 3, 32)
    assert kept.last_hidden_state.shape == (2, 5, 32)
    assert len(plain.hidden_states) == 3
    assert kept.attention_mask.sum(1).tolist() == [5, 3]
    # the same computation: plain is the kept output without its boundary columns, padding zeroed
    assert torch.equal(kept.last_hidden_state[:, 1:4] * plain.attention_mask.unsqueeze(-1), plain.last_hidden_state)
    # layer 0 is the context-independent token vector duplicated for both directions
    assert torch.equal(plain.hidden_states[0][..., :16], plain.hidden_states[0][..., 16:])
