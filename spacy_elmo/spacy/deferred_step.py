"""`DeferredStep`: an optimizer step that waits for the gradient it applies.

The `elmo` component's gradient comes from its listeners, and they send it only when their own
components backpropagate. `nlp.update` calls `elmo.finish_update(sgd)` right after `elmo.update`,
before those components have run: a step applied then would find no gradient (the batch's update
would be lost, or come one batch late) and would change weights that this batch's backward pass
still reads. So a step asked for while a batch's gradient is awaited is kept, and applied when the
last listener's gradient arrives, in the same `nlp.update`. A step asked for at any other time
(`spacy train` calls `finish_update` after the whole `nlp.update`) is applied at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

Optimizer = TypeVar("Optimizer")


class DeferredStep(Generic[Optimizer]):
    """Applies `apply(optimizer)` once the awaited gradient is in, never before.

    One batch: `start_batch()`, `expect_gradient()` once its forward pass has run, then the step
    (`request`, from `finish_update`) and the gradient (`gradient_arrived`) in either order; the
    step is applied once, after both.
    """

    def __init__(self, apply: Callable[[Optimizer], None]) -> None:
        self._apply = apply
        self._awaiting = False
        self._kept: Optimizer | None = None

    @property
    def awaiting_gradient(self) -> bool:
        """Whether a batch's forward pass ran and its gradient has not arrived yet."""
        return self._awaiting

    def start_batch(self) -> None:
        """Forgets a previous batch whose gradient never came, and the step kept for it."""
        self._awaiting, self._kept = False, None

    def expect_gradient(self) -> None:
        """The batch's forward pass has run: its gradient will arrive later."""
        self._awaiting = True

    def request(self, optimizer: Optimizer) -> None:
        """A step is asked for: applied now, or kept until the awaited gradient arrives."""
        if self._awaiting:
            self._kept = optimizer
        else:
            self._apply(optimizer)

    def gradient_arrived(self, optimizer: Optimizer | None = None) -> None:
        """The batch's gradient is in: applies `optimizer` (one passed to `update` itself) or else the
        step kept by `request`, if any; without either, the step comes with the next `request`."""
        self._awaiting = False
        step = optimizer if optimizer is not None else self._kept
        self._kept = None
        if step is not None:
            self._apply(step)


__all__ = ["DeferredStep"]
