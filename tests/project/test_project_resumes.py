"""A user's first hour (issue 20): an interrupted project resumes. The resumable pretraining step
(lab/experiments/pretrain_resumable.py) resumes an unfinished run, skips a finished one and starts over on new data;
Ctrl-C during torchrun pretraining prints one line and keeps the checkpoint; lab/experiments/train_ner.py does not redo
finished trainings. Real subprocesses for what a user types, real spaCy runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from helpers import TINY, lm_text, make_corpus, run  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.provenance import portable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A tiny DocBin with entities (for NER configs) and tags (for probes)."""
    return make_corpus(tmp_path_factory.mktemp("first_hour") / "train.spacy")


# --- 4. an interrupted project resumes ---------------------------------------------------------------


def _pretraining_step(output: Path, train: Path, *extra) -> list:
    return [
        sys.executable,
        "-m",
        "lab.experiments.pretrain_resumable",
        "--output",
        output,
        "--config",
        TINY,
        "--",
        "python",
        "-m",
        "spacy_elmo",
        "pretrain",
        TINY,
        "--output",
        output,
        "--paths.train",
        train,
        "--training.max_steps",
        "30",
        "--training.checkpoint_every",
        "10",
        "--no-progress",
        *extra,
    ]


def _start_records(output: Path) -> list[dict]:
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return [r for r in records if r.get("event") == "start"]


def test_pretraining_step_resumes_an_unfinished_run_skips_a_finished_one_and_restarts_on_new_data(tmp_path):
    train, output = lm_text(tmp_path / "train.txt"), tmp_path / "bilm"
    cut = run(*_pretraining_step(output, train), env={"SPACY_ELMO_CRASH_AT": "step:25"})  # killed at step 25
    assert cut.returncode == 75 and (output / "checkpoints" / "step-00000020").is_dir(), cut.stderr
    resumed = run(*_pretraining_step(output, train))
    assert resumed.returncode == 0, resumed.stderr
    assert f"{output}: resuming from step-00000020" in resumed.stderr
    assert [(r["step"], r["resumed"]) for r in _start_records(output)] == [(0, False), (20, True)]
    assert json.loads((output / "pretrain_summary.json").read_text())["step"] == 30
    assert json.loads((output / "provenance.json").read_text())["resumed_from"] == "step-00000020"
    model = (output / "model.safetensors").stat().st_mtime_ns
    again = run(*_pretraining_step(output, train))
    assert again.returncode == 0 and "finished earlier" in again.stderr, again.stderr
    assert (output / "model.safetensors").stat().st_mtime_ns == model  # not trained again
    with open(train, "a") as handle:
        handle.write("a new line of text\n")
    fresh = run(*_pretraining_step(output, train))
    assert fresh.returncode == 0 and "starting over" in fresh.stderr, fresh.stderr
    assert [(r["step"], r["resumed"]) for r in _start_records(output)] == [(0, False)]


def test_ctrl_c_during_torchrun_pretraining_prints_one_line_and_keeps_the_checkpoint(tmp_path, ctrl_c_after_checkpoint):
    train, output = lm_text(tmp_path / "train.txt"), tmp_path / "bilm"
    command = [
        sys.executable,
        "-m",
        "lab.experiments.pretrain_resumable",
        "--output",
        output,
        "--config",
        TINY,
        "--",
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "1",
        "-m",
        "spacy_elmo",
        "pretrain",
        TINY,
        "--output",
        output,
        "--paths.train",
        train,
        "--training.max_steps",
        "100000",
        "--training.checkpoint_every",
        "10",
        "--no-progress",
    ]
    # mid-run, past the first checkpoint
    child, (out, err) = ctrl_c_after_checkpoint(command, output, {**os.environ, "OMP_NUM_THREADS": "1"}, wait=0.5)
    assert child.returncode == 130, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "SignalException" not in err and "KeyboardInterrupt" not in err, err
    assert lines[-1].startswith(f"interrupted: {output} keeps its last checkpoint (step-"), err
    assert "run the same command again to resume" in lines[-1]
    assert not (output / "provenance.json").exists()  # an interrupted run records no result


def _train_ner_command(corpus: Path, tmp_path: Path) -> tuple[Path, list]:
    """(the corpus folder, a train_ner.py command training run `b_10` for 2 steps into `{tmp_path}/out`)."""
    data = tmp_path / "corpus"
    data.mkdir()
    for name in ("train_10.spacy", "dev.spacy"):
        (data / name).write_bytes(corpus.read_bytes())
    return data, [
        sys.executable,
        "-m",
        "lab.experiments.train_ner",
        ROOT / "configs" / "ner_baseline.cfg",
        "--name",
        "b",
        "--fractions",
        "10",
        "--corpus",
        data,
        "--out",
        tmp_path / "out",
        "--steps",
        "2",
        "--eval-frequency",
        "1",
    ]


def test_train_ner_does_not_redo_finished_trainings(corpus, tmp_path):
    data, command = _train_ner_command(corpus, tmp_path)
    first = run(*command)
    assert first.returncode == 0, first.stdout[-3000:]
    model = tmp_path / "out" / "b_10" / "model-last" / "meta.json"
    stamp = model.stat().st_mtime_ns
    record = json.loads((tmp_path / "out" / "b_10" / "provenance.json").read_text())
    assert record["exit_code"] == 0 and portable(str(data / "train_10.spacy")) in record["inputs"]
    second = run(*command)
    assert (
        second.returncode == 0 and "[b_10] finished earlier with the same command, inputs and threads" in second.stdout
    ), second.stdout
    assert model.stat().st_mtime_ns == stamp
    (data / "train_10.spacy").write_bytes(DocBin(docs=[Doc(spacy.blank("en").vocab, words=["x"])]).to_bytes())
    third = run(*command)  # the same command, other data: trained again
    assert "[b_10] started" in third.stdout, third.stdout
    # and the earlier finished run is kept beside the output folder, not overwritten
    assert "moved to" in third.stdout and (tmp_path / "out.replaced").is_dir(), third.stdout
    [kept] = [path for path in (tmp_path / "out.replaced").iterdir() if path.is_dir()]
    assert kept.name.startswith("b_10-")
    assert json.loads((kept / "provenance.json").read_text()) == record
    assert (kept / "model-last" / "meta.json").stat().st_mtime_ns == stamp
    assert kept.with_name(kept.name + ".log").is_file()
    assert json.loads((tmp_path / "out" / "b_10" / "provenance.json").read_text())["exit_code"] == 0


def test_train_ner_records_and_compares_the_threads_its_trainings_ran_with(corpus, tmp_path):
    """--jobs 2 runs each `spacy train` on one thread, --jobs 1 on torch's default: the sums, and so the
    model, differ. The record holds the training's thread settings, not the script's (which has none
    here), and a run finished with the other ones is trained again, not reused."""
    _, command = _train_ner_command(corpus, tmp_path)
    script_env = {key: value for key, value in os.environ.items() if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    record = tmp_path / "out" / "b_10" / "provenance.json"
    one_thread = subprocess.run(
        [str(c) for c in command + ["--jobs", "2"]], capture_output=True, text=True, timeout=600, env=script_env
    )
    assert one_thread.returncode == 0, one_thread.stdout[-3000:]
    assert json.loads(record.read_text())["machine"]["threads"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    default = subprocess.run(
        [str(c) for c in command + ["--jobs", "1"]], capture_output=True, text=True, timeout=600, env=script_env
    )
    assert default.returncode == 0 and "[b_10] started" in default.stdout and "moved to" in default.stdout, (
        default.stdout
    )
    assert json.loads(record.read_text())["machine"]["threads"] == {}
