"""One owner for each value of the `elmo` component (issue 50): the model reference is parsed once
and the precision checked once per component; saved pipelines keep their vectors across the
change to `spacy-elmo.ElmoBiLM.v2`; segmentation is a registered function, the user's own
included, and the layer cache keeps two segmentations of one text apart."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import urllib.parse
from collections import Counter
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.util import registry
from thinc.util import to_numpy

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoModel, ElmoTokenizer
from spacy_elmo.cli import main
from spacy_elmo.formats import references
from spacy_elmo.hf import model_directory
from spacy_elmo.kernels import capabilities
from spacy_elmo.precision import check_precision
from spacy_elmo.spacy.architectures import ElmoBiLM_v2
from spacy_elmo.spacy.component import ElmoSettingError
from spacy_elmo.spacy.layers.bilm import doc_key, predict_cached
from spacy_elmo.spacy.layers.layer_cache import LayerCache
from spacy_elmo.spacy.layers.segmentation import SentencesOrWindows, Windows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """These modules run the tiny biLM with one intra-op thread (see conftest)."""


@contextlib.contextmanager
def calls_of(*functions):
    """Counts the calls of `functions` (by their code, however they were imported) in this block."""
    codes = {f.__code__: f.__name__ for f in functions}
    counts: Counter[str] = Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            counts[codes[frame.f_code]] += 1

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _words(doc) -> list[str]:
    return [t.text for t in doc]


def _exact_layers(model, words: list[str]) -> numpy.ndarray:
    """[L+1, len(words), dim] float64 layers of `words` run as one sequence."""
    with torch.no_grad():
        out = model(**ElmoTokenizer()([words]))
    return torch.stack(out.hidden_states)[:, 0].numpy()


# --- parsed once, checked once ---------------------------------------------------------------------


def test_the_reference_is_parsed_once_and_the_precision_checked_once(tiny_model_dir):
    nlp = spacy.blank("en")
    with calls_of(references.parse_reference, check_precision) as calls:
        nlp.add_pipe("elmo", config={"model": str(tiny_model_dir), "precision": "int8"})
        doc = nlp("The cat sat on the mat .")
        nlp("A second Doc .")
    assert calls == {"parse_reference": 1, "check_precision": 1}, calls
    elmo = nlp.get_pipe("elmo")
    assert doc._.elmo.layers.shape == (3, 7, 32)
    # the one checked value is what the biLM computes in, and what its config records
    assert elmo.precision == "int8" and elmo.elmo_model.config.precision == "int8"
    assert elmo.model.attrs["load_precision"] is None  # the biLM's config holds it, alone


def test_the_components_precision_binds_when_set(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir), "cache_mb": 1})
    elmo = nlp.get_pipe("elmo")
    exact = to_numpy(nlp("The cat sat .").tensor)
    with calls_of(check_precision) as calls:
        elmo.precision = "int8"
    assert calls["check_precision"] == 1 and elmo.elmo_model.config.precision == "int8"  # set at once
    assert len(elmo.cache) == 0
    # int8 computes otherwise, where this CPU takes int8 products (elsewhere it is fp32)
    assert numpy.array_equal(to_numpy(nlp("The cat sat .").tensor), exact) == (not capabilities.int8_available())
    with pytest.raises(ElmoSettingError, match=r"^elmo: precision must be one of 'fp32', 'bf16', 'int8', got 'fp16'$"):
        elmo.precision = "fp16"
    assert elmo.precision == "int8"


# --- saved pipelines: the same vectors --------------------------------------------------------------


def test_pipelines_saved_at_c55240e_and_today_load_with_the_same_vectors(tiny_model, tiny_model_dir, tmp_path):
    """A pipeline saved at c55240e (before ElmoBiLM.v2) and one saved today (v2 in its config) give
    the recorded vectors, up to float rounding (float32_error: another CPU kind rounds otherwise)."""
    record = FIXTURES / "saved_c55240e"
    expected = dict(numpy.load(record / "expected.npz", allow_pickle=False))
    sentences = [
        "The cat sat on the mat , said Dr. Smith in London .",
        "Hello !",
        "Colourless green ideas sleep furiously .",
    ]
    today = spacy.blank("en")
    today.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    today.to_disk(tmp_path / "today")
    assert today.config["components"]["elmo"]["model"] == str(tiny_model_dir)
    v2 = spacy.blank("en")
    v2.add_pipe("elmo", config={"model": {"@architectures": "spacy-elmo.ElmoBiLM.v2", "name": str(tiny_model_dir)}})
    v2.to_disk(tmp_path / "v2")
    assert "spacy-elmo.ElmoBiLM.v2" in (tmp_path / "v2" / "config.cfg").read_text()
    exact_model = exact_copy(tiny_model)
    terms = forward_terms(tiny_model.config)
    for path in (record / "pipeline", tmp_path / "today", tmp_path / "v2"):
        nlp = spacy.load(path)
        for i, doc in enumerate(nlp.pipe(sentences)):
            exact = _exact_layers(exact_model, _words(doc))
            layers, tensor = to_numpy(doc._.elmo.layers), to_numpy(doc.tensor)
            assert_float32_error(exact, expected[f"layers_{i}"], layers, terms=terms, what=f"{path.name} {i}")
            assert_float32_error(
                exact.mean(axis=0), expected[f"tensor_{i}"], tensor, terms=terms, what=f"{path.name} tensor {i}"
            )


def test_a_pipeline_saved_by_0_1_loads_with_the_same_vectors(tiny_model):
    old = FIXTURES / "saved_v0_1"
    expected = numpy.load(old / "expected_layers.npy", allow_pickle=False)
    doc = spacy.load(old / "pipeline")("The cat sat on the mat , said Dr. Smith in London .")
    exact = _exact_layers(exact_copy(tiny_model), _words(doc))
    assert_float32_error(exact, expected, to_numpy(doc._.elmo.layers), terms=forward_terms(tiny_model.config))


def test_v1_and_v2_blocks_build_the_same_layer(tiny_model_dir):
    """v1's max_length / window_overlap / mixed_precision are v2's segmenter and autocast."""
    text = "A b c . D e f g h . I j k l m n o ."
    v1 = {
        "@architectures": "spacy-elmo.ElmoBiLM.v1",
        "name": str(tiny_model_dir),
        "max_length": 4,
        "window_overlap": 1,
        "mixed_precision": False,
    }
    v2 = {
        "@architectures": "spacy-elmo.ElmoBiLM.v2",
        "name": str(tiny_model_dir),
        "segmenter": {"@misc": "spacy-elmo.sentences_or_windows.v1", "max_length": 4, "window_overlap": 1},
        "autocast": False,
    }
    outputs = []
    for block in (v1, v2):
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        nlp.add_pipe("elmo", config={"model": block})
        outputs.append(to_numpy(nlp(text)._.elmo.layers))
    numpy.testing.assert_array_equal(*outputs)  # one process, one code path


# --- segmentation: registered, the user's own, part of the cache key ---------------------------------


@registry.misc("test-spacy-elmo.pairs.v1")
def pairs_v1(size: int = 2):
    """A user's segmenter: runs of `size` tokens, each its own sequence, sentences or not."""

    def pairs(doc):
        return [(start, min(start + size, len(doc))) for start in range(0, len(doc), size)]

    return pairs


def test_a_users_registered_segmenter_is_used(tiny_model, tiny_model_dir):
    nlp = spacy.blank("en")
    block = {
        "@architectures": "spacy-elmo.ElmoBiLM.v2",
        "name": str(tiny_model_dir),
        "segmenter": {"@misc": "test-spacy-elmo.pairs.v1", "size": 2},
    }
    nlp.add_pipe("elmo", config={"model": block})
    doc = nlp("The cat sat on the mat")
    layers = to_numpy(doc._.elmo.layers)
    exact_model = exact_copy(tiny_model)
    words = _words(doc)
    exact = numpy.concatenate([_exact_layers(exact_model, words[i : i + 2]) for i in (0, 2, 4)], axis=1)
    plain = spacy.blank("en")
    plain.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    reference = numpy.concatenate(
        [to_numpy(plain(" ".join(words[i : i + 2]))._.elmo.layers) for i in (0, 2, 4)], axis=1
    )
    assert_float32_error(exact, reference, layers, terms=forward_terms(tiny_model.config))
    # and not the whole Doc as one sequence, which the default segmenter runs
    assert not numpy.allclose(layers, to_numpy(plain(doc.text)._.elmo.layers), atol=1e-3)
    saved = nlp.config["components"]["elmo"]["model"]["segmenter"]
    assert saved == {"@misc": "test-spacy-elmo.pairs.v1", "size": 2}


def test_a_segmenter_that_loses_tokens_is_one_line(tiny_model_dir):
    nlp = spacy.blank("en")
    model = ElmoBiLM_v2(name=str(tiny_model_dir), segmenter=lambda doc: [(0, 2)])
    with pytest.raises(ValueError) as info:
        model.predict([nlp("The cat sat .")])
    message = str(info.value)
    assert "\n" not in message and "Doc 0 (4 tokens)" in message and "keep tokens up to 2, expected all 4" in message


def test_the_layer_cache_keeps_two_segmentations_apart(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    doc = nlp("A b c . D e f g h .")
    by_sentence = ElmoBiLM_v2(name=str(tiny_model_dir), segmenter=SentencesOrWindows(4, 1))
    by_window = ElmoBiLM_v2(name=str(tiny_model_dir), segmenter=Windows(4, 1))
    for layer in (by_sentence, by_window):
        layer.initialize()
    assert doc_key(by_sentence, doc) != doc_key(by_window, doc)
    own = [to_numpy(layer.predict([doc])[0]) for layer in (by_sentence, by_window)]
    assert not numpy.allclose(*own, atol=1e-4)  # the two segmentations do compute different layers
    cache = LayerCache(2**20)
    for layer, want in zip((by_sentence, by_window), own):
        numpy.testing.assert_array_equal(to_numpy(predict_cached(layer, [doc], cache)[0]), want)
    assert (cache.hits, cache.misses, len(cache)) == (0, 2, 2)
    numpy.testing.assert_array_equal(to_numpy(predict_cached(by_window, [doc], cache)[0]), own[1])
    assert cache.hits == 1


# --- resolved once: one hub request and one check of the files per load ------------------------------


def test_a_folder_is_checked_once_per_load_in_every_face(tiny_model_dir, tmp_path):
    """From `add_pipe` to the first Doc, in `load_model`, `from_pretrained` and the commands, the model
    folder passes `check_directory` once (the reference's check, handed to its load)."""
    text = tmp_path / "in.txt"
    text.write_text("The cat sat .\n", encoding="utf-8")

    def first_doc():
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
        return nlp("The cat sat .")._.elmo.layers.shape == (3, 4, 32)

    faces = {
        "add_pipe + first Doc": first_doc,
        "load_model": lambda: references.load_model(str(tiny_model_dir)).config.num_output_layers == 3,
        "from_pretrained": lambda: ElmoModel.from_pretrained(tiny_model_dir).config.num_output_layers == 3,
        "spacy-elmo embed": lambda: main(["embed", str(tiny_model_dir), str(text), str(tmp_path / "out.hdf5")]) == 0,
        "spacy-elmo convert": lambda: main(["convert", str(tiny_model_dir), str(tmp_path / "converted")]) == 0,
    }
    for face, load in faces.items():
        with calls_of(model_directory.check_directory) as calls:
            assert load(), face
        assert calls["check_directory"] == 1, (face, calls)


REVISION = "0123456789abcdef0123456789abcdef01234567"


@contextlib.contextmanager
def fake_hub(repos: dict[str, Path]):
    """A Hugging Face hub at http://127.0.0.1:PORT serving each repository `repos` names (its files as the
    hub's `resolve` route serves them, at REVISION for any revision asked), in a thread of this process;
    yields (its address, the requests it got: (face, method, path), the face being what the client
    announced last through /__face__/NAME)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    requests: list[tuple[str, str, str]] = []
    face = ["-"]

    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def answer(self, body: bool):
            if self.path.startswith("/__face__/"):
                face[0] = urllib.parse.unquote(self.path.removeprefix("/__face__/"))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            requests.append((face[0], self.command, self.path))
            owner, name, route, revision, *rest = self.path.lstrip("/").split("/")
            folder = repos.get(f"{owner}/{name}")
            path = folder / "/".join(rest) if folder is not None and route == "resolve" else None
            if path is None or not path.is_file():
                self.send_response(404)
                self.send_header("X-Error-Code", "RepoNotFound" if folder is None else "EntryNotFound")
                self.send_header("X-Repo-Commit", REVISION)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("X-Repo-Commit", REVISION)
            self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def do_HEAD(self):
            self.answer(body=False)

        def do_GET(self):
            self.answer(body=True)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", requests
    finally:
        server.shutdown()


# each face in turn in a fresh process (huggingface_hub reads HF_ENDPOINT and its cache's place when imported),
# announcing itself to the hub, counting the checks of a model folder
_HUB_FACES = textwrap.dedent("""
    import json, os, sys, threading, urllib.parse, urllib.request
    from collections import Counter
    from pathlib import Path
    import spacy
    from spacy_elmo import ElmoModel
    from spacy_elmo.cli import main
    from spacy_elmo.formats.references import load_model
    from spacy_elmo.hf import model_directory

    HUB, NAME = os.environ["HF_ENDPOINT"], "test-org/tiny-elmo"
    checks, face = Counter(), ["-"]
    code = model_directory.check_directory.__code__

    def count(frame, event, arg):
        if event == "call" and frame.f_code is code:
            checks[face[0]] += 1

    def first_doc():
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": NAME})
        nlp("The cat sat .")
        return nlp.config["components"]["elmo"]["model"]

    faces = {
        "first from_pretrained": lambda: ElmoModel.from_pretrained(NAME).config.name_or_path,
        "from_pretrained": lambda: ElmoModel.from_pretrained(NAME).config.name_or_path,
        "load_model": lambda: load_model(NAME).config.name_or_path,
        "add_pipe + first Doc": first_doc,
        "spacy-elmo embed": lambda: main(["embed", NAME, "in.txt", "out.hdf5", "--no-progress"]),
        "spacy-elmo convert": lambda: main(["convert", NAME, "converted", "--no-progress"]),
    }
    Path("in.txt").write_text("The cat sat .\\n", encoding="utf-8")
    names = {}
    sys.setprofile(count)
    threading.setprofile(count)
    for face[0], run in faces.items():
        urllib.request.urlopen(f"{HUB}/__face__/{urllib.parse.quote(face[0])}").read()
        names[face[0]] = run()
    sys.setprofile(None)
    print(json.dumps({"checks": checks, "names": names}))
""")


def test_a_hub_id_is_asked_once_and_its_snapshot_checked_once_per_load(tiny_model_dir, tmp_path):
    """Every face that takes a hub id asks the hub once per load (which commit `main` is) and checks the
    snapshot once; the first load downloads each file once, later ones nothing; configs, the model's
    name and the card keep the hub id, never the snapshot's path."""
    cache = tmp_path / "hub"
    with fake_hub({"test-org/tiny-elmo": tiny_model_dir}) as (address, requests):
        env = {"HF_ENDPOINT": address, "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")}
        env = {**{k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}, **env, "OMP_NUM_THREADS": "1"}
        done = subprocess.run(
            [sys.executable, "-c", _HUB_FACES], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    by_face: dict[str, list[tuple[str, str]]] = {}
    for face, method, path in requests:
        # (huggingface_hub 2.x's own registry of coding agents, fetched once a day: not about the model)
        if not path.startswith("/api/agent-harnesses"):
            by_face.setdefault(face, []).append((method, path))
    faces = list(result["names"])
    assert set(by_face) == set(faces), by_face
    lookup = ("HEAD", "/test-org/tiny-elmo/resolve/main/config.json")
    for face in faces:
        asked = by_face[face]
        assert asked[0] == lookup and lookup not in asked[1:], (face, asked)  # which commit main is: asked once
        if face == "first from_pretrained":  # then each file of that commit, once
            assert all(f"/resolve/{REVISION}/" in path for _, path in asked[1:]), asked
            assert len(asked) == len(set(asked)), asked
        else:
            assert asked == [lookup], (face, asked)  # all else from the cache
        assert result["checks"][face] == 1, (face, result["checks"])
    downloaded = {path.rsplit("/", 1)[1] for method, path in by_face["first from_pretrained"] if method == "GET"}
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= downloaded
    names = result["names"]
    assert {face: names[face] for face in ("from_pretrained", "load_model", "add_pipe + first Doc")} == dict.fromkeys(
        ("from_pretrained", "load_model", "add_pipe + first Doc"), "test-org/tiny-elmo"
    )
    card = (tmp_path / "converted" / "README.md").read_text(encoding="utf-8")
    assert "test-org/tiny-elmo" in card and str(cache) not in card
    assert str(cache) not in (tmp_path / "converted" / "config.json").read_text(encoding="utf-8")
