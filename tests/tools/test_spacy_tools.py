"""A spaCy user's first hour (issue 20), with spaCy's own tools: `spacy debug config` and `spacy train` take the
shipped configs and what `spacy-elmo init-config` writes as they are, and a missing or wrong `model` fails in
one line before any work; every spaCy command a user runs on a pipeline (issue 65: `debug config|data|model`,
`train`, `evaluate`, `benchmark speed`, `apply`, `package`, `find-threshold`) runs on an ELMo pipeline. Real
subprocesses for what a user types, real spaCy runs."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import DocBin

from helpers import make_corpus, run, spacy_transformers_missing  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.cli import main
from spacy_elmo.constants import DEFAULT_DEVICE, MAX_BATCH_TOKENS, MAX_LENGTH, WINDOW_OVERLAP
from spacy_elmo.tools.init_config import shipped_configs

ROOT = Path(__file__).resolve().parents[2]
SPACY_CONFIGS = [name for name, path in shipped_configs().items() if "[nlp]" in path.read_text()]
# the configs whose task model reads the `elmo` component through a listener
LISTENER_CONFIGS = [
    name
    for name in SPACY_CONFIGS
    if re.search(r"spacy-elmo\.(ElmoListener|ElmoEmbed)\.v1", shipped_configs()[name].read_text())
]
TEXTS = ["Yesterday Alice went to see the sea .", "Bob went to Paris ."]
REPO_ONLY = re.compile(r"\b(configs|docs|bench|lab|tests|results)/|README|RESULTS")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A tiny DocBin with entities (for NER configs) and tags (for probes)."""
    return make_corpus(tmp_path_factory.mktemp("first_hour") / "train.spacy")


@pytest.fixture(scope="module")
def train_corpus(tmp_path_factory) -> Path:
    """The same Docs, 120 of them: `spacy debug data` calls fewer than 100 too few to train a pipeline on."""
    return make_corpus(tmp_path_factory.mktemp("first_hour") / "train120.spacy", n=120)


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


# the settings a config may repeat whose default `spacy_elmo.constants` owns: {setting: owned value}
OWNED_LAYER_DEFAULTS = {
    "max_batch_tokens": MAX_BATCH_TOKENS,
    "max_length": MAX_LENGTH,
    "window_overlap": WINDOW_OVERLAP,
}


def test_the_configs_repeat_the_owned_defaults_as_they_are():
    """configs/*.cfg cannot import `spacy_elmo.constants`: where one repeats a default the package owns there
    (the biLM layer's batch and segmenter settings, a pretraining's device), it is that value."""
    from confection import Config

    checked = 0
    for path in sorted((ROOT / "configs").rglob("*.cfg")):
        config = Config().from_str(path.read_text(encoding="utf-8"), interpolate=False)
        blocks = [config]
        while blocks:
            block = blocks.pop()
            blocks += [value for value in block.values() if isinstance(value, dict)]
            if str(block.get("@architectures", block.get("@misc", ""))).startswith("spacy-elmo."):
                for setting, owned in OWNED_LAYER_DEFAULTS.items():
                    if setting in block:
                        assert block[setting] == owned, (path.name, setting, block[setting], owned)
                        checked += 1
        if "device" in config.get("system", {}):
            assert config["system"]["device"] == DEFAULT_DEVICE, (path.name, config["system"]["device"])
            checked += 1
    assert checked >= 12  # (the walk sees the settings: 3 in each of 4 spaCy configs, a device in 5)


def spacy_cli(*args, **kwargs):
    """`python -m spacy ARGS`, as a user types it."""
    return run(sys.executable, "-m", "spacy", *args, **kwargs)


def shown(done) -> str:
    return (done.stdout + done.stderr)[-3000:]


def test_the_listener_configs_are_the_ones_the_docs_name():
    assert sorted(LISTENER_CONFIGS) == ["ner_elmo", "ner_elmo_static", "ner_elmo_trf", "tagger_elmo", "textcat_elmo"]


@pytest.mark.slow
@pytest.mark.parametrize("name", LISTENER_CONFIGS)
def test_spacy_debug_model_on_every_listener_config(name, train_corpus, corpus, tiny_model_dir, request, tmp_path):
    """`spacy debug model CONFIG COMPONENT` updates the component it analyses alone (and a `transformer` it finds
    by its listener's name): the ELMo listener takes the layers from the `elmo` component itself."""
    paths = ["--paths.elmo", str(tiny_model_dir)]
    if "trf" in name:
        if spacy_transformers_missing():
            pytest.skip(spacy_transformers_missing())
        paths += ["--paths.transformer", str(request.getfixturevalue("tiny_bert_dir"))]
    if "static" in name:
        paths += ["--paths.vectors", str(request.getfixturevalue("tiny_vectors_dir"))]
    config = tmp_path / f"{name}.cfg"
    assert main(["init-config", name, str(config), *paths]) == 0
    component = spacy.util.load_config(config)["nlp"]["pipeline"][-1]
    done = spacy_cli(
        "debug", "model", config, component, "--paths.train", train_corpus, "--paths.dev", corpus, "-P3"
    )  # fmt: skip
    assert done.returncode == 0, shown(done)
    assert "Initialized the model with the training corpus" in done.stdout, shown(done)  # not spaCy's dummy data
    assert "Successfully ended analysis - model looks good" in done.stdout, shown(done)


@pytest.mark.slow
def test_spacy_commands_on_an_ner_elmo_pipeline(train_corpus, corpus, tiny_model_dir, tmp_path):
    """What a user types, from `spacy-elmo init-config` to a packaged pipeline: spacy debug config, debug data,
    train, evaluate, benchmark speed, apply and package."""
    config = tmp_path / "x.cfg"
    made = run(sys.executable, "-m", "spacy_elmo", "init-config", "ner_elmo", config, "--paths.elmo", tiny_model_dir)
    assert made.returncode == 0, made.stderr
    data = ["--paths.train", train_corpus, "--paths.dev", corpus]
    checked = spacy_cli("debug", "config", config, *data)
    assert checked.returncode == 0 and "Config is valid" in checked.stdout, shown(checked)
    debugged = spacy_cli("debug", "data", config, *data)
    assert debugged.returncode == 0, shown(debugged)
    assert "Pipeline can be initialized with data" in debugged.stdout and "Frozen components: elmo" in debugged.stdout

    out = tmp_path / "trained"
    steps = ["--training.max_steps", "2", "--training.eval_frequency", "1"]
    trained = spacy_cli("train", config, "--output", out, *data, *steps)
    assert trained.returncode == 0, shown(trained)
    pipeline = out / "model-last"
    nlp = spacy.load(pipeline)
    # 9: the training run had its layer cache; the trained pipeline does not keep one
    assert not nlp.get_pipe("elmo").cache.enabled and nlp.config["components"]["elmo"]["cache_mb"] == 0

    metrics = tmp_path / "metrics.json"
    evaluated = spacy_cli("evaluate", pipeline, corpus, "--output", metrics)
    assert evaluated.returncode == 0, shown(evaluated)
    scores = json.loads(metrics.read_text(encoding="utf-8"))
    assert {"ents_f", "ents_p", "ents_r", "speed"} <= set(scores) and scores["speed"] > 0

    timed = spacy_cli("benchmark", "speed", pipeline, corpus, "--batches", "30", "--batch-size", "2", "--warmup", "1")
    assert timed.returncode == 0, shown(timed)
    assert float(re.search(r"Mean: ([0-9.]+) words/s", timed.stdout).group(1)) > 0, shown(timed)

    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"text": text}) + "\n" for text in TEXTS), encoding="utf-8")
    applied = spacy_cli("apply", pipeline, texts, tmp_path / "applied.spacy")
    assert applied.returncode == 0, shown(applied)
    docs = list(DocBin().from_disk(tmp_path / "applied.spacy").get_docs(nlp.vocab))
    assert [doc.text for doc in docs] == TEXTS
    for doc, again in zip(docs, nlp.pipe(TEXTS)):  # the layers travel in the DocBin's user data
        assert doc._.elmo.layers.shape == (3, len(doc), 32)
        numpy.testing.assert_allclose(doc._.elmo.layers, again._.elmo.layers, rtol=1e-5, atol=1e-6)

    packages = tmp_path / "packages"
    packages.mkdir()
    built = spacy_cli("package", pipeline, packages, "--name", "ner_elmo", "--version", "0.0.1", "--build", "wheel")
    assert built.returncode == 0, shown(built)
    (wheel,) = packages.glob("en_ner_elmo-0.0.1/dist/en_ner_elmo-0.0.1-*.whl")
    assert wheel.stat().st_size > 0


@pytest.mark.slow
def test_spacy_find_threshold_on_a_multilabel_textcat_elmo_pipeline(corpus, tiny_model_dir, tmp_path):
    """textcat_elmo made multi-label by the overrides a user gives `spacy train`, then `spacy find-threshold`."""
    config = tmp_path / "textcat.cfg"
    assert main(["init-config", "textcat_elmo", str(config), "--paths.elmo", str(tiny_model_dir)]) == 0
    multilabel = [
        "--components.textcat.factory", "textcat_multilabel",
        "--components.textcat.model.linear_model.exclusive_classes", "false",
        "--components.textcat.scorer.@scorers", "spacy.textcat_multilabel_scorer.v2",
    ]  # fmt: skip
    data = ["--paths.train", corpus, "--paths.dev", corpus, "--training.max_steps", "2"]
    trained = spacy_cli("train", config, "--output", tmp_path / "out", *data, *multilabel)
    assert trained.returncode == 0, shown(trained)
    pipeline = tmp_path / "out" / "model-last"
    assert spacy.load(pipeline).get_pipe_meta("textcat").factory == "textcat_multilabel"
    found = spacy_cli("find-threshold", pipeline, corpus, "textcat", "threshold", "cats_macro_f", "--n_trials", "5")
    assert found.returncode == 0, shown(found)
    assert re.search(r"Best threshold: [0-9.]+ with cats_macro_f value of [0-9.]+", found.stdout), shown(found)


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
