"""Training with ELMo in spaCy: listeners, frozen vs fine-tuned biLM (its updates), the shipped configs, the cache."""

from __future__ import annotations

import copy
import gc
import io
import warnings
from pathlib import Path

import numpy
import pytest
import spacy
import torch
from spacy.training import Example
from thinc.util import to_numpy

from helpers import make_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo.spacy.layers.bilm import get_tokenizer, set_elmo_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

TAGGED = [
    ("I like green eggs", ["PRON", "VERB", "ADJ", "NOUN"]),
    ("Eat blue ham", ["VERB", "ADJ", "NOUN"]),
    ("the cat sat", ["DET", "NOUN", "VERB"]),
    ("a dog ran home", ["DET", "NOUN", "VERB", "NOUN"]),
]


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """These modules run the tiny biLM with one intra-op thread (see conftest)."""


def tagger_pipeline(tiny_model_dir, tok2vec: dict):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": tok2vec}})
    examples = [Example.from_dict(nlp.make_doc(t), {"tags": tags}) for t, tags in TAGGED]
    return nlp, examples


def bilm_state(nlp):
    return {k: v.detach().clone() for k, v in nlp.get_pipe("elmo").elmo_model.state_dict().items()}


def max_change(before, after) -> float:
    return max(float((after[k] - v).abs().max()) for k, v in before.items())


def scalar_mix(model):
    return next(node for node in model.walk() if node.name == "elmo-scalar-mix")


@pytest.mark.parametrize("frozen", [True, False])
def test_listener_tagger_learns_frozen_and_fine_tuned(tiny_model_dir, frozen):
    nlp, examples = tagger_pipeline(tiny_model_dir, {"@architectures": "spacy-elmo.ElmoListener.v1", "dropout": 0.0})
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.05 if frozen else 0.005  # fine-tuning the biLM needs a gentler rate
    assert nlp.get_pipe("elmo").listening_components == ["tagger"]
    mix = scalar_mix(nlp.get_pipe("tagger").model)
    s_before = mix.get_param("s").copy()
    bilm_before = bilm_state(nlp)
    losses = []
    for _ in range(20):
        step = {}
        if frozen:  # as `spacy train` does with frozen_components + annotating_components
            nlp.update(examples, sgd=optimizer, losses=step, exclude=["elmo"], annotates=["elmo"])
        else:
            nlp.update(examples, sgd=optimizer, losses=step)
        losses.append(step["tagger"])
    assert min(losses[-3:]) < 0.6 * losses[0]
    assert numpy.abs(mix.get_param("s") - s_before).max() > 1e-4  # the listener's own mix learns
    assert mix.get_param("gamma")[0] != 1.0
    change = max_change(bilm_before, bilm_state(nlp))
    if frozen:
        assert change == 0.0
    else:
        assert change > 1e-4
        assert "elmo" in step  # the component reports the gradient it received
    doc = nlp("I like green eggs")
    if frozen:
        assert [t.tag_ for t in doc] == TAGGED[0][1]
    assert doc._.elmo.layers.shape == (3, 4, 32)


@pytest.mark.parametrize("fine_tune_layers", [1, 2])
def test_fine_tuning_only_the_top_layers(tiny_model_dir, fine_tune_layers):
    """`fine_tune_layers` = k: only the top k biLSTM layers train with the task; the char CNN,
    highway, projection and lower layers keep their weights bit for bit."""
    nlp, examples = tagger_pipeline(tiny_model_dir, {"@architectures": "spacy-elmo.ElmoListener.v1", "dropout": 0.0})
    nlp.get_pipe("elmo").fine_tune_layers = fine_tune_layers
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.005
    before = bilm_state(nlp)
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    after = bilm_state(nlp)
    trained = {f"encoder.layers.{i}." for i in range(2 - fine_tune_layers, 2)}
    for name, value in before.items():
        change = float((after[name] - value).abs().max())
        if name.startswith(tuple(trained)):
            assert change > 1e-5, name
        else:
            assert change == 0.0, name
    with pytest.raises(ValueError, match="fine_tune_layers must be >= 0"):
        nlp.add_pipe("elmo", name="other", config={"model": str(tiny_model_dir), "fine_tune_layers": -1})


def test_fine_tuning_runs_the_bilm_with_its_dropout_and_prediction_without(tiny_model_dir):
    """While fine-tuned, the biLM runs in training mode: its config's dropout (the pretraining's) applies
    to every biLSTM layer's input, the frozen layers' too (docs/spacy.md). So a fine-tuned step's layers
    are not the frozen biLM's (a cache of the frozen lower layers would change the recipe); prediction
    runs without dropout."""
    nlp, examples = tagger_pipeline(tiny_model_dir, {"@architectures": "spacy-elmo.ElmoListener.v1", "dropout": 0.0})
    nlp.initialize(lambda: examples)
    elmo = nlp.get_pipe("elmo")
    docs = [eg.predicted for eg in examples]
    predicted = elmo.predict(docs)

    def training_layers(p):
        elmo.elmo_model.encoder.dropout.p = p
        torch.manual_seed(0)
        layers, _ = elmo.model.begin_update(docs)
        return layers

    def distance(layers, layer):  # from the prediction's layer (the training and inference kernels differ by rounding)
        return max(float(numpy.abs(to_numpy(a)[layer] - to_numpy(b)[layer]).max()) for a, b in zip(layers, predicted))

    rounding = max(distance(training_layers(0.0), layer) for layer in range(3))  # no dropout: the same layers
    noisy = training_layers(0.5)
    assert distance(noisy, 0) <= rounding  # the token layer: no dropout before it
    assert distance(noisy, 1) > 100 * rounding + 1e-3  # the first biLSTM layer (frozen at fine_tune_layers = 1)
    assert all(numpy.array_equal(to_numpy(a), to_numpy(b)) for a, b in zip(elmo.predict(docs), predicted))


# --- fine-tuning inside nlp.update: each step's gradient applied in that step, predictions see the new
# weights (the inference kernel's prepacked copies, the token cache), no step keeps old weights alive


def fine_tuned_tagger(tiny_model_dir, fine_tune_layers=None):
    """The listener tagger with the biLM unfrozen (`fine_tune_layers` of its layers trained)."""
    nlp, examples = tagger_pipeline(tiny_model_dir, {"@architectures": "spacy-elmo.ElmoListener.v1", "dropout": 0.0})
    nlp.get_pipe("elmo").fine_tune_layers = fine_tune_layers
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    return nlp, examples, optimizer


def test_the_first_update_already_changes_the_bilm(tiny_model_dir):
    """spaCy calls a component's finish_update right after its own update, before the listeners'
    gradients arrive; the component applies the update once they have (not one step late)."""
    nlp, examples, optimizer = fine_tuned_tagger(tiny_model_dir)
    before = bilm_state(nlp)
    nlp.update(examples, sgd=optimizer)
    after = bilm_state(nlp)
    assert max(float((after[k] - v).abs().max()) for k, v in before.items()) > 1e-4
    for parameter in nlp.get_pipe("elmo").elmo_model.parameters():
        assert parameter.grad is None or float(parameter.grad.abs().max()) == 0.0  # applied, nothing left over


def train_step(nlp, examples, optimizer, loop: str) -> None:
    if loop == "nlp.update":
        nlp.update(examples, sgd=optimizer)
    else:  # spacy train's loop: update without an optimizer, then finish_update for each component
        nlp.update(examples, sgd=False)
        for _, component in nlp.pipeline:
            component.finish_update(optimizer)


@pytest.mark.parametrize("loop", ["nlp.update", "spacy train"])
@pytest.mark.parametrize("fine_tune_layers", [None, 1])
def test_predictions_use_the_updated_weights(tiny_model_dir, fine_tune_layers, loop):
    """After fine-tuning steps, predicting (as spacy train's dev evaluation does, through the
    inference kernel's prepacked weights and the token cache, both built before training) gives
    what a fresh copy of the updated biLM gives."""
    nlp, examples, optimizer = fine_tuned_tagger(tiny_model_dir, fine_tune_layers)
    elmo = nlp.get_pipe("elmo")
    docs = [nlp.make_doc(text) for text, _ in TAGGED]
    before = elmo.predict(docs)  # builds the derived copies from the initial weights
    for _ in range(3):
        train_step(nlp, examples, optimizer, loop)
    fresh = spacy.blank("en").add_pipe("elmo", config={"model": str(tiny_model_dir)})
    set_elmo_model(fresh.model, copy.deepcopy(elmo.elmo_model), get_tokenizer(elmo.model))
    expected = fresh.predict(docs)
    got = elmo.predict(docs)
    for b, e, g in zip(before, expected, got):  # to_numpy: cupy arrays under --spacy-gpu
        b, e, g = to_numpy(b), to_numpy(e), to_numpy(g)
        assert float(numpy.abs(e - b).max()) > 1e-4  # the weights did change
        numpy.testing.assert_array_equal(g, e)


def test_updates_keep_no_old_weights_alive(tiny_model_dir):
    """thinc's PyTorchShim.finish_update rebinds each parameter's .data to a tensor made from the
    optimizer's array; every step kept one more tensor (and, in a long run, memory) alive."""
    nlp, examples, optimizer = fine_tuned_tagger(tiny_model_dir)

    def live_tensors() -> int:
        gc.collect()
        with warnings.catch_warnings():
            # the walk meets torch.distributed's deprecated `reduce_op` object, whose isinstance check warns (torch's)
            warnings.filterwarnings("ignore", message=r".*torch\.distributed\.reduce_op", category=FutureWarning)
            return sum(isinstance(o, torch.Tensor) for o in gc.get_objects())

    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    settled = live_tensors()
    for _ in range(10):
        nlp.update(examples, sgd=optimizer)
    assert live_tensors() == settled


def test_elmo_embed_feeds_the_context_encoder(tiny_model_dir):
    """spacy-elmo.ElmoEmbed.v1 in spacy.Tok2Vec.v2's embed slot: ELMo below the window encoder."""
    width = 24
    tok2vec = {
        "@architectures": "spacy.Tok2Vec.v2",
        "embed": {
            "@architectures": "spacy-elmo.ElmoEmbed.v1",
            "width": width,
            "upstream": "elmo",
            "embed": {
                "@architectures": "spacy.MultiHashEmbed.v2",
                "width": width,
                "attrs": ["NORM", "SHAPE"],
                "rows": [500, 50],
                "include_static_vectors": False,
            },
        },
        "encode": {
            "@architectures": "spacy.MaxoutWindowEncoder.v2",
            "width": width,
            "depth": 1,
            "window_size": 1,
            "maxout_pieces": 2,
        },
    }
    nlp, examples = tagger_pipeline(tiny_model_dir, tok2vec)
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.05
    assert nlp.get_pipe("elmo").listening_components == ["tagger"]
    mix = scalar_mix(nlp.get_pipe("tagger").model)
    s_before = mix.get_param("s").copy()
    losses = []
    for _ in range(20):
        step = {}
        nlp.update(examples, sgd=optimizer, losses=step, exclude=["elmo"], annotates=["elmo"])
        losses.append(step["tagger"])
    assert min(losses[-3:]) < 0.6 * losses[0]
    assert numpy.abs(mix.get_param("s") - s_before).max() > 1e-4
    # the ELMo input matters: zeroing doc._.elmo changes the tagger's scores
    docs = [nlp.make_doc(TAGGED[0][0])]
    docs = [nlp.get_pipe("elmo")(doc) for doc in docs]
    tagger = nlp.get_pipe("tagger")
    scores = tagger.model.predict(docs)[0].copy()
    docs[0]._.elmo = type(docs[0]._.elmo)(layers=numpy.zeros_like(docs[0]._.elmo.layers))
    assert numpy.abs(tagger.model.predict(docs)[0] - scores).max() > 1e-4
    again = spacy.blank("en").from_config(nlp.config)
    again.from_bytes(nlp.to_bytes())
    assert [t.tag_ for t in again(TAGGED[0][0])] == [t.tag_ for t in nlp(TAGGED[0][0])]


def test_grad_factor_zero_keeps_bilm_fixed_and_uses_cache(tiny_model_dir):
    nlp, examples = tagger_pipeline(
        tiny_model_dir, {"@architectures": "spacy-elmo.ElmoListener.v1", "grad_factor": 0.0}
    )
    elmo = nlp.get_pipe("elmo")
    elmo.cache.max_bytes = 2**20
    optimizer = nlp.initialize(lambda: examples)
    before = bilm_state(nlp)
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    assert max_change(before, bilm_state(nlp)) == 0.0
    assert elmo.cache.hits >= 2 * len(examples)


def test_a_listener_given_docs_without_layers_asks_its_component(tiny_model_dir):
    """`spacy debug model` updates and predicts with the analysed component alone, on Docs the `elmo` component
    never ran on (as a user calling `nlp.get_pipe("tagger")(doc)` does): the listener then takes the layers from
    the connected component's `predict`, the values `doc._.elmo` would hold, and sends no gradient back."""
    from spacy_elmo.spacy.layers.listener import ElmoListener

    nlp, examples = tagger_pipeline(tiny_model_dir, {"@architectures": "spacy-elmo.ElmoListener.v1", "dropout": 0.0})
    optimizer = nlp.initialize(lambda: examples)
    tagger = nlp.get_pipe("tagger")
    listener = next(node for node in tagger.model.walk() if isinstance(node, ElmoListener))
    texts = [text for text, _ in TAGGED]
    annotated = list(nlp.pipe(texts))  # the same Docs in one batch: the same code path, bit for bit
    for is_train in (False, True):
        layers, backprop = listener([nlp.make_doc(text) for text in texts], is_train)
        for got, doc in zip(layers, annotated):
            numpy.testing.assert_array_equal(to_numpy(got), to_numpy(doc._.elmo.layers))
        assert backprop(layers) == []
    assert [t.tag_ for t in tagger(nlp.make_doc(texts[0]))] == [t.tag_ for t in nlp(texts[0])]

    # updated alone, as `spacy debug model` updates it: the tagger learns, the biLM stays as it is
    mix = scalar_mix(tagger.model)
    s_before, bilm_before = mix.get_param("s").copy(), bilm_state(nlp)
    for _ in range(3):
        tagger.update(examples, sgd=optimizer)
    assert numpy.abs(mix.get_param("s") - s_before).max() > 1e-4
    assert max_change(bilm_before, bilm_state(nlp)) == 0.0


def test_standalone_elmo_tok2vec_serializes_with_its_component(tiny_model_dir):
    nlp = spacy.blank("en")
    tok2vec = {
        "@architectures": "spacy-elmo.ElmoTok2Vec.v1",
        "freeze": True,
        "cache_mb": 1,
        "bilm": {"@architectures": "spacy-elmo.ElmoBiLM.v1", "name": str(tiny_model_dir)},
        "tok2vec": {
            "@architectures": "spacy.Tok2Vec.v2",
            "embed": {
                "@architectures": "spacy.MultiHashEmbed.v2",
                "width": 16,
                "attrs": ["NORM", "SHAPE"],
                "rows": [500, 50],
                "include_static_vectors": False,
            },
            "encode": {
                "@architectures": "spacy.MaxoutWindowEncoder.v2",
                "width": 16,
                "depth": 1,
                "window_size": 1,
                "maxout_pieces": 2,
            },
        },
    }
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": tok2vec}})
    examples = [Example.from_dict(nlp.make_doc(t), {"tags": tags}) for t, tags in TAGGED]
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    losses = []
    for _ in range(10):
        step = {}
        nlp.update(examples, sgd=optimizer, losses=step)
        losses.append(step["tagger"])
    assert losses[-1] < 0.5 * losses[0]
    tagger_model = nlp.get_pipe("tagger").model
    assert tagger_model.get_ref("tok2vec").get_dim("nO") == 32 + 16
    expected = [t.tag_ for t in nlp("I like green eggs")]
    copy = spacy.blank("en")
    missing = dict(tok2vec, bilm={"@architectures": "spacy-elmo.ElmoBiLM.v1", "name": "/nonexistent"})
    copy.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": missing}})
    copy.from_bytes(nlp.to_bytes())  # the biLM travels inside the tagger's model bytes
    assert [t.tag_ for t in copy("I like green eggs")] == expected


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("corpus") / "train.spacy")


@pytest.mark.parametrize("task", ["ner", "tagger", "textcat"])
def test_spacy_train_with_shipped_config(task, corpus, tiny_model_dir, tmp_path):
    from spacy.cli.evaluate import evaluate
    from spacy.cli.train import train

    config = CONFIGS / f"{task}_elmo.cfg"
    overrides = {
        "paths.train": str(corpus),
        "paths.dev": str(corpus),
        "paths.elmo": str(tiny_model_dir),
        "training.max_steps": 4,
        "training.eval_frequency": 2,
    }
    train(config, tmp_path / "out", overrides=overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["elmo", task]
    assert (tmp_path / "out" / "model-last" / "elmo" / "bilm" / "model.safetensors").is_file()
    doc = nlp("Yesterday Alice went to see the sea .")
    assert doc.tensor.shape == (8, 32) and doc._.elmo.layers.shape == (3, 8, 32)
    if task == "tagger":
        assert all(t.tag_ for t in doc)
    elif task == "textcat":
        assert set(doc.cats) == {"SPORT", "POLITICS"}
    else:
        scores = evaluate(tmp_path / "out" / "model-last", corpus)
        assert "ents_f" in scores


def test_layer_cache_skips_bilm_in_later_epochs(corpus, tiny_model_dir):
    """With the frozen biLM of ner_elmo.cfg, epoch 2 (training and dev) never calls the biLM."""
    from spacy.training.initialize import init_nlp
    from spacy.training.loop import train
    from spacy.util import load_config

    config = load_config(
        CONFIGS / "ner_elmo.cfg",
        overrides={
            "paths.train": str(corpus),
            "paths.dev": str(corpus),
            "paths.elmo": str(tiny_model_dir),
            "training.max_epochs": 1,
            "training.max_steps": 0,
            "training.eval_frequency": 3,
        },
        interpolate=False,
    )
    nlp = init_nlp(config)
    elmo = nlp.get_pipe("elmo")
    assert elmo.cache.enabled
    calls = []
    elmo.model.layers[0].shims[0]._model.register_forward_hook(lambda *args: calls.append(1))
    train(nlp, None, stdout=io.StringIO(), stderr=io.StringIO())
    first_epoch = len(calls)
    assert first_epoch > 0
    train(nlp, None, stdout=io.StringIO(), stderr=io.StringIO())  # same docs: all from the cache
    assert len(calls) == first_epoch
    assert elmo.cache.hits > 0


def test_spacy_train_ner_on_an_elmoformanylangs_directory(corpus, fixtures_dir, tmp_path):
    """configs/ner_elmo.cfg with `[paths] elmo` pointed at an EFML directory (the README's example):
    the pipeline trains, saves the biLM with its lexicons and runs without the EFML files."""
    import shutil

    from spacy.cli.train import train

    source = tmp_path / "efml"
    shutil.copytree(fixtures_dir / "efml_tiny", source)
    overrides = {
        "paths.train": str(corpus),
        "paths.dev": str(corpus),
        "paths.elmo": str(source),
        "training.max_steps": 4,
        "training.eval_frequency": 2,
    }
    train(CONFIGS / "ner_elmo.cfg", tmp_path / "out", overrides=overrides)
    shutil.rmtree(source)
    bilm = tmp_path / "out" / "model-last" / "elmo" / "bilm"
    assert {"char_vocab.json", "word_vocab.json"} <= {p.name for p in bilm.iterdir()}
    nlp = spacy.load(tmp_path / "out" / "model-last")
    doc = nlp("Yesterday Alice went to see the sea .")
    assert doc._.elmo.layers.shape == (3, 8, 32) and float(abs(doc.tensor).max()) > 0
