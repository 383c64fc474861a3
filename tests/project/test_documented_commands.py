"""Every command the user's pages name exists and its arguments parse: README.md, docs/*.md,
results/README.md and bench/results/README.md, in their shell blocks and their inline code. `spacy-elmo X ...`
(or `python -m spacy_elmo X ...`) parses with the command's own parser, its numbers in their declared ranges (a
placeholder `...` leaves the options only, each of which must be the command's); `spacy project run
X` / `weasel run X` names a command or workflow of project.yml, and each `--vars.NAME` a variable of
it; `make X` a target of the Makefile; `python -m lab.X` a module of the lab. Shell blocks quote
their globs (an unquoted one is expanded by the shell into several arguments)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
import yaml

from spacy_elmo.cli import build_parser, split_overrides
from spacy_elmo.cli.arguments import input_file, input_file_or_stdin

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "results" / "README.md",
    ROOT / "bench" / "results" / "README.md",
]
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`]+)`")  # (markdown pairs the backticks in order; a span may wrap a line)
SHELL = {"", "bash", "sh", "shell", "console"}
# how a command starts, and which kind it is
STARTS = [
    (("spacy-elmo",), "cli"),
    (("python", "-m", "spacy_elmo"), "cli"),
    (("spacy", "project", "run"), "project"),
    (("python", "-m", "spacy", "project", "run"), "project"),
    (("weasel", "run"), "project"),
    (("python", "-m", "weasel", "run"), "project"),
    (("make",), "make"),
]


def _commands(text: str) -> list[list[str]]:
    """The commands of a shell text: continuation lines joined, comments, prompts and environment
    settings dropped, pipelines and `&&` lists cut into their commands."""
    text = text.replace("\\\n", " ").replace("…", "...")
    found = []
    for line in text.splitlines():
        line = re.sub(r"^\s*\$\s+", "", line)
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # (an unbalanced quote: prose, not a command)
            continue
        command: list[str] = []
        for word in [*words, "|"]:
            if word in ("|", "&&", ";", "||"):
                while command and re.match(r"^[A-Z_][A-Z0-9_]*=", command[0]):
                    command.pop(0)
                if command:
                    found.append(command)
                command = []
            else:
                command.append(word)
    return found


def documented() -> list[tuple[str, str, list[str]]]:
    """(page, kind, words) of every command the pages name."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        pieces = [code for lang, code in FENCED.findall(text) if lang in SHELL]
        pieces += [span.replace("\n", " ") for span in INLINE.findall(FENCED.sub("", text))]
        for piece in pieces:
            for words in _commands(piece):
                for start, kind in STARTS:
                    if tuple(words[: len(start)]) == start:
                        out.append((page.relative_to(ROOT).as_posix(), kind, words[len(start) :]))
                        break
                else:
                    if words[:2] == ["python", "-m"] and len(words) > 2 and words[2].startswith("lab."):
                        out.append((page.relative_to(ROOT).as_posix(), "lab", words[2:]))
    return out


DOCUMENTED = documented()


def _parser_without_file_checks() -> argparse.ArgumentParser:
    """The CLI's parser, its files to read taken as given (the pages' example paths are not here)."""
    parser = build_parser()
    for sub in parser._subparsers._group_actions[0].choices.values():
        for action in sub._actions:
            if action.type in (input_file, input_file_or_stdin):
                action.type = None
    return parser


class _Refused(Exception):
    pass


def _parse(words: list[str]) -> None:
    """Parses `spacy-elmo WORDS` as `cli.main` does, or raises `_Refused` with argparse's message."""
    parser = _parser_without_file_checks()
    messages = []

    def error(message):
        messages.append(message)
        raise _Refused(message)

    for sub in [parser, *parser._subparsers._group_actions[0].choices.values()]:
        sub.error = error
    words = [word.strip("[]") for word in words if word.strip("[]")]  # `[--batch-size 64]`: optional
    command, *rest = words
    commands = parser._subparsers._group_actions[0].choices
    if command not in commands:
        raise _Refused(f"no command {command!r}")
    if "..." in rest:  # a placeholder: the options named must be the command's
        known = {option for action in commands[command]._actions for option in action.option_strings}
        for word in rest:
            name = word.split("=")[0]
            overrides_ok = commands[command].get_default("accepts_overrides")
            if word.startswith("-") and name not in known and not (overrides_ok and "." in name):
                raise _Refused(f"{name} is no option of {command}")
        return
    arguments, overrides = split_overrides([command, *rest])
    args, extra = parser.parse_known_args(arguments)
    if extra or (overrides and not getattr(args, "accepts_overrides", False)):
        raise _Refused(f"unrecognized arguments: {' '.join(extra + overrides)}")


def _project() -> dict:
    return yaml.safe_load((ROOT / "project.yml").read_text(encoding="utf-8"))


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))


def _check(kind: str, words: list[str]) -> None:
    if kind == "cli":
        if words in ([], ["..."], ["--version"], ["--help"], ["-h"]):  # (the command itself named)
            return
        if len(words) == 1 and not words[0].startswith("-"):  # the command named, not run
            commands = build_parser()._subparsers._group_actions[0].choices
            assert words[0] in commands, f"no command {words[0]!r}"
            return
        _parse(words)
    elif kind == "project":
        project = _project()
        names = {c["name"] for c in project["commands"]} | set(project.get("workflows", {}))
        assert words and words[0] in names, f"project.yml has no command or workflow {words[:1]}"
        for word in words[1:]:
            if word.startswith("--vars."):
                var = word[len("--vars.") :].split("=")[0]
                assert var in project["vars"], f"project.yml has no variable {var!r}"
    elif kind == "make":
        targets = [word for word in words if not re.match(r"^[A-Z_][A-Z0-9_]*=", word)]
        missing = set(targets) - _make_targets()
        assert not missing, f"the Makefile has no target(s) {sorted(missing)}"
    elif kind == "lab":
        module = words[0][len("lab.") :]
        if module.isupper():  # a placeholder: `python -m lab.NAME`
            return
        path = ROOT / "lab" / module.replace(".", "/")
        # `python -m lab.X.Y` runs lab/X/Y.py, or lab/X/Y/__main__.py for a package (the GPU harness, lab.gpu)
        assert path.with_suffix(".py").is_file() or (path / "__main__.py").is_file(), f"no module lab.{module}"


@pytest.mark.parametrize(
    "page, kind, words", DOCUMENTED, ids=[f"{page}: {kind} {' '.join(words)[:60]}" for page, kind, words in DOCUMENTED]
)
def test_a_documented_command_exists_and_parses(page, kind, words):
    try:
        _check(kind, words)
    except _Refused as refused:
        pytest.fail(f"{page}: `{' '.join(words)}`: {refused}")


def test_every_page_names_commands_of_each_kind_it_documents():
    """The collection finds what the pages show (a broken pattern would pass every case above)."""
    kinds = {(page, kind) for page, kind, _ in DOCUMENTED}
    assert {("README.md", "cli"), ("README.md", "make"), ("results/README.md", "project")} <= kinds, kinds
    assert len(DOCUMENTED) >= 40, len(DOCUMENTED)


def test_a_removed_or_misspelled_command_is_caught():
    """The checks refuse what no longer exists (the project commands results/README.md named after
    fdd8665 removed them), a bad option and a value out of its range."""
    for kind, words in (
        ("project", ["recipe-pretrain", "."]),
        ("project", ["all", "--vars.no_such_variable", "1"]),
        ("make", ["no-such-target"]),
        ("lab", ["lab.variants"]),
        ("lab", ["lab.train_ner"]),  # moved into lab/experiments/
        ("lab", ["lab.reports"]),  # a folder, not a command
    ):
        with pytest.raises(AssertionError):
            _check(kind, words)
    for words in (
        ["embed", "m", "in.txt", "out.hdf5", "--batch-size", "0"],
        ["embed", "m", "--no-such-option"],
        ["probe", "m", "a", "b", "--l2", "-1"],
        ["similar", "m", "w", "...", "--no-such-option"],
        ["variants"],
    ):
        with pytest.raises((_Refused, AssertionError)):
            _check("cli", words)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shell_blocks_quote_their_globs(page):
    for lang, code in FENCED.findall(page.read_text(encoding="utf-8")):
        if lang == "bash":
            unquoted = re.findall(r"(?<=\s)([^'\"\s]*[*?][^'\"\s]*)", code)
            assert not unquoted, f"{page.name}: quote the glob(s) {unquoted}"
