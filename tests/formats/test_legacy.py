"""Legacy options.json + lm_weights.hdf5: variants load exactly, and every broken file gets a clear error."""

from __future__ import annotations

import json
import re
import shutil

import h5py
import numpy
import pytest
import torch

from spacy_elmo import (
    ElmoConfig,
    ElmoForBidirectionalLM,
    ElmoModel,
    ElmoTokenizer,
    LegacyFormatError,
    load_legacy,
    save_legacy,
)
from spacy_elmo.cli import main as cli_main
from spacy_elmo.formats.legacy import config_from_options, read_legacy_state_dict, weight_table

WORDS = [["Legacy", "weights", "load", "."], ["ok"]]


def _outputs(model):
    with torch.no_grad():
        return torch.stack(model(**ElmoTokenizer()(WORDS)).hidden_states)


def _copy(src_dir, dst):
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src_dir / "options.json", dst / "options.json")
    shutil.copy(src_dir / "lm_weights.hdf5", dst / "lm_weights.hdf5")
    return dst / "options.json", dst / "lm_weights.hdf5"


@pytest.mark.parametrize(
    "sizes,absent",
    [
        (
            dict(filters=[[1, 8], [2, 8]], projection_dim=16, lstm_dim=16),
            {"CNN_proj/W_proj", "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"},
        ),
        (
            dict(
                filters=[[1, 8], [3, 12]], projection_dim=8, lstm_dim=24, use_skip_connections=False, activation="tanh"
            ),
            set(),
        ),
    ],
)
def test_bilm_tf_variants_round_trip(tmp_path, sizes, absent):
    torch.manual_seed(0)
    config = ElmoConfig(char_embedding_dim=4, n_highway=1, num_layers=2, **sizes)
    model = ElmoModel(config).eval()
    options, weights = save_legacy(model, tmp_path)
    with h5py.File(weights, "r") as handle:
        names = set()
        handle.visit(names.add)
        assert absent.isdisjoint(names)
        assert handle["char_embed"].shape == (261, 4)
    again = load_legacy(options, weights)
    assert torch.equal(_outputs(again), _outputs(model))


def test_n_characters_261_accepted(tmp_path, bilm_tf_dir, fixtures_dir):
    options, weights = _copy(bilm_tf_dir, tmp_path)
    data = json.loads(options.read_text())
    data["char_cnn"]["n_characters"] = 261
    options.write_text(json.dumps(data))
    assert torch.equal(
        _outputs(load_legacy(options, weights)), _outputs(load_legacy(bilm_tf_dir / "options.json", weights))
    )


def test_missing_files(tmp_path, allennlp_dir):
    with pytest.raises(LegacyFormatError, match="options file not found: .*nope.json"):
        load_legacy(tmp_path / "nope.json", allennlp_dir / "lm_weights.hdf5")
    with pytest.raises(LegacyFormatError, match="weights file not found: .*nope.hdf5"):
        load_legacy(allennlp_dir / "options.json", tmp_path / "nope.hdf5")


def test_truncated_and_corrupt_hdf5(tmp_path, allennlp_dir):
    options, weights = _copy(allennlp_dir, tmp_path)
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 3])
    with pytest.raises(LegacyFormatError, match=r"lm_weights.hdf5.*(not a readable HDF5|truncated)"):
        load_legacy(options, weights)
    weights.write_bytes(b"not an hdf5 file at all" * 100)
    with pytest.raises(LegacyFormatError, match="not a readable HDF5 file"):
        load_legacy(options, weights)


def _edit_weights(weights, name, value=None, delete=False):
    with h5py.File(weights, "a") as handle:
        del handle[name]
        if not delete:
            handle[name] = value


def test_wrong_shape_names_dataset_and_shapes(tmp_path, allennlp_dir):
    options, weights = _copy(allennlp_dir, tmp_path)
    _edit_weights(weights, "CNN_high_1/W_carry", numpy.zeros((124, 100), numpy.float32))
    with pytest.raises(
        LegacyFormatError,
        match=r"lm_weights\.hdf5: .*'CNN_high_1/W_carry' has shape \(124, 100\), expected \(124, 124\)",
    ):
        load_legacy(options, weights)


def test_missing_dataset(tmp_path, allennlp_dir):
    options, weights = _copy(allennlp_dir, tmp_path)
    _edit_weights(weights, "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B", delete=True)
    with pytest.raises(
        LegacyFormatError,
        match=r"lm_weights\.hdf5: .*missing dataset 'RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/B' "
        r"\(expected shape \(256,\)\)",
    ) as error:
        load_legacy(options, weights)
    assert str(error.value).startswith(f"{weights}: ") and "\n" not in str(error.value)


@pytest.mark.parametrize("bad", [numpy.nan, numpy.inf])
def test_nan_and_inf_weights(tmp_path, allennlp_dir, bad):
    options, weights = _copy(allennlp_dir, tmp_path)
    value = h5py.File(allennlp_dir / "lm_weights.hdf5", "r")["CNN/W_cnn_2"][...]
    value[0, 1, 2, 3] = bad
    _edit_weights(weights, "CNN/W_cnn_2", value)
    with pytest.raises(
        LegacyFormatError, match=r"lm_weights\.hdf5: dataset 'CNN/W_cnn_2' contains 1 NaN/inf values$"
    ) as error:
        load_legacy(options, weights)
    assert str(error.value).startswith(f"{weights}: ") and "\n" not in str(error.value)


def test_options_contradicting_weights(tmp_path, allennlp_dir):
    options, weights = _copy(allennlp_dir, tmp_path)
    data = json.loads(options.read_text())
    data["lstm"]["dim"] = 128
    options.write_text(json.dumps(data))
    with pytest.raises(LegacyFormatError, match=r"W_0' has shape \(32, 256\), expected \(32, 512\).*belong together"):
        load_legacy(options, weights)


@pytest.mark.parametrize(
    "edit,message",
    [
        # values are checked by ElmoConfig: the field, what it expects and what it found, on one line
        (lambda o: o["char_cnn"].update(activation="gelu"), r"activation.*'relu'.*'tanh'.*gelu"),
        (lambda o: o["char_cnn"].update(n_characters=300), r"n_characters.*261.*262.*300"),
        (lambda o: o["lstm"].update(dim="wide"), r"field 'lstm\.dim'.*int.*wide"),
        (lambda o: o["lstm"].update(projection_dim=100), r"lstm\.projection_dim.*100.*lstm\.dim.*64"),
        # the structure the loader needs is checked here
        (lambda o: o.pop("lstm"), r"missing section 'lstm'"),
        (lambda o: o["lstm"].pop("projection_dim"), r"missing field 'lstm.projection_dim'"),
        (lambda o: o["char_cnn"].update(embedding=16), r"field 'char_cnn.embedding' must be an object, found 16"),
        (lambda o: o["char_cnn"].update(embedding={}), r"missing field 'char_cnn.embedding.dim'"),
    ],
)
def test_bad_options(tmp_path, allennlp_dir, edit, message):
    options, weights = _copy(allennlp_dir, tmp_path)
    data = json.loads(options.read_text())
    edit(data)
    options.write_text(json.dumps(data))
    with pytest.raises(LegacyFormatError, match=re.escape(str(options)) + ": .*" + message) as info:
        load_legacy(options, weights)
    assert "\n" not in str(info.value)
    options.write_text("{not json")
    with pytest.raises(LegacyFormatError, match="options.json: not valid JSON"):
        load_legacy(options, weights)


@pytest.mark.parametrize("lm_head", [False, True])
def test_every_dataset_maps_to_one_tensor_and_back_exactly(tmp_path, lm_head):
    """save_legacy and read_legacy_state_dict go through one table: every tensor comes back bit for
    bit, every dataset written is one the reader reads (the LM softmax aside), and none is read twice."""
    torch.manual_seed(0)
    config = ElmoConfig(
        char_embedding_dim=4,
        n_highway=2,
        num_layers=2,
        filters=[[1, 8], [2, 8]],
        projection_dim=8,
        lstm_dim=12,
        num_output_representations=1,
        vocab_size=7 if lm_head else 0,
    )
    model = ElmoForBidirectionalLM(config) if lm_head else ElmoModel(config)
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-1, 1)
    elmo = model.elmo if lm_head else model
    elmo.token_encoder.char_embedding.weight.data[0] = 0  # the padding row, which the file does not hold
    options, weights = save_legacy(model, tmp_path)
    state = read_legacy_state_dict(config_from_options(options), weights)
    expected = {k: v for k, v in elmo.state_dict().items() if not k.startswith("scalar_mixes.")}
    assert state.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(state[name], tensor), name
    table = weight_table(config)
    assert len({(e.dataset, e.rows.start) for e in table}) == len(table)  # no block of a dataset read twice
    with h5py.File(weights, "r") as handle:
        written = set()
        handle.visititems(lambda name, obj: written.add(name) if isinstance(obj, h5py.Dataset) else None)
    assert written - {e.dataset for e in table} == ({"softmax/W", "softmax/b"} if lm_head else set())
    if lm_head:
        with h5py.File(weights, "r") as handle:
            assert numpy.array_equal(handle["softmax/W"][...], model.lm_head.weight.detach().numpy())


def test_cli_convert_and_embed(tmp_path, allennlp_dir, capsys, monkeypatch):
    import io

    out_dir = tmp_path / "hf"
    assert (
        cli_main(["convert", str(allennlp_dir / "options.json"), str(allennlp_dir / "lm_weights.hdf5"), str(out_dir)])
        == 0
    )
    assert (out_dir / "model.safetensors").is_file() and (out_dir / "tokenizer_config.json").is_file()
    monkeypatch.setattr("sys.stdin", io.StringIO("The cat sat .\n"))
    assert cli_main(["embed", str(out_dir)]) == 0
    printed = capsys.readouterr().out
    assert "layers: (3, 4, 32)" in printed and "cat" in printed
    # a broken weights file is a one-line error with exit status 2, not a traceback
    bad = tmp_path / "bad.hdf5"
    bad.write_bytes(b"garbage")
    assert cli_main(["convert", str(allennlp_dir / "options.json"), str(bad), str(tmp_path / "x")]) == 2
    assert "not a readable HDF5 file" in capsys.readouterr().err
