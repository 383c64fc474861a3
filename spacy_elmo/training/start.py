"""Where a pretraining run starts from: one typed choice, made once.

- `Fresh`: a new biLM from the `[model]` settings and a vocabulary of the training text (or `paths.vocab`);
- `Resume`: the output directory's latest checkpoint (`--resume`): model, optimizer, RNG states and
  data position, so the run continues exactly;
- `FromLanguageModel`: fine-tuning an `ElmoForBidirectionalLM` directory (`paths.init_from` with a
  config, an LM head and its vocab.txt): its weights, softmax and vocabulary;
- `FromElmo`: fine-tuning any biLM `load_pretrained` reads (`paths.init_from`): its encoder and
  tokenizer, with a new LM head over a vocabulary of the training text.

`choose_start` also refuses what cannot start: an output directory holding an earlier run's files
(`RUN_FILES`: checkpoints, metrics, a model, ...) without `--resume` (continue it) or `--overwrite`
(start over: `clear_earlier_run` removes them once the data and the start are checked), both at
once, a resume whose data settings or thread count differ from the checkpoint's. This is the one
overwrite policy of the commands (`files.check_output`), with `--resume` beside it.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..constants import (
    CHECKPOINTS_FOLDER,
    CONFIG_FILE,
    LEGACY_FOLDER,
    METRICS_FILE,
    MODEL_FILES,
    RUN_CONFIG_FILE,
    RUN_SUMMARY_FILE,
    VOCAB_FILE,
    WEIGHTS_FILE,
)
from .checkpoints import Checkpoints, MetricsLog
from .settings import PretrainError, PretrainSettings, check_resumable

# what a run writes in its output directory (a README.md it did not write is kept, so it is not here)
RUN_FILES = (
    CHECKPOINTS_FOLDER,
    METRICS_FILE,
    VOCAB_FILE,
    RUN_CONFIG_FILE,
    RUN_SUMMARY_FILE,
    LEGACY_FOLDER,
    *MODEL_FILES,
)
# what a run stopped before its first checkpoint leaves: `--resume` starts such a run over
SCRATCH_FILES = (CHECKPOINTS_FOLDER, METRICS_FILE, VOCAB_FILE)


def earlier_run_files(output: Path) -> list[str]:
    """The names of `RUN_FILES` that `output` holds (an earlier run's, or a model's)."""
    return [name for name in RUN_FILES if (output / name).exists()]


def clear_earlier_run(output: Path) -> None:
    """Removes an earlier run's files (`RUN_FILES`) from `output`: a new run starts over there."""
    for name in earlier_run_files(output):
        path = output / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


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
    overwrite: bool = False,
) -> Fresh | Resume:
    """Resume (the latest checkpoint, checked against these settings) or a new run, which
    `clear_earlier_run` gives an empty output once the data and the start are checked (see the
    module docstring). `FromLanguageModel` / `FromElmo` are chosen later by `pretrained_start`,
    once the data is checked. Nothing is written here."""
    if resume and overwrite:
        raise PretrainError("--resume continues the run in the output directory, --overwrite starts it over: give one")
    init_from = settings.paths.init_from
    if init_from is not None and Path(str(init_from)).resolve() == output.resolve():
        raise PretrainError(
            f"paths.init_from ({init_from}) is the output directory: write the new model to another one"
        )
    checkpoint = checkpoints.latest()
    if checkpoint is not None and resume:
        _check_resumable(settings, checkpoints, checkpoint, threads, device_type)
        return Resume(checkpoint)
    earlier = earlier_run_files(output)
    if checkpoint is not None and not overwrite:
        raise PretrainError(
            f"--output {output} already holds checkpoints ({checkpoint.name}); pass --resume to continue "
            "that run, or --overwrite to start it over, or choose another output directory"
        )
    if earlier and not overwrite and not (resume and set(earlier) <= set(SCRATCH_FILES)):
        raise PretrainError(
            f"--output {output} already holds {', '.join(earlier)} (an earlier run's or a model's); pass "
            "--overwrite to replace them, or choose another output directory"
        )
    if resume and is_main:
        print(f"--resume: no checkpoint in {output}, starting a new run", file=sys.stderr)
    return Fresh()


def pretrained_start(settings: PretrainSettings, start: Fresh | Resume) -> Start:
    """A new run with `paths.init_from` starts from that model: `FromLanguageModel` when it is an LM
    directory with its vocabulary, else `FromElmo` (it is loaded here)."""
    reference = settings.paths.init_from
    if reference is None or isinstance(start, Resume):
        return start
    from ..hf.configuration_elmo import ElmoConfig

    path = Path(str(reference))
    vocab_file = path / VOCAB_FILE
    if (path / CONFIG_FILE).is_file():
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

    saved = Config().from_disk(checkpoint / RUN_CONFIG_FILE, interpolate=False)
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

    weights = path / WEIGHTS_FILE
    if not weights.is_file():
        return False
    with safe_open(str(weights), "pt") as handle:
        return "lm_head.weight" in handle.keys()


__all__ = [
    "RUN_FILES",
    "Start",
    "Fresh",
    "Resume",
    "FromLanguageModel",
    "FromElmo",
    "choose_start",
    "clear_earlier_run",
    "earlier_run_files",
    "pretrained_start",
]
