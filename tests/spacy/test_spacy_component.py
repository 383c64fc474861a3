"""The `elmo` spaCy component: outputs, batching, long and odd documents, serialization."""

from __future__ import annotations

import json
import pickle
import random
import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.tokens import Doc, DocBin
from thinc.api import get_current_ops
from thinc.util import to_numpy

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoTokenizer
from spacy_elmo.formats.references import load_model
from spacy_elmo.spacy.doc_data import ElmoDocData, set_similarity_hooks
from spacy_elmo.spacy.layers.layer_cache import LayerCache
from spacy_elmo.spacy.layers.segmentation import SentencesOrWindows, plan_segments, window_spans

WORDS = "the cat sat on a mat while dogs ran far away from home and birds sang in trees today".split()


def random_texts(n: int, seed: int = 0, max_len: int = 40) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, max_len))) for _ in range(n)]


def run_python(code: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (which never imports spacy_elmo itself)."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def reference_layers(model, words: list[str]) -> numpy.ndarray:
    """All layers of the HF model for one sentence, [L+1, n, dim]."""
    tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token)
    with torch.no_grad():
        out = model(**tokenizer([words]))
    return torch.stack(out.hidden_states)[:, 0].numpy()


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """These modules run the tiny biLM with one intra-op thread (see conftest)."""


@pytest.fixture(scope="module")
def exact_model(tiny_model_dir):
    """The pipeline's biLM in float64 (the definition the float32 layers round)."""
    return exact_copy(load_model(tiny_model_dir))


def same_vectors(got, reference, exact, terms: int) -> None:
    """`got` is as close to the float64 `exact` as the float32 `reference` is (float32_error; cupy
    arrays, as under --spacy-gpu, are compared on the host)."""
    assert_float32_error(exact, reference, got, terms=terms)


@pytest.fixture(scope="module")
def nlp(tiny_model_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    return nlp


@pytest.mark.slow
def test_fresh_process_entry_point_matches_hf_model(tiny_model_dir, tmp_path, exact_model):
    """add_pipe("elmo") works through the entry point alone; doc.tensor = mean of the HF layers."""
    texts = ["The cat sat on the mat .", "ELMo vectors depend on context !", "Hi"]
    run_python(
        """
        import sys, json, numpy, spacy
        assert "spacy_elmo" not in sys.modules
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": sys.argv[1]})
        texts = json.loads(sys.argv[3])
        docs = list(nlp.pipe(texts))
        numpy.savez(sys.argv[2], *[d.tensor for d in docs])
        json.dump([[t.text for t in d] for d in docs], open(sys.argv[2] + ".json", "w"))
        """,
        str(tiny_model_dir),
        str(tmp_path / "out.npz"),
        __import__("json").dumps(texts),
    )
    tensors = numpy.load(tmp_path / "out.npz")
    words = __import__("json").load(open(tmp_path / "out.npz.json"))
    model = load_model(tiny_model_dir)
    for i, sentence in enumerate(words):
        expected = reference_layers(model, sentence).mean(axis=0)
        exact = reference_layers(exact_model, sentence).mean(axis=0)
        same_vectors(tensors[f"arr_{i}"], expected, exact, forward_terms(model.config))


def _cosine(a, b) -> float:
    a, b = to_numpy(a), to_numpy(b)  # cupy vectors under --spacy-gpu
    return float(a @ b / numpy.linalg.norm(a) / numpy.linalg.norm(b))


def test_vectors_spans_and_layer_choice(nlp, tiny_model_dir, exact_model):
    doc = nlp("The cat sat on the mat .")
    layers = to_numpy(doc._.elmo.layers)  # host copy (cupy under --spacy-gpu): the mixes below by hand
    exact = layers.astype(numpy.float64)  # each mix by hand in float32 and float64 (sums in its own order)
    assert layers.shape == (3, len(doc), 32)
    same_vectors(doc.tensor, layers.mean(axis=0), exact.mean(axis=0), terms=3)
    assert numpy.array_equal(to_numpy(doc[1].vector), to_numpy(doc.tensor[1]))
    same_vectors(doc.vector, doc.tensor.mean(axis=0), exact.mean(axis=0).mean(axis=0), terms=3 * len(doc))
    span = doc[1:4]
    same_vectors(span.vector, doc.tensor[1:4].mean(axis=0), exact[:, 1:4].mean(axis=0).mean(axis=0), terms=3 * 3)
    assert span._.elmo.layers.shape == (3, 3, 32)
    assert doc[2]._.elmo.layers.shape == (3, 32)  # one token: [L+1, dim]
    numpy.testing.assert_array_equal(to_numpy(doc[2]._.elmo.layers), layers[:, 2])
    other = nlp("A dog sat on a rug .")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no W007: the similarity is by the ELMo vectors, on purpose
        sim = doc.similarity(other)
        token_sim, span_sim = doc[1].similarity(other[1]), span.similarity(other[1:4])
    assert sim == pytest.approx(_cosine(doc.vector, other.vector), abs=1e-6) and 0.0 < sim <= 1.0
    assert token_sim == pytest.approx(_cosine(doc.tensor[1], other.tensor[1]), abs=1e-6)
    assert span_sim == pytest.approx(_cosine(span.vector, other[1:4].vector), abs=1e-6)
    top = spacy.blank("en")
    top.add_pipe("elmo", config={"model": str(tiny_model_dir), "layers": [-1]})
    top_exact = reference_layers(exact_model, [t.text for t in doc])[2]  # the biLM's own rounding
    same_vectors(top(doc.text).tensor, layers[2], top_exact, terms=forward_terms(exact_model.config))
    weighted = spacy.blank("en")
    weighted.add_pipe("elmo", config={"model": str(tiny_model_dir), "layers": [0, 2], "layer_weights": [0.25, 0.5]})
    same_vectors(
        weighted(doc.text).tensor, 0.25 * layers[0] + 0.5 * layers[2], 0.25 * exact[0] + 0.5 * exact[2], terms=2
    )


def test_pipe_batch_size_invariance(nlp, exact_model):
    """200 docs of mixed length: batch sizes 1 and 64 and a tiny token budget agree up to float
    rounding (each as close to the float64 vectors as batch size 1 is, float32_error)."""
    texts = random_texts(200, max_len=30)
    one = [d.tensor for d in nlp.pipe(texts, batch_size=1)]
    many = [d.tensor for d in nlp.pipe(texts, batch_size=64)]
    elmo = nlp.get_pipe("elmo")
    budget = elmo.model.attrs["max_batch_tokens"]
    elmo.model.attrs["max_batch_tokens"] = 50  # forces many small biLM batches
    shapes = []
    hook = (
        elmo.model.layers[0]
        .shims[0]
        ._model.register_forward_hook(
            lambda m, args, kwargs, out: shapes.append(kwargs["input_ids"].shape), with_kwargs=True
        )
    )
    try:
        small = [d.tensor for d in nlp.pipe(texts[:60], batch_size=64)]
    finally:
        elmo.model.attrs["max_batch_tokens"] = budget
        hook.remove()
    # the padded size (rows × longest row) stays within the budget; a longer row runs alone
    assert len(shapes) > 5 and all(rows * steps <= 50 or rows == 1 for rows, steps, _ in shapes)
    assert sum(rows for rows, _, _ in shapes) == sum(1 for t in texts[:60] if t)
    assert len(one) == len(many) == 200
    exact = [
        reference_layers(exact_model, text.split()).mean(axis=0) if text else numpy.zeros((0, 32)) for text in texts
    ]
    terms = forward_terms(exact_model.config)
    for a, b, want, text in zip(one, many, exact, texts):
        assert a.shape == (len(text.split()), 32)
        same_vectors(b, a, want, terms)
    for a, c, want in zip(one, small, exact):
        same_vectors(c, a, want, terms)


def test_segments_cover_every_token_once():
    for n, size, overlap in [(10, 4, 1), (20000, 256, 64), (257, 256, 64), (9, 3, 0), (100, 7, 6)]:
        spans = window_spans(0, n, size, overlap)
        kept = [i for s, e, ks, ke in spans for i in range(ks, ke)]
        assert kept == list(range(n))
        assert all(e - s <= size and s <= ks <= ke <= e for s, e, ks, ke in spans)
    nlp = spacy.blank("en")
    docs = [nlp.make_doc(" ".join(["w"] * k)) for k in (0, 3, 10, 600)]
    segments = plan_segments(docs, SentencesOrWindows(256, 64))
    assert sorted({s.doc for s in segments}) == [1, 2, 3]


def test_long_and_odd_documents(nlp, exact_model):
    rng = random.Random(1)
    long_text = " ".join(rng.choice(WORDS) for _ in range(20000))
    doc = nlp(long_text)
    assert doc.tensor.shape == (20000, 32) and numpy.isfinite(to_numpy(doc.tensor)).all()
    # sentence by sentence when sentences are set
    with_sents = spacy.blank("en")
    with_sents.add_pipe("sentencizer")
    with_sents.add_pipe("elmo", config={"model": nlp.get_pipe("elmo").model.attrs["name"]})
    sent_doc = with_sents(". ".join(" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(40)))
    assert len(sent_doc) > 256 and numpy.isfinite(to_numpy(sent_doc.tensor)).all()
    first = list(sent_doc.sents)[0]
    alone = with_sents(first.text)  # a sentence gets the same vectors as when run alone (up to rounding)
    exact = reference_layers(exact_model, [t.text for t in first]).mean(axis=0)
    same_vectors(sent_doc.tensor[: len(first)], alone.tensor[: len(first)], exact, forward_terms(exact_model.config))
    odd = [
        "",
        "   ",
        "\n\n\t ",
        "😀 👍🏽 🇩🇪 emoji 🤖",
        "ctrl \x00 \x01 \x07 \x1b[31m \u200b \ufeff end",
        "x" * 1000 + " long token",
        "é" * 700,  # 1,400 UTF-8 bytes in one token
    ]
    for text in odd:
        d = nlp(text)
        assert d.tensor.shape == (len(d), 32)
        assert numpy.isfinite(to_numpy(d.tensor)).all()
    assert all(d.tensor.shape[0] == len(d) for d in nlp.pipe(odd, batch_size=3))


def test_an_empty_docs_vector_has_the_models_width(nlp):
    """`doc.vector` of an empty Doc is zeros of the biLM's width, as every other Doc's is that wide, so
    the vectors of a batch stack (spaCy alone would give its static vectors' width: 0)."""
    docs = list(nlp.pipe(["The cat sat .", "", "A dog ."]))
    vectors = numpy.stack([to_numpy(doc.vector) for doc in docs])
    assert vectors.shape == (3, 32) and not vectors[1].any() and vectors[0].any()
    assert docs[1].vector_norm == 0 and docs[1].similarity(docs[0]) == 0.0
    # and so is an empty span's, of an empty Doc or not, also on a Doc read back from bytes (with the hooks)
    again = set_similarity_hooks(Doc(nlp.vocab).from_bytes(docs[0].to_bytes(exclude=["user_hooks"])))
    spans = [docs[0][1:3], docs[0][2:2], docs[1][0:0], again[1:1], again[1:3]]
    vectors = numpy.stack([to_numpy(span.vector) for span in spans])
    assert vectors.shape == (5, 32) and not vectors[1:4].any() and vectors[0].any()
    numpy.testing.assert_array_equal(vectors[4], vectors[0])
    assert docs[0][2:2].vector_norm == 0 and docs[0][2:2].similarity(docs[0][1:3]) == 0.0
    (stored,) = DocBin(store_user_data=True, docs=[docs[0]]).get_docs(nlp.vocab)  # keeps the layers, not the tensor
    assert set_similarity_hooks(stored)[1:1].vector.shape == (32,)
    # an empty Doc read back from bytes (which keep no vector) is as wide as the others again
    empty = set_similarity_hooks(Doc(nlp.vocab).from_bytes(docs[1].to_bytes(exclude=["user_hooks"])))
    assert empty.vector.shape == (32,) and not empty.vector.any()


def test_doc_serialization_pickle_and_docbin(nlp):
    texts = random_texts(6, seed=3, max_len=12) + ["One more sentence ."]
    docs = list(nlp.pipe(texts))
    doc = docs[-1]
    with pytest.warns(UserWarning, match="W109"):  # spaCy saves no user hooks (docs/guarantees.md, known limits)
        restored = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert isinstance(restored._.elmo, ElmoDocData)
    layers = to_numpy(doc._.elmo.layers)  # cupy under --spacy-gpu (the restored copies are host arrays)
    numpy.testing.assert_array_equal(to_numpy(restored._.elmo.layers), layers)
    numpy.testing.assert_array_equal(to_numpy(restored.tensor), to_numpy(doc.tensor))
    unpickled = pickle.loads(pickle.dumps(doc))
    numpy.testing.assert_array_equal(to_numpy(unpickled._.elmo.layers), layers)
    docbin = DocBin(store_user_data=True, docs=docs)
    back = list(DocBin().from_bytes(docbin.to_bytes()).get_docs(nlp.vocab))
    numpy.testing.assert_array_equal(to_numpy(back[-1]._.elmo.layers), layers)


def documented_two_process_block() -> str:
    """docs/spacy.md's python block that runs `nlp.pipe(..., n_process=2)` ("Similarity after bytes")."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "spacy.md").read_text(encoding="utf-8")
    (block,) = [code for code in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M) if "n_process=2" in code]
    return block


@pytest.mark.slow
def test_pipe_with_two_processes(nlp, tmp_path, exact_model):
    """n_process=2 after the parent used torch (forked workers must not hang); run in a subprocess
    with a timeout so a hang fails the test instead of blocking the suite. The docs' block then gives
    the parallel Docs the similarity of one process, and no warning reaches the user: not W109 from
    the workers (told by component_cfg to set no hooks: their Docs leave as bytes), nor W007 from
    `similarity`."""
    texts = random_texts(6, seed=3, max_len=12)
    done = run_python(
        """
        import sys, json, numpy, spacy
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": sys.argv[1]})
        texts = json.loads(sys.argv[3])
        serial = list(nlp.pipe(texts))
        no_hooks = {"elmo": {"similarity_hooks": False}}  # as the docs say: the workers send bytes
        parallel = list(nlp.pipe(texts, n_process=2, batch_size=2, component_cfg=no_hooks))
        numpy.savez(sys.argv[2], *[d._.elmo.layers for d in serial + parallel], *[d.tensor for d in serial + parallel])
        exec(sys.argv[4])  # the docs' block: `docs` from two processes, given their similarity back
        one = list(nlp.pipe(texts))
        def similarities(a, b):  # Docs, the two "bank"s, spans, a token with itself
            return [a.similarity(b), a[4].similarity(b[1]), a[1:3].similarity(b[2:4]), a[4].similarity(a[4])]
        print(json.dumps([similarities(*docs), similarities(*one)]))
        """,
        nlp.get_pipe("elmo").model.attrs["name"],
        str(tmp_path / "out.npz"),
        __import__("json").dumps(texts),
        documented_two_process_block(),
    )
    assert "W109" not in done.stderr and "W007" not in done.stderr, done.stderr[-3000:]
    two, one = json.loads(done.stdout.splitlines()[-1])
    numpy.testing.assert_allclose(two, one, rtol=0, atol=1e-5)  # the workers' batches round otherwise
    assert two[1] < 0.999 and two[3] == pytest.approx(1.0)  # "bank" in two contexts differs; the same token is 1
    arrays = numpy.load(tmp_path / "out.npz")
    arrays = [arrays[f"arr_{i}"] for i in range(4 * len(texts))]
    layers, tensors = arrays[: 2 * len(texts)], arrays[2 * len(texts) :]
    for i, text in enumerate(texts):  # other batches in the workers: the same vectors up to rounding
        exact = reference_layers(exact_model, [t.text for t in nlp.make_doc(text)])
        serial, parallel = i, len(texts) + i
        same_vectors(layers[parallel], layers[serial], exact, forward_terms(exact_model.config))
        same_vectors(tensors[parallel], tensors[serial], exact.mean(axis=0), forward_terms(exact_model.config))


def test_to_disk_and_bytes_need_no_original_files(tiny_model_dir, tmp_path, exact_model):
    """The pipeline carries the biLM (safetensors + character settings): the source can go away."""
    source = tmp_path / "source_model"
    shutil.copytree(tiny_model_dir, source)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(source)})
    texts = ["The cat sat on the mat .", "Another one , with emoji 😀 ."]
    expected = [to_numpy(d.tensor) for d in nlp.pipe(texts)]  # host copies (cupy under --spacy-gpu)
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.to_bytes()
    shutil.rmtree(source)
    files = {p.name for p in (tmp_path / "pipeline" / "elmo" / "bilm").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer_config.json"} <= files
    run_python(
        """
        import sys, json, numpy, spacy, torch
        from thinc.util import to_numpy
        torch.set_num_threads(1)  # as in this test process
        if sys.argv[4] == "gpu":  # and on its device (--spacy-gpu): the GPU rounds otherwise than the CPU
            spacy.require_gpu()
        nlp = spacy.load(sys.argv[1])
        numpy.savez(sys.argv[2], *[to_numpy(d.tensor) for d in nlp.pipe(json.loads(sys.argv[3]))])
        """,
        str(tmp_path / "pipeline"),
        str(tmp_path / "loaded.npz"),
        __import__("json").dumps(texts),
        get_current_ops().device_type,
    )
    loaded = numpy.load(tmp_path / "loaded.npz")
    for i, (text, tensor) in enumerate(zip(texts, expected)):  # another process: the same up to float rounding
        exact = reference_layers(exact_model, [t.text for t in nlp.make_doc(text)]).mean(axis=0)
        same_vectors(loaded[f"arr_{i}"], tensor, exact, terms=forward_terms(exact_model.config))
    again = spacy.blank("en").from_config(nlp.config)  # `model` is gone: from_bytes brings the weights
    again.from_bytes(data)
    for doc, tensor in zip(again.pipe(texts), expected):
        numpy.testing.assert_array_equal(to_numpy(doc.tensor), tensor)


@pytest.mark.parametrize("name", ["hf", "models/elmo", "absolute"])
def test_a_saved_pipeline_whose_model_folder_is_gone_loads(name, tiny_model_dir, tmp_path, monkeypatch):
    """The config keeps naming the folder the biLM came from: a relative one (`hf`; `models/elmo`,
    which could also be a hub id) or an absolute one. Gone, it is a leftover: spacy.load and
    from_config + from_bytes take the weights from the pipeline's own files."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "abs_elmo" if name == "absolute" else Path(name)
    shutil.copytree(tiny_model_dir, source)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(source)})
    text = "The cat sat on the mat ."
    expected = to_numpy(nlp(text).tensor)
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.to_bytes()
    shutil.rmtree(source)
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.config["components"]["elmo"]["model"] == str(source)  # the leftover name
    numpy.testing.assert_array_equal(to_numpy(loaded(text).tensor), expected)
    again = spacy.blank("en").from_config(nlp.config)
    again.from_bytes(data)
    numpy.testing.assert_array_equal(to_numpy(again(text).tensor), expected)


def test_layer_cache_is_bounded_and_exact(tiny_model_dir):
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo", config={"model": str(tiny_model_dir), "cache_mb": 0.1})
    calls = []
    elmo.model.layers[0].shims[0]._model.register_forward_hook(lambda *a: calls.append(1))
    texts = random_texts(20, seed=5, max_len=10)
    first = [d.tensor for d in nlp.pipe(texts)]
    n_calls = len(calls)
    second = [d.tensor for d in nlp.pipe(texts)]
    assert len(calls) == n_calls  # every doc came from the cache
    for a, b in zip(first, second):  # to_numpy: cupy arrays under --spacy-gpu
        numpy.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    assert elmo.cache.nbytes <= elmo.cache.max_bytes
    nlp(" ".join(["word"] * 2000))  # 2000 × 3 × 32 × 4 bytes > 0.1 MB: not cached, evicts nothing
    assert elmo.cache.nbytes <= elmo.cache.max_bytes
    cache = LayerCache(max_bytes=3 * 400)
    for i in range(5):
        cache.put(("w", i), numpy.zeros((1, 1, 100), dtype="f"))
    assert len(cache) == 3 and cache.get(("w", 0)) is None and cache.get(("w", 4)) is not None
