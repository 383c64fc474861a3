"""Pretraining speed, same run: the project's pretraining command at a baseline commit and at this checkout,
alternated on the same text; writes bench/results/pretrain_speed.json and its table (.md).

    python -m lab.benchmarks.pretrain_speed --baseline-tree ../c55240e --text work/corpus/lm/train.txt \
        --variants fp32 bf16 --steps 300 --rounds 2 [--models results/bilm work/bilm_bf16 ...]

A run is `torchrun --standalone --nproc_per_node 2 -m spacy_elmo pretrain configs/pretrain_project.cfg (or
--config) --training.max_steps STEPS`: the baseline's in its tree (a worktree of that commit: its code and config),
each variant's here with `--training.precision VARIANT`; per round the baseline, then each variant. Its speed is its
steady words/s: words over step seconds from the log record at step WARMUP to the last (metrics.jsonl).
`--models`: finished pretrainings whose held-out perplexity, steps, seed and precision go into a second table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from confection import Config

from lab import ROOT
from spacy_elmo.provenance import git_state, machine, portable, utc_now

WARMUP = 40  # steps: the first windows (allocator, caches) are not steady


def run(tree: Path, config: str, text: Path, steps: int, precision: str | None, out: Path) -> dict:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m"]
    command += ["spacy_elmo", "pretrain", config, "--output", str(out), "--no-progress"]
    command += ["--paths.train", str(text.resolve()), "--training.max_steps", str(steps), "--training.eval_every", "0"]
    command += ["--training.precision", precision] if precision else []
    load = os.getloadavg()
    subprocess.run(command, cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)), check=True, stdout=subprocess.DEVNULL)
    logs = [r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "words_per_s" in r]
    first = next(r for r in logs if r["step"] >= WARMUP)  # words and train_seconds are running totals
    speed = (logs[-1]["words"] - first["words"]) / (logs[-1]["train_seconds"] - first["train_seconds"])
    return {"words_per_s": round(speed, 1), "load_before": load}


def model_row(folder: Path) -> dict:
    summary = json.loads((folder / "pretrain_summary.json").read_text())
    provenance = json.loads((folder / "provenance.json").read_text())
    config = Config().from_str((folder / "pretrain.cfg").read_text(), interpolate=False)
    return {
        "model": portable(str(folder)),
        "precision": config["training"].get("precision", "fp32"),
        "seed": provenance.get("seed"),
        "step": summary["step"],
        "heldout_ppl": round(summary["heldout_ppl"], 2),
        "commit": provenance["git"]["commit"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.benchmarks.pretrain_speed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--baseline-tree", type=Path, required=True, help="a worktree of the baseline commit")
    parser.add_argument("--text", type=Path, required=True, help="the pretraining text (the project's train.txt)")
    parser.add_argument("--variants", nargs="+", default=["fp32", "bf16"], help="training.precision values")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--config", default="configs/pretrain_project.cfg", help="in each tree")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--models", type=Path, nargs="*", default=[], help="finished pretrainings to list")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "pretrain_speed.json")
    args = parser.parse_args(argv)
    baseline, started = git_state(args.baseline_tree), utc_now()
    names = [f"baseline {baseline['commit'][:7]}", *args.variants]
    runs: dict[str, list] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.rounds):
            for name in names:
                tree, precision = (args.baseline_tree, None) if name == names[0] else (ROOT, name)
                runs[name].append(
                    run(tree, args.config, args.text, args.steps, precision, Path(scratch) / f"{index}-{name[:8]}")
                )
                print(name, runs[name][-1], flush=True)
    medians = {name: statistics.median(r["words_per_s"] for r in found) for name, found in runs.items()}
    rows = [
        {"run": n, "runs": runs[n], "median": m, "vs_baseline": round(m / medians[names[0]], 3)}
        for n, m in medians.items()
    ]
    models = [model_row(folder) for folder in args.models]
    record = {
        "command": " ".join(portable(arg) for arg in ["python", "-m", "lab.benchmarks.pretrain_speed", *sys.argv[1:]]),
        "config": args.config,
        "started_utc": started,
        "ended_utc": utc_now(),
        "git": git_state(ROOT),
        "baseline": baseline,
        "text": portable(str(args.text)),
        "steps": args.steps,
        "warmup": WARMUP,
        "machine": machine(),
        "rows": rows,
        "models": models,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    lines = ["| run | steady words/s per run | median | × baseline |", "|---|---|---:|---:|"]
    for r in rows:
        per_run = ", ".join(f"{x['words_per_s']:,.0f}" for x in r["runs"])
        lines.append(f"| {r['run']} | {per_run} | {r['median']:,.0f} | {r['vs_baseline']:.2f} |")
    if models:
        lines += [
            "",
            "| model | precision | seed | steps | held-out perplexity | commit |",
            "|---|---|---:|---:|---:|---|",
        ]
        for m in models:
            lines.append(f"| {m['model']} | {m['precision']} | {m['seed']} | {m['step']} | {m['heldout_ppl']:.2f} | ")
            lines[-1] += f"{m['commit'][:7]} |"
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
