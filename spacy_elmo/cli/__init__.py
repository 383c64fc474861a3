"""The `spacy-elmo` command line: one module per command, each with its arguments and a thin handler
that parses them and makes one call into the module doing the work (`tools/`, `training/`).

- `convert`, `embed`, `pretrain` (pretrain and finetune), `similar`, `init_config`, `probe`: the commands.
- `arguments`: what they share (the parser, the help formatter, `--device`, `--no-progress`) and the
  convention for a user's mistake: `error: ` lines on stderr, exit status 2.

Only the standard library is imported here and by the command modules: each handler imports what it
uses (spaCy, the tools, training) when it runs. (Importing this package runs `spacy_elmo/__init__`,
which registers the model with transformers; the console script `spacy_elmo_cli` answers `--version`
before that.)
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from . import convert, embed, init_config, pretrain, probe, similar
from .arguments import USER_ERROR, Parser

COMMANDS = (convert, init_config, embed, pretrain, similar, probe)  # the order --help lists them in


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="spacy-elmo", description="ELMo for spaCy and Hugging Face")
    parser.add_argument("--version", action="version", version=f"spacy-elmo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_to(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    args.argv = argv  # the command line as given, for a record of it (the library reads no argv)
    args.overrides = extra
    if extra and not getattr(args, "accepts_overrides", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if getattr(args, "no_progress", False):  # --no-progress also hides transformers' and the hub's bars
            from ..quiet import no_progress_bars

            with no_progress_bars():
                return args.func(args)
        return args.func(args)
    except (FileNotFoundError, ValueError, OSError) as err:  # the user's mistake (a missing model included)
        for line in str(err).splitlines() or [type(err).__name__]:  # several problems: one line each
            print(f"error: {line}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


__all__ = ["build_parser", "main"]
