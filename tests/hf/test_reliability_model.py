"""Reliability of the HF model and tokenizer: hostile text gives finite vectors; bad saved models fail at load."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from spacy_elmo import ElmoLoadError, ElmoModel, ElmoTokenizer

HOSTILE = {
    "empty sentence": [[]],
    "whitespace tokens": [[" ", "\t", "\n", "\u3000", "\u200b"]],
    "1000-char token": [["x" * 1000, "y"]],
    "non-BMP and emoji": [["🙂", "👩‍👩‍👧", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "🇯🇵"]],
    "combining marks": [["e\u0301", "a\u0308\u0308\u0308", "\u0301"]],
    "control chars and NUL": [["\x00", "\x07\x1b", "a\x00b", "\x7f"]],
    "invalid surrogates": [["\ud800", "a\udfffb", "\udc00\ud800"]],
    "mixed scripts": [["Москва", "東京", "القاهرة", "नमस्ते", "x1"]],
    "literal boundary tokens": [["<S>", "</S>", "<S>", "x"]],
    "empty string token": [["", "a", ""]],
    "mixed batch": [["a"], [], ["🙂", "\x00", "x" * 300]],
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_gives_finite_vectors(tiny_model, name):
    sentences = HOSTILE[name]
    batch = ElmoTokenizer()(sentences)
    with torch.no_grad():
        out = tiny_model(**batch)
    longest = max(len(s) for s in sentences)
    assert out.last_hidden_state.shape == (len(sentences), longest, 32)
    assert len(out.hidden_states) == 3
    for layer in out.hidden_states:
        assert torch.isfinite(layer).all()
    assert out.attention_mask.sum(1).tolist() == [len(s) for s in sentences]


def test_empty_batch(tiny_model):
    with torch.no_grad():
        out = tiny_model(**ElmoTokenizer()([]))
    assert out.last_hidden_state.shape == (0, 0, 32)


def test_long_token_truncated_to_max_characters(tiny_model):
    """A token is spelled by its first max_characters_per_token − 2 bytes."""
    tok = ElmoTokenizer()
    a, b = tok([["x" * 48 + "a"]]), tok([["x" * 48 + "b"]])
    assert torch.equal(a["input_ids"], b["input_ids"])
    assert not torch.equal(tok([["x" * 47 + "a"]])["input_ids"], tok([["x" * 47 + "b"]])["input_ids"])


def test_10000_token_sentence(tiny_model):
    words = [f"w{i % 97}" for i in range(10_000)]
    with torch.no_grad():
        out = tiny_model(**ElmoTokenizer()([words]))
    assert out.last_hidden_state.shape == (1, 10_000, 32)
    assert torch.isfinite(out.last_hidden_state).all()


def test_bad_model_inputs_are_clear_errors(tiny_model):
    with pytest.raises(ValueError, match=r"\[batch, tokens, max_chars\]"):
        tiny_model(torch.zeros(2, 50, dtype=torch.long))
    with pytest.raises(ValueError, match="max_characters_per_token=50"):
        tiny_model(torch.ones(1, 2, 20, dtype=torch.long))
    with pytest.raises(ValueError, match="left-aligned"):
        ids = ElmoTokenizer()([["a", "b"]])["input_ids"]
        tiny_model(ids, torch.tensor([[False, True]]))


def _variant(src, dst, config_edit=None, tensors_edit=None):
    shutil.copytree(src, dst)
    if config_edit:
        data = json.loads((dst / "config.json").read_text())
        config_edit(data)
        (dst / "config.json").write_text(json.dumps(data))
    if tensors_edit:
        tensors = load_file(dst / "model.safetensors")
        tensors_edit(tensors)
        save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.mark.parametrize(
    "config_edit,tensors_edit,message",
    [
        (lambda c: c.update(hidden_size_typo=3), None, r"config.json: unknown field\(s\) \['hidden_size_typo'\]"),
        (
            lambda c: c.update(lstm_dim="big"),
            None,
            r"invalid config.json: field 'lstm_dim': expected int, got str \(value: 'big'\)$",
        ),
        (lambda c: c.update(filters="abc"), None, r"invalid config.json: field 'filters': expected a list, got str$"),
        (
            lambda c: c.update(activation="gelu"),
            None,
            r"invalid config.json: field 'activation': expected one of \('relu', 'tanh'\), got gelu$",
        ),
        (lambda c: c.update(model_type="bert"), None, r"model_type is 'bert', expected 'elmo'"),
        (
            lambda c: c.update(lstm_dim=128),
            None,
            r"model.safetensors: weight shapes do not match config.json \(encoder.layers.0.bias: file \(2, 256\), "
            r"config.json \(2, 512\);",
        ),
        (
            None,
            lambda t: t.pop("encoder.layers.1.bias"),
            r"model\.safetensors: .*lacks tensors \['encoder.layers.1.bias'\]",
        ),
        (
            None,
            lambda t: t["token_encoder.projection.weight"].fill_(float("inf")),
            r"model\.safetensors: .*NaN/inf values in \['token_encoder.projection.weight'\]",
        ),
    ],
)
def test_bad_saved_models_fail_at_load(tiny_model_dir, tmp_path, config_edit, tensors_edit, message):
    bad = _variant(tiny_model_dir, tmp_path / "bad", config_edit, tensors_edit)
    with pytest.raises(ElmoLoadError, match=message) as error:
        ElmoModel.from_pretrained(bad)
    if tensors_edit:  # a missing or NaN/inf tensor: one line naming the weights file by its path
        assert str(error.value).startswith(f"{bad / 'model.safetensors'}: ") and "\n" not in str(error.value)


def test_config_json_not_json(tiny_model_dir, tmp_path):
    bad = _variant(tiny_model_dir, tmp_path / "bad")
    (bad / "config.json").write_text("{oops")
    with pytest.raises(ElmoLoadError, match=r"config.json: not valid JSON"):
        ElmoModel.from_pretrained(bad)
