"""Times `make test` in a fresh clone and writes bench/results/make_test.txt (the suite's duration the README cites).

    .venv/bin/python -m lab.benchmarks.time_make_test   # clone HEAD into a temporary folder, run `make test` there

The clone has nothing beside it: no `assets/` (so the project smoke test fetches its corpora from PyPI, as CI
does), no `../shared`, and `make test` builds its own `.venv`. The file records the commit (a clone of HEAD:
uncommitted changes are not measured, and the file says so), the machine, the UTC start and end, the load
average, the wall and CPU times, the exit status, pytest's last line and its slowest tests.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lab import ROOT
from spacy_elmo.provenance import git_state, machine, utc_now

SLOWEST = 5  # pytest --durations


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


SUMMARY = re.compile(r"\b(passed|failed|errors?|no tests ran)\b.* in \d+(\.\d+)?s")
DURATION = re.compile(r"^\d+(\.\d+)?s\s+(call|setup|teardown)\s+\S+")


def pytest_lines(output: str) -> tuple[str, list[str], list[str]]:
    """(pytest's final summary line, its `--durations` lines, its FAILED / ERROR lines) from the command's output."""
    lines = [line.strip() for line in output.splitlines()]
    summary = next((line.strip("= ") for line in reversed(lines) if SUMMARY.search(line)), "(none)")
    failures = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return summary, [" ".join(line.split()) for line in lines if DURATION.match(line)][:SLOWEST], failures


def run(repo: Path, command: str, workdir: Path) -> dict:
    """Clones `repo`'s HEAD into `workdir/checkout` and runs `command` there, timed."""
    state = git_state(repo)
    if not state["commit"]:
        raise SystemExit(f"{repo}: not a git checkout with a commit to clone")
    checkout = workdir / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(repo), str(checkout)], check=True)
    env = dict(os.environ, PYTEST_ADDOPTS=f"{os.environ.get('PYTEST_ADDOPTS', '')} --durations={SLOWEST}".strip())
    env.pop("VIRTUAL_ENV", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    record = {
        "commit": state["commit"],
        "uncommitted": state["dirty_paths"],
        "command": command,
        "started": utc_now(),
        "load_start": _load(),
        "machine": machine(),
        "assets": (checkout / "assets").exists(),
    }
    start = time.monotonic()
    done = subprocess.run(shlex.split(command), cwd=checkout, env=env, capture_output=True, text=True)
    record["wall_s"] = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    record.update(
        ended=utc_now(),
        load_end=_load(),
        exit_status=done.returncode,
        user_s=after.ru_utime - before.ru_utime,
        sys_s=after.ru_stime - before.ru_stime,
    )
    record["summary"], record["durations"], record["failures"] = pytest_lines(done.stdout + "\n" + done.stderr)
    (workdir / "output.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    return record


def render(record: dict) -> str:
    """The record as `field: value` lines."""
    m = record["machine"]
    lines = [
        f"# `{record['command']}` in a fresh clone of HEAD (no assets/, no ../shared, a new .venv); "
        "written by `python -m lab.benchmarks.time_make_test`",
        "",
        f"commit: {record['commit']}",
        f"uncommitted changes (not measured): {', '.join(record['uncommitted']) or 'none'}",
        f"started (UTC): {record['started']}",
        f"ended (UTC): {record['ended']}",
        f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Python {m['python']}",
        f"load average at start: {record['load_start']}",
        f"load average at end: {record['load_end']}",
        f"assets/: {'present' if record['assets'] else 'absent'}",
        f"wall time (s): {record['wall_s']:.1f} ({_minutes(record['wall_s'])})",
        f"CPU time user / sys (s): {record['user_s']:.1f} / {record['sys_s']:.1f}",
        f"exit status: {record['exit_status']}",
        f"pytest's last line: {record['summary']}",
        f"slowest tests (pytest --durations={SLOWEST}):",
        *(f"    {line}" for line in record["durations"]),
    ]
    if record.get("failures"):
        lines += ["failed tests:", *(f"    {line}" for line in record["failures"])]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose HEAD is cloned (default: this one)")
    parser.add_argument("--command", default="make test")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "make_test.txt")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="make_test_") as tmp:
        record = run(args.repo.resolve(), args.command, Path(tmp))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        failed_output = args.out.with_name(args.out.stem + "_failed_output.txt")
        if record["exit_status"] != 0:
            output = (Path(tmp) / "output.txt").read_text(encoding="utf-8")
            print("\n".join(output.splitlines()[-20:] + record["failures"]), file=sys.stderr)
            # pytest's whole report of the failures, beside the record (pip's output follows it in output.txt)
            failed_output.write_text(output, encoding="utf-8")
        else:  # an earlier failure's report must not sit beside a passing record
            failed_output.unlink(missing_ok=True)
    args.out.write_text(render(record), encoding="utf-8")
    print(f"wrote {args.out}: {record['summary']} in {_minutes(record['wall_s'])}, exit status {record['exit_status']}")
    return record["exit_status"]


if __name__ == "__main__":
    sys.exit(main())
