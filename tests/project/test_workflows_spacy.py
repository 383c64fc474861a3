"""The Chinese NER workflow of README.md and docs/spacy.md, run as a user runs it, at a tiny scale:
`spacy-elmo init-config ner_elmo ner.cfg --lang zh --paths.elmo EFML_DIR`, `python -m spacy train`,
`spacy.load(.../model-best)`, `python -m spacy evaluate`; with `paths.elmo` an ELMoForManyLangs
directory (tests/fixtures/efml_tiny) and the URL of its zip on a local HTTP server. Real spaCy and
real subprocesses; the corpus is written here (template sentences with person, place and
organisation names), so nothing is downloaded."""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_elmo.cli import main

PEOPLE = ["杨过", "郭靖", "黄蓉", "小龙女", "令狐冲", "张无忌", "乔峰", "段誉"]
PLACES = ["北京", "襄阳", "杭州", "大理", "洛阳", "古墓", "华山", "桃花岛"]
ORGS = ["丐帮", "全真教", "明教", "少林寺", "武当派", "峨眉派"]
TEMPLATES = [
    "{PER}在{LOC}练功。",
    "{PER}和{PER}去了{LOC}。",
    "{PER}是{ORG}的弟子。",
    "{ORG}在{LOC}。",
    "昨天{PER}从{LOC}回来了。",
    "{PER}加入了{ORG}，住在{LOC}。",
]

# a few seconds of training: small model, small batches, two evaluations
TRAIN_OVERRIDES = [
    "--training.max_steps",
    "60",
    "--training.eval_frequency",
    "30",
    "--training.patience",
    "0",
    "--training.batcher.size.start",
    "60",
    "--training.batcher.size.stop",
    "60",
    "--training.optimizer.learn_rate",
    "0.005",
    "--components.ner.model.tok2vec.encode.width",
    "32",
    "--components.ner.model.tok2vec.encode.depth",
    "1",
    "--components.ner.model.hidden_width",
    "32",
    "--components.ner.model.tok2vec.embed.embed.rows",
    "[500,100,100,100]",
]


def _sentences(n: int, seed: int) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """`n` sentences from TEMPLATES with names drawn at random, and their entities' character spans."""
    rng = random.Random(seed)
    names = {"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS}
    out = []
    for _ in range(n):
        text, spans, rest = "", [], rng.choice(TEMPLATES)
        while "{" in rest:
            before, _, after = rest.partition("{")
            label, _, rest = after.partition("}")
            text += before
            name = rng.choice(names[label])
            spans.append((len(text), len(text) + len(name), label))
            text += name
        out.append((text + rest, spans))
    return out


def _write_corpus(path: Path, n: int, seed: int) -> None:
    nlp = spacy.blank("zh")  # char segmentation: every name is whole tokens
    docs = []
    for text, spans in _sentences(n, seed):
        doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(start, end, label=label) for start, end, label in spans]
        docs.append(doc)
    DocBin(docs=docs).to_disk(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("zh_corpus")
    _write_corpus(folder / "train.spacy", 120, seed=0)
    _write_corpus(folder / "dev.spacy", 30, seed=1)
    return folder


@pytest.fixture(scope="module")
def efml_dir(fixtures_dir) -> Path:
    return fixtures_dir / "efml_tiny"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """A command as a user types it (`python -m spacy ...`), one torch thread on the shared CPU."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    result = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, (args, result.stdout[-3000:], result.stderr[-3000:])
    return result


def _train(config: Path, output: Path, corpus: Path, *extra: str, env: dict[str, str] | None = None) -> Path:
    _run(
        "spacy",
        "train",
        str(config),
        "--output",
        str(output),
        "--paths.train",
        str(corpus / "train.spacy"),
        "--paths.dev",
        str(corpus / "dev.spacy"),
        *TRAIN_OVERRIDES,
        *extra,
        env=env,
    )
    return output / "model-best"


def test_chinese_ner_as_documented(tmp_path, corpus, efml_dir):
    """init-config --lang zh → spacy train → spacy.load → spacy evaluate: Chinese tokens, F above 0."""
    config = tmp_path / "ner.cfg"
    assert main(["init-config", "ner_elmo", str(config), "--lang", "zh", "--paths.elmo", str(efml_dir)]) == 0
    best = _train(config, tmp_path / "training", corpus)

    nlp = spacy.load(best)
    assert nlp.lang == "zh" and nlp.pipe_names == ["elmo", "ner"]
    doc = nlp("杨过在北京练功。")
    assert [t.text for t in doc] == list("杨过在北京练功。")  # the English tokenizer gives 2 tokens
    assert doc._.elmo.layers.shape[:2] == (3, len(doc))

    metrics = tmp_path / "metrics.json"
    _run("spacy", "evaluate", str(best), str(corpus / "dev.spacy"), "--output", str(metrics))
    scores = json.loads(metrics.read_text(encoding="utf-8"))
    assert scores["ents_f"] > 0.3, scores["ents_per_type"]


@pytest.fixture
def efml_url(tmp_path, efml_dir):
    """The fixture as ELMoForManyLangs distributes its models (a zip of the model folder), served by
    http.server on 127.0.0.1; yields (URL, the paths requested)."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.make_archive(str(site / "zh.model"), "zip", root_dir=efml_dir.parent, base_dir=efml_dir.name)
    requested: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requested.append(self.path)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/zh.model.zip", requested
    httpd.shutdown()
    httpd.server_close()


def test_paths_elmo_as_a_url_in_spacy_train(tmp_path, corpus, efml_url):
    """`spacy train ... --paths.elmo URL` downloads the zip once into $SPACY_ELMO_CACHE and trains;
    the trained pipeline loads without the server."""
    url, requested = efml_url
    config = tmp_path / "ner.cfg"
    assert main(["init-config", "ner_elmo", str(config), "--lang", "zh"]) == 0
    cache = tmp_path / "cache"
    best = _train(config, tmp_path / "training", corpus, "--paths.elmo", url, env={"SPACY_ELMO_CACHE": str(cache)})
    assert any(cache.rglob("char.dic"))  # extracted there, not in the user's cache
    nlp = spacy.load(best)
    assert [t.text for t in nlp("郭靖去了襄阳。")] == list("郭靖去了襄阳。")
    assert requested == ["/zh.model.zip"]  # once: later loads read the cache, spacy.load the pipeline's files
