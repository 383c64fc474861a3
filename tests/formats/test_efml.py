"""ELMoForManyLangs models load exactly: tests/fixtures/efml_tiny (a model built by that package and
its runtime's outputs for 8 sentences) through the HF model (every CPU kernel, several batch
compositions), the spaCy component, `spacy-elmo convert`, and what the package writes back."""

from __future__ import annotations

import json
import shutil

import numpy
import pytest
import spacy
import torch
from spacy.tokens import Doc

import spacy_elmo
from spacy_elmo import ElmoModel, ElmoTokenizer, save_legacy
from spacy_elmo.cli import main
from spacy_elmo.formats.references import load_pretrained
from spacy_elmo.kernels import capabilities

TOL = 1e-5  # the bound, relative to each layer's scale (the reference is float32 too)


@pytest.fixture(scope="module")
def efml_dir(fixtures_dir):
    return fixtures_dir / "efml_tiny"


@pytest.fixture(scope="module")
def reference(efml_dir):
    sentences = json.loads((efml_dir / "sentences.json").read_text(encoding="utf-8"))
    expected = numpy.load(efml_dir / "expected_layers.npz")
    return sentences, [expected[f"sentence_{i}"] for i in range(len(sentences))]


@pytest.fixture(scope="module")
def loaded(efml_dir):
    return load_pretrained(efml_dir)


def _error(got: numpy.ndarray, want: numpy.ndarray) -> float:
    """Largest difference of every layer, relative to that layer's scale (at least 1)."""
    return max(float(numpy.abs(g - w).max()) / max(1.0, float(numpy.abs(w).max())) for g, w in zip(got, want))


def _layers(model, tokenizer, batch: list[list[str]]) -> list[numpy.ndarray]:
    with torch.no_grad():
        out = model(**tokenizer(batch))
    stacked = torch.stack(out.hidden_states).numpy()
    return [stacked[:, row, : len(words)] for row, words in enumerate(batch)]


COMPOSITIONS = {
    "all": lambda n: [list(range(n))],
    "one_by_one": lambda n: [[i] for i in range(n)],
    "reversed_pairs": lambda n: [list(range(n))[::-1][i : i + 2] for i in range(0, n, 2)],
    "long_with_short": lambda n: [[5, 6], [0, 2, 4], [1, 3, 7]],
}


@pytest.mark.parametrize("implementation", ["eager", "packed", "fused", "auto"])
@pytest.mark.parametrize("composition", sorted(COMPOSITIONS))
def test_every_layer_of_every_sentence_matches_the_runtime(loaded, reference, implementation, composition):
    model, tokenizer = loaded
    sentences, expected = reference
    model.config.lstm_implementation = implementation
    try:
        for rows in COMPOSITIONS[composition](len(sentences)):
            got = _layers(model, tokenizer, [sentences[i] for i in rows])
            for row, i in enumerate(rows):
                assert got[row].shape == expected[i].shape, (i, got[row].shape)
                assert _error(got[row], expected[i]) <= TOL, (implementation, composition, i)
    finally:
        model.config.lstm_implementation = "auto"


def test_the_fixture_is_not_trivially_small(reference):
    """The bound above means something: the reference layers are O(1), and they differ per sentence."""
    _, expected = reference
    assert all(float(numpy.abs(layers).max()) > 0.1 for layers in expected)
    assert not numpy.allclose(expected[0][2, 0], expected[7][2, 1])  # "The" in two contexts


def test_the_token_cache_gives_the_same_layers(loaded, reference):
    model, tokenizer = loaded
    sentences, expected = reference
    model.enable_token_cache(1000)
    try:
        for _ in range(2):  # fill, then hit
            for got, want in zip(_layers(model, tokenizer, sentences), expected):
                assert _error(got, want) <= TOL
        assert model.token_cache.hits > 0
    finally:
        model.disable_token_cache()


def test_the_spacy_component_on_the_same_words(efml_dir, reference, tmp_path):
    sentences, expected = reference
    source = tmp_path / "efml"
    shutil.copytree(efml_dir, source)
    nlp = spacy.blank("xx")
    nlp.add_pipe("elmo", config={"model": str(source)})
    docs = [Doc(nlp.vocab, words=words) for words in sentences]
    for doc, want in zip(nlp.pipe(docs, batch_size=3), expected):
        assert _error(doc._.elmo.layers, want) <= TOL
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(source)  # a saved pipeline carries the biLM and its lexicons
    bilm = tmp_path / "pipeline" / "elmo" / "bilm"
    assert {"char_vocab.json", "word_vocab.json", "tokenizer_config.json"} <= {p.name for p in bilm.iterdir()}
    reloaded = spacy.load(tmp_path / "pipeline")
    doc = reloaded(Doc(reloaded.vocab, words=sentences[3]))
    assert _error(doc._.elmo.layers, expected[3]) <= TOL


def test_convert_writes_a_directory_hf_loads_exactly(efml_dir, reference, tmp_path, capsys):
    sentences, expected = reference
    assert main(["convert", str(efml_dir), str(tmp_path / "out"), "--lang", "zh"]) == 0
    out = tmp_path / "out"
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "char_vocab.json",
        "word_vocab.json",
        "README.md",
    } <= {p.name for p in out.iterdir()}
    config = json.loads((out / "config.json").read_text())
    assert config["char_vocab_size"] == 120 and config["word_vocab_size"] == 15 and config["word_embedding_dim"] == 8
    assert config["forget_bias"] == 0.0 and "lstm_implementation" not in config
    from transformers import AutoModel, AutoTokenizer

    model, tokenizer = AutoModel.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out)
    assert isinstance(tokenizer, ElmoTokenizer) and tokenizer.lang == "zh"
    for got, want in zip(_layers(model, tokenizer, sentences), expected):
        assert _error(got, want) <= TOL
    card = (out / "README.md").read_text()
    assert "ELMoForManyLangs" in card and "character lexicon of 120 ids" in card and "word embedding" in card


def test_the_runtime_s_token_rules(loaded):
    """Cut at max_characters_per_token - 2 characters (not bytes), unknown characters → <oov>, the
    words <bos>/<eos> are the sentence markers, and words are looked up as cut."""
    _, tokenizer = loaded
    chars, words = tokenizer.char_vocab, tokenizer.word_vocab
    ids = tokenizer.encode_words([["ü" * 60, "😀", "<bos>", "The", "the", "THE"]])
    row = ids["input_ids"][0]
    assert list(row[0][:2]) == [chars["<bow>"], chars.get("ü", chars["<oov>"])]
    assert row[0][49] == chars["<eow>"] and (row[0][1:49] == row[0][1]).all()  # 48 characters, not 24 two-byte ones
    assert list(row[1][:4]) == [chars["<bow>"], chars["<oov>"], chars["<eow>"], chars["<pad>"]]
    assert list(row[2][:3]) == [chars["<bow>"], chars["<bos>"], chars["<eow>"]]
    assert list(ids["input_word_ids"][0]) == [
        words["<oov>"],
        words["<oov>"],
        words["<bos>"],
        words["The"],
        words["the"],
        words["<oov>"],
    ]
    long_word = "a" * 60
    cut = ElmoTokenizer(max_characters_per_token=50, char_vocab=chars, word_vocab={**words, "a" * 48: len(words)})
    assert cut.encode_words([[long_word]])["input_word_ids"][0, 0] == len(words)


def test_writing_it_back(loaded, tmp_path):
    model, tokenizer = loaded
    with pytest.raises(
        ValueError, match="cannot hold a character lexicon .*, a word embedding .*, forget_bias other than 1"
    ):
        save_legacy(model, tmp_path / "legacy")
    with pytest.raises(ValueError, match="pass the tokenizer"):
        model.save_pretrained(tmp_path / "no_tokenizer")
    model.save_pretrained(tmp_path / "hf", tokenizer=tokenizer)
    again, again_tokenizer = load_pretrained(tmp_path / "hf")
    assert again_tokenizer.char_vocab == tokenizer.char_vocab and again_tokenizer.word_vocab == tokenizer.word_vocab
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))


def test_int8_runs_on_it_with_a_bounded_error(loaded, reference):
    from spacy_elmo.hf.quantization import dequantize, quantize_int8

    model, tokenizer = loaded
    sentences, expected = reference
    quantize_int8(model)
    try:
        got = _layers(model, tokenizer, sentences)
    finally:
        dequantize(model)
    errors = [_error(g, w) for g, w in zip(got, expected)]
    if capabilities.int8_available():
        assert 0 < max(errors) < 0.1  # approximate (int8), and not silently the float path
    else:  # int8 is fp32 on this CPU
        assert max(errors) <= TOL
    assert max(_error(g, w) for g, w in zip(_layers(model, tokenizer, sentences), expected)) <= TOL


def test_a_word_embedding_model_needs_its_word_ids(loaded):
    model, tokenizer = loaded
    batch = tokenizer([["The", "cat"]])
    with pytest.raises(ValueError, match="pass input_word_ids"):
        model(batch["input_ids"], batch["attention_mask"])
    assert "input_word_ids" in batch and tuple(batch["input_word_ids"].shape) == (1, 2)


def test_auto_classes_know_it(efml_dir, tmp_path):
    assert spacy_elmo.ElmoModel is ElmoModel
    model, tokenizer = load_pretrained(efml_dir)
    model.save_pretrained(tmp_path, tokenizer=tokenizer)
    from transformers import pipeline

    extractor = pipeline("feature-extraction", model=str(tmp_path), tokenizer=str(tmp_path))
    vectors = numpy.asarray(extractor("The cat sat ."))
    assert vectors.shape == (1, 4, model.config.output_dim)
