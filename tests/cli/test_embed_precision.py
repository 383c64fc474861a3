"""`spacy-elmo embed --precision`: the model computes in the precision asked for (default: as saved);
a bad value is argparse's one line naming the option, the choices and the value."""

from __future__ import annotations

import io
import sys

import h5py
import numpy
import pytest

from spacy_elmo.cli import main
from spacy_elmo.kernels import capabilities


def _layers(path):
    with h5py.File(path, "r") as f:
        return {name: numpy.asarray(f[name]) for name in f if name != "sentence_to_index"}


def test_embed_precision_int8_changes_the_layers_and_fp32_is_the_default(tiny_model_dir, tmp_path, monkeypatch):
    text = tmp_path / "in.txt"
    text.write_text("the cat sat on the mat\nhello world\n", encoding="utf8")
    outputs = {}
    for name, extra in (("default", []), ("fp32", ["--precision", "fp32"]), ("int8", ["--precision", "int8"])):
        out = tmp_path / f"{name}.hdf5"
        assert main(["embed", str(tiny_model_dir), str(text), str(out), "--no-progress", *extra]) == 0
        outputs[name] = _layers(out)
    assert sorted(outputs["default"]) == sorted(outputs["int8"])
    for key, value in outputs["default"].items():
        assert numpy.array_equal(value, outputs["fp32"][key])
    # int8 changes the layers where this CPU takes int8 products (elsewhere it is fp32)
    changed = any(not numpy.array_equal(v, outputs["int8"][k]) for k, v in outputs["default"].items())
    assert changed == capabilities.int8_available()


def test_embed_refuses_an_unknown_precision_in_one_line(tiny_model_dir, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"hi\n")))
    with pytest.raises(SystemExit) as exit_:
        main(["embed", str(tiny_model_dir), "--precision", "fp16"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--precision" in err and "'fp16'" in err and "bf16" in err, err
