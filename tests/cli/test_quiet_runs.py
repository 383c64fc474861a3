"""Quiet, tidy runs: optional scalar-mix weights load without transformers' LOAD REPORT,
--no-progress hides transformers' bars too, the training bar shows on a terminal only, and a run refused on
its settings leaves no empty folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from helpers import on_a_terminal  # tests/ is on sys.path
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
    assert main(args + ["--output", str(tmp_path / "piped")]) == 0
    err = capfd.readouterr().err
    # stderr is no terminal (a log, CI): no bar, without --no-progress too
    assert "step/s" not in err and "Writing model shards" not in err and "Loading weights" not in err, err
    assert hf_logging.is_progress_bar_enabled()  # the command leaves the global setting as it found it
    # on a terminal the training bar shows; transformers' own bars (loading, writing shards) never do
    status, _, shown = on_a_terminal(*args, "--output", tmp_path / "shown")
    assert status == 0 and "step/s" in shown, shown
    assert "Writing model shards" not in shown and "Loading weights" not in shown, shown


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


def test_no_progress_keeps_heldout_perplexities_and_the_resume_note(tmp_path):
    """--no-progress hides the bar only: the periodic held-out perplexities, the note that a run resumed
    and the summary still print (they went through the bar before, and vanished with it)."""
    train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
    train.write_text("the cat sat on the mat .\nthe dog sat on the rug .\n" * 30)
    heldout.write_text("the cat sat on the rug .\n" * 3)
    out = tmp_path / "run"
    args = [str(Path(sys.executable).with_name("spacy-elmo")), "pretrain", str(TINY), "--output", str(out)]
    settings = ["--paths.train", str(train), "--paths.heldout", str(heldout), "--training.eval_every", "2"]
    settings += ["--training.checkpoint_every", "2", "--training.log_every", "1", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run([*args, *settings, "--training.max_steps", "2"], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "step 2: held-out perplexity" in first.stderr and "Trained 2 steps" in first.stderr, first.stderr
    assert "step/s" not in first.stderr and "it/s" not in first.stderr, first.stderr
    more = [*settings, "--training.max_steps", "4", "--resume"]
    resumed = subprocess.run([*args, *more], capture_output=True, text=True, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    lines = resumed.stderr.splitlines()
    assert lines[0] == f"resuming {out} from step-00000002 (step 2)", lines
    assert "step 4: held-out perplexity" in resumed.stderr and "Trained 4 steps" in resumed.stderr, lines
    assert "step/s" not in resumed.stderr, lines
