"""Low precision that saves memory (`hf.fp32_weights`): a biLM in eval mode bound to bf16 or int8 keeps
no fp32 copy of the weights it converted; what needs them reads them back from the model's own files
(saving, back to fp32, training, moving), checked unchanged, or refuses in one line where it has none."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import torch
from safetensors.torch import load_file

from spacy_elmo import ElmoConfig, ElmoModel, ElmoTokenizer, load_legacy
from spacy_elmo.hf.fp32_weights import Fp32WeightsGone
from spacy_elmo.kernels import capabilities, packed_lstm, products

# products of at least MIN_INT8_INPUTS inputs, recurrent weights over ONE_ROW_FP32_MAX_BYTES: every
# LSTM and linear weight is converted at either precision (as the original model's are)
CONFIG = dict(lstm_dim=96, projection_dim=64, n_highway=1, filters=[[1, 32], [2, 32], [3, 64]], char_embedding_dim=8)
LOW = [p for p, ok in (("bf16", capabilities.native_bf16_available()), ("int8", capabilities.int8_available())) if ok]
RELEASED = {
    "token_encoder.highways.0.transform.weight",
    "token_encoder.highways.0.gate.weight",
    "token_encoder.projection.weight",
    *(f"encoder.layers.{i}.{name}" for i in range(2) for name in ("input_weight", "hidden_weight", "proj_weight")),
}
SENTENCES = [["a", "small", "cat", "sat"], ["on", "the", "mat"], ["hi"]]


@pytest.fixture(autouse=True)
def _recurrent_weights_convert_too(monkeypatch):
    monkeypatch.setattr(products, "ONE_ROW_FP32_MAX_BYTES", 0)


@pytest.fixture
def folder(tmp_path):
    """A seeded fp32 biLM saved as a model directory (config.json, model.safetensors, tokenizer)."""
    torch.manual_seed(0)
    ElmoModel(ElmoConfig(**CONFIG)).save_pretrained(tmp_path / "fp32")
    return tmp_path / "fp32"


def _layers(model):
    with torch.no_grad():
        return model(**ElmoTokenizer()(SENTENCES)).hidden_states


def _same(a, b) -> bool:
    return all(map(torch.equal, a, b))


def _parameters(model) -> set[str]:
    return {name for name, _ in model.named_parameters()}


@pytest.mark.parametrize("precision", LOW)
def test_a_low_precision_model_in_eval_mode_keeps_no_fp32_copy(precision, folder):
    """Loaded at bf16 or int8 (eval mode), the LSTM's and the linears' weights are no parameters and
    no derived copy of them is kept beside the modules, before or after a call: their converted forms
    are all the model holds (none an fp32 tensor), and nothing else takes a gradient. It computes as
    the same precision bound to a model that keeps its fp32 weights (the same bits)."""
    model = ElmoModel.from_pretrained(folder, precision=precision)
    assert _parameters(ElmoModel.from_pretrained(folder)) - _parameters(model) == RELEASED
    assert not any(p.requires_grad for p in model.parameters())
    out = _layers(model)
    forms = [f for layer in model.encoder.layers for fs in layer.converted.values() for f in fs]
    forms.append(model.token_encoder.highways[0].transform.converted["weight"])
    assert len(forms) == 2 * 2 * 3 + 1
    assert not any(isinstance(f, torch.Tensor) and f.dtype == torch.float32 for f in forms)
    for module in model.modules():  # no prepacked or converted copy beside the modules
        assert module not in packed_lstm._DERIVED._store and module not in products._DERIVED._store
    torch.manual_seed(0)  # the same weights, built in memory and bound in train mode: eval() keeps them
    kept = ElmoModel(ElmoConfig(**CONFIG)).set_precision(precision).eval()
    assert RELEASED <= _parameters(kept)
    assert _same(out, _layers(kept))
    assert not _same(out, _layers(ElmoModel.from_pretrained(folder)))


@pytest.mark.parametrize("precision", LOW)
def test_a_real_save_after_binding_reads_back_the_exact_fp32_weights(precision, folder, tmp_path):
    """save_pretrained of a released model writes the fp32 weights read back from its files, bit for
    bit, and its precision; loaded at fp32 it computes as the original (the model itself is unchanged)."""
    model = ElmoModel.from_pretrained(folder, precision=precision)
    before = _layers(model)
    model.save_pretrained(tmp_path / "saved")
    original, saved = load_file(folder / "model.safetensors"), load_file(tmp_path / "saved" / "model.safetensors")
    assert sorted(original) == sorted(saved) and all(torch.equal(original[k], saved[k]) for k in original)
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["precision"] == precision
    assert _same(
        _layers(ElmoModel.from_pretrained(tmp_path / "saved", precision="fp32")),
        _layers(ElmoModel.from_pretrained(folder)),
    )
    assert _parameters(ElmoModel.from_pretrained(folder)) - _parameters(model) == RELEASED  # still released
    assert _same(before, _layers(model))
    # the state dict has every key, in the fp32 model's order
    assert list(model.state_dict()) == list(ElmoModel.from_pretrained(folder).state_dict())


def test_a_legacy_models_weights_are_read_back_from_its_hdf5(allennlp_dir, tmp_path, monkeypatch):
    """A model read from options.json + hdf5 (`load_legacy`) reads its released weights back from the
    hdf5 file (the fixture's products are small: int8 for all of them here)."""
    monkeypatch.setattr(products, "MIN_INT8_INPUTS", 1)
    options, weights = allennlp_dir / "options.json", allennlp_dir / "lm_weights.hdf5"
    fp32 = load_legacy(options, weights)
    model = load_legacy(options, weights).set_precision("int8" if capabilities.int8_available() else "bf16")
    if not set(fp32.state_dict()) - _parameters(model) - {n for n, _ in model.named_buffers()}:
        pytest.skip("no low-precision products on this CPU")
    want = fp32.state_dict()
    got = model.state_dict()
    assert list(want) == list(got) and all(torch.equal(want[k], got[k]) for k in want)


def test_back_to_fp32_is_bit_identical_to_a_fresh_fp32_model(folder):
    fresh = _layers(ElmoModel.from_pretrained(folder))
    for precision in LOW:
        model = ElmoModel.from_pretrained(folder, precision=precision)
        _layers(model)
        assert _same(fresh, _layers(model.set_precision("fp32")))
        assert _parameters(model) >= RELEASED and all(p.requires_grad for p in model.parameters())


def test_a_model_built_in_memory_refuses_in_one_line(folder):
    """No files to read the released weights back from: every use that needs them is one line
    naming what needs them, and the model still computes as it did."""
    if not LOW:
        pytest.skip("neither bf16 nor int8 products on this CPU: nothing is released")
    torch.manual_seed(0)
    model = ElmoModel(ElmoConfig(**CONFIG)).eval().set_precision(LOW[-1])
    assert not RELEASED & _parameters(model)
    before = _layers(model)
    ids = ElmoTokenizer()(SENTENCES)

    def eager():
        model.config.lstm_implementation = "eager"
        try:
            with torch.no_grad():
                model(**ids)
        finally:
            model.config.lstm_implementation = "auto"

    faces = {
        "state_dict": lambda: model.save_pretrained(folder.parent / "nothing"),
        "lstm_implementation 'eager'": eager,
        "train()": model.train,
        "set_precision('fp32')": lambda: model.set_precision("fp32"),
        "moving or casting": lambda: model.to(torch.float64),
    }
    for what, call in faces.items():
        with pytest.raises(Fp32WeightsGone) as err:
            call()
        message = str(err.value)
        assert "\n" not in message and message.startswith(what), message
        assert "it was built in memory" in message, message
    assert not (folder.parent / "nothing" / "model.safetensors").exists()
    assert _same(before, _layers(model)) and not model.training


def test_changed_or_missing_files_are_not_read(folder, tmp_path):
    """The files are checked unchanged since loading: a folder rewritten with other weights, or gone,
    is one line naming the file, never other weights saved as the model's."""
    if not LOW:
        pytest.skip("neither bf16 nor int8 products on this CPU: nothing is released")
    model = ElmoModel.from_pretrained(folder, precision=LOW[-1])
    torch.manual_seed(1)
    ElmoModel(ElmoConfig(**CONFIG)).save_pretrained(folder)  # other weights in its files
    with pytest.raises(Fp32WeightsGone, match=r"model\.safetensors changed since the model was loaded from it") as err:
        model.save_pretrained(tmp_path / "saved")
    assert "\n" not in str(err.value)
    (folder / "model.safetensors").unlink()
    with pytest.raises(Fp32WeightsGone, match=r"model\.safetensors is gone since the model was loaded from it"):
        model.set_precision("fp32")


def test_training_reads_the_weights_back_and_eval_keeps_what_it_learned(folder, tmp_path):
    """train() reads the released weights back; after an optimizer step the weights are in no file, so
    eval() keeps them (the low precision computes from copies beside them) and saving writes them."""
    if not LOW:
        pytest.skip("neither bf16 nor int8 products on this CPU: nothing is released")
    model = ElmoModel.from_pretrained(folder, precision=LOW[-1]).train()
    assert _parameters(model) >= RELEASED and all(p.requires_grad for p in model.parameters())
    loss = sum(h.sum() for h in model(**ElmoTokenizer()(SENTENCES)).hidden_states)
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    learned = {k: v.clone() for k, v in model.state_dict().items()}
    model.eval()
    assert _parameters(model) >= RELEASED  # kept: no file holds them
    _layers(model)
    model.save_pretrained(tmp_path / "trained")
    saved = load_file(tmp_path / "trained" / "model.safetensors")
    assert all(torch.equal(saved[k], learned[k]) for k in saved)
    assert not torch.equal(
        saved["encoder.layers.0.input_weight"], load_file(folder / "model.safetensors")["encoder.layers.0.input_weight"]
    )
    # bound again explicitly, they are released, and then in no file: saving refuses in one line
    model.set_precision(LOW[-1])
    with pytest.raises(Fp32WeightsGone, match="its weights changed since they were loaded"):
        model.save_pretrained(tmp_path / "again")


def test_eval_after_binding_in_train_mode_releases_while_the_weights_are_the_files(folder):
    if not LOW:
        pytest.skip("neither bf16 nor int8 products on this CPU: nothing is released")
    model = ElmoModel.from_pretrained(folder).train().set_precision(LOW[-1])
    assert _parameters(model) >= RELEASED
    model.eval()
    assert not RELEASED & _parameters(model)


def test_copies_carry_the_converted_weights_and_moving_reads_back(folder):
    """Pickling and deep copies carry the converted forms (and where the files are): the same outputs,
    no file read. `.to` the device it is on reads nothing; a cast reads the weights back."""
    if not LOW:
        pytest.skip("neither bf16 nor int8 products on this CPU: nothing is released")
    model = ElmoModel.from_pretrained(folder, precision=LOW[-1])
    want = _layers(model)
    copies = [copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    (folder / "model.safetensors").rename(folder / "away.safetensors")  # a read would fail now
    assert all(_same(want, _layers(other)) for other in copies)
    assert _same(want, _layers(model.to("cpu").cpu().float()))
    (folder / "away.safetensors").rename(folder / "model.safetensors")
    double = copies[0].double()
    assert _parameters(double) >= RELEASED and next(double.parameters()).dtype == torch.float64


def test_a_kernel_that_reads_fp32_weights_reads_them_back(folder):
    """An explicit `eager` (the definition), or a gradient through the initial state (`fused`), reads
    the released weights back from the files (the model keeps them, until bound again) and computes."""
    if not LOW:
        pytest.skip("neither bf16 nor int8 products on this CPU: nothing is released")
    ids = ElmoTokenizer()(SENTENCES)
    original = load_file(folder / "model.safetensors")
    for kernel in ("eager", "fused"):
        model = ElmoModel.from_pretrained(folder, precision=LOW[-1])
        model.config.lstm_implementation = kernel
        state = None
        if kernel == "fused":  # a gradient through the initial state
            zero = model(**ids, return_state=True).state
            state = type(zero)(zero.h.clone().requires_grad_(), zero.c.clone())
        with torch.no_grad() if kernel == "eager" else torch.enable_grad():
            out = model(**ids, initial_state=state)
        assert _parameters(model) >= RELEASED
        assert all(torch.equal(p.detach(), original[n]) for n, p in model.named_parameters() if n in RELEASED)
        assert all(bool(torch.isfinite(h).all()) for h in out.hidden_states)
