"""What the commands' arguments share: the parser (its errors in the CLI's one-line form), the help
formatter (defaults shown where worth it), a sub-command whose help is its handler's docstring,
`--device`, `--no-progress`, `--overwrite` (the one overwrite policy: `files.check_output`), the
argparse types of a file to read (`input_file`: there, not a folder, readable) and the declared
ranges of the numeric options (`tools.options.OPTIONS`, whose `Range`s are argparse types), and
`contradiction`: options that do not go together, refused in one line.

The CLI's convention for a user's mistake, whoever finds it (argparse, a handler, the library): one
line per problem on stderr, each starting `error: `, and exit status 2 (argparse's own). 1 is left to
what is not the user's mistake (a bug: Python's traceback), 3 to a pretraining that diverged, 130 to
Ctrl-C, 143 to SIGTERM (docs/guarantees.md, "Conventions")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from ..constants import DEFAULT_DEVICE, DEVICES
from ..files import check_input_file
from ..tools.options import OPTIONS  # standard library only

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
    """Shows an option's default in --help when it has one worth showing (not None / False); a
    positional with a `usage` attribute (e.g. convert's `(SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT`)
    is shown as that text in the usage line and the list of arguments."""

    def _format_args(self, action, default_metavar):
        usage = getattr(action, "usage", None)
        return usage if usage is not None else super()._format_args(action, default_metavar)

    def _format_action_invocation(self, action):
        usage = getattr(action, "usage", None)
        return usage if usage is not None else super()._format_action_invocation(action)

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


def input_file(text: str) -> Path:
    """argparse type of a file to read: there, not a folder, readable (`files.check_input_file`)."""
    try:
        return check_input_file(text)
    except OSError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def input_file_or_stdin(text: str) -> Path | str:
    """`input_file`, or "-" for standard input."""
    return text if text == "-" else input_file(text)


def add_number(
    parser: argparse.ArgumentParser, command: str, option: str, *, default, help: str, shown_default=None
) -> None:
    """Option `option` of `command`, its values checked against its declared range
    (`tools.options.OPTIONS`), which its help gives with the default (`shown_default`: the one a
    None default stands for, where None means "not given")."""
    allowed = OPTIONS[command][option]
    shown = "%(default)s" if default is not None else shown_default
    text = f"{help} [{allowed.describe()}" + (f"; default: {shown}]" if shown is not None else "]")
    parser.add_argument(option, type=allowed, default=default, help=text)


def add_overwrite(parser: argparse.ArgumentParser, what: str, *aliases: str) -> None:
    """`--overwrite`: the one overwrite policy (`files.check_output`): an existing output is kept
    unless it is given."""
    parser.add_argument(
        "--overwrite", *aliases, action="store_true", dest="overwrite", help=f"replace {what} if it exists"
    )


def contradiction(message: str) -> NoReturn:
    """Options that do not go together: one line, exit 2, as argparse's own errors."""
    raise ValueError(message)


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=DEFAULT_DEVICE, choices=DEVICES, help=DEVICE_HELP)


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
    "add_number",
    "add_overwrite",
    "contradiction",
    "input_file",
    "input_file_or_stdin",
]
