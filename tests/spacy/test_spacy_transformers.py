"""spaCy's transformer pipelines beside ELMo, in one environment (issue 53): the shipped `ner_elmo_trf` config
trains, through `spacy train`, one pipeline with spacy-transformers' `transformer` component and the `elmo`
component, whose NER model reads both (their features concatenated); the trained pipeline saves, loads with the
same predictions and packages. The transformer is a small BERT made and saved here (no hub is reachable).

spacy-transformers' newest release, 1.4.0, requires transformers<4.53.3, so these tests run where
`make test-compat` installs it (transformers 4.53.2); under transformers 5 they say so and skip."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy
import pytest
import spacy

from helpers import (
    make_corpus,
    run,
    spacy_transformers_missing,
)  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.tools.init_config import shipped_configs

pytestmark = pytest.mark.skipif(spacy_transformers_missing() is not None, reason=str(spacy_transformers_missing()))

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["Yesterday Alice went to see the sea .", "Yesterday Bob went to see Paris ."]


def features(nlp, docs) -> list[numpy.ndarray]:
    """What the NER model reads for each token: its tok2vec's features (the ELMo mix, then the transformer's),
    before the parser's own projection of them."""
    layer = nlp.get_pipe("ner").model.get_ref("tok2vec").layers[0]
    assert layer.name.startswith("elmo-features|transformer-listener")
    return [numpy.asarray(x) for x in layer.predict(docs)]


def progress(shown: str) -> list[dict[str, float]]:
    """The rows of `spacy train`'s progress table (ConsoleLogger), by column."""
    lines = shown.splitlines()
    header = next(re.split(r"\s{2,}", line.strip()) for line in lines if line.split()[:2] == ["E", "#"])
    return [
        dict(zip(header, map(float, line.split())))
        for line in lines
        if re.fullmatch(r"\s*\d+\s+\d+(\s+[\d.]+)+\s*", line) and len(line.split()) == len(header)
    ]


@pytest.mark.slow
def test_the_short_run_the_trf_config_suggests_learns(tiny_model_dir, tiny_bert_dir, tmp_path):
    """The overrides the config's header gives for a short run (a smoke test of a pipeline), as a user adds
    them: within 40 steps the transformer trains and the NER model finds the training Docs' entities."""
    (line,) = [line for line in shipped_configs()["ner_elmo_trf"].read_text().splitlines() if "warmup_steps 1" in line]
    overrides = line.lstrip("# ").split()
    assert overrides[0] == "--training.optimizer.learn_rate.warmup_steps", line
    corpus = make_corpus(tmp_path / "train.spacy")
    config = tmp_path / "ner_elmo_trf.cfg"
    paths = ["--paths.elmo", tiny_model_dir, "--paths.transformer", tiny_bert_dir]
    assert run(sys.executable, "-m", "spacy_elmo", "init-config", "ner_elmo_trf", config, *paths).returncode == 0
    data = ["--paths.train", corpus, "--paths.dev", corpus]
    steps = ["--training.max_steps", "40", "--training.eval_frequency", "20"]
    trained = run(sys.executable, "-m", "spacy", "train", config, *data, *steps, *overrides)
    assert trained.returncode == 0, (trained.stdout + trained.stderr)[-3000:]
    last = progress(trained.stdout)[-1]
    assert last["#"] == 40 and last["LOSS TRANS..."] > 0 and last["ENTS_F"] > 0, trained.stdout[-2000:]


@pytest.mark.slow
def test_ner_elmo_trf_trains_saves_reloads_and_packages(tiny_model_dir, tiny_bert_dir, tmp_path):
    corpus = make_corpus(tmp_path / "train.spacy")
    config = tmp_path / "ner_elmo_trf.cfg"
    paths = ["--paths.elmo", tiny_model_dir, "--paths.transformer", tiny_bert_dir]
    made = run(sys.executable, "-m", "spacy_elmo", "init-config", "ner_elmo_trf", config, *paths)
    assert made.returncode == 0, made.stderr
    data = ["--paths.train", corpus, "--paths.dev", corpus]
    steps = ["--training.max_steps", "6", "--training.eval_frequency", "3"]
    trained = run(sys.executable, "-m", "spacy", "train", config, "--output", tmp_path / "out", *data, *steps)
    assert trained.returncode == 0, (trained.stdout + trained.stderr)[-3000:]
    # what the config's header says a short run with its schedule shows: the rate is still near 0
    assert {(row["LOSS TRANS..."], row["ENTS_F"]) for row in progress(trained.stdout)} == {(0.0, 0.0)}

    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["transformer", "elmo", "ner"]
    docs = list(nlp.pipe(TEXTS))
    got = features(nlp, docs)
    elmo_width = docs[0]._.elmo.width
    trf_width = docs[0]._.trf_data.model_output.last_hidden_state.shape[-1]
    assert got[0].shape == (len(docs[0]), elmo_width + trf_width)

    # the NER model reads both components: each one's output moves its own columns, and only those
    for doc in docs:
        doc._.elmo.layers[...] = 0
    without_elmo = features(nlp, docs)
    docs = list(nlp.pipe(TEXTS))
    for doc in docs:
        doc._.trf_data.model_output.last_hidden_state[...] = 0
    without_trf = features(nlp, docs)
    for full, no_elmo, no_trf in zip(got, without_elmo, without_trf):
        assert not numpy.allclose(full[:, :elmo_width], no_elmo[:, :elmo_width])
        numpy.testing.assert_array_equal(full[:, elmo_width:], no_elmo[:, elmo_width:])
        assert not numpy.allclose(full[:, elmo_width:], no_trf[:, elmo_width:])
        numpy.testing.assert_array_equal(full[:, :elmo_width], no_trf[:, :elmo_width])

    # saved and loaded again: the same predictions
    nlp.to_disk(tmp_path / "saved")
    again = spacy.load(tmp_path / "saved")
    reloaded = list(again.pipe(TEXTS))
    fresh = list(nlp.pipe(TEXTS))
    for a, b in zip(features(nlp, fresh), features(again, reloaded)):
        numpy.testing.assert_array_equal(a, b)
    assert [[(e.text, e.label_) for e in d.ents] for d in fresh] == [
        [(e.text, e.label_) for e in d.ents] for d in reloaded
    ]

    # and packaged, as docs/spacy.md packages a pipeline
    packages = tmp_path / "packages"
    packages.mkdir()
    built = run(
        sys.executable, "-m", "spacy", "package", tmp_path / "saved", packages,
        "--name", "ner_elmo_trf", "--version", "0.0.1", "--build", "wheel",
    )  # fmt: skip
    assert built.returncode == 0, (built.stdout + built.stderr)[-3000:]
    (wheel,) = Path(packages).glob("en_ner_elmo_trf-0.0.1/dist/en_ner_elmo_trf-0.0.1-*.whl")
    assert wheel.stat().st_size > 0


def _freeze(path: Path) -> dict[str, str]:
    """`pip freeze` lines by distribution name (canonical): {name: the line}."""
    lines = [
        line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()[:1] not in ("", "#")
    ]
    return {re.sub(r"[-_.]+", "-", re.split(r"\s*(?:==|@| )", line, maxsplit=1)[0]).lower(): line for line in lines}


def test_installing_beside_spacy_transformers_keeps_its_transformers():
    """Installing spacy-elmo into a spacy-transformers user's environment replaces nothing of it.

    `make test-compat` makes this environment in that order: the user's (Python 3.10, torch at setup.cfg's floor,
    transformers 4.53.2, spacy-transformers 1.4.0), `pip freeze` (freeze-before.txt), then `pip install
    ".[package]"` as the README says, `pip freeze` again (freeze-after.txt): every package of the first is in
    the second at the same version. And as the environment is now (the declared floors installed): every
    requirement setup.cfg declares is met by what is installed, and pip finds nothing broken (`pip check`), so
    installing the checkout again would change nothing either."""
    import configparser
    from importlib.metadata import version

    from packaging.requirements import Requirement

    before_path, after_path = Path(sys.prefix, "freeze-before.txt"), Path(sys.prefix, "freeze-after.txt")
    assert before_path.is_file() and after_path.is_file(), f"no {before_path.name} in {sys.prefix}: make test-compat"
    before, after = _freeze(before_path), _freeze(after_path)
    assert "spacy-transformers" in before and "torch" in before and "spacy-elmo" not in before
    assert "spacy-elmo" in after
    assert {name: after.get(name) for name in before} == before

    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg", encoding="utf-8")
    declared = setup["options"]["install_requires"] + "\n" + setup["options.extras_require"]["package"]
    for requirement in map(Requirement, filter(None, map(str.strip, declared.splitlines()))):
        found = version(requirement.name)
        assert requirement.specifier.contains(found, prereleases=True), f"{requirement}: {found} installed"
    checked = run(sys.executable, "-m", "pip", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
