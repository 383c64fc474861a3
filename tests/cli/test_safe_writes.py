"""What the commands write, and what they check first, as a user runs them: no command overwrites an
existing output without `--overwrite` (`convert` refuses a folder holding a model, its own earlier
output included, as `embed` and `init-config` refuse a file; other files in the folder stay); a
temporary output is removed on SIGTERM as on Ctrl-C (real signals to the console script), and what a run
killed with `kill -9` left is removed by the next run; input and output are checked before the model
loads (a model that breaks only when read shows the order), and a decoding error later in the input
still leaves no output."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spacy_elmo.cli import main

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")  # the console script, as a user runs it


def everything(folder: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder under `folder`, hidden ones included."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def status(args: list[str]) -> int:
    """`main`'s exit status, also where argparse refuses an argument (it exits, as on the command line)."""
    try:
        return main(args)
    except SystemExit as stop:
        return int(stop.code or 0)


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


# --- convert replaces a model only with --overwrite ----------------------------------------------------------


@pytest.fixture
def saved_bert(tmp_path) -> Path:
    """A (tiny) BERT saved by transformers, with a file of the user's beside it."""
    from transformers import BertConfig, BertModel

    folder = tmp_path / "models" / "my_model"
    config = BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)
    BertModel(config).save_pretrained(folder)
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    return folder


def test_convert_refuses_a_folder_holding_a_model_it_did_not_write(allennlp_dir, saved_bert, capsys):
    before = everything(saved_bert)
    assert main(["convert", str(allennlp_dir), str(saved_bert), "--no-progress"]) == 2
    line = one_error_line(capsys)
    assert line == (
        f"error: OUTPUT {saved_bert} already holds config.json, model.safetensors; "
        "pass --overwrite to replace them, or choose another OUTPUT"
    )
    assert everything(saved_bert) == before  # not a byte changed, no temporary left
    assert [p.name for p in saved_bert.parent.iterdir()] == ["my_model"]
    # --overwrite: the ELMo files replace BERT's; the user's vocab.txt stays
    assert main(["convert", str(allennlp_dir), str(saved_bert), "--no-progress", "--overwrite"]) == 0
    assert '"model_type": "elmo"' in (saved_bert / "config.json").read_text()
    assert (saved_bert / "vocab.txt").read_bytes() == before["vocab.txt"]


def test_convert_replaces_its_own_output_with_overwrite_and_keeps_the_users_files(allennlp_dir, tmp_path, capsys):
    out = tmp_path / "elmo"
    assert main(["convert", str(allennlp_dir), str(out), "--no-progress"]) == 0
    (out / "vocab.txt").write_text("cat\ndog\n")  # the user's word list, for `similar`
    os.chmod(out / "config.json", 0o600)
    before = everything(out)
    assert main(["convert", str(allennlp_dir), str(out), "--no-progress", "--license", "apache-2.0"]) == 2
    assert "pass --overwrite" in one_error_line(capsys) and everything(out) == before  # its own output too
    assert (
        main(["convert", str(allennlp_dir), str(out), "--no-progress", "--license", "apache-2.0", "--overwrite"]) == 0
    )
    assert "apache-2.0" in (out / "README.md").read_text()  # rewritten: its own earlier output
    assert (out / "vocab.txt").read_text() == "cat\ndog\n" and (out / "config.json").stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elmo"]  # no temporary folder beside it


def test_convert_onto_a_file_is_one_clear_line(allennlp_dir, tmp_path, capsys):
    target = tmp_path / "elmo"
    target.write_text("my notes\n")
    assert main(["convert", str(allennlp_dir), str(target), "--no-progress"]) == 2
    line = one_error_line(capsys)
    assert line == f"error: OUTPUT {target}: is a file, expected a folder"
    assert "Errno" not in line and target.read_text() == "my notes\n"


# --- signals: SIGTERM cleans up as Ctrl-C does; the next run cleans up after kill -9 -----------------------------


def _start_embed(model: Path, text: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [str(SPACY_ELMO), "embed", str(model), str(text), str(out), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        # as a terminal's foreground job: SIGINT at its default even where this suite ignores it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _wait_for_layers(child: subprocess.Popen, folder: Path) -> Path:
    """The temporary output, once embed writes layers into it."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()[1][-3000:]
        found = [p for p in folder.glob(".out.hdf5.tmp*") if p.stat().st_size > 4096]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("embed wrote no layers within 300 s")


@pytest.fixture(scope="module")
def long_text(tmp_path_factory) -> Path:
    """Enough lines that embed is still writing them when the signal comes."""
    path = tmp_path_factory.mktemp("text") / "long.txt"
    words = "the cat sat on a mat while dogs ran to the big red house".split()
    path.write_text("\n".join(" ".join(words[i % 7 :]) for i in range(200_000)) + "\n")
    return path


@pytest.mark.parametrize(
    "signum, status, said", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")]
)
def test_a_signal_during_embed_leaves_no_temporary_file(signum, status, said, tiny_model_dir, long_text, tmp_path):
    out_dir = tmp_path / "out"
    child = _start_embed(tiny_model_dir, long_text, out_dir / "out.hdf5")
    try:
        _wait_for_layers(child, out_dir)
        child.send_signal(signum)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == status, err[-3000:]
    assert err.strip().splitlines()[-1] == said and "Traceback" not in err, err[-3000:]
    assert everything(tmp_path) == {}  # neither output, temporary file nor the folder made for them


def test_the_next_run_removes_what_kill_9_left(tiny_model_dir, allennlp_dir, long_text, tmp_path, capsys):
    out_dir = tmp_path / "out"
    child = _start_embed(tiny_model_dir, long_text, out_dir / "out.hdf5")
    try:
        left = _wait_for_layers(child, out_dir)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert left.exists()  # kill -9 runs no cleanup
    short = tmp_path / "short.txt"
    short.write_text("the cat sat .\n")
    assert main(["embed", str(tiny_model_dir), str(short), str(out_dir / "out.hdf5"), "--no-progress"]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["out.hdf5"]
    # convert's temporary folder, as a killed run leaves it (its process gone): removed by the next run
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".elmo.tmp{int(gone.stdout)}"
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"half a model")
    assert main(["convert", str(allennlp_dir), str(tmp_path / "elmo"), "--no-progress"]) == 0
    assert not stale.exists() and (tmp_path / "elmo" / "model.safetensors").is_file()


# --- input and output checked before the model loads -----------------------------------------------------


@pytest.fixture
def breaks_when_read(fixtures_dir, tmp_path) -> Path:
    """An ELMoForManyLangs model that passes the cheap check and fails when its weights are read:
    whatever a command reports first instead of it was checked before the model loaded."""
    folder = tmp_path / "efml"
    shutil.copytree(fixtures_dir / "efml_tiny", folder)
    data = (folder / "encoder.pkl").read_bytes()
    (folder / "encoder.pkl").write_bytes(data[: len(data) // 2])
    return folder


def _stdin(monkeypatch, data: bytes) -> None:
    """Standard input as a pipe gives it: a buffered stream that can be peeked at."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(io.BytesIO(data))))


def test_embed_checks_input_and_output_before_the_model_loads(breaks_when_read, tmp_path, monkeypatch, capsys):
    model = str(breaks_when_read)
    text = tmp_path / "in.txt"
    text.write_text("the cat sat .\n")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("the café\n".encode("latin-1"))
    (tmp_path / "a_file").write_text("not a folder\n")
    out = tmp_path / "out" / "layers.hdf5"
    cases = {
        "input not UTF-8": ([latin1, out], f"{latin1}, line 1: not UTF-8"),
        "input a folder": ([tmp_path, out], f"argument INPUT: {tmp_path}: is a directory, expected a file"),
        "input missing": ([tmp_path / "none.txt", out], f"argument INPUT: {tmp_path / 'none.txt'}: no such file"),
        "output a folder": ([text, tmp_path], f"OUTPUT {tmp_path}: is a directory, expected a file"),
        "output under a file": (
            [text, tmp_path / "a_file" / "layers.hdf5"],
            f"OUTPUT {tmp_path / 'a_file' / 'layers.hdf5'}: cannot write there: {tmp_path / 'a_file'} is a file, "
            "not a folder",
        ),
    }
    for case, (paths, message) in cases.items():
        assert status(["embed", model, *map(str, paths), "--no-progress"]) == 2, case
        line = one_error_line(capsys)
        assert line.startswith(f"error: {message}"), (case, line)
        assert not (tmp_path / "out").exists()
    # standard input: what is there to read is checked first (into a file, and printed)
    for args in (["-", str(out)], []):
        for data, message in ((b"caf\xe9\n", "<stdin>, line 1: not UTF-8"), (b"", "<stdin>: no input")):
            _stdin(monkeypatch, data)
            assert main(["embed", model, *args, "--no-progress"]) == 2, (args, data)
            assert one_error_line(capsys).startswith(f"error: {message}"), (args, data)
    # the model itself, once the input and output pass
    assert main(["embed", model, str(text), str(out), "--no-progress"]) == 2
    assert "encoder.pkl: not a readable PyTorch state dict" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_decoding_error_later_in_the_input_leaves_no_output(tiny_model_dir, tmp_path, capsys):
    text = tmp_path / "in.txt"
    good = "the cat sat on the mat .\n" * 4000  # past the first block, which is checked up front
    text.write_bytes(good.encode() + "the café\n".encode("latin-1"))
    out = tmp_path / "out" / "layers.hdf5"
    assert main(["embed", str(tiny_model_dir), str(text), str(out), "--no-progress"]) == 2
    assert one_error_line(capsys).startswith(f"error: {text}, line 4001: not UTF-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_convert_checks_its_output_before_the_model_loads(breaks_when_read, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a folder\n")
    for output, message in (
        (tmp_path / "a_file", f"OUTPUT {tmp_path / 'a_file'}: is a file, expected a folder"),
        (tmp_path / "a_file" / "elmo", f"OUTPUT {tmp_path / 'a_file' / 'elmo'}: cannot write there"),
    ):
        assert main(["convert", str(breaks_when_read), str(output), "--no-progress"]) == 2
        assert one_error_line(capsys).startswith(f"error: {message}")


def test_sigterm_during_pretraining_names_the_checkpoint_and_leaves_no_partial_one(tmp_path):
    """SIGTERM (a job scheduler's stop) does what Ctrl-C does: one line naming the checkpoint
    `--resume` continues from, exit 143, and no half-written checkpoint folder (checkpoints come
    every 2 steps, so the signal most likely lands while one is written)."""
    from helpers import TINY, lm_text

    corpus = lm_text(tmp_path / "train.txt")
    out = tmp_path / "run"
    child = subprocess.Popen(
        [str(SPACY_ELMO), "pretrain", str(TINY), "--output", str(out), "--no-progress"]
        + ["--paths.train", str(corpus), "--training.max_steps", "100000", "--training.checkpoint_every=2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoints" / "latest").is_file():
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()[1][-3000:]
            time.sleep(0.05)
        time.sleep(0.5)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "--resume" in err.strip().splitlines()[-1], err[-3000:]
    assert not list((out / "checkpoints").glob(".*tmp*")), sorted(p.name for p in (out / "checkpoints").iterdir())
