"""A spaCy or HF user's first hour (issue 20): the quick start, configs spaCy's own tools accept,
mistakes caught before any work, a project that resumes, text that must be UTF-8, quiet loads, a
command line that answers at once. Real subprocesses for what a user types, real spaCy runs."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from spacy_elmo.cli import main
from spacy_elmo.shipped_configs import shipped_configs

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
TINY = ROOT / "configs" / "pretrain_tiny.cfg"
SPACY_CONFIGS = [name for name, path in shipped_configs().items() if "[nlp]" in path.read_text()]
REPO_ONLY = re.compile(r"\b(configs|docs|bench|scripts|tests|results)/|README|RESULTS")


def run(*args, timeout=600, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **kwargs.pop("env", {})}
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env, **kwargs)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A tiny DocBin with entities (for NER configs) and tags (for probes)."""
    from test_spacy_training import make_corpus

    return make_corpus(tmp_path_factory.mktemp("first_hour") / "train.spacy")


def lm_text(path: Path, lines: int = 200) -> Path:
    words = "the cat sat on a mat while dogs ran to the big red house".split()
    path.write_text("\n".join(" ".join(words[(i + j) % len(words)] for j in range(4 + i % 7)) for i in range(lines)) + "\n")
    return path


# --- 1. the README starts with the user's quick start -------------------------------------------


def test_readme_opens_with_a_quick_start_for_spacy_and_hf_users():
    text = (ROOT / "README.md").read_text()
    quick = text[text.index("## Quick start"):text.index("## Set-up: two commands")]
    assert text.index("## Quick start") < text.index("make main")  # the package first, then the project
    assert "pip install" in quick and "load_legacy(" in quick and "docs/models.md" in quick
    assert "AllenNLP" in quick and "hub" in quick  # where real weights come from
    assert 'add_pipe("elmo"' in quick and "AutoModel.from_pretrained" in quick and 'pipeline("feature-extraction"' in quick
    hf = quick[quick.index("In Hugging Face"):]
    assert hf.index("import spacy_elmo") < hf.index("from transformers import")  # and says why


# --- 2. spaCy's own tools take our configs as they are ----------------------------------------------


@pytest.mark.parametrize("name", SPACY_CONFIGS)
def test_every_shipped_spacy_config_passes_spacy_debug_config(name, corpus, tiny_model_dir, capsys):
    from spacy.cli.debug_config import debug_config

    overrides = {"paths.train": str(corpus), "paths.dev": str(corpus)}
    if "elmo" in name:
        overrides["paths.elmo"] = str(tiny_model_dir)
    try:
        debug_config(shipped_configs()[name], overrides=overrides)  # what `python -m spacy debug config` runs
    except SystemExit as stop:  # its way of reporting an invalid config
        pytest.fail(f"spacy debug config rejects {name}: exit {stop.code}\n{capsys.readouterr().out[-2000:]}")
    assert "Config is valid" in capsys.readouterr().out


def test_init_config_writes_what_spacy_debug_config_and_train_accept(corpus, tiny_model_dir, tmp_path):
    """What a user types: init-config (name without .cfg, --paths.elmo), spacy debug config, spacy train."""
    config = tmp_path / "x.cfg"
    made = run(sys.executable, "-m", "spacy_elmo", "init-config", "ner_elmo", config, "--paths.elmo", tiny_model_dir)
    assert made.returncode == 0, made.stderr
    data = ["--paths.train", corpus, "--paths.dev", corpus]
    checked = run(sys.executable, "-m", "spacy", "debug", "config", config, *data)
    assert checked.returncode == 0 and "Config is valid" in checked.stdout, checked.stdout[-3000:]
    out = tmp_path / "trained"
    trained = run(sys.executable, "-m", "spacy", "train", config, "--output", out, *data,
                  "--training.max_steps", "2", "--training.eval_frequency", "1")
    assert trained.returncode == 0, (trained.stdout + trained.stderr)[-3000:]
    # 9: the training run had its layer cache; the trained pipeline does not keep one
    nlp = spacy.load(out / "model-last")
    assert not nlp.get_pipe("elmo").cache.enabled and nlp.config["components"]["elmo"]["cache_mb"] == 0


def test_init_config_lang_gpu_stdout_and_names(tmp_path, capsys):
    assert main(["init-config", "ner_elmo.cfg", "-", "--lang", "de", "--gpu", "--paths.elmo", "my elmo"]) == 0
    text = capsys.readouterr().out
    config = spacy.util.load_config_from_str(text, interpolate=False)
    assert config["nlp"]["lang"] == "de" and config["system"]["gpu_allocator"] == "pytorch"
    assert config["paths"]["elmo"] == "my elmo"
    assert "# Layer cache" in text  # edited in place: the comments stay
    assert main(["init-config", "pretrain_small", "-", "--gpu", "--lang", "fr"]) == 0
    from spacy_elmo.training.settings import load_settings

    settings = load_settings(None, text=capsys.readouterr().out)
    assert settings["system"]["device"] == "cuda" and settings["data"]["lang"] == "fr"
    assert main(["init-config", "ner_elmo", "-", "--paths.nope", "1"]) == 2
    assert "[paths] has no setting 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_init_config_names_nothing_a_pip_install_lacks(name, capsys):
    assert main(["init-config", name, "-"]) == 0
    found = [line for line in capsys.readouterr().out.splitlines() if line.startswith("#") and REPO_ONLY.search(line)]
    assert not found, found


# --- 3. mistakes fail in one line, before any work ------------------------------------------------


def test_spacy_train_without_paths_elmo_is_one_line_before_training(corpus, tmp_path):
    done = run(sys.executable, "-m", "spacy", "train", ROOT / "configs" / "ner_elmo.cfg",
               "--paths.train", corpus, "--paths.dev", corpus, "--output", tmp_path / "out")
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert "Traceback" not in shown and "Training pipeline" not in shown, shown
    after = [line for line in shown.split("Initializing pipeline", 1)[1].splitlines()[1:] if line.strip()]
    assert len(after) == 1 and "elmo: no biLM: elmo `model` (paths.elmo) is not set" in after[0], shown


def test_a_wrong_model_fails_at_add_pipe_but_saved_pipelines_load_without_it(tiny_model_dir, tmp_path):
    from spacy_elmo.pipeline_component import ElmoSettingError

    nlp = spacy.blank("en")
    start = time.perf_counter()
    with pytest.raises(ElmoSettingError, match=r"no such directory: .*missing"):
        nlp.add_pipe("elmo", config={"model": str(tmp_path / "missing")})
    with pytest.raises(ElmoSettingError, match=r"not an ELMo model"):
        nlp.add_pipe("elmo", config={"model": str(tmp_path)})  # exists, holds no model
    assert time.perf_counter() - start < 1.0  # nothing is loaded to find out
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"model": str(tmp_path / "gone")}}})
    assert loaded("A cat .")._.elmo.layers.shape == (3, 3, 32)  # its own weights, `model` never read


# --- 4. an interrupted project resumes ---------------------------------------------------------------


def _pretraining_step(output: Path, train: Path, *extra) -> list:
    return [sys.executable, SCRIPTS / "pretrain_resumable.py", "--output", output, "--config", TINY, "--",
            "python", "-m", "spacy_elmo", "pretrain", TINY, "--output", output, "--paths.train", train,
            "--training.max_steps", "30", "--training.checkpoint_every", "10", "--no-progress", *extra]


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
    command = [sys.executable, SCRIPTS / "pretrain_resumable.py", "--output", output, "--config", TINY, "--",
               "python", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
               "-m", "spacy_elmo", "pretrain", TINY, "--output", output, "--paths.train", train,
               "--training.max_steps", "100000", "--training.checkpoint_every", "10", "--no-progress"]
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
    return data, [sys.executable, SCRIPTS / "train_ner.py", ROOT / "configs" / "ner_baseline.cfg", "--name", "b",
                  "--fractions", "10", "--corpus", data, "--out", tmp_path / "out", "--steps", "2", "--eval-frequency", "1"]


def test_train_ner_does_not_redo_finished_trainings(corpus, tmp_path):
    data, command = _train_ner_command(corpus, tmp_path)
    first = run(*command)
    assert first.returncode == 0, first.stdout[-3000:]
    model = tmp_path / "out" / "b_10" / "model-last" / "meta.json"
    stamp = model.stat().st_mtime_ns
    record = json.loads((tmp_path / "out" / "b_10" / "provenance.json").read_text())
    assert record["exit_code"] == 0 and str(data / "train_10.spacy") in record["inputs"]
    second = run(*command)
    assert second.returncode == 0 and "[b_10] finished earlier with the same command, inputs and threads" in second.stdout, second.stdout
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
    one_thread = subprocess.run([str(c) for c in command + ["--jobs", "2"]], capture_output=True, text=True, timeout=600, env=script_env)
    assert one_thread.returncode == 0, one_thread.stdout[-3000:]
    assert json.loads(record.read_text())["machine"]["threads"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    default = subprocess.run([str(c) for c in command + ["--jobs", "1"]], capture_output=True, text=True, timeout=600, env=script_env)
    assert default.returncode == 0 and "[b_10] started" in default.stdout and "moved to" in default.stdout, default.stdout
    assert json.loads(record.read_text())["machine"]["threads"] == {}


# --- 5. text that is not UTF-8, and empty input ------------------------------------------------------


@pytest.mark.parametrize("kind", ["utf16", "utf16-no-bom", "latin1", "empty"])
def test_pretrain_refuses_text_that_is_not_utf8_before_any_work(kind, tmp_path, capsys):
    train = tmp_path / "train.txt"
    text = "the cat sat\nle café\n"
    train.write_bytes({
        "utf16": text.encode("utf-16"), "utf16-no-bom": text.encode("utf-16-le"),
        "latin1": ("the cat sat\n" * 3 + "le café\n").encode("latin-1"), "empty": b"\n\n",
    }[kind])
    out = tmp_path / "run"
    assert main(["pretrain", str(TINY), "--output", str(out), "--paths.train", str(train), "--no-progress"]) == 2
    err = capsys.readouterr().err
    expected = {
        "utf16": f"{train}, line 1: starts with a UTF-16 byte-order mark",
        "utf16-no-bom": f"{train}, line 1: NUL bytes",
        "latin1": f"{train}, line 4: not UTF-8 (0xe9 at byte 7 of the line",
        "empty": f"paths.train: no text in {train}",
    }[kind]
    assert err.startswith(f"error: {expected}") and len(err.splitlines()) == 1, err
    assert not out.exists()  # refused before anything was written (10: no metrics.jsonl left behind)


def test_a_bad_line_past_the_checked_start_names_its_line_when_read(tmp_path):
    from spacy_elmo.text_input import TextError, check_text_files, read_block

    path = tmp_path / "big.txt"
    path.write_bytes(b"a fine line of text\n" * 5000 + "caf\xe9\n".encode("latin-1") + b"more\n")
    check_text_files([path], "paths.train")  # the first 64 KiB are fine
    lines, offset = read_block(path, 0, 4000, 1 << 20)
    assert len(lines) == 4000
    with pytest.raises(TextError, match=rf"^{re.escape(str(path))}, line 5001: not UTF-8 \(0xe9 at byte 4 of the line"):
        read_block(path, offset, 4000, 1 << 20)


def test_a_long_line_cut_inside_a_character_is_still_text(tmp_path):
    from spacy_elmo.text_input import read_block

    path = tmp_path / "long.txt"
    path.write_text("é" * 100 + "\nnext\n", encoding="utf-8")
    lines, _ = read_block(path, 0, 10, 51)  # 51 bytes: 25 characters and half of one
    assert lines == ["é" * 25, "next"]


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_embed_refuses_bad_text_and_empty_input_from_a_file_or_stdin(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "layers.hdf5"
    cases = {"empty.txt": b"", "blank.txt": b"\n\n", "utf16.txt": "the cat\n".encode("utf-16"),
             "latin1.txt": "the café\n".encode("latin-1")}
    messages = {"empty.txt": "no input", "blank.txt": "no input", "utf16.txt": "line 1: starts with a UTF-16 byte-order mark",
                "latin1.txt": "line 1: not UTF-8"}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert main(["embed", str(tiny_model_dir), str(tmp_path / name), str(out), "--no-progress"]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"error: {tmp_path / name}") and messages[name] in err and len(err.splitlines()) == 1, err
        assert not out.exists()
    for data, message in ((b"", "<stdin>: no input"), (b"caf\xe9\n", "<stdin>, line 1: not UTF-8")):
        _stdin(monkeypatch, data)
        assert main(["embed", str(tiny_model_dir)]) == 2
        assert capsys.readouterr().err.startswith(f"error: {message}")


def test_embed_format_text_is_honoured_on_stdin(tiny_model_dir, monkeypatch, capsys):
    _stdin(monkeypatch, b"Don't stop.\n")
    assert main(["embed", str(tiny_model_dir), "--format", "text", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "sentence: Do n't stop ." in out and "layers: (3, 4, 32)" in out  # spaCy's tokens, not split()
    _stdin(monkeypatch, b"Don't stop.\n")
    assert main(["embed", str(tiny_model_dir)]) == 0
    assert "layers: (3, 2, 32)" in capsys.readouterr().out


# --- 6. quiet by default --------------------------------------------------------------------------------


def test_loading_a_model_draws_no_progress_bar(tiny_model_dir, capfd):
    from spacy_elmo.loading import load_model

    load_model(tiny_model_dir)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    nlp("The cat .")
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s]" not in err, err
    from transformers.utils import logging as hf_logging

    assert hf_logging.is_progress_bar_enabled()  # switched off only while loading


@pytest.mark.parametrize("command", ["convert", "embed", "pretrain", "finetune", "similar", "probe"])
def test_every_command_that_may_draw_a_bar_takes_no_progress(command):
    from spacy_elmo.cli import build_parser

    parser = build_parser()
    assert "--no-progress" in parser._subparsers._group_actions[0].choices[command].format_help()


# --- 7. the command line ----------------------------------------------------------------------------------


def test_help_answers_at_once_without_importing_torch_transformers_or_spacy():
    for args in (["--help"], ["--version"], ["embed", "--help"]):
        start = time.perf_counter()
        done = run(sys.executable, "-X", "importtime", "-m", "spacy_elmo", *args)
        seconds = time.perf_counter() - start
        assert done.returncode == 0, done.stderr[-2000:]
        imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
        assert not imported & {"torch", "transformers", "spacy", "thinc", "numpy"}, sorted(imported)
        assert seconds < 5.0, seconds  # about 0.2 s; spaCy's own --help takes several
    assert run(sys.executable, "-m", "spacy_elmo", "--version").stdout.strip() == "spacy-elmo 0.1.0"


def test_import_spacy_elmo_registers_the_auto_classes(tiny_model_dir):
    script = (
        "import spacy_elmo\n"
        "from transformers import AutoConfig, AutoModel, AutoTokenizer\n"
        f"print(type(AutoModel.from_pretrained({str(tiny_model_dir)!r})).__name__,"
        f" type(AutoTokenizer.from_pretrained({str(tiny_model_dir)!r})).__name__)\n"
    )
    done = run(sys.executable, "-c", script)
    assert done.returncode == 0 and done.stdout.split() == ["ElmoModel", "ElmoTokenizer"], done.stderr[-2000:]


def test_help_shows_defaults_and_device_choices(capsys):
    from spacy_elmo.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    embed = commands["embed"].format_help()
    assert "(default: 32)" in embed and "(default: tokenized)" in embed and "(default: auto)" in embed
    assert "(default: None)" not in embed and "(default: False)" not in embed
    for name in ("embed", "similar", "probe"):
        assert "--device {auto,cpu,cuda}" in commands[name].format_help()


def test_device_cuda_without_a_gpu_is_one_line(tiny_model_dir, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on a machine without CUDA
    assert main(["similar", str(tiny_model_dir), "cat", "--vocab", str(TINY), "--device", "cuda"]) == 2
    assert capsys.readouterr().err == "error: device 'cuda' asked for, but no CUDA device is available\n"


# --- 10. smaller things ------------------------------------------------------------------------------------


def test_missing_heldout_file_names_the_setting(tmp_path, capsys):
    train = lm_text(tmp_path / "train.txt")
    args = ["pretrain", str(TINY), "--output", str(tmp_path / "run"), "--paths.train", str(train),
            "--paths.heldout", str(tmp_path / "heldout.txt")]
    assert main(args) == 2
    assert capsys.readouterr().err == f"error: paths.heldout: no text files match '{tmp_path / 'heldout.txt'}'\n"
    assert not (tmp_path / "run").exists()


def test_config_errors_are_one_line_each(capsys):
    args = ["pretrain", str(TINY), "--output", "unused", "--training.optimizer", "sgd", "--data.min_count", "0"]
    assert main(args) == 2
    lines = capsys.readouterr().err.splitlines()
    assert sorted(lines) == [
        "error: invalid pretraining config: data.min_count: expected greater than or equal to 1, found 0",
        "error: invalid pretraining config: training.optimizer: expected 'adagrad' or 'adam', found 'sgd'",
    ]


def test_probe_on_untagged_data_names_the_task(tiny_model_dir, tmp_path, capsys):
    untagged = tmp_path / "untagged.spacy"
    DocBin(docs=[Doc(spacy.blank("en").vocab, words=["A", "cat", "."])]).to_disk(untagged)
    assert main(["probe", str(tiny_model_dir), str(untagged), str(untagged), "--task", "pos", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {untagged}: probe task 'pos' needs fine-grained tags (token.tag_), and no token here has one\n"


# Files readable by others (the model-directory writer) and convert's argument order.


def test_written_weights_are_readable_by_other_users(allennlp_dir, tmp_path):
    old = os.umask(0o022)
    try:
        assert main(["convert", str(allennlp_dir / "options.json"), str(allennlp_dir / "lm_weights.hdf5"), str(tmp_path / "m")]) == 0
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(tmp_path / "m")})
        nlp.to_disk(tmp_path / "pipeline")  # what `spacy package` archives
    finally:
        os.umask(old)
    for weights in (tmp_path / "m" / "model.safetensors", tmp_path / "pipeline" / "elmo" / "bilm" / "model.safetensors"):
        assert weights.stat().st_mode & 0o044 == 0o044, oct(weights.stat().st_mode)


def test_convert_with_swapped_arguments_says_which_comes_first(allennlp_dir, tmp_path, capsys):
    assert main(["convert", str(allennlp_dir / "lm_weights.hdf5"), str(allennlp_dir / "options.json"), str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and re.search(r"order|swap", err) and "options" in err, err
