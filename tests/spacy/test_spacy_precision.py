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


def test_the_default_is_the_bilms_own_precision(tiny_model_dir, tmp_path):
    """One default, one owner: the component's `precision` is null unless set, and the biLM's config
    holds the precision (fp32 for the fp32 fixture; int8 for a folder saved at int8), which the
    component reports."""
    from spacy_elmo import ElmoModel

    nlp = _pipeline(tiny_model_dir)
    assert nlp.config["components"]["elmo"]["precision"] is None
    exact = _tensors(nlp)
    assert nlp.get_pipe("elmo").precision == "fp32" == nlp.get_pipe("elmo").elmo_model.config.precision
    ElmoModel.from_pretrained(tiny_model_dir, precision="int8").save_pretrained(tmp_path / "int8")
    int8 = _pipeline(tmp_path / "int8")
    assert _tensors(int8)[0].shape == exact[0].shape
    assert int8.get_pipe("elmo").precision == "int8"


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


# --- low precision that saves memory: the pipeline's biLM holds no fp32 copy of what it converted ---

LOW = [p for p, ok in (("bf16", capabilities.native_bf16_available()), ("int8", capabilities.int8_available())) if ok]


@pytest.fixture(scope="module")
def wide_model_dir(tmp_path_factory):
    """A seeded biLM whose input products and linears have enough inputs for int8 (`MIN_INT8_INPUTS`)."""
    import torch

    from spacy_elmo import ElmoConfig, ElmoModel

    folder = tmp_path_factory.mktemp("wide_elmo")
    torch.manual_seed(0)
    config = ElmoConfig(lstm_dim=96, projection_dim=64, n_highway=1, filters=[[1, 32], [2, 32], [3, 64]])
    ElmoModel(config).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("precision", LOW)
def test_a_low_precision_pipeline_saves_the_fp32_weights_it_released(precision, wide_model_dir, tmp_path):
    """The component's biLM at bf16 or int8 holds its converted weights only (it stays in eval mode
    between Docs); `to_disk` writes the fp32 weights read back from its files, bit for bit, and the
    loaded pipeline computes as the saved one; bytes round-trip too (a biLM read from bytes keeps
    its fp32 weights: no files to read them back from)."""
    from safetensors.torch import load_file

    nlp = _pipeline(wide_model_dir, precision)
    want = _tensors(nlp)
    elmo = nlp.get_pipe("elmo").elmo_model
    names = {name for name, _ in elmo.named_parameters()}
    assert "encoder.layers.0.input_weight" not in names and "token_encoder.projection.weight" not in names
    assert not elmo.training
    nlp.to_disk(tmp_path / "pipeline")
    original = load_file(wide_model_dir / "model.safetensors")
    saved = load_file(tmp_path / "pipeline" / "elmo" / "bilm" / "model.safetensors")
    assert sorted(saved) == sorted(original) and all(torch_equal(saved[k], original[k]) for k in original)
    loaded = spacy.load(tmp_path / "pipeline")
    assert all(numpy.array_equal(a, b) for a, b in zip(want, _tensors(loaded)))
    assert loaded.get_pipe("elmo").precision == precision
    again = _pipeline(wide_model_dir, precision).from_bytes(nlp.to_bytes())
    assert all(numpy.array_equal(a, b) for a, b in zip(want, _tensors(again)))
    assert again.to_bytes() == nlp.to_bytes()


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_an_int8_pipeline_runs_in_two_processes(start, wide_model_dir):
    """`nlp.pipe(n_process=2)` on a pipeline whose biLM released its fp32 weights: forked workers
    share its converted weights, spawned ones receive them pickled (`kernels.int8.PackedInt8`,
    `kernels.bf16.PrepackedBf16`); both give the one-process vectors of the same batches (int8's
    activation scales are per batch; the token cache off, which would keep a word's vector from
    another batch), up to the workers' single-thread rounding of the fp32 parts."""
    import subprocess
    import sys
    import textwrap

    precision = LOW[-1] if LOW else "int8"
    code = textwrap.dedent(
        """
        import json, multiprocessing, sys
        import numpy, spacy

        def main():
            multiprocessing.set_start_method(sys.argv[2], force=True)
            nlp = spacy.blank("en")
            nlp.add_pipe("elmo", config={"model": sys.argv[1], "precision": sys.argv[3]})
            texts = ["The cat sat on the mat .", "ELMo vectors depend on context !", "Hi", "a b c d", "one more"]
            # (the token cache keeps a word's vector as first computed, which int8 makes batch-dependent)
            nlp.get_pipe("elmo").elmo_model.disable_token_cache()
            serial = [d.tensor for d in nlp.pipe(texts, batch_size=2)]
            held = [name for name, _ in nlp.get_pipe("elmo").elmo_model.named_parameters()]
            no_hooks = {"elmo": {"similarity_hooks": False}}
            parallel = [d.tensor for d in nlp.pipe(texts, n_process=2, batch_size=2, component_cfg=no_hooks)]
            scale = max(float(numpy.abs(t).max()) for t in serial)
            print(json.dumps([held, scale, [float(numpy.abs(a - b).max()) for a, b in zip(serial, parallel)]]))

        if __name__ == "__main__":
            main()
        """
    )
    script = wide_model_dir.parent / f"two_processes_{start}.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script), str(wide_model_dir), start, precision],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    held, scale, differences = json.loads(done.stdout.splitlines()[-1])
    assert ("encoder.layers.0.input_weight" in held) == (not LOW)
    assert len(differences) == 5 and max(differences) <= 1e-5 * max(scale, 1.0), differences
