"""`spacy-elmo pretrain` and `spacy-elmo finetune`: their arguments; the work is `training.pretrain`.

The handler turns how a run ended into the exit status: 0 done, 3 diverged, 130 interrupted (one
line naming the checkpoint `--resume` continues from, `training.checkpoints.interrupted_message`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .arguments import TERMINATED, Terminated, add_command, add_no_progress, add_overwrite, input_file


def run_pretrain(args) -> int:
    """Trains a biLM from text (config: `spacy-elmo init-config pretrain_small`; overrides: --section.key value)."""
    return _train(args, init_from=args.init_from)


def run_finetune(args) -> int:
    """Continues LM training of a pretrained biLM on (domain) text."""
    return _train(args, init_from=args.model)


def _train(args, init_from=None) -> int:
    from ..training.pretrain import pretrain
    from ..training.settings import TrainingDiverged, parse_overrides

    try:
        result = pretrain(
            args.config,
            args.output,
            parse_overrides(args.overrides),
            resume=args.resume,
            init_from=init_from,
            progress=not args.no_progress,
            overwrite=args.overwrite,
        )
    except TrainingDiverged as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM: one line (from the first process only), not a traceback
        if int(os.environ.get("RANK", "0")) == 0:
            from ..training.checkpoints import interrupted_message

            print(interrupted_message(args.output), file=sys.stderr)
        return TERMINATED if isinstance(stop, Terminated) else 130
    if result.get("rank", 0) != 0:
        return 0  # under torchrun only rank 0 reports
    summary = f"Trained {result['step']:,} steps ({result['words']:,} words) in {result['train_seconds']:.0f}s"
    if "heldout_ppl" in result:
        summary += f"; held-out perplexity {result['heldout_ppl']:.2f}"
    print(f"{summary}. Model saved to {args.output}", file=sys.stderr)
    return 0


def _training_args(p) -> None:
    p.add_argument(
        "config",
        metavar="CONFIG",
        type=input_file,
        help="pretraining config (spacy-elmo init-config pretrain_small ...)",
    )
    p.add_argument("--output", "-o", type=Path, required=True, help="output directory (checkpoints, metrics, model)")
    p.add_argument("--resume", action="store_true", help="continue from the output directory's last checkpoint")
    add_overwrite(p, "an earlier run's files in --output (its checkpoints, metrics and model), starting over")
    add_no_progress(p)
    p.set_defaults(accepts_overrides=True)


def add_to(sub) -> None:
    p = add_command(
        sub,
        "pretrain",
        run_pretrain,
        epilog="Config overrides, before or after the other arguments: --paths.train 'corpus/*.txt'",
    )
    _training_args(p)
    p.add_argument("--init-from", help="start from this pretrained model (fine-tuning)")

    p = add_command(
        sub,
        "finetune",
        run_finetune,
        epilog="Config overrides, before or after the other arguments: --paths.train domain.txt",
    )
    p.add_argument(
        "model", metavar="MODEL", help="pretrained model directory (with vocab.txt and LM head, or any ELMo)"
    )
    _training_args(p)
