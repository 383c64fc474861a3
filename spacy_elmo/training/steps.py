"""A run's optimizer steps: `train_steps(run)` yields a `StepInfo` after each, as spaCy's
`train_while_improving` yields its steps; logging, checkpoints, held-out evaluation and the stop
conditions consume them (`pretrain.py`). `train_step` is one step on one batch; `evaluate` the
held-out perplexity.

Under torchrun every process takes the same global batches and trains on its own rows; the loss
is scaled so DistributedDataParallel's averaged gradient equals the gradient of the global batch's
mean loss.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from ..kernels import bf16_products
from .batches import DataPosition
from .checkpoints import fault_point
from .run import Run
from .settings import TrainingDiverged, learning_rate_at


@dataclass(frozen=True)
class StepInfo:
    """What one optimizer step did (the run's `state` holds the totals after it)."""

    step: int  # 1-based, over the whole run (a resumed run continues the count)
    epoch: int
    position: DataPosition  # where the data continues after this step
    forward_loss: float  # the global batch's mean loss, each direction
    backward_loss: float
    grad_norm: float  # before clipping
    lr: float
    words: int  # words of the global batch
    seconds: float  # taking the batch and the step
    data_seconds: float  # of which taking the batch
    batch: object  # the Batch trained on (this process's rows)

    @property
    def loss(self) -> float:
        return (self.forward_loss + self.backward_loss) / 2


def train_steps(run: Run, batches: Iterator | None = None) -> Iterator[StepInfo]:
    """Steps until the data ends (training.max_epochs), from the run's data position; the consumer
    stops earlier (training.max_steps). `batches`: (batch, position) pairs to train on instead of
    the run's corpus from its position."""
    if batches is None:
        batches = run.corpus.batches(run.state.position)
    state = run.state
    while True:
        started = time.perf_counter()
        item = next(batches, None)
        if item is None:
            return  # max_epochs reached
        fetched = time.perf_counter()
        batch, position = item
        fwd, bwd, norm = train_step(run, batch)
        seconds = time.perf_counter() - started
        state.step += 1
        state.words += batch.global_words
        state.train_seconds += seconds
        state.position = position
        fault_point("step", state.step)
        yield StepInfo(
            state.step,
            position.epoch,
            position,
            fwd,
            bwd,
            norm,
            run.optimizer.param_groups[0]["lr"],
            batch.global_words,
            seconds,
            fetched - started,
            batch,
        )


def train_step(run: Run, batch) -> tuple[float, float, float]:
    """One optimizer step on this process's rows of `batch` (the run's step count is not advanced);
    returns the global batch's (forward, backward) mean loss and the gradient norm before clipping."""
    dist, training = run.dist, run.settings.training
    batch.to(dist.device)
    # bf16 where the device multiplies bf16 natively; elsewhere one warning line and fp32 (emulated
    # bf16 products are slower than fp32 ones)
    bf16 = training.precision == "bf16" and bf16_products(dist.device.type)
    with torch.autocast(dist.device.type, dtype=torch.bfloat16, enabled=bf16):
        out = run.train_model(
            input_ids=batch.char_ids,
            attention_mask=batch.mask,
            labels=batch.word_ids,
            softmax_fn=run.softmax_fn,
            input_word_ids=batch.input_word_ids,
        )
    # sums over this process's targets; scaled so DDP's gradient average is the global mean's gradient
    sums = torch.stack([out.forward_loss, out.backward_loss]) * out.num_targets * batch.weight
    loss = sums.sum() / (2 * batch.global_targets) * dist.world_size
    loss.backward()
    total = dist.sum(sums.detach().double()) / batch.global_targets
    fwd, bwd = (float(x) for x in total)
    step = run.state.step + 1
    if not (math.isfinite(fwd) and math.isfinite(bwd)):
        raise TrainingDiverged(_diverged_message(run, f"the loss is {fwd:.4g} (forward) / {bwd:.4g} (backward)", step))
    clip = training.clip_norm
    norm = float(torch.nn.utils.clip_grad_norm_(run.params, clip if clip > 0 else float("inf")))
    if not math.isfinite(norm):
        raise TrainingDiverged(_diverged_message(run, f"the gradient norm is {norm}", step))
    for group in run.optimizer.param_groups:
        group["lr"] = learning_rate_at(training, step)
    run.optimizer.step()
    mark_updated(run)
    run.optimizer.zero_grad(set_to_none=True)
    return fwd, bwd, norm


def mark_updated(run: Run) -> None:
    """Bumps every trained parameter's version counter, as an in-place update does: a fused
    optimizer step does not, and the inference kernel's prepacked weights and the token cache
    (used by held-out evaluation) must see that the weights changed."""
    if getattr(run.optimizer, "defaults", {}).get("fused"):
        for parameter in run.params:
            torch.autograd.graph.increment_version(parameter)


def _diverged_message(run: Run, what: str, step: int) -> str:
    last = run.checkpoints.latest()
    where = f"the last checkpoint is {last}" if last else "no checkpoint was written"
    return (
        f"training diverged at step {step}: {what}. Stopped without saving this state; {where}. "
        "Lower training.learning_rate or training.clip_norm, or check the data."
    )


@torch.no_grad()
def evaluate(run: Run, files=None) -> dict[str, float]:
    """Bidirectional perplexity exp((L_fwd + L_bwd) / 2) on held-out text (`files`, else
    paths.heldout), full softmax, no dropout; summed over every process."""
    corpus = run.make_corpus(files or run.heldout_files, run.settings.training.eval_batch_tokens)
    model, device = run.model, run.dist.device
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64)
    for batch in corpus.eval_batches():
        batch.to(device)
        out = model(
            input_ids=batch.char_ids,
            attention_mask=batch.mask,
            labels=batch.word_ids,
            input_word_ids=batch.input_word_ids,
        )
        n = float(out.num_targets)
        sums += torch.tensor([float(out.forward_loss) * n, float(out.backward_loss) * n, n], dtype=torch.float64)
    model.train()
    sums = run.dist.sum(sums.to(device)).cpu()
    n = max(float(sums[2]), 1.0)
    fwd, bwd = float(sums[0]) / n, float(sums[1]) / n
    return {
        "heldout_ppl": math.exp((fwd + bwd) / 2),
        "heldout_forward_ppl": math.exp(fwd),
        "heldout_backward_ppl": math.exp(bwd),
        "heldout_targets": int(n),
    }


__all__ = ["StepInfo", "train_steps", "train_step", "evaluate", "mark_updated"]
