"""The shipped configs with static vectors (issue 63): `ner_static` (the baseline + spaCy's static vectors) and
`ner_elmo_static` (`ner_elmo` + the same vectors), as a user gets them: `spacy-elmo init-config` writes them,
`spacy init vectors --mode floret` makes a vectors pipeline from a floret table, and `spacy train` trains on both
(real subprocesses), the trained pipelines carrying the vectors and reading them in their NER model."""

from __future__ import annotations

import sys

import numpy
import pytest
import spacy

from helpers import make_corpus, run  # tests/ is on sys.path (rootdir conftest)

STATIC_CONFIGS = ["ner_static", "ner_elmo_static"]


def static_vectors_layers(nlp) -> list[str]:
    """The layers of the pipeline's models (the NER model's, or the `tok2vec` its listener reads) that read the
    vocab's static vectors."""
    return [node.name for _, pipe in nlp.pipeline for node in pipe.model.walk() if node.name == "static_vectors"]


@pytest.mark.slow
@pytest.mark.parametrize("name", STATIC_CONFIGS)
def test_init_config_writes_a_static_vectors_config_that_spacy_trains(name, tiny_vectors_dir, tiny_model_dir, tmp_path):
    corpus = make_corpus(tmp_path / "train.spacy")
    config = tmp_path / f"{name}.cfg"
    elmo = ["--paths.elmo", tiny_model_dir] if "elmo" in name else []
    made = run(sys.executable, "-m", "spacy_elmo", "init-config", name, config, *elmo)
    assert made.returncode == 0, made.stderr
    written = spacy.util.load_config(config, interpolate=False)
    assert written["initialize"]["vectors"] == "${paths.vectors}"
    data = ["--paths.train", corpus, "--paths.dev", corpus, "--paths.vectors", tiny_vectors_dir]
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


def test_the_configs_without_static_vectors_read_none(tiny_vectors_dir, tiny_model_dir, tmp_path):
    """The arms' other configs: the same model without the static vectors layer (what `static_vectors_layers`
    tells apart), so a static-vector config that lost `include_static_vectors` would fail the test above."""
    from spacy_elmo.tools.init_config import find_config

    for name, has_static in [("ner_baseline", False), ("ner_elmo", False), *((n, True) for n in STATIC_CONFIGS)]:
        overrides = {"paths.vectors": str(tiny_vectors_dir)}
        if "elmo" in name:
            overrides["paths.elmo"] = str(tiny_model_dir)
        config = spacy.util.load_config(find_config(name), overrides=overrides)
        nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
        assert bool(static_vectors_layers(nlp)) == has_static, name
