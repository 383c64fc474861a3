"""What the commands' arguments share: the parser (its errors in the CLI's one-line form), the help
formatter (defaults shown where worth it), a sub-command whose help is its handler's docstring,
`--device` and `--no-progress`.

The CLI's convention for a user's mistake, whoever finds it (argparse, a handler, the library): one
line per problem on stderr, each starting `error: `, and exit status 2 (argparse's own). 1 is left to
what is not the user's mistake (a bug: Python's traceback), 3 to a pretraining that diverged, 130 to
Ctrl-C, 143 to SIGTERM (docs/guarantees.md, "Conventions")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

USER_ERROR = 2  # argparse's status for bad arguments, used for every mistake of the user
TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is (`cli.main` installs the handler), as Ctrl-C raises
    KeyboardInterrupt: the same cleanups run (temporary outputs removed, a pretraining's checkpoint
    named), then the exit status `TERMINATED`."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, its errors in the CLI's form: `error: MESSAGE (see PROG --help)`, exit 2,
    instead of the usage block and `PROG: error: MESSAGE` (subcommands' parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(USER_ERROR)


DEVICE_HELP = "where the biLM runs: auto (CUDA when available), cpu or cuda"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default in --help when it has one worth showing (not None / False)."""

    def _get_help_string(self, action):
        if (
            action.default in (None, False, argparse.SUPPRESS)
            or action.default == []
            or "%(default)" in (action.help or "")
        ):
            return action.help
        return super()._get_help_string(action)


def add_command(sub, name: str, handler: Callable[[argparse.Namespace], int], **kwargs) -> argparse.ArgumentParser:
    """Sub-command `name` of `sub` (the subparsers), run by `handler`, whose docstring is its help."""
    doc = handler.__doc__
    parser = sub.add_parser(name, help=doc, description=doc, formatter_class=HelpFormatter, **kwargs)
    parser.set_defaults(func=handler)
    return parser


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help=DEVICE_HELP)


def add_no_progress(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bars (transformers' and the hub's included)"
    )


__all__ = [
    "TERMINATED",
    "USER_ERROR",
    "Terminated",
    "Parser",
    "DEVICE_HELP",
    "HelpFormatter",
    "add_command",
    "add_device",
    "add_no_progress",
]
