"""DeferredStep: the `elmo` component's optimizer step waits for the listeners' gradient.

spaCy's `nlp.update` calls `finish_update` (here `request`) before the gradient arrives; `spacy
train` calls it after. Either way the step is applied exactly once, after the gradient.
"""

from __future__ import annotations

from spacy_elmo.spacy.deferred_step import DeferredStep


def recording_step():
    applied = []
    return DeferredStep(applied.append), applied


def test_a_step_asked_for_with_no_gradient_awaited_is_applied_at_once():
    step, applied = recording_step()
    step.request("sgd")
    assert applied == ["sgd"] and not step.awaiting_gradient


def test_a_step_asked_for_before_the_gradient_waits_for_it_and_is_applied_once():
    """`nlp.update(examples, sgd=optimizer)`: finish_update comes between the forward pass and the
    listeners' backprop."""
    step, applied = recording_step()
    step.start_batch()
    step.expect_gradient()
    assert step.awaiting_gradient
    step.request("sgd")
    assert applied == []  # no gradient yet: nothing to apply
    step.gradient_arrived()
    assert applied == ["sgd"] and not step.awaiting_gradient
    step.gradient_arrived()  # a second arrival has no kept step to apply
    assert applied == ["sgd"]


def test_a_step_asked_for_after_the_gradient_is_applied_at_once():
    """`spacy train`: update with sgd=False (the gradient arrives inside nlp.update), then
    finish_update."""
    step, applied = recording_step()
    step.start_batch()
    step.expect_gradient()
    step.gradient_arrived()
    assert applied == []
    step.request("sgd")
    assert applied == ["sgd"]


def test_an_optimizer_passed_to_update_is_applied_on_arrival_instead_of_a_kept_one():
    step, applied = recording_step()
    step.start_batch()
    step.expect_gradient()
    step.request("kept")
    step.gradient_arrived("own")
    assert applied == ["own"]
    step.gradient_arrived()
    assert applied == ["own"]  # the kept one was dropped, not applied later


def test_a_new_batch_forgets_one_whose_gradient_never_came():
    step, applied = recording_step()
    step.start_batch()
    step.expect_gradient()
    step.request("stale")
    step.start_batch()  # the next batch's update: the last gradient never arrived
    assert not step.awaiting_gradient
    step.request("sgd")  # not awaiting now: applied at once
    step.gradient_arrived()  # the stale step is not applied either
    assert applied == ["sgd"]


def test_the_elmo_component_defers_its_step_through_it(tiny_model_dir):
    import spacy

    elmo = spacy.blank("en").add_pipe("elmo", config={"model": str(tiny_model_dir)})
    assert isinstance(elmo._step, DeferredStep)
    elmo._step.expect_gradient()
    elmo.finish_update(object())  # would fail in thinc if applied: it is kept instead
    assert elmo._step.awaiting_gradient
