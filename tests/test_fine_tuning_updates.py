"""Fine-tuning the biLM inside `nlp.update`: each step's gradient is applied in that step, predictions
(the inference kernel's prepacked weights, the token cache) see the new weights, and no step keeps
an old copy of the weights alive."""

from __future__ import annotations

import copy
import gc

import numpy
import pytest
import spacy
import torch
from spacy.training import Example

from spacy_elmo.layers import set_elmo_model

TAGGED = [
    ("I like green eggs", ["PRON", "VERB", "ADJ", "NOUN"]),
    ("Eat blue ham", ["VERB", "ADJ", "NOUN"]),
    ("the cat sat", ["DET", "NOUN", "VERB"]),
]


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_torch_thread):
    """These modules run the tiny biLM with one intra-op thread (see conftest)."""


def fine_tuned_tagger(tiny_model_dir, fine_tune_layers=None):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(tiny_model_dir), "fine_tune_layers": fine_tune_layers})
    tok2vec = {"@architectures": "spacy-elmo.ElmoListener.v1", "dropout": 0.0}
    nlp.add_pipe("tagger", config={"model": {"@architectures": "spacy.Tagger.v2", "tok2vec": tok2vec}})
    examples = [Example.from_dict(nlp.make_doc(t), {"tags": tags}) for t, tags in TAGGED]
    optimizer = nlp.initialize(lambda: examples)
    optimizer.learn_rate = 0.01
    return nlp, examples, optimizer


def bilm_state(nlp):
    return {k: v.detach().clone() for k, v in nlp.get_pipe("elmo").elmo_model.state_dict().items()}


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
    set_elmo_model(fresh.model, copy.deepcopy(elmo.elmo_model), elmo.model.layers[0].shims[0]._model.tokenizer)
    expected = fresh.predict(docs)
    got = elmo.predict(docs)
    for b, e, g in zip(before, expected, got):
        assert float(numpy.abs(e - b).max()) > 1e-4  # the weights did change
        numpy.testing.assert_array_equal(g, e)


def test_updates_keep_no_old_weights_alive(tiny_model_dir):
    """thinc's PyTorchShim.finish_update rebinds each parameter's .data to a tensor made from the
    optimizer's array; every step kept one more tensor (and, in a long run, memory) alive."""
    nlp, examples, optimizer = fine_tuned_tagger(tiny_model_dir)

    def live_tensors() -> int:
        gc.collect()
        return sum(isinstance(o, torch.Tensor) for o in gc.get_objects())

    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    settled = live_tensors()
    for _ in range(10):
        nlp.update(examples, sgd=optimizer)
    assert live_tensors() == settled
