"""What the commands' arguments share: the help formatter (defaults shown where worth it), a
sub-command whose help is its handler's docstring, `--device` and `--no-progress`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

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


__all__ = ["DEVICE_HELP", "HelpFormatter", "add_command", "add_device", "add_no_progress"]
