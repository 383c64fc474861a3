"""Writes docs/performance.md's results tables from the runs recorded in bench/RESULTS.md, so they are
generated, never typed (between `<!-- perf-results:start -->` and `<!-- perf-results:end -->`, spliced by
scripts/doc_regions.py, the lab's one marker-splicing helper).

    python -m bench.performance_doc            # rewrite docs/performance.md
    python -m bench.performance_doc --check    # exit 1 if it differs from what would be written

Each target is judged on the newest run that measured it *and* records a clean commit of this checkout's
code: an `## Inference benchmark` section of `python -m bench` with a `Code: <commit>` line (not
`-dirty`, not `unknown`), not measured from another directory (`--source`), at 2 threads; baseline rows
(`--baseline`) are other code and never count. A target no such run measured is said to be unmeasured,
with no figure. Training rows come the same way from `bench/train_throughput.py`'s sections.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
DOC = ROOT / "docs" / "performance.md"
REGION = "perf-results"  # doc_regions.markers(REGION) are its markers
if str(ROOT / "scripts") not in sys.path:
    sys.path.append(str(ROOT / "scripts"))  # scripts/doc_regions.py: the lab's one marker-splicing helper
import doc_regions  # noqa: E402

THREADS = 2  # the targets are for 2 threads
GIB_MIB = 1024


@dataclass
class Run:
    """One recorded benchmark section of bench/RESULTS.md."""

    kind: str  # "inference" | "training"
    started: str  # "2026-11-26 11:14 UTC"
    label: str
    threads: int | None = None
    code: str | None = None  # the short commit, None when not recorded
    clean: bool = False  # a recorded commit without uncommitted changes
    other_source: bool = False  # measured another directory's package (`--source`)
    machine: str = ""
    load: str = ""
    gemm: float | None = None  # the roofline's fp32 GEMM rate, GFLOP/s
    rows: list[dict] = field(default_factory=list)

    @property
    def counts(self) -> bool:
        """Measures this checkout's own code at a recorded clean commit, at the targets' thread count."""
        return self.clean and not self.other_source and self.threads == THREADS

    def cite(self) -> str:
        return f"{self.started}, commit {self.code}" if self.code else f"{self.started}, commit not recorded"


@dataclass(frozen=True)
class Target:
    name: str
    arch: str
    batch: int
    mode: str
    metric: str
    goals: tuple  # ((threshold, text), ...): every goal the target has had, judged each
    at_most: bool = False


TARGETS = (
    Target(
        "original, batch 32: compute roofline (executed FLOPs)",
        "original",
        32,
        "exact",
        "roofline_executed",
        ((0.65, "≥ 65% (issue 13 part 2)"), (0.60, "≥ 60% (part 1)")),
    ),
    Target(
        "original, batch 1: bandwidth bound",
        "original",
        1,
        "exact",
        "bandwidth_bound",
        ((0.70, "≥ 70% (issue 13 part 2)"), (0.80, "≥ 80% (part 1)")),
    ),
    Target(
        "small, batch 32: compute roofline (executed FLOPs)",
        "small",
        32,
        "exact",
        "roofline_executed",
        ((0.50, "≥ 50%"),),
    ),
    Target(
        "small, batch 128: compute roofline (executed FLOPs)",
        "small",
        128,
        "exact",
        "roofline_executed",
        ((0.50, "≥ 50%"),),
    ),
    Target(
        "original, batch 32: peak RSS during inference",
        "original",
        32,
        "exact",
        "rss_infer",
        ((1.2 * GIB_MIB, "≤ 1.2 GiB (1,228.8 MiB)"),),
        at_most=True,
    ),
    *(
        Target(f"{arch}: `nlp.pipe` words/s vs the raw model's", arch, 32, "pipe", "pipe_over_raw", ((0.90, "≥ 90%"),))
        for arch in ("small", "medium", "original")
    ),
)


# ---------------------------------------------------------------------------------------------
# reading bench/RESULTS.md


def _percent(cell: str) -> float | None:
    return float(cell.rstrip("%")) / 100 if cell.endswith("%") else None


def _number(cell: str) -> float | None:
    try:
        return float(cell.replace(",", "").rstrip("×"))
    except ValueError:
        return None


def _inference_row(cells: list[str]) -> dict | None:
    if len(cells) != 10 or not cells[1].isdigit():
        return None
    rss = [_number(x) for x in cells[8].split("/")] if "/" in cells[8] else [None, None]
    row = {
        "arch": cells[0],
        "batch": int(cells[1]),
        "mode": cells[2],
        "words_per_s": _number(cells[3]),
        "roofline": _percent(cells[5]),
        "roofline_executed": _percent(cells[6]),
        "bandwidth_bound": _percent(cells[7]),
        "rss_infer": rss[0],
        "rss_load": rss[1],
        "notes": cells[9],
    }
    pipe = re.search(r"nlp\.pipe = (\d+)% of raw model \((\d+) words/s\)", cells[9])
    if pipe:
        row["pipe_over_raw"], row["raw_words_per_s"] = int(pipe[1]) / 100, float(pipe[2])
    return row


def _training_row(cells: list[str]) -> dict | None:
    if len(cells) != 6 or _number(cells[1]) is None:
        return None
    return {
        "implementation": cells[0],
        "seconds_per_step": _number(cells[1]),
        "words_per_s": _number(cells[2]),
        "training_roofline": _percent(cells[4]),
        "vs_eager": _number(cells[5]),
    }


def _commit(run: Run, text: str) -> None:
    """The commit a section records: `Code: abc1234[-dirty]` (python -m bench) or `Commit abc1234[ (with
    uncommitted changes)].` (train_throughput.py)."""
    code = re.search(r"^Code: ([0-9a-f]{7,40})(-dirty)?[;.]", text, re.M)
    if code:
        run.code, run.clean = code[1], not code[2]
        return
    commit = re.search(r"\bCommit ([0-9a-f]{7,40})( \(with uncommitted changes\))?\.", text)
    if commit:
        run.code, run.clean = commit[1], not commit[2]


def parse_section(heading: str, text: str) -> Run | None:
    """A Run from one `## ...` section, or None for sections that are not benchmark runs."""
    match = re.match(
        r"## (Inference benchmark|Training throughput), (\d{4}-\d\d-\d\d \d\d:\d\d \w+)(?: \((.*)\))?$", heading
    )
    if not match:
        return None
    run = Run("inference" if match[1] == "Inference benchmark" else "training", match[2], match[3] or "")
    machine = re.search(r"^Machine: (.*)$", text, re.M)
    if machine:
        run.machine = machine[1].split(";")[0]
        threads = re.search(r"(\d+) threads", machine[1])
        run.threads = int(threads[1]) if threads else None
        load = re.search(r"Load average at start (\d+\.\d+(?:/\d+\.\d+)*), at end (\d+\.\d+(?:/\d+\.\d+)*)", machine[1])
        run.load = f"load average {load[1]} at start, {load[2]} at end" if load else ""
    _commit(run, text)
    run.other_source = "(`--source`)" in text
    gemm = re.search(r"roofline = ([\d.]+)\)", text) or re.search(
        r"fp32 GEMM rate measured in this run \(([\d.]+) GFLOP/s", text
    )
    run.gemm = float(gemm[1]) if gemm else None
    parse = _inference_row if run.kind == "inference" else _training_row
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            row = parse([cell.strip() for cell in line.strip().strip("|").split("|")])
            if row:
                run.rows.append(row)
    return run


def read_runs(results: Path = RESULTS) -> list[Run]:
    """Every benchmark run recorded in `results`, oldest first (the file is appended, newest last)."""
    sections = re.split(r"^(?=## )", results.read_text(encoding="utf-8"), flags=re.M)
    runs = []
    for section in sections:
        heading, _, body = section.partition("\n")
        run = parse_section(heading.strip(), body)
        if run:
            runs.append(run)
    return sorted(runs, key=lambda r: r.started)


# ---------------------------------------------------------------------------------------------
# choosing and judging


def _row(run: Run, target: Target) -> dict | None:
    """The run's row of this checkout's code for the target (baseline rows are other code)."""
    for row in run.rows:
        if (row["arch"], row["batch"], row["mode"]) == (target.arch, target.batch, target.mode) and row.get(
            target.metric
        ) is not None:
            return row
    return None


def latest(runs: list[Run], target: Target, counting: bool = True) -> tuple[Run, dict] | None:
    """The newest run (that counts, unless `counting` is False) with a row for the target."""
    for run in reversed(runs):
        row = _row(run, target) if run.kind == "inference" and (run.counts or not counting) else None
        if row:
            return run, row
    return None


def verdict(target: Target, value: float) -> str:
    parts = []
    for threshold, text in target.goals:
        met = value <= threshold if target.at_most else value >= threshold
        parts.append(("met" if met else "**not met**") + (f" ({text.split(' (')[0]})" if len(target.goals) > 1 else ""))
    return ", ".join(parts)


def _measured(target: Target, row: dict) -> str:
    if target.metric == "rss_infer":
        return f"{row['rss_infer']:,.0f} MiB (loading peaks at {row['rss_load']:,.0f})"
    if target.metric == "pipe_over_raw":
        return f"{row['pipe_over_raw']:.0%} ({row['words_per_s']:,.0f} vs {row['raw_words_per_s']:,.0f} words/s)"
    if target.metric == "roofline_executed":
        return (
            f"{row['roofline_executed']:.0%} executed / {row['roofline']:.0%} nominal "
            f"({row['words_per_s']:,.0f} words/s)"
        )
    return f"{row[target.metric]:.0%} ({row['words_per_s']:,.0f} words/s)"


# ---------------------------------------------------------------------------------------------
# writing


def target_lines(runs: list[Run]) -> list[str]:
    out = ["| target | goal | run | measured | verdict |", "| --- | --- | --- | --- | --- |"]
    cited, unmeasured = {}, []
    for target in TARGETS:
        found = latest(runs, target)
        if found is None:
            older = latest(runs, target, counting=False)
            unmeasured.append((target, older[0] if older else None))
            continue
        run, row = found
        cited[run.started] = run
        out.append(
            f"| {target.name} | {'; '.join(text for _, text in target.goals)} | {run.cite()} | "
            f"{_measured(target, row)} | {verdict(target, row[target.metric])} |"
        )
    out.append("")
    for run in cited.values():
        out.append(
            f"The run of {run.cite()}: {run.machine}, {run.threads} threads; {run.load}; fp32 GEMM roofline "
            f"{run.gemm} GFLOP/s measured in the same run."
        )
    if unmeasured:
        out += [
            "",
            "Not measured by any run that records a clean commit of this code (so no figure is given; "
            "`python -m bench` measures them all):",
            "",
        ]
        out += [
            f"- {t.name}: the newest run that measured it is {run.cite() if run else 'none'} (bench/RESULTS.md)"
            for t, run in unmeasured
        ]
    return out + [""]


def training_lines(runs: list[Run]) -> list[str]:
    latest_per_config: dict[str, Run] = {}
    for run in runs:
        if run.kind == "training" and run.clean and run.rows:
            latest_per_config[run.label] = run
    if not latest_per_config:
        return ["No `bench/train_throughput.py` run records a clean commit.", ""]
    out = [
        "Training steps (`bench/train_throughput.py`, the newest run per config that records a clean commit; each "
        "batch trained once per LSTM kernel, alternating):",
        "",
        "| config | run | threads | kernel | words/s | training roofline | vs eager |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for label, run in sorted(latest_per_config.items()):
        for row in run.rows:
            out.append(
                f"| {label} | {run.cite()} | {run.threads} | {row['implementation']} | {row['words_per_s']:,.0f} | "
                f"{row['training_roofline']:.0%} | {row['vs_eager']:.2f}× |"
            )
    return out + [""]


def render(runs: list[Run]) -> str:
    """What goes between the perf-results markers."""
    return (
        "\n".join(
            [
                "",
                "<!-- Written by `python -m bench.performance_doc` from bench/RESULTS.md; "
                "tests/bench/test_performance_doc.py fails "
                "if this differs from what it would write. -->",
                "",
                "Targets (exact fp32, 2 threads, token cache off, nearly all-distinct words), each judged on the "
                "newest run "
                "in bench/RESULTS.md that measured it and records a clean commit of this checkout's code:",
                "",
                *target_lines(runs),
                *training_lines(runs),
            ]
        ).rstrip("\n")
        + "\n"
    )


def rewrite(text: str, block: str) -> str:
    return doc_regions.splice(text, REGION, block, where=str(DOC))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if docs/performance.md is stale")
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    return doc_regions.write_or_check(
        {DOC: (current, rewrite(current, render(read_runs())))}, args.check, "python -m bench.performance_doc"
    )


if __name__ == "__main__":
    sys.exit(main())
