"""The `elmo` component's `precision` setting: validated in one line, saved with the pipeline (its
config and `bilm/config.json`), applied on loading, and a bf16 request on a CPU without native bf16
handled as documented (one warning line, then fp32)."""

from __future__ import annotations

import json
import logging

import numpy
import pytest
import spacy
from thinc.api import use_ops
from thinc.util import to_numpy

from spacy_elmo.kernels import capabilities
from spacy_elmo.spacy.component import ElmoSettingError

TEXTS = ["The cat sat on the mat .", "ELMo vectors depend on context !", "Hi"]


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """These modules run the tiny biLM with one intra-op thread (see conftest)."""


def _pipeline(model_dir, precision=None):
    nlp = spacy.blank("en")
    config = {"model": str(model_dir)}
    if precision is not None:
        config["precision"] = precision
    nlp.add_pipe("elmo", config=config)
    return nlp


def _tensors(nlp):
    """Host copies of the Docs' vectors (cupy arrays under --spacy-gpu)."""
    return [to_numpy(doc.tensor) for doc in nlp.pipe(TEXTS)]


@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_a_saved_pipeline_keeps_its_precision(precision, tiny_model_dir, tmp_path):
    nlp = _pipeline(tiny_model_dir, precision)
    want = _tensors(nlp)
    elmo = nlp.get_pipe("elmo")
    assert elmo.precision == precision and elmo.elmo_model.config.precision == precision
    nlp.to_disk(tmp_path / "pipeline")
    assert nlp.config["components"]["elmo"]["precision"] == precision
    saved = json.loads((tmp_path / "pipeline" / "elmo" / "bilm" / "config.json").read_text())
    assert saved["precision"] == precision
    loaded = spacy.load(tmp_path / "pipeline")
    got = _tensors(loaded)
    assert loaded.get_pipe("elmo").precision == precision
    assert loaded.get_pipe("elmo").elmo_model.config.precision == precision
    assert all(numpy.array_equal(a, b) for a, b in zip(want, got))
    # it computes differently from fp32 where this CPU has the precision's products (else it is fp32)
    fast = capabilities.native_bf16_available() if precision == "bf16" else capabilities.int8_available()
    exact = _tensors(_pipeline(tiny_model_dir))
    assert all(numpy.array_equal(a, b) for a, b in zip(exact, got)) == (not fast)


def test_the_default_is_exact_fp32(tiny_model_dir):
    nlp = _pipeline(tiny_model_dir)
    assert nlp.config["components"]["elmo"]["precision"] == "fp32"
    _tensors(nlp)
    assert nlp.get_pipe("elmo").elmo_model.config.precision == "fp32"


def test_an_invalid_precision_is_one_line(tiny_model_dir):
    with pytest.raises(ElmoSettingError) as err:
        _pipeline(tiny_model_dir, "fp16")
    assert str(err.value) == "elmo: precision must be one of 'fp32', 'bf16', 'int8', got 'fp16'"


def test_bf16_without_native_bf16_warns_once_and_computes_fp32(tiny_model_dir, monkeypatch, caplog):
    """A CPU's fallback: the pipelines run on the CPU (thinc's numpy ops) also under --spacy-gpu, where a GPU with
    bf16 would compute bf16."""
    monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {"native_bf16"})
    monkeypatch.setattr(capabilities, "_warned_bf16", set())
    with use_ops("numpy"), caplog.at_level(logging.WARNING, logger="spacy_elmo.kernels"):
        exact = _tensors(_pipeline(tiny_model_dir))
        nlp = _pipeline(tiny_model_dir, "bf16")
        got = _tensors(nlp) + _tensors(nlp)
    assert all(numpy.array_equal(a, b) for a, b in zip(exact + exact, got))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "precision='bf16'" in warnings[0] and "fp32" in warnings[0], warnings
    assert nlp.get_pipe("elmo").precision == "bf16"
