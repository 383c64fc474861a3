"""`spacy-elmo probe`: linear probes of each frozen biLM layer and a learned mix (paper §5.3)."""

from __future__ import annotations

import json
import random

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from spacy_elmo.cli import main

DET, ADJ, NOUN, VERB, PREP = (
    ["the", "a", "this", "every"],
    ["big", "small", "red", "old", "quiet"],
    ["cat", "dog", "house", "river", "teacher", "car"],
    ["sat", "ran", "slept", "waited", "stood"],
    ["on", "under", "near", "behind"],
)
PEOPLE, PLACES = ["John", "Mary", "Peter", "Anna"], ["Paris", "London", "Berlin", "Rome"]


def _sentence(rng):
    """(words, tags, entities as (start, end, label)) from a small template grammar."""
    words, tags, ents = [], [], []
    if rng.random() < 0.5:
        words += [rng.choice(PEOPLE)]
        tags += ["NNP"]
        ents.append((0, 1, "PER"))
    else:
        words += [rng.choice(DET), rng.choice(ADJ), rng.choice(NOUN)]
        tags += ["DT", "JJ", "NN"]
    words += [rng.choice(VERB), rng.choice(PREP)]
    tags += ["VBD", "IN"]
    if rng.random() < 0.5:
        ents.append((len(words), len(words) + 1, "LOC"))
        words += [rng.choice(PLACES)]
        tags += ["NNP"]
    else:
        words += [rng.choice(DET), rng.choice(NOUN)]
        tags += ["DT", "NN"]
    return words + ["."], tags + ["."], ents


@pytest.fixture(scope="module")
def docbin(tmp_path_factory):
    rng = random.Random(0)
    vocab = spacy.blank("en").vocab
    db = DocBin()
    for _ in range(12):  # docs of 5 sentences each, sentence starts set (as preprocess_conll.py writes them)
        words, tags, starts, ents = [], [], [], []
        for _ in range(5):
            w, t, e = _sentence(rng)
            ents += [(len(words) + a, len(words) + b, label) for a, b, label in e]
            starts += [True] + [False] * (len(w) - 1)
            words += w
            tags += t
        doc = Doc(vocab, words=words, tags=tags, sent_starts=starts)
        doc.ents = [doc.char_span(doc[a].idx, doc[b - 1].idx + len(doc[b - 1]), label=label) for a, b, label in ents]
        db.add(doc)
    path = tmp_path_factory.mktemp("probe") / "data.spacy"
    db.to_disk(path)
    return path


def test_probe_learns_each_layer_and_the_mix(tiny_model_dir, docbin, tmp_path, one_torch_thread, capsys):
    out, png = tmp_path / "probe.json", tmp_path / "probe.png"
    code = main(
        [
            "probe",
            str(tiny_model_dir),
            str(docbin),
            str(docbin),
            "--task",
            "pos",
            "ner-type",
            "--max-sentences",
            "40",
            "--output",
            str(out),
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result["tasks"]) == {"pos", "ner-type"}
    pos, ner = result["tasks"]["pos"], result["tasks"]["ner-type"]
    assert pos["train_sentences"] == 40 and pos["labels"] == 7 and ner["labels"] == 2
    for scores in (pos, ner):
        # one entry per biLM layer (the fixture has 2 LSTM layers: 0, 1, 2) + the learned mix
        assert [e["layer"] for e in scores["layers"]] == [0, 1, 2]
        assert len(scores["mix"]["weights"]) == 3 and abs(sum(scores["mix"]["weights"]) - 1) < 1e-3
        # train = dev here: a linear probe that learned anything clears the majority class by far
        for accuracy in [e["accuracy"] for e in scores["layers"]] + [scores["mix"]["accuracy"]]:
            assert accuracy >= scores["majority_accuracy"] + 20, scores
    assert pos["majority_label"] in ("DT", "NN", "NNP") and pos["majority_accuracy"] < 40
    # PER vs LOC needs the names' identity or context, which the vectors carry
    assert ner["dev_tokens"] >= 20
    assert result["provenance"]["seed"] == 0 and result["provenance"]["machine"]["cores"] >= 1
    # the command line given to the CLI, not this process's argv (the library reads none)
    assert result["provenance"]["command"][:2] == ["spacy-elmo", "probe"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "mix" in capsys.readouterr().out


def test_probe_rejects_unknown_task(docbin):
    from spacy_elmo.tools.probe import read_examples

    with pytest.raises(ValueError, match="unknown probe task"):
        read_examples(docbin, "sentiment")
