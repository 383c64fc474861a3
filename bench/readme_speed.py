"""Writes the README's GPU speed summary (between `<!-- gpu-speed:start -->` and `<!-- gpu-speed:end -->`)
from the newest `bench/results/*/gpu.json`, so its figures are generated, never typed.

    python -m bench.readme_speed            # rewrite README.md
    python -m bench.readme_speed --check    # exit 1 if README.md differs from what would be written
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- gpu-speed:start -->", "<!-- gpu-speed:end -->"
TARGETS = {"inference": 100_000, "training": 50_000, "pipe": 0.9}  # issue 13's GPU targets


def newest_result(root: Path = ROOT) -> tuple[Path, dict]:
    results = sorted(
        ((json.loads(p.read_text(encoding="utf-8")), p) for p in (root / "bench" / "results").glob("*/gpu.json")),
        key=lambda item: item[0]["started"],
    )
    if not results:
        raise SystemExit("no bench/results/*/gpu.json: run `bash bench/gpu.sh` on a GPU machine first")
    report, path = results[-1]
    return path, report


def _met(value: float, target: float) -> str:
    return "meets" if value >= target else "misses"


def render(path: Path, report: dict) -> str:
    modes = report["inference"]["modes"]
    auto_bf16 = modes["eager_bf16"]["words_per_s"]  # what `auto` runs on CUDA under autocast
    graphs_bf16 = modes["cuda_graphs_bf16"]["words_per_s"]
    fp32 = modes["packed_fp32"]["words_per_s"]
    error = modes["eager_bf16"]["relative_error_vs_packed_fp32"]
    train = max(report["training"], key=lambda run: run["rows"])
    best_kernel, best = max(
        ((name, entry["words_per_s"]) for name, entry in train["modes"].items() if "words_per_s" in entry),
        key=lambda item: item[1],
    )
    cli = {run["precision"]: run for run in report.get("pretrain_cli", []) if "error" not in run}
    pipe = report["pipe"]["pipe_over_raw"]
    relative = path.relative_to(ROOT).as_posix()
    lines = [
        START,
        f"On one {report['device']} (`bash bench/gpu.sh`, commit {report['commit'][:7]}, "
        f"{report['started'][:10]}; [{relative}]({relative})), original architecture:",
        "",
        f"- inference, batch 128, bf16 autocast: **{auto_bf16:,.0f} words/s** with the default kernel "
        f"(`auto` → eager), {graphs_bf16:,.0f} with `lstm_implementation=\"cuda_graphs\"`; fp32 (packed): "
        f"{fp32:,.0f} words/s; bf16's largest error is {error:.1%} of the largest fp32 value "
        f"({_met(auto_bf16, TARGETS['inference'])} the 100,000 target);",
        f"- pretraining steps with a sampled softmax (8,192 negatives, 793,471 words), {train['rows']} × "
        f"{train['steps']} words per step: **{best:,.0f} words/s** ({best_kernel.replace('_', ', ')}); "
        + (
            f"`spacy-elmo pretrain` end to end with `training.precision = \"bf16\"`: "
            f"{cli['bf16']['words_per_s_median_window']:,.0f} words/s once warm, "
            f"{cli['bf16']['words_per_s_whole_run']:,.0f} over the whole {cli['bf16']['steps']}-step run "
            if "bf16" in cli else ""
        )
        + f"({_met(best, TARGETS['training'])} the 50,000 target; bilm-tf: about 8,000 on three GTX 1080s);",
        f"- `nlp.pipe` with the `elmo` component: {pipe:.0%} of the raw model's words/s "
        f"({_met(pipe, TARGETS['pipe'])} the 90% target).",
        END,
    ]
    return "\n".join(lines)


def rewrite(readme: str, block: str) -> str:
    if START not in readme or END not in readme:
        raise SystemExit(f"README.md lacks the {START} … {END} markers")
    head, rest = readme.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + block + tail


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    readme_path = ROOT / "README.md"
    readme = readme_path.read_text(encoding="utf-8")
    new = rewrite(readme, render(*newest_result()))
    if args.check:
        if new != readme:
            print("README.md's GPU speed section differs from `python -m bench.readme_speed`", file=sys.stderr)
            return 1
        return 0
    readme_path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
