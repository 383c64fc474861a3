"""A spaCy user's first hour (issue 20), with spaCy's own tools: `spacy debug config` and `spacy train` take the
shipped configs and what `spacy-elmo init-config` writes as they are, and a missing or wrong `model` fails in
one line before any work. Real subprocesses for what a user types, real spaCy runs."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
import spacy

from helpers import make_corpus, run, spacy_transformers_missing  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.cli import main
from spacy_elmo.tools.init_config import shipped_configs

ROOT = Path(__file__).resolve().parents[2]
SPACY_CONFIGS = [name for name, path in shipped_configs().items() if "[nlp]" in path.read_text()]
REPO_ONLY = re.compile(r"\b(configs|docs|bench|lab|tests|results)/|README|RESULTS")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A tiny DocBin with entities (for NER configs) and tags (for probes)."""
    return make_corpus(tmp_path_factory.mktemp("first_hour") / "train.spacy")


# --- 2. spaCy's own tools take our configs as they are ----------------------------------------------


@pytest.mark.parametrize("name", SPACY_CONFIGS)
def test_every_shipped_spacy_config_passes_spacy_debug_config(name, corpus, tiny_model_dir, request, capsys):
    from spacy.cli.debug_config import debug_config

    overrides = {"paths.train": str(corpus), "paths.dev": str(corpus)}
    if "elmo" in name:
        overrides["paths.elmo"] = str(tiny_model_dir)
    if "trf" in name:  # spacy-transformers' `transformer` component, on a small BERT made here
        if spacy_transformers_missing():
            pytest.skip(spacy_transformers_missing())
        overrides["paths.transformer"] = str(request.getfixturevalue("tiny_bert_dir"))
    try:
        debug_config(shipped_configs()[name], overrides=overrides)  # what `python -m spacy debug config` runs
    except SystemExit as stop:  # its way of reporting an invalid config
        pytest.fail(f"spacy debug config rejects {name}: exit {stop.code}\n{capsys.readouterr().out[-2000:]}")
    assert "Config is valid" in capsys.readouterr().out


@pytest.mark.slow
def test_init_config_writes_what_spacy_debug_config_and_train_accept(corpus, tiny_model_dir, tmp_path):
    """What a user types: init-config (name without .cfg, --paths.elmo), spacy debug config, spacy train."""
    config = tmp_path / "x.cfg"
    made = run(sys.executable, "-m", "spacy_elmo", "init-config", "ner_elmo", config, "--paths.elmo", tiny_model_dir)
    assert made.returncode == 0, made.stderr
    data = ["--paths.train", corpus, "--paths.dev", corpus]
    checked = run(sys.executable, "-m", "spacy", "debug", "config", config, *data)
    assert checked.returncode == 0 and "Config is valid" in checked.stdout, checked.stdout[-3000:]
    out = tmp_path / "trained"
    trained = run(
        sys.executable,
        "-m",
        "spacy",
        "train",
        config,
        "--output",
        out,
        *data,
        "--training.max_steps",
        "2",
        "--training.eval_frequency",
        "1",
    )
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


@pytest.mark.slow
def test_spacy_train_without_paths_elmo_is_one_line_before_training(corpus, tmp_path):
    done = run(
        sys.executable,
        "-m",
        "spacy",
        "train",
        ROOT / "configs" / "ner_elmo.cfg",
        "--paths.train",
        corpus,
        "--paths.dev",
        corpus,
        "--output",
        tmp_path / "out",
    )
    shown = done.stdout + done.stderr
    assert done.returncode == 1, shown
    assert "Traceback" not in shown and "Training pipeline" not in shown, shown
    after = [line for line in shown.split("Initializing pipeline", 1)[1].splitlines()[1:] if line.strip()]
    assert len(after) == 1 and "elmo: no biLM: elmo `model` (paths.elmo) is not set" in after[0], shown


def test_a_wrong_model_fails_before_any_work_but_saved_pipelines_load_without_it(tiny_model_dir, tmp_path):
    from spacy_elmo.spacy.component import ElmoSettingError

    nlp = spacy.blank("en")
    start = time.perf_counter()
    with pytest.raises(ElmoSettingError, match=r"not an ELMo model"):
        nlp.add_pipe("elmo", config={"model": str(tmp_path)})  # exists, holds no model: at add_pipe
    nlp.add_pipe("elmo", config={"model": str(tmp_path / "missing")})  # nothing there: when the weights are needed
    with pytest.raises(ElmoSettingError, match=r"no such directory: .*missing$"):
        nlp.initialize()
    assert time.perf_counter() - start < 1.0  # nothing is loaded to find out
    nlp.remove_pipe("elmo")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline", config={"components": {"elmo": {"model": str(tmp_path / "gone")}}})
    assert loaded("A cat .")._.elmo.layers.shape == (3, 3, 32)  # its own weights, `model` never read
