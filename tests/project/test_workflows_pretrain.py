"""Pretraining workflows as a user runs them, in real processes: a 2-process torchrun pretraining stopped
with Ctrl-C and resumed, and the project's resumable pretraining step (lab/experiments/pretrain_resumable.py)
deciding between resuming and starting over on the thread settings and the files a glob names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.provenance import portable, sha256

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN_2 = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def _env(**variables) -> dict:
    """This environment without thread variables (torchrun sets its own), plus `variables`."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    return env | {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **variables}


def test_ctrl_c_then_resume_of_two_processes_ends_where_an_uninterrupted_run_ends(tmp_path, ctrl_c_after_checkpoint):
    """Dropout and a sampled softmax draw from each process's RNG: the resume restores both processes' states."""
    train = write_grammar_corpus(tmp_path / "train.txt", 1500, seed=3)
    heldout = write_grammar_corpus(tmp_path / "heldout.txt", 100, seed=4)
    pretrain = [
        *TORCHRUN_2,
        "-m",
        "spacy_elmo",
        "pretrain",
        TINY,
        "--no-progress",
        "--paths.train",
        train,
        "--paths.heldout",
        heldout,
        "--training.checkpoint_every",
        "10",
        "--model.dropout",
        "0.1",
        "--training.softmax",
        "sampled",
        "--training.n_negative_samples",
        "8",
    ]
    cut = tmp_path / "cut"
    child, (_, err) = ctrl_c_after_checkpoint(
        [*pretrain, "--output", cut, "--training.max_steps", "100000"], cut, _env()
    )
    assert child.returncode != 0 and not (cut / "model.safetensors").exists(), err[-3000:]
    saved = int((cut / "checkpoints" / "latest").read_text().strip().removeprefix("step-"))
    total = str(saved + 10)

    resumed = subprocess.run(
        [str(c) for c in [*pretrain, "--output", cut, "--training.max_steps", total, "--resume"]],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    whole = tmp_path / "whole"
    uninterrupted = subprocess.run(
        [str(c) for c in [*pretrain, "--output", whole, "--training.max_steps", total]],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-4000:]

    starts = [json.loads(line) for line in (cut / "metrics.jsonl").read_text().splitlines() if '"start"' in line]
    assert [(s["step"], s["resumed"], s["world_size"]) for s in starts] == [(0, False, 2), (saved, True, 2)]
    a, b = (json.loads((out / "pretrain_summary.json").read_text()) for out in (cut, whole))
    assert a["step"] == b["step"] == saved + 10 and a["words"] == b["words"]
    assert a["heldout_ppl"] == b["heldout_ppl"]
    assert sha256(cut / "model.safetensors") == sha256(whole / "model.safetensors")


def test_resumable_step_records_the_workers_threads_and_starts_over_on_other_threads_or_globbed_files(tmp_path, script):
    """torchrun gives its 2 workers OMP_NUM_THREADS=1 (this environment has none): that is what the record
    holds, what the workers report in their checkpoint, and what a resume needs again. A changed file under
    `--paths.train 'DIR/*.txt'` means other data, as a changed named file does."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, seed in (("a.txt", 5), ("b.txt", 6)):
        write_grammar_corpus(corpus / name, 400, seed=seed)
    output = tmp_path / "bilm"
    command = [
        *TORCHRUN_2,
        "-m",
        "spacy_elmo",
        "pretrain",
        str(TINY),
        "--output",
        str(output),
        "--no-progress",
        "--paths.train",
        f"{corpus}/*.txt",
        "--training.max_steps",
        "30",
        "--training.checkpoint_every",
        "10",
    ]
    wrapper = [
        sys.executable,
        "-m",
        "lab.experiments.pretrain_resumable",
        "--output",
        output,
        "--config",
        TINY,
        "--",
        "python",
        *command[1:],
    ]
    cut = subprocess.run(
        [str(c) for c in wrapper], env=_env(SPACY_ELMO_CRASH_AT="step:15"), capture_output=True, text=True, timeout=300
    )  # both workers stop after step 15
    assert cut.returncode != 0 and (output / "checkpoints" / "step-00000010").is_dir(), cut.stderr[-3000:]

    record = json.loads((output / "run_inputs.json").read_text())
    assert record["threads"] == {"OMP_NUM_THREADS": "1"}
    assert sorted(record["inputs"]) == sorted(portable(str(p)) for p in (TINY, corpus / "a.txt", corpus / "b.txt"))
    trained_with = json.loads((output / "checkpoints" / "step-00000010" / "state.json").read_text())["threads"]
    assert trained_with == {"torch_threads": 1, "OMP_NUM_THREADS": "1"}
    assert json.loads((output / "provenance.json").read_text())["machine"]["threads"] == {"OMP_NUM_THREADS": "1"}

    # what the next run of the same step decides, from the record on disk
    resumable = script("experiments.pretrain_resumable")

    def next_run(env: dict) -> str:
        return resumable.plan(output, resumable.run_record(command, output, resumable.worker_env(command, env)))

    assert next_run(_env()) == "resume"
    assert next_run(_env(OMP_NUM_THREADS="1")) == "resume"  # what torchrun would have set anyway
    assert next_run(_env(OMP_NUM_THREADS="2")) == "start"
    with open(corpus / "b.txt", "a") as handle:
        handle.write("the cat sees the dog\n")
    assert next_run(_env()) == "start"
