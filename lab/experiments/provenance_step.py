"""Runs a project step's command and records where its result came from (the lab's wrapper, not the library's).

    python -m lab.experiments.provenance_step --out DIR/provenance.json [--seed 0] [--config C.cfg ...] \
        [--settings 'section.key=value ...'] -- CMD ARGS...

runs CMD, then writes the record (`spacy_elmo.provenance.Provenance`: commit, dirty paths, configs,
command, seed, machine, UTC times, with CMD's exit status) and exits with CMD's status. It is for
project steps that run a tool they do not own; scripts that write results record their own
provenance with the library's `Provenance`. `wrapper_arguments` (this command line, also
lab/experiments/pretrain_resumable.py's) and `settings_as_options` (also lab/experiments/train_ner.py's `--settings`)
live here: only the project uses them, so they do not ship in the wheel. Importing this module
imports only the standard library.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SETTINGS_HELP = (
    "space-separated section.key=value settings, added to the command as `--section.key value` "
    "(a project variable cannot carry them with their dashes: spaCy's `project run` strips them)"
)


def settings_as_options(text: str | None) -> list[str]:
    """'training.precision=bf16 model.dropout=0.1' -> ['--training.precision', 'bf16', '--model.dropout', '0.1']."""
    options: list[str] = []
    for item in shlex.split(text or ""):
        key, sep, value = item.partition("=")
        if not sep or "." not in key.strip("-") or not value:
            raise SystemExit(f"--settings: {item!r} is not section.key=value (e.g. training.precision=bf16)")
        options += [f"--{key.strip('-')}", value]
    return options


def wrapper_arguments(argv: Sequence[str], prog: str, output: tuple[str, str]) -> tuple[argparse.Namespace, list[str]]:
    """(options, COMMAND) of a wrapper command line `prog OUTPUT_OPTION X [--seed S] [--config C ...]
    -- COMMAND ...` (this script's and lab/experiments/pretrain_resumable.py's); `output` is the output
    option's (flag, help). A COMMAND run by `python` runs in the environment running the wrapper."""
    argv = list(argv)
    if "--" not in argv:
        print(f"usage: {prog} {output[0]} X [--seed S] [--config C ...] -- COMMAND ...", file=sys.stderr)
        raise SystemExit(2)
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument(output[0], type=Path, required=True, help=output[1])
    parser.add_argument("--seed", type=int, help="seed, for the provenance record")
    parser.add_argument("--config", action="append", default=[], help="config file the command uses (repeatable)")
    parser.add_argument("--settings", default="", help=SETTINGS_HELP)
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if not command:
        parser.error("no command after --")
    command += settings_as_options(args.settings)
    if command[0] in ("python", "python3"):
        command[0] = sys.executable  # as weasel does for a step's own `python`: the environment running this
    return args, command


def main(argv: list[str] | None = None) -> int:
    args, command = wrapper_arguments(
        sys.argv[1:] if argv is None else argv,
        "lab/experiments/provenance_step.py",
        ("--out", "provenance JSON to write"),
    )
    from spacy_elmo.provenance import Provenance  # here: importing the package loads transformers (seconds)

    prov = Provenance(command=command, seed=args.seed, configs=args.config)
    code = subprocess.run(command).returncode
    prov.write(args.out, exit_code=code)
    return code


if __name__ == "__main__":
    sys.exit(main())
