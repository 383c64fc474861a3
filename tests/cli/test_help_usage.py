"""Every command's `--help` shows every argument its parser takes: the usage line names each option
(by one of its names) and each positional argument as the user types it, and the list below gives
every name of every option (aliases included); checked against the parsers' own actions, so an
argument added later is covered without a change here."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_elmo.cli import build_parser

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")
COMMANDS = build_parser()._subparsers._group_actions[0].choices


def _shown(action: argparse.Action) -> str:
    """How --help shows a positional argument: its usage text, else its metavar, else its name."""
    return getattr(action, "usage", None) or action.metavar or action.dest


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_usage_line_names_every_argument(name):
    parser = COMMANDS[name]
    usage = " ".join(parser.format_usage().split())
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            assert any(re.search(rf"\[{re.escape(o)}[\] ]", usage) for o in action.option_strings) or (
                action.required and any(o in usage for o in action.option_strings)
            ), (name, action.option_strings, usage)
        else:
            shown = _shown(action)
            assert shown in usage, (name, shown, usage)
            # named as the help's text names it (MODEL, OUTPUT, ...), not by an internal name
            assert shown != action.dest and shown != "PATH", (name, shown)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_help_lists_every_name_of_every_option(name):
    text = COMMANDS[name].format_help()
    for action in COMMANDS[name]._actions:
        for option in action.option_strings:
            assert re.search(rf"(^|[\s,]){re.escape(option)}([\s,]|$)", text, re.M), (name, option)


def test_convert_help_as_the_user_sees_it():
    """The case that was wrong: `convert --help` left out --lang, --license and --overwrite from its usage
    line and called its positional arguments PATH."""
    done = subprocess.run([str(SPACY_ELMO), "convert", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    usage = " ".join(done.stdout.split("\n\n")[0].split())
    for option in ("--lang", "--license", "--overwrite", "--no-progress"):
        assert option in usage, usage
    assert usage.endswith("(SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT") and "PATH" not in done.stdout, usage
