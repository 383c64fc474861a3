"""One owner for each value of the `elmo` component (issue 50): the model reference is parsed once
and the precision checked once per component; saved pipelines keep their vectors across the
change to `spacy-elmo.ElmoBiLM.v2`; segmentation is a registered function, the user's own
included, and the layer cache keeps two segmentations of one text apart; names that moved keep
working from their old place for one release, with a warning."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.util import registry
from thinc.util import to_numpy

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoTokenizer
from spacy_elmo.formats import references
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


# --- moved names: one release with a warning -----------------------------------------------------


def test_moved_names_work_from_their_old_place_with_a_warning(tiny_model_dir):
    from spacy_elmo.spacy.layers import bilm, bilm_files, segmentation

    for name, module in [("window_spans", segmentation), ("Segment", segmentation), ("load_bilm", bilm_files)]:
        with pytest.warns(DeprecationWarning, match=rf"bilm\.{name} is deprecated: import it from {module.__name__}"):
            assert getattr(bilm, name) is getattr(module, name)
    nlp = spacy.blank("en")
    docs = [nlp("a b c d e f g")]
    with pytest.warns(DeprecationWarning, match="plan_segments"):
        old = bilm.plan_segments(docs, 3, 1)  # the old signature: (docs, max_length, overlap)
    assert old == segmentation.plan_segments(docs, SentencesOrWindows(3, 1))
    with pytest.warns(DeprecationWarning, match="segmenter=SentencesOrWindows"):
        layer = bilm.build_bilm(str(tiny_model_dir), max_length=3, window_overlap=1, mixed_precision=False)
    assert layer.attrs["segmenter"] == SentencesOrWindows(3, 1)
    with pytest.raises(AttributeError):
        bilm.no_such_name  # noqa: B018


def test_describe_source_is_deprecated_for_the_references_description(allennlp_dir):
    from spacy_elmo.tools.convert import describe_source

    pair = [str(allennlp_dir / "options.json"), str(allennlp_dir / "lm_weights.hdf5")]
    with pytest.warns(DeprecationWarning, match="describe"):
        assert describe_source(pair) == "`options.json` + `lm_weights.hdf5`"
    assert references.parse_reference(",".join(pair)).describe() == "`options.json` + `lm_weights.hdf5`"
