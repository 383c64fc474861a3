"""The table and figure of results/alternatives.md, from the campaign's run records (and the speed bench, if run).

    python -m lab.reports.alternatives_report results/runs/alternatives --page results/alternatives.md \\
        --json results/alternatives.json --plot results/alternatives.png [--speed results/alternatives_speed.json]

Reads every scored record (lab/experiments/alternatives_campaign.py: arm, training size, seed, test F1) and writes, as
results/alternatives.md's "Analysis" fixes it:
- per training size, each arm's test F1 per seed and its mean ± sd;
- per size, the paired per-seed gains ELMo − none, ELMo − static and (ELMo + static) − static (same size and seed),
  each with its mean ± sd and the 95% interval mean ± t(0.975, n − 1) · sd / √n (lab/reports/gains.py's `spread`);
- per arm, the training size at which its mean test F1 first reaches the none arm's mean test F1 at 100% (each run's
  model-best chosen on dev): linear in log(size) between the last size below it and the first size at or above it,
  "≤ smallest" when the smallest already reaches it and "not reached" when 100% does not; the same per seed against
  that seed's none-100% score;
- words/s through nlp.pipe beside each arm, from `--speed` (lab/benchmarks/alternatives_speed.py), where given;
- per arm and size, the minutes per training (each record's wall clock): median and range over seeds, the cells that
  fine-tuned the biLM marked, and the runs that started beside more than their campaign pair (load at start ≥ BUSY).
The table goes between `<!-- alternatives:start -->` and `<!-- alternatives:end -->` of `--page`; the numbers into
`--json`; the figure (test F1 by size per arm, and the three gains with their intervals) into `--plot`. Cells
without all their seeds are shown with the seeds they have, and say so. Standard library and matplotlib only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from lab.experiments.alternatives_campaign import SEEDS
from lab.reports.gains import splice, spread

ARMS = ("none", "static", "elmo", "elmo_static")
LABELS = {"none": "none", "static": "static", "elmo": "ELMo", "elmo_static": "ELMo + static"}
GAINS = (("elmo", "none"), ("elmo", "static"), ("elmo_static", "static"))
# The campaign trains two at a time on two cores, so a load near 2 is its own; at 3 or more something else ran too.
BUSY = 3.0


def read(folder: Path) -> list[dict]:
    runs = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = json.loads(path.read_text(encoding="utf8"))
        test = (record.get("test") or {}).get("score")
        if record.get("arm") in ARMS and isinstance(test, (int, float)):
            runs.append(
                {
                    "run": record["run"],
                    "arm": record["arm"],
                    "pct": int(record["train_pct"]),
                    "seed": int(record["seed"]),
                    "test": float(test),
                    "dev": (record.get("best_dev") or {}).get("ents_f"),
                    "minutes": record.get("minutes"),
                    "fine_tuned": record.get("fine_tuned"),
                    "load": (((record.get("provenance") or {}).get("machine") or {}).get("load_average") or [None])[0],
                    "commit": ((record.get("provenance") or {}).get("git") or {}).get("commit"),
                }
            )
    return runs


def crossing(curve: dict[int, float], target: float) -> dict:
    """The training size (%) at which `curve` ({pct: score}) first reaches `target`, linear in log(size)."""
    sizes = sorted(curve)
    if not sizes:
        return {"pct": None, "how": "no scores"}
    if curve[sizes[0]] >= target:  # an upper bound: a smaller size, unrun, might reach it too
        return {"pct": sizes[0], "at_most": True, "how": f"≤ {sizes[0]}%: the smallest size run reaches it"}
    for low, high in zip(sizes, sizes[1:]):
        if curve[high] >= target > curve[low]:
            share = (target - curve[low]) / (curve[high] - curve[low])
            pct = math.exp(math.log(low) + share * (math.log(high) - math.log(low)))
            return {"pct": round(pct, 1), "how": f"between {low}% and {high}%, linear in log(size)"}
    return {"pct": None, "how": f"not reached by {sizes[-1]}%"}


def analyse(runs: list[dict], speed: dict | None) -> dict:
    by = {(r["arm"], r["pct"], r["seed"]): r for r in runs}
    sizes = sorted({r["pct"] for r in runs})
    seeds = sorted({r["seed"] for r in runs})
    cells = []
    for pct in sizes:
        row: dict = {"pct": pct, "arms": {}, "gains": {}}
        for arm in ARMS:
            scores = {s: by[(arm, pct, s)]["test"] for s in seeds if (arm, pct, s) in by}
            row["arms"][arm] = {"per_seed": scores, **(spread(list(scores.values())) if scores else {"n": 0})}
        for a, b in GAINS:
            gains = {
                s: round(by[(a, pct, s)]["test"] - by[(b, pct, s)]["test"], 2)
                for s in seeds
                if (a, pct, s) in by and (b, pct, s) in by
            }
            row["gains"][f"{a}-{b}"] = {"per_seed": gains, **(spread(list(gains.values())) if gains else {"n": 0})}
        cells.append(row)
    target_cell = next((c for c in cells if c["pct"] == 100), None)
    target = (target_cell or {}).get("arms", {}).get("none", {}).get("mean")
    reach: dict = {"target": target, "arms": {}}
    for arm in ARMS:
        curve = {c["pct"]: c["arms"][arm]["mean"] for c in cells if c["arms"][arm].get("n")}
        entry = crossing(curve, target) if target is not None else {"pct": None, "how": "no none-arm score at 100%"}
        per_seed, at_most = {}, []
        for s in seeds:
            own = by.get(("none", 100, s))
            seed_curve = {pct: by[(arm, pct, s)]["test"] for pct in sizes if (arm, pct, s) in by}
            if own:
                seed_entry = crossing(seed_curve, own["test"])
                per_seed[s] = seed_entry["pct"]
                at_most += [s] if seed_entry.get("at_most") else []
        reach["arms"][arm] = {**entry, "per_seed": per_seed, "per_seed_at_most": at_most}
    minutes: dict = {arm: {} for arm in ARMS}
    for arm in ARMS:
        for pct in sizes:
            cell_runs = [by[(arm, pct, s)] for s in seeds if (arm, pct, s) in by]
            values = sorted(r["minutes"] for r in cell_runs if isinstance(r["minutes"], (int, float)))
            if values:
                minutes[arm][pct] = {
                    "median": round(statistics.median(values), 1),
                    "min": values[0],
                    "max": values[-1],
                    "per_seed": {r["seed"]: r["minutes"] for r in cell_runs},
                    "fine_tuned": any(r["fine_tuned"] for r in cell_runs),
                }
    busy = sorted(r["run"] for r in runs if isinstance(r["load"], (int, float)) and r["load"] >= BUSY)
    return {
        "about": (
            "results/alternatives.md's analysis, written by alternatives_report.py from the run records: test "
            "F1 (ents_f x 100) per arm, size and seed; paired per-seed gains with mean, sample sd and 95% t interval; "
            "the size at which each arm reaches the none arm's 100% test F1; minutes per training; words/s."
        ),
        "seeds": seeds,
        "sizes": sizes,
        "cells": cells,
        "reach_none_full": reach,
        "minutes": minutes,
        "busy_runs": busy,
        "speed": speed,
        "runs": runs,
    }


def _pm(entry: dict) -> str:
    if not entry.get("n"):
        return "—"
    sd = f" ± {entry['sd']:.2f}" if entry.get("sd") is not None else ""
    return f"{entry['mean']:.2f}{sd}"


def _gain(entry: dict) -> str:
    if not entry.get("n"):
        return "—"
    seeds = ", ".join(f"s{s} {v:+.2f}" for s, v in sorted(entry["per_seed"].items()))
    interval = f" [{entry['interval'][0]:+.2f}, {entry['interval'][1]:+.2f}]" if entry.get("interval") else ""
    return f"{entry['mean']:+.2f}{interval} ({seeds})"


def table(result: dict) -> str:
    seeds = len(SEEDS)  # a cell with fewer of the registered seeds says how many it has
    lines = [
        "| train % | none | static | ELMo | ELMo + static | ELMo − none | ELMo − static | (ELMo + static) − static |",
        "|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for cell in result["cells"]:
        arms = [
            _pm(cell["arms"][arm])
            + ("" if cell["arms"][arm].get("n") == seeds else f" (n={cell['arms'][arm].get('n')})")
            for arm in ARMS
        ]
        gains = [_gain(cell["gains"][f"{a}-{b}"]) for a, b in GAINS]
        lines.append(f"| {cell['pct']} | " + " | ".join(arms + gains) + " |")
    lines += [
        "",
        "| arm | reaches the none arm's 100% test F1 at | per seed | words/s (nlp.pipe) |",
        "|---|---|---|---:|",
    ]
    reach = result["reach_none_full"]
    speed = (result.get("speed") or {}).get("arms", {})
    for arm in ARMS:
        entry = reach["arms"][arm]
        at = "—" if entry.get("pct") is None else ("≤ " if entry.get("at_most") else "") + f"{entry['pct']}%"
        bound = {s: "≤ " if s in entry["per_seed_at_most"] else "" for s in entry["per_seed"]}
        per_seed = ", ".join(
            f"s{s} {'—' if v is None else f'{bound[s]}{v}%'}" for s, v in sorted(entry["per_seed"].items())
        )
        wps = speed.get(arm, {}).get("words_per_s")
        lines.append(
            f"| {LABELS[arm]} | {at} ({entry['how']}) | {per_seed or '—'} | {wps if wps else 'not measured'} |"
        )
    target = reach["target"]
    registered = ", ".join(f"s{s}" for s in SEEDS)
    complete = all(cell["arms"][arm].get("n") == seeds for cell in result["cells"] for arm in ARMS)
    over = (
        f"the registered seeds {registered}, all run in every cell"
        if complete
        else f"the seeds run so far ({', '.join(f's{s}' for s in result['seeds'])} of the registered {registered}; "
        "a cell with fewer says n)"
    )
    lines += [
        "",
        f"Test F1 (ents_f × 100) as mean ± sd over {over}; "
        "gains as mean [95% interval] (per-seed values); the none arm's 100% test F1: "
        f"{'—' if target is None else f'{target:.2f}'}. Written by lab/reports/alternatives_report.py from "
        f"{len(result['runs'])} run records.",
    ]
    if result.get("speed"):
        run = result["speed"]
        cpu, load = run["cpu"], run["load_average_before"][0]
        lines += [
            "",
            f"Words/s: one run of lab/benchmarks/alternatives_speed.py ({run['provenance']['started_utc']}, commit "
            f"{run['provenance']['git']['commit'][:7]}) on {cpu['vendor']} family {cpu['family']} model "
            f"{cpu['model']}, {run['threads']} threads, load {load:.2f} before; {run['sentences']} dev sentences, "
            "median of its passes.",
        ]
    lines += [*_minutes_table(result), ""]
    return "\n".join(lines)


def _minutes_table(result: dict) -> list[str]:
    minutes = result["minutes"]
    if not any(minutes[arm] for arm in ARMS):
        return []
    lines = [
        "",
        "Minutes per training, median (min–max) over seeds of each record's wall clock:",
        "",
        "| train % | " + " | ".join(LABELS[arm] for arm in ARMS) + " |",
        "|---:|" + "---:|" * len(ARMS),
    ]
    for pct in result["sizes"]:
        entries = [minutes[arm].get(pct) for arm in ARMS]
        lines.append(
            f"| {pct} | "
            + " | ".join(
                "—"
                if not e
                else f"{e['median']:.1f} ({e['min']:.1f}–{e['max']:.1f})" + (" ft" if e["fine_tuned"] else "")
                for e in entries
            )
            + " |"
        )
    busy = ", ".join(result["busy_runs"]) or "none"
    lines += [
        "",
        "Two trainings at a time with one thread each at nice 19; ft: the biLM fine-tuned (the recipe's rule for "
        "the smaller sizes), otherwise "
        f"frozen behind the layer cache. The load is recorded at a run's start only; runs that started at load ≥ "
        f"{BUSY:.0f} (beside more than their pair): {busy}.",
    ]
    return lines


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for arm in ARMS:
        xs = [c["pct"] for c in result["cells"] if c["arms"][arm].get("n")]
        ys = [c["arms"][arm]["mean"] for c in result["cells"] if c["arms"][arm].get("n")]
        line = left.plot(xs, ys, marker="o", label=LABELS[arm])[0]
        for run in result["runs"]:
            if run["arm"] == arm:
                left.scatter(run["pct"], run["test"], s=8, color=line.get_color(), alpha=0.5)
    if result["reach_none_full"]["target"] is not None:
        left.axhline(result["reach_none_full"]["target"], color="grey", linestyle=":", label="none at 100%")
    left.set(xscale="log", xlabel="training size (% of FiNER-ORD train)", ylabel="test F1", title="Test F1 by size")
    left.legend(fontsize=8)
    for offset, (a, b) in zip((-0.04, 0.0, 0.04), GAINS):
        cells = [c for c in result["cells"] if c["gains"][f"{a}-{b}"].get("n")]
        xs = [c["pct"] * math.exp(offset) for c in cells]
        ys = [c["gains"][f"{a}-{b}"]["mean"] for c in cells]
        low = [y - (c["gains"][f"{a}-{b}"]["interval"] or [y, y])[0] for y, c in zip(ys, cells)]
        high = [(c["gains"][f"{a}-{b}"]["interval"] or [y, y])[1] - y for y, c in zip(ys, cells)]
        name = f"({LABELS[a]}) − {LABELS[b]}" if " " in LABELS[a] else f"{LABELS[a]} − {LABELS[b]}"
        right.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=name)
    right.axhline(0, color="grey", linewidth=0.8)
    right.set(xscale="log", xlabel="training size (%)", ylabel="paired test F1 gain", title="Gains, 95% intervals")
    right.legend(fontsize=8)
    for axis in (left, right):  # the sizes themselves as ticks, not powers of ten
        axis.set_xticks(result["sizes"], [str(size) for size in result["sizes"]])
        axis.minorticks_off()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="folder of the campaign's run records")
    parser.add_argument("--page", type=Path, help="the page whose alternatives markers get the table")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--speed", type=Path, help="lab/benchmarks/alternatives_speed.py's results, if run")
    args = parser.parse_args(argv)
    speed = json.loads(args.speed.read_text(encoding="utf8")) if args.speed and args.speed.is_file() else None
    result = analyse(read(args.records), speed)
    text = table(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    if args.page:
        page = args.page.read_text(encoding="utf8")
        if "<!-- alternatives:start -->" not in page:
            parser.error(f"{args.page}: no <!-- alternatives:start --> / <!-- alternatives:end --> markers")
        args.page.write_text(splice(page, "alternatives", text), encoding="utf8")
    if args.plot and result["runs"]:
        plot(result, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
