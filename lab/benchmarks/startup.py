"""Start-up time: the wall seconds of the first commands a user runs, in fresh interpreters.

    python -m lab.benchmarks.startup [--runs 5] [--json bench/results/startup.json]

writes the record (JSON) and, beside it, its table (the same name, .md), which docs/performance.md cites.

Each command runs `--runs` times, the commands alternated (one run of each in turn), so that all see
the same machine state; reported: each command's median and its runs, the load average before and
after, what `import spacy_elmo` adds over `import torch, spacy` (medians), what
`from transformers import PreTrainedModel` (the class `ElmoModel` builds on: transformers' modeling
code) adds over the same, and one `-X importtime` run of
`import torch, spacy, spacy_elmo`: the time spent importing each top-level package (where the time
goes; `-X importtime` adds its own overhead). The commands import this checkout's package
(PYTHONPATH), run by this interpreter and the console script beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lab import ROOT

# the baseline, and the import the package cannot avoid while `import spacy_elmo` registers ElmoModel
BASE = "import torch, spacy"
PRE_TRAINED_MODEL = "import torch, spacy; from transformers import PreTrainedModel"


def commands(python: str = sys.executable) -> dict[str, list[str]]:
    """{name: argv}: the console script's --version, and the imports it is compared with."""
    script = Path(python).with_name("spacy-elmo")
    version = [str(script)] if script.is_file() else [python, str(ROOT / "spacy_elmo_cli.py")]
    return {
        "spacy-elmo --version": [*version, "--version"],
        BASE: [python, "-c", BASE],
        "import spacy_elmo": [python, "-c", "import spacy_elmo"],
        "import torch, spacy, spacy_elmo": [python, "-c", "import torch, spacy, spacy_elmo"],
        PRE_TRAINED_MODEL: [python, "-c", PRE_TRAINED_MODEL],
    }


def environment() -> dict[str, str]:
    """This environment with the checkout first on the path: the code measured is the commit recorded."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def wall_seconds(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return time.perf_counter() - start


def import_times(python: str, env: dict[str, str]) -> dict[str, float]:
    """Seconds spent importing each top-level package (its modules' own times, however deep they were
    imported: transformers under spacy_elmo counts as transformers) in one `-X importtime` run of
    `import torch, spacy, spacy_elmo`; packages under 10 ms (the interpreter's own start-up) left out."""
    done = subprocess.run(
        [python, "-X", "importtime", "-c", "import torch, spacy, spacy_elmo"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    times: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line[len("import time:") :].split("|")
        package = name.strip().split(".")[0]
        times[package] = times.get(package, 0.0) + int(own) / 1e6
    return {name: seconds for name, seconds in sorted(times.items(), key=lambda item: -item[1]) if seconds >= 0.01}


def measure(runs: int, warmups: int = 1, python: str = sys.executable) -> dict:
    env = environment()
    named = commands(python)
    for _ in range(warmups):  # warm the file cache and the bytecode: a first run after a change is not a user's
        for argv in named.values():
            wall_seconds(argv, env)
    by_run: dict[str, list[float]] = {name: [] for name in named}
    for _ in range(runs):
        for name, argv in named.items():
            by_run[name].append(wall_seconds(argv, env))
    median = {name: statistics.median(times) for name, times in by_run.items()}
    return {
        "runs": runs,
        "warmups": warmups,
        "median_s": median,
        "by_run_s": by_run,
        "spacy_elmo_over_torch_spacy_s": median["import torch, spacy, spacy_elmo"] - median[BASE],
        "pre_trained_model_over_torch_spacy_s": median[PRE_TRAINED_MODEL] - median[BASE],
        "import_time_s": import_times(python, env),
    }


def table(record: dict) -> str:
    """The record as a Markdown table: each command's median and runs, and what spacy_elmo adds (where and when
    it ran is in the record)."""
    lines = [
        "<!-- written by `python -m lab.benchmarks.startup` from startup.json, "
        "which records the commit, CPU and load -->",
        "",
        "| command | median s | runs (s) |",
        "| --- | ---: | --- |",
    ]
    for name, median in record["median_s"].items():
        runs = ", ".join(f"{x:.2f}" for x in record["by_run_s"][name])
        lines.append(f"| `{name}` | {median:.2f} | {runs} |")
    lines.append(f"| added by `spacy_elmo` over `{BASE}` (medians) | {record['spacy_elmo_over_torch_spacy_s']:.2f} | |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default: 5)")
    parser.add_argument("--warmups", type=int, default=1, help="untimed runs of each command first (default: 1)")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "startup.json"), help="the record")
    args = parser.parse_args(argv)

    from spacy_elmo.provenance import Provenance

    command = [sys.executable, "-m", "lab.benchmarks.startup", *(sys.argv[1:] if argv is None else argv)]
    prov = Provenance(command=command, where=ROOT)
    load_before = os.getloadavg()
    result = measure(args.runs, args.warmups)
    result["loadavg_before"] = list(load_before)
    result["loadavg_after"] = list(os.getloadavg())
    result["provenance"] = prov.record()
    print(json.dumps({k: v for k, v in result.items() if k not in ("provenance", "by_run_s")}, indent=1))
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    path.with_suffix(".md").write_text(table(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
