"""The shipped configs with static vectors (issue 63): `ner_static` (the baseline + spaCy's static vectors) and
`ner_elmo_static` (`ner_elmo` + the same vectors), as a user gets them: `spacy-elmo init-config` writes them,
`spacy init vectors --mode floret` makes a vectors pipeline from a floret table, and `spacy train` trains on both
(real subprocesses), the trained pipelines carrying the vectors and reading them in their NER model."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy
import pytest
import spacy

from helpers import make_corpus, run  # tests/ is on sys.path (rootdir conftest)

STATIC_CONFIGS = ["ner_static", "ner_elmo_static"]


def floret_table(path: Path, rows: int = 64, dim: int = 8) -> Path:
    """A tiny floret table as floret's `save_floret_vectors` writes one: a header of rows, dim, minn, maxn,
    hash count, hash seed, BOW and EOW, then one `index v_1 ... v_dim` line per hashed row."""
    rng = numpy.random.default_rng(0)
    lines = [f"{rows} {dim} 3 4 2 2166136261 < >"]
    lines += [f"{i} " + " ".join(f"{v:.5f}" for v in rng.normal(0, 0.1, dim)) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


@pytest.fixture(scope="module")
def vectors(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("floret")
    made = run(
        sys.executable,
        "-m",
        "spacy",
        "init",
        "vectors",
        "en",
        floret_table(folder / "tiny.floret"),
        folder / "vectors",
        "--mode",
        "floret",
    )
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
    return folder / "vectors"


def static_vectors_layers(nlp) -> list[str]:
    """The layers of the pipeline's models (the NER model's, or the `tok2vec` its listener reads) that read the
    vocab's static vectors."""
    return [node.name for _, pipe in nlp.pipeline for node in pipe.model.walk() if node.name == "static_vectors"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STATIC_CONFIGS)
def test_init_config_writes_a_static_vectors_config_that_spacy_trains(name, vectors, tiny_model_dir, tmp_path):
    corpus = make_corpus(tmp_path / "train.spacy")
    config = tmp_path / f"{name}.cfg"
    elmo = ["--paths.elmo", tiny_model_dir] if "elmo" in name else []
    made = run(sys.executable, "-m", "spacy_elmo", "init-config", name, config, *elmo)
    assert made.returncode == 0, made.stderr
    written = spacy.util.load_config(config, interpolate=False)
    assert written["initialize"]["vectors"] == "${paths.vectors}"
    data = ["--paths.train", corpus, "--paths.dev", corpus, "--paths.vectors", vectors]
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
    nlp = spacy.load(out / "model-last")
    table = nlp.vocab.vectors
    assert table.mode == "floret" and table.shape == (64, 8)  # the pipeline carries the vectors
    assert static_vectors_layers(nlp), "no model of the pipeline reads the static vectors"
    assert ("elmo" in nlp.pipe_names) == ("elmo" in name)
    doc = nlp("Alice went to Paris.")
    assert numpy.abs(doc[0].vector).sum() > 0  # floret: every token has a vector, unseen words included


def test_the_configs_without_static_vectors_read_none(vectors, tiny_model_dir, tmp_path):
    """The arms' other configs: the same model without the static vectors layer (what `static_vectors_layers`
    tells apart), so a static-vector config that lost `include_static_vectors` would fail the test above."""
    from spacy_elmo.tools.init_config import find_config

    for name, has_static in [("ner_baseline", False), ("ner_elmo", False), *((n, True) for n in STATIC_CONFIGS)]:
        overrides = {"paths.vectors": str(vectors)}
        if "elmo" in name:
            overrides["paths.elmo"] = str(tiny_model_dir)
        config = spacy.util.load_config(find_config(name), overrides=overrides)
        nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
        assert bool(static_vectors_layers(nlp)) == has_static, name
