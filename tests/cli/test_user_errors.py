"""Mistakes get one clear line, without waiting on the network: model references that are neither
a directory, legacy files nor a well-formed hub id; hub ids offline or with the hub unreachable;
an `elmo` component without a model (when it is added) or with a model of nothing (when it is
initialized or first used). The `spacy-elmo` CLI prints the line and exits 2, as it does for every
mistake of the user, whichever command and whoever finds it (argparse, a handler, the library)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import spacy

from helpers import ROOT, make_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.cli import main
from spacy_elmo.formats.references import ModelNotFoundError, is_hub_id, load_model
from spacy_elmo.spacy.component import ElmoSettingError

DEAD_HUB = "http://127.0.0.1:9"  # nothing listens there: a connection is refused at once


@pytest.mark.parametrize("reference", ["./missing", "/no/such/elmo", "~/elmo", "build/runs/elmo", "missing", "a/b/c"])
def test_local_looking_references_fail_at_once(reference):
    start = time.perf_counter()
    with pytest.raises(ModelNotFoundError) as info:
        load_model(reference)
    assert time.perf_counter() - start < 1.0
    assert str(info.value) == f"no such directory: {reference}"


def test_hub_id_shape():
    assert is_hub_id("allenai/elmo-small") and is_hub_id("models/fixture_elmo")
    for local in ("./a/b", "/a/b", "~/a", "a/b/c", "a", "a/../b", ".hidden/x"):
        assert not is_hub_id(local), local


def _cli(*args, **env):
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "spacy_elmo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    return result, time.perf_counter() - start


def _one_error_line(result):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_cli_offline_hub_id_is_one_line(tmp_path):
    result, _ = _cli("embed", "someone/missing-elmo", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path))
    line = _one_error_line(result)
    assert "no such directory: someone/missing-elmo" in line and "HF_HUB_OFFLINE is set" in line


def test_unreachable_hub_fails_fast_but_cached_models_load(tiny_model_dir, tmp_path):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--test-org--tiny-elmo"
    shutil.copytree(tiny_model_dir, repo / "snapshots" / revision)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    script = textwrap.dedent("""
        import time
        from spacy_elmo.formats.references import ModelNotFoundError, load_model
        print(load_model("test-org/tiny-elmo").config.output_dim)   # cached: no hub needed
        start = time.perf_counter()
        try:
            load_model("someone/missing-elmo")
        except ModelNotFoundError as err:
            print(f"{time.perf_counter() - start:.1f}", err)
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "HF_ENDPOINT": DEAD_HUB,
            "HF_HUB_CACHE": str(tmp_path / "hub"),
            "HF_HOME": str(tmp_path / "home"),
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dim, failed = result.stdout.strip().splitlines()
    assert dim == "32"
    seconds, message = failed.split(" ", 1)
    assert float(seconds) < 5.0  # huggingface_hub's 5 retries alone wait 1+2+4+8+8 s
    assert message.startswith(
        "no such directory: someone/missing-elmo; as a Hugging Face hub id it is not in the local cache, "
        "and the hub cannot be reached ("
    )
    assert "Retry" not in result.stderr


@pytest.mark.parametrize("command", ["embed", "similar"])
def test_cli_missing_directory_is_one_line_and_exit_2(command, tmp_path, capsys):
    args = [command, str(tmp_path / "nope")] + (["London"] if command == "similar" else [])
    assert main(args) == 2
    assert capsys.readouterr().err == f"error: no such directory: {tmp_path / 'nope'}\n"


def test_elmo_without_model_fails_at_add_pipe_naming_the_setting():
    nlp = spacy.blank("en")
    with pytest.raises(ElmoSettingError) as info:
        nlp.add_pipe("elmo")  # at once, not at the first Doc
    assert str(info.value) == "elmo: no biLM: elmo `model` (paths.elmo) is not set"
    assert nlp.pipe_names == []


def test_elmo_with_a_model_of_nothing_fails_at_initialize_and_first_use_naming_the_setting():
    """A name of nothing here is accepted when the component is built (a saved pipeline's config
    names files that may be gone), and fails in one line when the weights are needed."""
    line = "elmo `model` (paths.elmo): no such directory: ./no/such/bilm"
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": "./no/such/bilm"})
    with pytest.raises(ElmoSettingError) as info:
        nlp.initialize()
    assert str(info.value) == line
    with pytest.raises(ElmoSettingError) as info:
        nlp("The cat sat .")
    assert str(info.value) == line


def _truncated_hdf5(folder):
    weights = folder / "lm_weights.hdf5"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    return f"{weights}: not a readable HDF5 file (truncated or corrupt?): "


def _options_not_json(folder):
    (folder / "options.json").write_text('{"lstm": {"dim": 16,')
    return f"{folder / 'options.json'}: not valid JSON ("


def _options_only(folder):
    (folder / "lm_weights.hdf5").unlink()
    return f"{folder / 'lm_weights.hdf5'}: no such file; {folder} has options.json but no .hdf5 weights file"


@pytest.mark.parametrize("damage", [_truncated_hdf5, _options_not_json, _options_only])
def test_broken_legacy_files_fail_at_add_pipe_in_one_line(allennlp_dir, tmp_path, damage):
    """Files that are there are checked when the component is built (no weights read)."""
    folder = tmp_path / "legacy"
    folder.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(allennlp_dir / name, folder / name)
    start = damage(folder)
    nlp = spacy.blank("en")
    with pytest.raises(ElmoSettingError) as info:
        nlp.add_pipe("elmo", config={"model": str(folder)})
    assert str(info.value).startswith(f"elmo `model` (paths.elmo): {start}"), str(info.value)
    assert "\n" not in str(info.value) and nlp.pipe_names == []


# the two readings of a name that is neither a folder here nor a cached hub id
BOTH_READINGS = (
    "no such directory: {0}; as a Hugging Face hub id it is not in the local cache, and HF_HUB_OFFLINE is set"
)


def test_a_name_of_nothing_fails_at_initialize_and_first_use_naming_both_readings(tmp_path):
    """add_pipe accepts it (a saved pipeline's leftover name looks the same); initialize and the
    first Doc fail in one line. Offline, in a fresh process (huggingface_hub reads HF_HUB_OFFLINE
    when imported)."""
    script = textwrap.dedent("""
        import json, spacy
        errors = []
        for run in ("initialize", "first Doc"):
            nlp = spacy.blank("en")
            nlp.add_pipe("elmo", config={"model": "build/fixure_elmo"})
            try:
                nlp.initialize() if run == "initialize" else nlp("The cat sat .")
            except Exception as err:
                errors.append([type(err).__name__, str(err)])
        print(json.dumps(errors))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = "elmo `model` (paths.elmo): " + BOTH_READINGS.format("build/fixure_elmo")
    assert json.loads(result.stdout) == [["ElmoSettingError", line]] * 2


def test_spacy_train_with_a_name_of_nothing_is_one_line_before_training(tmp_path):
    """`python -m spacy train ... --paths.elmo build/does_not_exist`: spaCy prints the line (wrapped at
    80 columns) without a traceback and spaCy exits 1 before training; the output folder stays empty."""
    corpus = make_corpus(tmp_path / "train.spacy")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "ner_elmo.cfg"), "--output", str(out)]
    data = ["--paths.train", str(corpus), "--paths.dev", str(corpus), "--paths.elmo", "build/does_not_exist"]
    done = subprocess.run(
        command + data,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")},
    )
    shown = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # wasabi's colours, where it uses them
    assert done.returncode == 1, shown
    assert "Traceback" not in shown and "Training pipeline" not in shown, shown
    after = " ".join(shown.split("Initializing pipeline", 1)[1].strip("= \n").split())
    assert after == "✘ elmo `model` (paths.elmo): " + BOTH_READINGS.format("build/does_not_exist"), shown
    assert not out.exists() or not any(out.iterdir())


# an ELMoForManyLangs directory is checked when it is named (architecture parsed, files present,
# no weights read), not at the first Doc: (damage, the file the line names, what it says)
EFML_BROKEN = {
    "no encoder.pkl": (
        lambda d: (d / "encoder.pkl").unlink(),
        "encoder.pkl",
        "no such file; expected the ELMoForManyLangs biLSTM weights",
    ),
    "no token_embedder.pkl": (
        lambda d: (d / "token_embedder.pkl").unlink(),
        "token_embedder.pkl",
        "no such file; expected the ELMoForManyLangs token embedder weights",
    ),
    "no char.dic": (
        lambda d: (d / "char.dic").unlink(),
        "char.dic",
        "no such file; expected the ELMoForManyLangs character lexicon",
    ),
    "no word.dic": (
        lambda d: (d / "word.dic").unlink(),
        "word.dic",
        "no such file; expected the ELMoForManyLangs word lexicon (word_dim is 8)",
    ),
    "no config.json": (
        lambda d: (d / "config.json").unlink(),
        "config.json",
        "no such file; expected the ELMoForManyLangs config naming the architecture json",
    ),
    "architecture not JSON": (lambda d: (d / "tiny.json").write_text("{"), "tiny.json", "not valid JSON"),
    "architecture without a field": (
        lambda d: (d / "tiny.json").write_text((d / "tiny.json").read_text().replace('"dim"', '"dimension"')),
        "tiny.json",
        "missing field 'encoder.dim'",
    ),
}


@pytest.fixture
def efml_copy(fixtures_dir, tmp_path):
    target = tmp_path / "zh.model"
    shutil.copytree(fixtures_dir / "efml_tiny", target)
    return target


@pytest.mark.parametrize("case", list(EFML_BROKEN))
def test_broken_efml_directory_fails_at_add_pipe_naming_the_file(efml_copy, case):
    damage, name, what = EFML_BROKEN[case]
    damage(efml_copy)
    nlp = spacy.blank("zh")
    with pytest.raises(ElmoSettingError) as info:
        nlp.add_pipe("elmo", config={"model": str(efml_copy)})
    assert str(info.value).startswith(f"elmo `model` (paths.elmo): {efml_copy / name}: {what}"), str(info.value)
    assert "\n" not in str(info.value) and nlp.pipe_names == []


@pytest.mark.parametrize("case", ["no encoder.pkl", "architecture without a field"])
def test_cli_broken_efml_directory_is_one_line(efml_copy, case, capsys):
    damage, name, what = EFML_BROKEN[case]
    damage(efml_copy)
    assert main(["embed", str(efml_copy)]) == 2
    assert capsys.readouterr().err == f"error: {efml_copy / name}: {what}\n"


# --- one convention for every command: `error: ` lines on stderr, exit status 2 ---------------------------

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")  # the console script, as a user runs it


def _mistakes(tiny_model_dir, tmp_path) -> dict[str, list]:
    """A mistake per command and per finder: argparse, the command's handler, the library."""
    text = tmp_path / "sentences.txt"
    text.write_text("the cat sat on the mat .\n")
    return {
        "unknown command": ["frob"],
        "missing argument": ["convert"],
        "bad option value": ["similar", tiny_model_dir, "cat", "-n", "many"],
        "unknown option": ["embed", tiny_model_dir, "--bogus"],
        "embed INPUT without OUTPUT": ["embed", tiny_model_dir, text],
        "missing model": ["embed", tmp_path / "no_such_elmo", text, tmp_path / "out.hdf5"],
        "missing input": ["embed", tiny_model_dir, tmp_path / "none.txt", tmp_path / "out.hdf5", "--no-progress"],
        "convert missing weights": ["convert", tmp_path / "options.json", tmp_path / "w.hdf5", tmp_path / "elmo"],
        "unknown shipped config": ["init-config", "no_such_config", tmp_path / "x.cfg"],
        "pretrain without data": ["pretrain", ROOT / "configs" / "pretrain_tiny.cfg", "--output", tmp_path / "run"],
        "similar missing corpus": ["similar", tiny_model_dir, "cat", "--corpus", tmp_path / "none.txt"],
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown command",
        "missing argument",
        "bad option value",
        "unknown option",
        "embed INPUT without OUTPUT",
        "missing model",
        "missing input",
        "convert missing weights",
        "unknown shipped config",
        "pretrain without data",
        "similar missing corpus",
    ],
)
def test_every_user_error_is_error_lines_and_exit_2(case, tiny_model_dir, tmp_path):
    args = _mistakes(tiny_model_dir, tmp_path)[case]
    result = subprocess.run(
        [str(SPACY_ELMO), *map(str, args)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (case, result.stderr[-2000:])
    assert lines and all(line.startswith("error: ") for line in lines), (case, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and result.stdout == "", case


def test_a_saved_pipeline_given_as_the_model_points_at_its_bilm(tiny_model_dir, tmp_path, capsys):
    """`model` naming a saved spaCy pipeline (a likely slip: the folder `spacy train` wrote) says where
    its biLM is, at add_pipe and in the CLI, instead of the generic "not an ELMo model"."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    nlp.to_disk(tmp_path / "model-best")
    line = (
        f"{tmp_path / 'model-best'}: a saved spaCy pipeline, not a biLM folder: its biLM is "
        f"{tmp_path / 'model-best' / 'elmo' / 'bilm'} (give that folder as the model, or load the pipeline with "
        "spacy.load)"
    )
    with pytest.raises(ElmoSettingError) as info:
        spacy.blank("en").add_pipe("elmo", config={"model": str(tmp_path / "model-best")})
    assert str(info.value) == f"elmo `model` (paths.elmo): {line}"
    assert main(["similar", str(tmp_path / "model-best"), "cat"]) == 2
    assert capsys.readouterr().err == f"error: {line}\n"
    spacy.blank("en").add_pipe("elmo", config={"model": str(tmp_path / "model-best" / "elmo" / "bilm")})
