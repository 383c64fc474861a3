"""Pretraining (and fine-tuning) of the ELMo biLM: the run's loop, as spaCy's training loop.

`pretrain` reads the typed settings (`settings.read_settings`), builds the run (`run.build_run`:
model, optimizer, softmax, batches, state, where it starts) and consumes its steps
(`steps.train_steps`, one `StepInfo` per optimizer step) as `spacy train` consumes
`train_while_improving`: here the log records (metrics.jsonl and the progress bar), the
checkpoints, the held-out evaluations and the stop conditions (training.max_steps; the data ends
the steps at training.max_epochs). After the last step: a final checkpoint, the held-out
perplexity, the exported model directory and `pretrain_summary.json`. Checkpoints, the `latest`
pointer, resume and metrics.jsonl live in `checkpoints.py`; `--resume` restores model, optimizer,
RNG states and data position, so the run continues exactly.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from ..constants import LEGACY_FOLDER, RUN_CONFIG_FILE, RUN_SUMMARY_FILE, VOCAB_FILE
from ..devices import Distributed
from ..files import write_text_atomic
from ..hf.model_directory import save_model_directory
from .run import Run, build_run
from .settings import PretrainError, TrainingSettings, read_settings
from .start import Resume
from .steps import StepInfo, evaluate, train_steps


def save_checkpoint(run: Run) -> Path | None:
    """Every process contributes its RNG state; rank 0 writes the checkpoint."""
    dist = run.dist
    rng = {"cpu": dist.gather(torch.get_rng_state())}
    if dist.device.type == "cuda":
        rng["cuda"] = dist.gather(torch.cuda.get_rng_state(dist.device).to(dist.device)).cpu()
    if not dist.is_main:
        return None
    state = run.state.to_dict() | {"world_size": dist.world_size, "threads": run.threads}
    return run.checkpoints.save(
        run.state.step,
        run.model,
        run.tokenizer,
        run.optimizer.state_dict(),
        rng,
        {RUN_CONFIG_FILE: run.settings.to_config().to_str(), "state.json": json.dumps(state, indent=2)},
    )


def finished(training: TrainingSettings, step: int) -> bool:
    """The stop condition on steps: training.max_steps reached (0: only the data's end stops)."""
    return bool(training.max_steps) and step >= training.max_steps


@dataclass
class LogWindow:
    """The steps since the last log record: their words, seconds and mean losses."""

    words: int = 0
    seconds: float = 0.0
    fwd: float = 0.0
    bwd: float = 0.0
    steps: int = 0

    def add(self, info: StepInfo) -> None:
        self.words += info.words
        self.seconds += info.seconds
        self.fwd += info.forward_loss
        self.bwd += info.backward_loss
        self.steps += 1

    def record(self, run: Run, info: StepInfo) -> dict:
        """The metrics.jsonl record of these steps, ending at `info`."""
        steps = max(self.steps, 1)
        fwd, bwd = self.fwd / steps, self.bwd / steps
        loss = (fwd + bwd) / 2
        return {
            "step": info.step,
            "epoch": info.epoch,
            "loss": loss,
            "ppl": math.exp(min(loss, 50.0)),
            "forward_ppl": math.exp(min(fwd, 50.0)),
            "backward_ppl": math.exp(min(bwd, 50.0)),
            "grad_norm": info.grad_norm,
            "lr": info.lr,
            "words": run.state.words,
            "words_per_s": self.words / max(self.seconds, 1e-9),
            "train_seconds": round(run.state.train_seconds, 3),
        }


def say(line: str) -> None:
    """A line for the user on stderr, above a progress bar when one is drawn (tqdm clears and redraws it):
    `progress=False` hides the bar, never these lines."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def train(run: Run, *, progress: bool = True) -> dict:
    """Trains until training.max_steps (or max_epochs), then exports; returns the final metrics."""
    t, main = run.settings.training, run.dist.is_main
    bar = None
    if main and isinstance(run.start, Resume):
        say(f"resuming {run.output} from {run.start.checkpoint.name} (step {run.state.step:,})")
    if main and progress:
        from tqdm import tqdm

        bar = tqdm(  # (on a terminal only: disable=None; never into a log file)
            total=t.max_steps or None,
            initial=run.state.step,
            unit="step",
            dynamic_ncols=True,
            mininterval=1.0,
            disable=None,
        )
    if main:
        run.metrics.write(
            {
                "event": "start",
                "step": run.state.step,
                "resumed": run.resumed,
                "world_size": run.dist.world_size,
                "parameters": run.n_params,
                "vocab_size": len(run.vocab),
                "softmax": run.softmax_name,
                "device": str(run.dist.device),
            }
        )
    window, last_eval = LogWindow(), {}
    last_saved = run.state.step if run.resumed else -1
    try:
        for info in () if finished(t, run.state.step) else train_steps(run):
            window.add(info)
            if info.step % t.log_every == 0 or info.step == t.max_steps:
                record = window.record(run, info)
                run.metrics.write(record)
                window = LogWindow()
                if bar is not None:
                    bar.set_postfix(
                        loss=f"{record['loss']:.3f}",
                        ppl=f"{record['ppl']:.1f}",
                        tok_s=f"{record['words_per_s']:.0f}",
                        refresh=False,
                    )
            if bar is not None:
                bar.update(1)
            if info.step % t.checkpoint_every == 0:
                save_checkpoint(run)
                last_saved = info.step
            if t.eval_every and info.step % t.eval_every == 0 and run.heldout_files:
                last_eval = _eval_record(run)
                if main:
                    say(f"step {info.step}: held-out perplexity {last_eval['heldout_ppl']:.2f}")
            if finished(t, info.step):
                break
    finally:
        if bar is not None:
            bar.close()
    state = run.state
    if state.step == 0:
        raise PretrainError("no training step was run (is training.max_epochs reached already?)")
    if last_saved != state.step:
        save_checkpoint(run)
    final = {
        "step": state.step,
        "words": state.words,
        "train_seconds": round(state.train_seconds, 3),
        "rank": run.dist.rank,
    }
    if run.heldout_files:  # not again if the last periodic evaluation was at this step
        final |= last_eval if last_eval.get("step") == state.step else _eval_record(run)
    export(run, final)
    write_summary(run, final)
    run.dist.barrier()
    return final


def _eval_record(run: Run) -> dict:
    record = {"step": run.state.step, "event": "eval", **evaluate(run)}
    run.metrics.write(record)
    return record


def write_summary(run: Run, final: dict) -> None:
    """`pretrain_summary.json`: the run in one object (for reports), next to the model."""
    if not run.dist.is_main:
        return
    summary = {k: v for k, v in final.items() if k not in ("rank", "event")}
    seconds = max(run.state.train_seconds, 1e-9)
    summary |= {
        "words_per_s": run.state.words / seconds,
        "steps_per_s": run.state.step / seconds,
        "parameters": run.n_params,
        "vocab_size": len(run.vocab),
        "softmax": run.softmax_name,
        "world_size": run.dist.world_size,
        "device": str(run.dist.device),
    }
    for record in run.metrics.records():
        if record.get("event") == "vocab" and "unigram_heldout_ppl" in record:
            summary["unigram_heldout_ppl"] = record["unigram_heldout_ppl"]
    write_text_atomic(run.output / RUN_SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")


def export(run: Run, final: dict) -> None:
    """The final model: its model directory (with LM head, tokenizer, and a card naming the
    training text, its size and the held-out perplexity), vocab, config; legacy files if asked."""
    if not run.dist.is_main:
        return
    from .. import save_legacy

    run.model.eval()
    corpus = next((r["train_words"] for r in run.metrics.records() if r.get("event") == "vocab"), None)
    card = {"training": {"text": run.train_files, "corpus_words": corpus, **final}}
    save_model_directory(run.output, run.model, run.tokenizer, card=card)
    write_text_atomic(run.output / RUN_CONFIG_FILE, run.settings.to_config().to_str())
    if run.settings.export.legacy:
        legacy = run.output / LEGACY_FOLDER
        save_legacy(run.model, legacy)
        run.vocab.save(legacy / VOCAB_FILE)
    run.model.train()


def pretrain(
    config_path,
    output,
    overrides: dict | None = None,
    *,
    resume: bool = False,
    init_from=None,
    progress: bool = True,
    overwrite: bool = False,
) -> dict:
    """Runs `spacy-elmo pretrain`: returns the final metrics (held-out perplexity when paths.heldout is set).
    An output directory holding an earlier run's files is refused unless `resume` (continue it) or
    `overwrite` (start over; `start.choose_start`)."""
    overrides = dict(overrides or {})
    if init_from is not None:
        overrides["paths.init_from"] = str(init_from)
    settings = read_settings(config_path, overrides)
    threads = torch.get_num_threads()
    created = [p for p in (Path(output), *Path(output).parents) if not p.exists()]  # deepest first
    try:
        try:
            run = build_run(settings, output, resume=resume, overwrite=overwrite)
        except Exception:  # refused on its settings or data: leave no empty folder behind
            for folder in created:
                with contextlib.suppress(OSError):  # not empty, or another process removed it
                    folder.rmdir()
            raise
        return train(run, progress=progress)
    finally:
        torch.set_num_threads(threads)  # system.threads is for this run only
        Distributed.close()


__all__ = ["pretrain", "train", "save_checkpoint", "export", "write_summary", "finished", "LogWindow"]
