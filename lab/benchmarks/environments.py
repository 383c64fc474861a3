"""`python -m lab.benchmarks.environments LEG...`: legs of CI (Makefile targets) run in a fresh clone of HEAD, timed,
with the versions each installed; appends the records to bench/results/environments.jsonl and writes
bench/results/environments.md from every record there (the README's "Tested versions" cites it).

    .venv/bin/python -m lab.benchmarks.environments test-newest               # Python 3.13, newest torch, transformers
    .venv/bin/python -m lab.benchmarks.environments test-compat test-newest   # one leg after the other
    .venv/bin/python -m lab.benchmarks.environments                           # environments.md again from the records

A leg is run as `lab.benchmarks.time_make_test` runs `make test` (a clone of HEAD with nothing beside it:
uncommitted changes are not measured, and the record says so); its record adds the Python and the versions of the
packages that decide what the tests exercise, read from the leg's own environment after the run, every pytest
summary line of the leg (test-compat runs pytest twice: at transformers 4.53.2, then at its floor), and the CPU's
kind.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from lab import ROOT
from lab.benchmarks.time_make_test import SUMMARY
from lab.benchmarks.time_make_test import run as run_in_clone
from spacy_elmo.provenance import cpu_kind, git_state

RESULTS = ROOT / "bench" / "results"
# each leg's environment, as the Makefile names it
LEGS = {"test": ".venv", "test-compat": ".venv-compat", "test-newest": ".venv-newest"}
PACKAGES = ["torch", "transformers", "huggingface-hub", "spacy", "thinc", "numpy", "spacy-transformers"]

VERSIONS = """
import importlib.metadata as m, json, platform, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = m.version(name)
    except m.PackageNotFoundError:
        found[name] = None
print(json.dumps({"python": platform.python_version(), **found}))
"""


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def summaries(output: str) -> list[str]:
    """Every pytest summary line of the output, in order (`= 12 passed, 1 skipped in 3.2s =` → `12 passed, ...`)."""
    return [line.strip().strip("= ") for line in output.splitlines() if SUMMARY.search(line)]


def versions(python: Path) -> dict:
    done = subprocess.run([str(python), "-c", VERSIONS, *PACKAGES], capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout)


def run_leg(leg: str, repo: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"env_{leg}_") as tmp:
        record = run_in_clone(repo, f"make {leg}", Path(tmp))
        output = (Path(tmp) / "output.txt").read_text(encoding="utf-8")
        record.update(
            leg=leg,
            versions=versions(Path(tmp) / "checkout" / LEGS[leg] / "bin" / "python"),
            summaries=summaries(output),
            cpu_kind={k: v for k, v in cpu_kind().items() if k != "flags"},
        )
        if record["exit_status"] != 0:
            print("\n".join(output.splitlines()[-30:]), file=sys.stderr)
    record.pop("durations", None)
    return record


def render(records: list[dict]) -> str:
    """The records as a Markdown table, newest first."""
    columns = [
        "leg",
        "Python",
        *PACKAGES,
        "pytest",
        "wall",
        "CPU time",
        "exit",
        "commit",
        "CPU",
        "started (UTC)",
        "load",
    ]
    lines = [
        "<!-- written by `python -m lab.benchmarks.environments` from environments.jsonl: "
        "each leg in a fresh clone of HEAD -->",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---" for _ in columns) + " |",
    ]
    for r in sorted(records, key=lambda r: r["started"], reverse=True):
        v, kind = r["versions"], r["cpu_kind"]
        cpu = f"{r['machine']['cpu']} ({kind.get('vendor')} family {kind.get('family')} model {kind.get('model')}), "
        cpu += f"{r['machine']['cores']} cores"
        commit = r["commit"][:7] + (" + uncommitted (not measured)" if r["uncommitted"] else "")
        row = [
            f"`make {r['leg']}`",
            v.get("python", "?"),
            *(v.get(name) or "—" for name in PACKAGES),
            "; ".join(r["summaries"]) or "(none)",
            minutes(r["wall_s"]),
            minutes(r["user_s"] + r["sys_s"]),
            str(r["exit_status"]),
            commit,
            cpu,
            r["started"],
            f"{r['load_start']} → {r['load_end']}",
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.benchmarks.environments", description=__doc__.split("\n\n")[0])
    # checked below: argparse refuses an empty list against `choices` (the records-only call)
    parser.add_argument(
        "legs", nargs="*", metavar="LEG", help=f"Makefile targets, run in this order: {', '.join(LEGS)}"
    )
    parser.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose HEAD is cloned (default: this one)")
    parser.add_argument("--out", type=Path, default=RESULTS / "environments.jsonl")
    args = parser.parse_args(argv)
    unknown = [leg for leg in args.legs if leg not in LEGS]
    if unknown:
        parser.error(f"unknown leg {unknown[0]!r}: expected one of {', '.join(LEGS)}")
    if not args.legs:  # the table again from the records, as a run writes it
        records = [json.loads(line) for line in args.out.read_text(encoding="utf-8").splitlines() if line.strip()]
        args.out.with_suffix(".md").write_text(render(records), encoding="utf-8")
        return 0
    status = 0
    repo = args.repo.resolve()
    # This run's own records make the tree dirty after its first leg; the later legs still clone HEAD, so those
    # writes are no uncommitted change of what they measure (unless they were uncommitted before this run began).
    before = set(git_state(repo)["dirty_paths"])
    written = [path.resolve() for path in (args.out, args.out.with_suffix(".md"))]
    own = {path.relative_to(repo).as_posix() for path in written if path.is_relative_to(repo)} - before
    for leg in args.legs:
        record = run_leg(leg, repo)
        record["uncommitted"] = [path for path in record["uncommitted"] if path not in own]
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        records = [json.loads(line) for line in args.out.read_text(encoding="utf-8").splitlines() if line.strip()]
        args.out.with_suffix(".md").write_text(render(records), encoding="utf-8")
        print(f"{leg}: {'; '.join(record['summaries'])} in {minutes(record['wall_s'])}, exit {record['exit_status']}")
        status = status or record["exit_status"]
    return status


if __name__ == "__main__":
    sys.exit(main())
