"""Where a pretraining run starts from: one typed choice, made once.

- `Fresh`: a new biLM from the `[model]` settings and a vocabulary of the training text (or `paths.vocab`);
- `Resume`: the output directory's latest checkpoint (`--resume`): model, optimizer, RNG states and
  data position, so the run continues exactly;
- `FromLanguageModel`: fine-tuning an `ElmoForBidirectionalLM` directory (`paths.init_from` with a
  config, an LM head and its vocab.txt): its weights, softmax and vocabulary;
- `FromElmo`: fine-tuning any biLM `load_pretrained` reads (`paths.init_from`): its encoder and
  tokenizer, with a new LM head over a vocabulary of the training text.

`choose_start` also refuses what cannot start: checkpoints without `--resume`, a resume whose data
settings or thread count differ from the checkpoint's.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checkpoints import Checkpoints, MetricsLog
from .settings import PretrainError, PretrainSettings, check_resumable


@dataclass(frozen=True)
class Fresh:
    """A new model from the `[model]` settings."""


@dataclass(frozen=True)
class Resume:
    """The checkpoint directory a `--resume` continues from."""

    checkpoint: Path


@dataclass(frozen=True)
class FromLanguageModel:
    """A pretrained `ElmoForBidirectionalLM` directory: its config, LM head and vocabulary file."""

    path: Path
    config: Any  # ElmoConfig
    vocab: Path


@dataclass(frozen=True)
class FromElmo:
    """A pretrained biLM without an LM head (any format `load_pretrained` reads): its model and tokenizer."""

    path: Path
    config: Any  # ElmoConfig
    elmo: Any  # ElmoModel
    tokenizer: Any  # ElmoTokenizer or None


Start = Fresh | Resume | FromLanguageModel | FromElmo


def choose_start(
    settings: PretrainSettings,
    output: Path,
    checkpoints: Checkpoints,
    metrics: MetricsLog,
    *,
    resume: bool,
    is_main: bool,
    threads: dict,
    device_type: str,
) -> Fresh | Resume:
    """Resume (the latest checkpoint, checked against these settings) or a new run (its metrics log
    emptied). `FromLanguageModel` / `FromElmo` are chosen later by `pretrained_start`, once the data is checked."""
    checkpoint = checkpoints.latest()
    if checkpoint is not None and not resume:
        raise PretrainError(
            f"{output} already holds checkpoints ({checkpoint.name}); pass --resume to continue "
            "that run, or choose another output directory"
        )
    if checkpoint is not None:
        _check_resumable(settings, checkpoints, checkpoint, threads, device_type)
        return Resume(checkpoint)
    if resume and is_main:
        print(f"--resume: no checkpoint in {output}, starting a new run", file=sys.stderr)
    metrics.truncate_after(-1)  # a fresh run starts a fresh log
    return Fresh()


def pretrained_start(settings: PretrainSettings, start: Fresh | Resume) -> Start:
    """A new run with `paths.init_from` starts from that model: `FromLanguageModel` when it is an LM
    directory with its vocabulary, else `FromElmo` (it is loaded here)."""
    reference = settings.paths.init_from
    if reference is None or isinstance(start, Resume):
        return start
    from ..hf.configuration_elmo import ElmoConfig

    path = Path(str(reference))
    vocab_file = path / "vocab.txt"
    if (path / "config.json").is_file():
        config = ElmoConfig.from_pretrained(str(path))
        if config.vocab_size and vocab_file.is_file() and _has_lm_head(path):
            return FromLanguageModel(path, config, vocab_file)
    from ..formats.references import load_pretrained

    elmo, tokenizer = load_pretrained(reference)
    return FromElmo(path, elmo.config, elmo, tokenizer)


def _check_resumable(
    settings: PretrainSettings, checkpoints: Checkpoints, checkpoint: Path, threads: dict, device_type: str
) -> None:
    from confection import Config

    saved = Config().from_disk(checkpoint / "pretrain.cfg", interpolate=False)
    check_resumable(saved, settings, checkpoint)
    before = checkpoints.load_state(checkpoint)[1].get("threads")  # None: written before they were kept
    if before and device_type == "cpu" and before["torch_threads"] != threads["torch_threads"]:
        raise PretrainError(
            f"cannot resume {checkpoint} exactly: it was trained with {_threads_text(before)}, this run has "
            f"{_threads_text(threads)}, and another thread count sums in another order; resume with the same "
            "system.threads or OMP_NUM_THREADS, or start a new output directory"
        )


def _threads_text(threads: dict) -> str:
    variables = ", ".join(f"{k}={v}" for k, v in threads.items() if k != "torch_threads") or "no thread variables"
    return f"{threads['torch_threads']} torch threads per process ({variables})"


def _has_lm_head(path: Path) -> bool:
    from safetensors import safe_open

    weights = path / "model.safetensors"
    if not weights.is_file():
        return False
    with safe_open(str(weights), "pt") as handle:
        return "lm_head.weight" in handle.keys()


__all__ = ["Start", "Fresh", "Resume", "FromLanguageModel", "FromElmo", "choose_start", "pretrained_start"]
