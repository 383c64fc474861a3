"""Pretraining under faults, for real: a process that dies at fixed points of a checkpoint write or
at a random step (a real subprocess ended with `os._exit` by the writer's fault hook), a disk that
fills up during the run (a real tmpfs, when this machine lets the test mount one) or a write that
fails with ENOSPC / EIO (the writer's hook raising the OSError), torn and corrupt metrics lines,
and planted pickles in every file a resume reads.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from helpers import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.cli import main
from spacy_elmo.training.checkpoints import CRASH_EXIT_CODE, CheckpointError, Checkpoints, MetricsLog
from spacy_elmo.training.pretrain import pretrain
from spacy_elmo.training.settings import PretrainError

ROOT = Path(__file__).resolve().parents[2]
# dropout and a sampled softmax draw random numbers: an exact resume needs RNG state and data position
SETTINGS = {
    "model.dropout": 0.2,
    "training.softmax": "sampled",
    "training.n_negative_samples": 12,
    "training.max_steps": 30,
    "training.checkpoint_every": 10,
    "training.log_every": 5,
    "data.block_lines": 400,
}


def as_args(settings: dict) -> list[str]:
    return [f"--{key}={json.dumps(value) if not isinstance(value, str) else value}" for key, value in settings.items()]


def run_cli(out: Path, settings: dict, env: dict, timeout: int = 240) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "spacy_elmo",
        "pretrain",
        str(TINY),
        "--output",
        str(out),
        "--no-progress",
        *as_args(settings),
    ]
    env = dict(
        os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env
    )
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def max_difference(a: Path, b: Path) -> float:
    x, y = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert x.keys() == y.keys()
    return max(float((x[k] - y[k]).abs().max()) for k in x)


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """The runs in this process use the subprocesses' one intra-op thread (OMP_NUM_THREADS=1): a
    resumed run then repeats an uninterrupted one's float32 operations exactly, on any CPU."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_grammar_corpus(tmp_path_factory.mktemp("fault_corpus") / "train.txt", 1200, seed=7)


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    pretrain(TINY, out, SETTINGS | {"paths.train": str(corpus)}, progress=False)
    return out


# `step:N` ends the process after step N's update and before step N's checkpoint: step 20 (a checkpoint
# step, so the last checkpoint on disk is step 10) always, and one other step drawn at random
STEP = random.Random(os.environ.get("SPACY_ELMO_TEST_SEED", time.time_ns())).choice(
    [s for s in range(11, 30) if s != 20]
)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["mid-tensor:20", "before-rename:20", "before-latest:20", "step:20", f"step:{STEP}"])
def test_hard_exit_during_a_checkpoint_write_then_resume_matches_an_uninterrupted_run(
    point, corpus, uninterrupted, tmp_path
):
    out = tmp_path / "crashed"
    crashed = run_cli(out, SETTINGS | {"paths.train": str(corpus)}, {"SPACY_ELMO_CRASH_AT": point})
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr[-3000:]
    checkpoints = out / "checkpoints"
    if point == "mid-tensor:20":  # half of optimizer.pt written, the directory never renamed
        partial = checkpoints / ".step-00000020.tmp"
        assert (partial / "optimizer.pt").is_file() and not (partial / "state.json").exists()
    if point == "before-latest:20":  # complete and in place, but not yet named in `latest`
        assert (checkpoints / "step-00000020" / "state.json").is_file()
    if point.startswith(("mid-tensor", "before-rename", "before-latest")):
        assert (checkpoints / "latest").read_text().strip() == "step-00000010"
    latest = Checkpoints(checkpoints).latest()  # the pointer wins: a step-20 without it is written again
    crashed_after = int(point.split(":")[1]) if point.startswith("step:") else 0
    expected = "step-00000020" if crashed_after > 20 else "step-00000010"
    assert latest.name == expected, point

    result = pretrain(TINY, out, SETTINGS | {"paths.train": str(corpus)}, resume=True, progress=False)
    assert result["step"] == 30
    assert max_difference(out, uninterrupted) == 0.0, point  # the same operations on the same bits
    assert not list(checkpoints.glob(".*tmp*"))  # the crash's leftovers are pruned
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-00000020", "step-00000030"]


@pytest.mark.parametrize(
    "fault, reason", [("mid-tensor:20=ENOSPC", "no space left on device"), ("fsync-dir:20=EIO", "input/output error")]
)
def test_a_failing_checkpoint_write_stops_clearly_and_keeps_the_previous_one(
    fault, reason, corpus, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "failing"
    monkeypatch.setenv("SPACY_ELMO_FAIL_AT", fault)
    code = main(
        [
            "pretrain",
            str(TINY),
            "--output",
            str(out),
            "--no-progress",
            *as_args(SETTINGS | {"paths.train": str(corpus)}),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    message = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(message) == 1 and "Traceback" not in err, err
    assert reason in message[0] and str(out / "checkpoints" / "step-00000020") in message[0], message
    assert "previous checkpoint" in message[0] and "step-00000010" in message[0]
    checkpoints = out / "checkpoints"
    assert not list(checkpoints.glob(".*tmp*")) and not (checkpoints / "step-00000020").exists()
    monkeypatch.delenv("SPACY_ELMO_FAIL_AT")
    latest = Checkpoints(checkpoints).latest()
    assert latest.name == "step-00000010"
    Checkpoints.load_model(latest, torch.device("cpu"))
    Checkpoints.load_optimizer(latest, torch.device("cpu"))
    result = pretrain(TINY, out, SETTINGS | {"paths.train": str(corpus)}, resume=True, progress=False)
    assert result["step"] == 30


@pytest.fixture
def small_disk(tmp_path):
    """A real 24 MiB tmpfs (needs root and mount rights; skipped where the machine does not allow it)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_during_training_stops_clearly_and_keeps_the_previous_checkpoint(corpus, small_disk):
    """A real ENOSPC: the disk fills up (another file) after the first checkpoint."""
    out = small_disk / "run"
    settings = SETTINGS | {"paths.train": str(corpus), "training.max_steps": 100000, "training.log_every": 100000}
    command = [
        sys.executable,
        "-m",
        "spacy_elmo",
        "pretrain",
        str(TINY),
        "--output",
        str(out),
        "--no-progress",
        *as_args(settings),
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ballast = small_disk / f"ballast-{uuid.uuid4().hex}"
    try:
        deadline = time.monotonic() + 180
        while not (out / "checkpoints" / "latest").exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "no checkpoint within 180 s"
            time.sleep(0.05)
        with open(ballast, "wb") as handle:  # fill the file system
            try:
                while True:
                    handle.write(b"\0" * (1 << 16))
                    handle.flush()
            except OSError:
                pass
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err[-3000:]
    message = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(message) == 1 and "Traceback" not in err, err[-3000:]
    assert "no space left on device" in message[0] and str(out / "checkpoints" / "step-") in message[0], message
    assert "previous checkpoint" in message[0]
    ballast.unlink()
    checkpoints = out / "checkpoints"
    latest = Checkpoints(checkpoints).latest()
    assert not list(checkpoints.glob(".step-*.tmp"))  # the partial write was removed
    saved = json.loads((latest / "state.json").read_text())["step"]
    assert saved % 10 == 0
    result = pretrain(TINY, out, settings | {"training.max_steps": saved + 3}, resume=True, progress=False)
    assert result["step"] == saved + 3


def test_metrics_reader_skips_only_a_torn_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "lo')  # killed while appending
    assert MetricsLog(path).records() == [{"step": 1}, {"step": 2}]
    MetricsLog(path).truncate_after(5)
    assert path.read_text() == '{"step": 1}\n{"step": 2}\n'
    path.write_text('{"step": 1}\n{"step": 2\n{"step": 3}\n')  # a damaged line in the middle
    with pytest.raises(PretrainError, match=rf"{path}, line 2: not a JSON record"):
        MetricsLog(path).records()
    path.write_text('{"step": 1}\n{"step": 2\n')  # the last line is complete (newline) but broken
    with pytest.raises(PretrainError, match="line 2"):
        MetricsLog(path).records()


class Planted:
    """Unpickling this creates `marker`: what a malicious checkpoint file would do."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished")
    pretrain(TINY, out, SETTINGS | {"paths.train": str(corpus), "training.max_steps": 10}, progress=False)
    return out


@pytest.mark.parametrize("target", ["optimizer.pt", "rng.pt", "model.safetensors", "pytorch_model.bin"])
def test_planted_pickles_are_refused_without_running_code(target, corpus, finished, tmp_path):
    out = tmp_path / "planted"
    shutil.copytree(finished, out)
    checkpoint = Checkpoints(out / "checkpoints").latest()
    marker = tmp_path / "code-ran"
    if target == "pytorch_model.bin":  # a pickled weights file instead of the safetensors one
        (checkpoint / "model.safetensors").unlink()
    torch.save({"state": Planted(marker), "param_groups": []}, checkpoint / target)
    with pytest.raises(CheckpointError) as info:
        pretrain(
            TINY, out, SETTINGS | {"paths.train": str(corpus), "training.max_steps": 20}, resume=True, progress=False
        )
    assert not marker.exists(), "loading the checkpoint ran code from a pickle"
    message = str(info.value)
    assert "\n" not in message and str(checkpoint) in message, message
    if target.endswith(".pt"):
        assert "refused to load" in message and "Unsupported global" in message and "open" in message, message


def test_an_rng_file_of_another_layout_is_one_line_naming_it_and_the_expected_layout(corpus, finished, tmp_path):
    """rng.pt holds [processes, state] stacks; a lone state (or anything else) is refused, not fed to torch."""
    out = tmp_path / "unstacked"
    shutil.copytree(finished, out)
    checkpoint = Checkpoints(out / "checkpoints").latest()
    torch.save({"cpu": torch.get_rng_state()}, checkpoint / "rng.pt")
    with pytest.raises(CheckpointError) as info:
        pretrain(
            TINY, out, SETTINGS | {"paths.train": str(corpus), "training.max_steps": 20}, resume=True, progress=False
        )
    size = torch.get_rng_state().numel()
    assert str(info.value) == (
        f"{checkpoint / 'rng.pt'}: expected 'cpu': a uint8 tensor [processes, {size}], found torch.uint8 [{size}]"
    )
