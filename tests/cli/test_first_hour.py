"""A spaCy or HF user's first hour (issue 20) at the command line: text that must be UTF-8, quiet loads, a
command line that answers at once, mistakes named in one line, files readable by others. Real subprocesses for
what a user types. (The quick start: tests/project/test_readme_quick_start.py; spaCy's tools on the shipped
configs: tests/spacy/test_spacy_tools.py; a project that resumes: tests/project/test_project_resumes.py.)"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from helpers import TINY, lm_text, run  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.cli import main
from spacy_elmo.constants import VERSION

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")  # the console script, as a user runs it

# --- 5. text that is not UTF-8, and empty input ------------------------------------------------------


@pytest.mark.parametrize("kind", ["utf16", "utf16-no-bom", "latin1", "empty"])
def test_pretrain_refuses_text_that_is_not_utf8_before_any_work(kind, tmp_path, capsys):
    train = tmp_path / "train.txt"
    text = "the cat sat\nle café\n"
    train.write_bytes(
        {
            "utf16": text.encode("utf-16"),
            "utf16-no-bom": text.encode("utf-16-le"),
            "latin1": ("the cat sat\n" * 3 + "le café\n").encode("latin-1"),
            "empty": b"\n\n",
        }[kind]
    )
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
    cases = {
        "empty.txt": b"",
        "blank.txt": b"\n\n",
        "utf16.txt": "the cat\n".encode("utf-16"),
        "latin1.txt": "the café\n".encode("latin-1"),
    }
    messages = {
        "empty.txt": "no input",
        "blank.txt": "no input",
        "utf16.txt": "line 1: starts with a UTF-16 byte-order mark",
        "latin1.txt": "line 1: not UTF-8",
    }
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
    from spacy_elmo.formats.references import load_model

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


def test_version_answers_without_importing_the_package_torch_transformers_or_spacy():
    """The console script answers --version from the installed metadata: no import of spacy_elmo (whose
    import registers the Auto classes, importing torch and transformers)."""
    script = Path(sys.executable).with_name("spacy-elmo")
    assert script.is_file(), "the console script is installed beside the interpreter"
    done = run(sys.executable, "-X", "importtime", str(script), "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"spacy-elmo {VERSION}", done.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
    assert not imported & {"spacy_elmo", "torch", "transformers", "spacy", "thinc", "numpy"}, sorted(imported)
    for args in (["--help"], ["embed", "--help"]):  # the rest goes through spacy_elmo.cli
        done = run(str(script), *args)
        assert done.returncode == 0 and "usage: spacy-elmo" in done.stdout, done.stderr[-2000:]
    assert run(sys.executable, "-m", "spacy_elmo", "--version").stdout.strip() == f"spacy-elmo {VERSION}"


def test_import_spacy_elmo_registers_the_auto_classes(tiny_model_dir, tmp_path):
    """`import spacy_elmo` registers the config at once and the model and tokenizer classes with the first
    ElmoConfig, so it imports neither transformers' modeling code (seconds) nor spaCy; every Auto path
    still finds the classes in a fresh interpreter: the tokenizer first, a model from a config, a config
    unpickled as the first one, and pipeline()."""
    model = str(tiny_model_dir)
    script = (
        "import pickle, sys\n"
        "import spacy_elmo\n"
        "assert not {'spacy', 'transformers.modeling_utils'} & set(sys.modules), 'imported at import'\n"
        "from transformers import AutoConfig, AutoModel, AutoTokenizer\n"
        f"print(type(AutoTokenizer.from_pretrained({model!r})).__name__)\n"  # before any model class is asked for
        f"print(type(AutoModel.from_pretrained({model!r})).__name__)\n"
        "config = AutoConfig.for_model('elmo', lstm_dim=8, projection_dim=4, filters=[[1, 4]], n_highway=0)\n"
        "print(type(AutoModel.from_config(config)).__name__)\n"
        f"open({str(tmp_path / 'config.pkl')!r}, 'wb').write(pickle.dumps(config))\n"
    )
    done = run(sys.executable, "-c", script)
    assert done.returncode == 0 and done.stdout.split() == ["ElmoTokenizer", "ElmoModel", "ElmoModel"], done.stderr[
        -2000:
    ]
    unpickled = (
        "import pickle, spacy_elmo\n"
        "from transformers import AutoModel, pipeline\n"
        f"config = pickle.loads(open({str(tmp_path / 'config.pkl')!r}, 'rb').read())\n"
        "print(type(AutoModel.from_config(config)).__name__)\n"
        f"print(len(pipeline('feature-extraction', model={model!r})('The cat sat .')[0]))\n"
    )
    done = run(sys.executable, "-c", unpickled)
    assert done.returncode == 0 and done.stdout.split() == ["ElmoModel", "4"], done.stderr[-2000:]


def test_spacy_blank_with_spacy_elmo_installed_does_not_import_the_model():
    """spaCy imports every installed plugin's factories through their entry points whenever it makes a
    pipeline, `spacy.blank("en")` too: our `elmo` factory must register without transformers' modeling
    code, which would add seconds to every spaCy process of a user who has spacy-elmo installed."""
    script = (
        "import sys, spacy\n"
        "nlp = spacy.blank('en')\n"
        "assert 'elmo' in spacy.registry.factories, 'the entry point was not loaded'\n"
        "print(sorted({'spacy_elmo.hf.modeling_elmo', 'transformers.modeling_utils'} & set(sys.modules)))\n"
    )
    done = run(sys.executable, "-c", script)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])


def test_help_shows_defaults_and_device_choices(capsys):
    from spacy_elmo.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    embed = " ".join(commands["embed"].format_help().split())
    assert "default: 32]" in embed and "(default: tokenized)" in embed and "(default: auto)" in embed
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
    args = [
        "pretrain",
        str(TINY),
        "--output",
        str(tmp_path / "run"),
        "--paths.train",
        str(train),
        "--paths.heldout",
        str(tmp_path / "heldout.txt"),
    ]
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
    assert (
        err == f"error: {untagged}: probe task 'pos' needs fine-grained tags (token.tag_), and no token here has one\n"
    )


# Files readable by others (the model-directory writer) and convert's argument order.


def test_written_weights_are_readable_by_other_users(allennlp_dir, tmp_path):
    old = os.umask(0o022)
    try:
        assert (
            main(
                [
                    "convert",
                    str(allennlp_dir / "options.json"),
                    str(allennlp_dir / "lm_weights.hdf5"),
                    str(tmp_path / "m"),
                ]
            )
            == 0
        )
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(tmp_path / "m")})
        nlp.to_disk(tmp_path / "pipeline")  # what `spacy package` archives
    finally:
        os.umask(old)
    for weights in (
        tmp_path / "m" / "model.safetensors",
        tmp_path / "pipeline" / "elmo" / "bilm" / "model.safetensors",
    ):
        assert weights.stat().st_mode & 0o044 == 0o044, oct(weights.stat().st_mode)


def test_convert_with_swapped_arguments_says_which_comes_first(allennlp_dir, tmp_path, capsys):
    assert (
        main(
            ["convert", str(allennlp_dir / "lm_weights.hdf5"), str(allennlp_dir / "options.json"), str(tmp_path / "m")]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and re.search(r"order|swap", err) and "options" in err, err


# --- config overrides anywhere on the command line -------------------------------------------------------


def test_config_overrides_may_come_before_the_config(tmp_path):
    """`spacy-elmo pretrain --paths.train x.txt my.cfg`, as docs/pretraining.md allows: the corpus is the
    override's value, the config the positional argument (before, x.txt was read as the config)."""
    corpus = lm_text(tmp_path / "x.txt", lines=40)
    shutil.copy(TINY, tmp_path / "my.cfg")
    done = run(
        SPACY_ELMO, "pretrain", "--paths.train", corpus, "my.cfg", "--output", "run", "--training.max_steps=2",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Trained 2 steps" in done.stderr
    saved = (tmp_path / "run" / "pretrain.cfg").read_text()
    assert re.search(rf'^train = "{re.escape(str(corpus))}"$', saved, re.M), saved
    # one that is no setting is argparse's line, wherever it is
    done = run(SPACY_ELMO, "pretrain", "--bogus", "my.cfg", "--output", "run2", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("error: unrecognized arguments: --bogus"), done.stderr
