"""`torchrun --nproc_per_node 2` (gloo, DistributedDataParallel) trains the same model as one process
with the same global batch: a real torchrun subprocess against an in-process single-process run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from helpers import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.training.pretrain import pretrain

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_gloo_processes_match_one_process_with_the_same_global_batch(tmp_path):
    train = write_grammar_corpus(tmp_path / "train.txt", 1500, seed=3)
    heldout = write_grammar_corpus(tmp_path / "heldout.txt", 100, seed=4)
    settings = [
        "--paths.train",
        str(train),
        "--paths.heldout",
        str(heldout),
        "--training.max_steps",
        "30",
        "--training.checkpoint_every",
        "10",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    two = tmp_path / "two"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "spacy_elmo",
            "pretrain",
            str(TINY),
            "--output",
            str(two),
            "--no-progress",
            "--data.batch_tokens",
            "128",
            *settings,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stderr.count("Trained 30 steps") == 1  # only rank 0 reports

    overrides = {settings[i][2:]: settings[i + 1] for i in range(0, len(settings), 2)}
    overrides = {k: (int(v) if v.isdigit() else v) for k, v in overrides.items()}
    one = pretrain(TINY, tmp_path / "one", overrides | {"data.batch_tokens": 256}, progress=False)

    a, b = load_file(str(two / "model.safetensors")), load_file(str(tmp_path / "one" / "model.safetensors"))
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4
    summary = json.loads((two / "pretrain_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["words"] == one["words"]
    assert abs(summary["heldout_ppl"] - one["heldout_ppl"]) < 1e-3 * one["heldout_ppl"]
    rng = __import__("torch").load(two / "checkpoints" / "step-00000030" / "rng.pt", weights_only=True)
    assert rng["cpu"].shape[0] == 2  # each process's RNG state is kept for --resume
