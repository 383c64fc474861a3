"""`spacy-elmo probe`: its arguments; the work is `tools.probe.probe_and_report`."""

from __future__ import annotations

from pathlib import Path

from .arguments import add_command, add_device, add_no_progress, add_number, add_overwrite, input_file


def run(args) -> int:
    """Linear probes of each frozen biLM layer and a learned mix: dev accuracy per layer (paper §5.3)."""
    from ..tools.probe import probe_and_report

    probe_and_report(
        args.model,
        args.train,
        args.dev,
        args.task,
        args.max_sentences,
        args.seed,
        args.l2,
        args.max_iter,
        device=args.device,
        progress=not args.no_progress,
        output=args.output,
        plot=args.plot,
        overwrite=args.overwrite,
        command=["spacy-elmo", *args.argv],
    )
    return 0


def add_to(sub) -> None:
    p = add_command(sub, "probe", run)
    p.add_argument("model", metavar="MODEL", help="HF directory, hub id, or legacy directory")
    p.add_argument("train", metavar="TRAIN", type=input_file, help=".spacy DocBin to fit the probes on")
    p.add_argument("dev", metavar="DEV", type=input_file, help=".spacy DocBin to score them on")
    p.add_argument(
        "--task",
        nargs="+",
        default=["pos"],
        choices=("pos", "upos", "ner-type"),
        help="pos: token.tag_; upos: token.pos_; ner-type: entity type of tokens inside entities",
    )
    add_number(p, "probe", "--max-sentences", default=0, help="read at most this many sentences of each file")
    add_number(p, "probe", "--seed", default=0, help="seed of the probes' initialization")
    add_number(p, "probe", "--l2", default=1e-4, help="l2 penalty on the classifier weights")
    add_number(p, "probe", "--max-iter", default=100, help="L-BFGS iterations per probe")
    p.add_argument("--output", type=Path, help="write the scores (and provenance) as JSON")
    p.add_argument(
        "--plot", type=Path, help="write a plot of accuracy by layer (PNG, or the suffix's format); needs matplotlib"
    )
    add_overwrite(p, "--output and --plot")
    add_device(p)
    add_no_progress(p)
