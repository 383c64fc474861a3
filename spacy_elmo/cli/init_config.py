"""`spacy-elmo init-config`: its arguments; the work is `tools.init_config.write_config`."""

from __future__ import annotations

import sys
from pathlib import Path

from ..tools.init_config import shipped_configs  # standard library only
from .arguments import add_command, add_overwrite


def run(args) -> int:
    """Writes a shipped config (e.g. ner_elmo, tagger_baseline, pretrain_small) to OUTPUT ('-' = stdout),
    complete and ready for `spacy debug config` / `spacy train` (or `spacy-elmo pretrain`)."""
    from ..tools.init_config import write_config
    from ..training.settings import parse_overrides

    source = write_config(
        args.name,
        args.output,
        lang=args.lang,
        gpu=args.gpu,
        overrides=parse_overrides(args.overrides),
        overwrite=args.overwrite,
    )
    if str(args.output) != "-":
        print(f"Wrote {source.stem} to {args.output}", file=sys.stderr)
    return 0


def add_to(sub) -> None:
    p = add_command(
        sub,
        "init-config",
        run,
        epilog="Settings to change, before or after the other arguments, as in spacy train: --paths.elmo DIR",
    )
    p.add_argument(
        "name", metavar="NAME", help=f"shipped config (with or without .cfg): {', '.join(shipped_configs())}"
    )
    p.add_argument("output", metavar="OUTPUT", type=Path, help="where to write it (.cfg); '-' = stdout")
    p.add_argument(
        "--lang",
        "-l",
        help="spaCy language: [nlp] lang and that language's own tokenizer from spaCy's defaults "
        "(spacy.zh.ChineseTokenizer for zh, …), as spacy init config --lang writes them; "
        "[data] lang of a pretraining config; default: the config's (en)",
    )
    p.add_argument(
        "--gpu",
        "-G",
        action="store_true",
        help="for a GPU: gpu_allocator = pytorch (spaCy configs), device = cuda (pretraining configs)",
    )
    add_overwrite(p, "OUTPUT", "--force", "-F")  # (--force, -F: spacy init config's names)
    p.set_defaults(accepts_overrides=True)
