"""`ElmoConfig.precision` in a model directory: saved unless fp32, applied again on loading (never
changed silently), overridden only by an explicit `from_pretrained(..., precision=...)`; on a built
model, changed only by `set_precision` (setting `config.precision` changes what is saved, not the model)."""

from __future__ import annotations

import json

import pytest
import torch

from spacy_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
from spacy_elmo.hf.quantization import dequantize, quantize_int8
from spacy_elmo.kernels import capabilities, products

CONFIG = dict(lstm_dim=24, projection_dim=12, n_highway=1, filters=[[1, 4], [2, 4], [3, 8]], char_embedding_dim=4)


def _model() -> ElmoModel:
    torch.manual_seed(0)
    return ElmoModel(ElmoConfig(**CONFIG)).eval()


def _layers(model):
    tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token)
    with torch.no_grad():
        return model(**tokenizer([["a", "small", "cat"], ["sat"]])).hidden_states


def _saved(tmp_path):
    """The fp32 model saved as a directory (the low-precision models below are loaded from it, so they
    have files to read their released fp32 weights back from)."""
    folder = tmp_path / "fp32"
    _model().save_pretrained(folder)
    return folder


@pytest.mark.parametrize("precision", ["fp32", "bf16", "int8"])
def test_a_saved_directory_keeps_its_precision(precision, tmp_path):
    model = ElmoModel.from_pretrained(_saved(tmp_path)).set_precision(precision)
    want = _layers(model)
    model.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert saved.get("precision") == (None if precision == "fp32" else precision)  # fp32 files unchanged
    loaded = ElmoModel.from_pretrained(tmp_path / "saved").eval()
    assert loaded.config.precision == precision
    assert all(map(torch.equal, want, _layers(loaded)))
    # an explicit choice on loading wins, and says so in the config
    exact = ElmoModel.from_pretrained(tmp_path / "saved", precision="fp32").eval()
    assert exact.config.precision == "fp32"
    assert all(map(torch.equal, _layers(_model()), _layers(exact)))


def test_quantize_int8_is_the_int8_precision_and_is_recorded(tmp_path):
    model = quantize_int8(ElmoModel.from_pretrained(_saved(tmp_path)))
    assert model.config.precision == "int8"
    int8 = _layers(model)
    assert all(map(torch.equal, int8, _layers(ElmoModel.from_pretrained(tmp_path / "fp32", precision="int8"))))
    model.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["precision"] == "int8"
    assert dequantize(model).config.precision == "fp32"
    assert all(map(torch.equal, _layers(_model()), _layers(model)))


def test_setting_the_config_field_changes_what_is_saved_not_the_model(tmp_path, monkeypatch):
    """`config.precision` is the one store of the precision, but a built model changes it only
    through `set_precision`, which binds it: setting the field on the config of a model that exists
    changes what `save_pretrained` writes (and what a model built from that config computes in), not
    how that model computes (CHANGELOG.md). Its small products are int8 here (`MIN_INT8_INPUTS` at 1)."""
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)
    monkeypatch.setattr(products, "ONE_ROW_FP32_MAX_BYTES", 0)
    fp32 = _layers(_model())
    model = ElmoModel.from_pretrained(_saved(tmp_path))
    model.config.precision = "int8"
    assert all(map(torch.equal, fp32, _layers(model)))  # still the exact fp32 model
    model.save_pretrained(tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["precision"] == "int8"
    int8 = _layers(ElmoModel.from_pretrained(tmp_path / "saved"))
    assert all(map(torch.equal, fp32, int8)) == (not capabilities.int8_available())
    assert all(map(torch.equal, int8, _layers(model.set_precision("int8"))))  # the migration: set_precision
    model.config.precision = "fp32"
    assert all(map(torch.equal, int8, _layers(model)))
    assert all(map(torch.equal, fp32, _layers(model.set_precision("fp32"))))


def test_an_invalid_precision_is_one_line_in_every_face(tiny_model_dir, tmp_path):
    """The HF faces: the one check's line (`spacy_elmo.precision`), not @strict's two-line error;
    in a config.json, that line naming the file. (spaCy's and the CLI's: tests/spacy/test_spacy_precision.py,
    tests/cli/test_embed_precision.py.)"""
    from transformers import AutoConfig, AutoModel

    line = "precision must be one of 'fp32', 'bf16', 'int8', got 'fp16'"
    model = ElmoModel.from_pretrained(tiny_model_dir)
    before = _layers(model)
    faces = {
        "ElmoModel.from_pretrained": lambda: ElmoModel.from_pretrained(tiny_model_dir, precision="fp16"),
        "AutoModel.from_pretrained": lambda: AutoModel.from_pretrained(tiny_model_dir, precision="fp16"),
        "AutoConfig.from_pretrained": lambda: AutoConfig.from_pretrained(tiny_model_dir, precision="fp16"),
        "ElmoConfig": lambda: ElmoConfig(precision="fp16"),
        "config.precision =": lambda: setattr(model.config, "precision", "fp16"),
        "set_precision": lambda: model.set_precision("fp16"),
    }
    for face, run in faces.items():
        with pytest.raises(ValueError) as info:
            run()
        assert str(info.value).endswith(line) and "\n" not in str(info.value), (face, str(info.value))
    assert model.config.precision == "fp32" and all(map(torch.equal, before, _layers(model)))
    saved = tmp_path / "saved"
    model.save_pretrained(saved)
    config = saved / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "precision": "fp16"}))
    with pytest.raises(ValueError) as info:
        ElmoModel.from_pretrained(saved)
    assert str(info.value) == f"{saved}: invalid config.json: {line}"
