"""Quiet, tidy runs: optional scalar-mix weights load without transformers' LOAD REPORT,
--no-progress hides transformers' bars too, and a run refused on its settings leaves no empty folder."""

from __future__ import annotations

from pathlib import Path

import torch

from spacy_elmo import ElmoModel
from spacy_elmo.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "pretrain_tiny.cfg"


def test_new_scalar_mixes_load_quietly(tiny_model_dir, capfd, caplog):
    model = ElmoModel.from_pretrained(tiny_model_dir, num_output_representations=2)
    shown = capfd.readouterr().err + caplog.text  # transformers logs the report (a warning)
    assert len(model.scalar_mixes) == 2
    assert "LOAD REPORT" not in shown and "MISSING" not in shown, shown
    for mix in model.scalar_mixes:  # initialized as documented: equal weights, gamma 1
        assert torch.equal(mix.scalar_parameters.detach(), torch.zeros_like(mix.scalar_parameters))
        assert mix.gamma.item() == 1.0


def test_no_progress_hides_transformers_bars(tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    train = tmp_path / "train.txt"
    train.write_text("the cat sat on the mat .\n" * 50)
    args = ["pretrain", str(TINY), "--paths.train", str(train), "--training.max_steps", "1"]
    assert main(args + ["--output", str(tmp_path / "quiet"), "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert "it/s]" not in err and "step/s" not in err and "Writing model shards" not in err, err
    assert main(args + ["--output", str(tmp_path / "shown")]) == 0
    err = capfd.readouterr().err
    # the training bar shows; transformers' own bars (loading, writing shards) never do
    assert "step/s" in err and "Writing model shards" not in err and "Loading weights" not in err, err
    assert hf_logging.is_progress_bar_enabled()  # the command leaves the global setting as it found it


def test_refused_run_leaves_no_empty_output_folder(tmp_path, capsys):
    out = tmp_path / "runs" / "new"
    assert main(["pretrain", str(TINY), "--output", str(out), "--no-progress"]) == 2
    assert "no training data: set paths.train" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    assert main(["pretrain", str(TINY), "--output", str(out), "--paths.train", str(tmp_path / "none.txt")]) == 2
    assert "no text files match" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    existing = tmp_path / "mine"
    existing.mkdir()
    assert main(["pretrain", str(TINY), "--output", str(existing), "--no-progress"]) == 2
    assert existing.is_dir()  # not ours to remove
