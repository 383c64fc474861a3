"""What buys accuracy: each biLM variant's held-out perplexity against the ELMo gain it gives on dev.

    python scripts/variants.py --baseline work/training_seeds/ner_baseline_10 \
        --variant work/bilm work/training_seeds/ner_elmo_10 \
        --variant work/variants/bilm_1000 work/variants/training/ner_elmo_bilm1000_10 \
        --out work/results/variants.json --plot work/results/ppl_vs_gain.png

A variant is a pretrained biLM folder (its `pretrain_summary.json` gives the held-out perplexity,
steps and minutes) and the prefix of the `spacy train` runs made with it, one per seed
(`PREFIX_s{seed}`, as scripts/train_ner.py names them). The gain is paired by seed: the dev score
of ELMo's `model-best` minus the baseline's for the same seed (`--baseline PREFIX [PREFIX ...]`). Dev only: the
score is the one training selected `model-best` by, read from its meta.json — no test set is read,
so variants can be tried freely under the protocol. Every biLM and run's provenance is kept.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from report import copy_configs, find_provenance, own_provenance, plt, save_figure, spread

SEED_DIR = re.compile(r"_s(?P<seed>\d+)$")


def seed_runs(prefix: Path) -> dict[str, Path]:
    """{seed: folder} of the runs named `{prefix}_s{seed}`."""
    runs = {}
    for run in sorted(prefix.parent.glob(f"{prefix.name}_s*")):
        match = SEED_DIR.search(run.name)
        if match and run.name == f"{prefix.name}_s{match['seed']}" and run.is_dir():
            runs[match["seed"]] = run
    return runs


def dev_scores(prefix: Path, score: str) -> dict[str, float]:
    """{seed: dev score %} of every `{prefix}_s{seed}/model-best` (the score training selected it by)."""
    found = {}
    for seed, run in seed_runs(prefix).items():
        meta = run / "model-best" / "meta.json"
        if not meta.is_file():
            raise SystemExit(f"{meta}: missing (did the training run {run} finish?)")
        value = json.loads(meta.read_text()).get("performance", {}).get(score)
        if not isinstance(value, (int, float)):
            raise SystemExit(f"{meta}: performance.{score}: expected a number, found {value!r}")
        found[seed] = round(float(value) * 100, 2)
    if not found:
        raise SystemExit(f"{prefix}_s*: no training runs found (expected folders named {prefix.name}_s0, _s1, ...)")
    return dict(sorted(found.items(), key=lambda kv: int(kv[0])))


def baseline_scores(prefixes: list[Path], score: str) -> dict[str, float]:
    """{seed: dev score %} of the baseline runs under one or more prefixes (seeds added later live beside
    the variants' runs). The first prefix must hold runs; a later one without any is named and left out
    (its seeds may not be trained yet); a seed under two prefixes is an error, not a silent choice."""
    found: dict[str, float] = {}
    where: dict[str, Path] = {}
    for index, prefix in enumerate(prefixes):
        if index and not seed_runs(prefix):
            print(f"{prefix}_s*: no baseline runs yet, none added", file=sys.stderr)
            continue
        for seed, value in dev_scores(prefix, score).items():
            if seed in found:
                raise SystemExit(
                    f"baseline seed {seed}: found under both {where[seed]}_s{seed} and {prefix}_s{seed}; "
                    "expected each seed once"
                )
            found[seed], where[seed] = value, prefix
    return dict(sorted(found.items(), key=lambda kv: int(kv[0])))


def read_variant(bilm: Path, prefix: Path, baseline: dict[str, float], score: str, name: str | None = None) -> dict:
    summary_path = bilm / "pretrain_summary.json"
    if not summary_path.is_file():
        raise SystemExit(f"{summary_path}: missing (is {bilm} a finished `spacy-elmo pretrain` output?)")
    summary = json.loads(summary_path.read_text())
    for key in ("heldout_ppl", "step", "train_seconds"):
        if not isinstance(summary.get(key), (int, float)):
            raise SystemExit(f"{summary_path}: {key}: expected a number, found {summary.get(key)!r}")
    elmo = dev_scores(prefix, score)
    paired = [seed for seed in elmo if seed in baseline]
    if not paired:
        raise SystemExit(
            f"{prefix}_s*: seeds {sorted(elmo, key=int)} share none with the baseline's {sorted(baseline, key=int)}"
        )
    gains = {seed: round(elmo[seed] - baseline[seed], 2) for seed in paired}
    return {
        "name": (name or "{steps} step" + ("" if summary["step"] == 1 else "s")).replace(
            "{steps}", f"{summary['step']:,}"
        ),
        "bilm": str(bilm),
        "runs": str(prefix),
        "pretrain_steps": summary["step"],
        "pretrain_minutes": round(summary["train_seconds"] / 60, 1),
        "heldout_ppl": round(summary["heldout_ppl"], 2),
        "elmo": {"per_seed": elmo, **spread(list(elmo.values()))},
        "gain": {"per_seed": gains, **spread(list(gains.values()))},
    }


def paired_difference(a: dict, b: dict) -> dict | None:
    """Variant `a` against `b`, paired by seed: the difference of their dev scores (so of their gains: the
    baseline cancels) on the seeds both were trained at, and on how many of those `a` is ahead. None
    when they share no seed."""
    seeds = [seed for seed in a["elmo"]["per_seed"] if seed in b["elmo"]["per_seed"]]
    if not seeds:
        return None
    differences = {seed: round(a["elmo"]["per_seed"][seed] - b["elmo"]["per_seed"][seed], 2) for seed in seeds}
    return {
        "per_seed": differences,
        "ahead_on": sum(d > 0 for d in differences.values()),
        **spread(list(differences.values())),
    }


def leader_vs_runner_up(variants: list[dict]) -> dict | None:
    """The variant with the largest mean dev gain against the next one, paired by seed (`paired_difference`).
    None without two variants, with a tie, or when they share no seed."""
    ranked = sorted(variants, key=lambda v: v["gain"]["mean"], reverse=True)
    if len(ranked) < 2 or ranked[0]["gain"]["mean"] == ranked[1]["gain"]["mean"]:
        return None
    difference = paired_difference(ranked[0], ranked[1])
    return None if difference is None else {"leader": ranked[0]["name"], "runner_up": ranked[1]["name"], **difference}


def against_first_on_its_bilm(variants: list[dict]) -> list[dict]:
    """Each variant trained with the first variant's biLM (an NER-side change: another NER config,
    fine-tuning) against that first one, paired by seed: what the change itself buys, the biLM held fixed."""
    first = variants[0]
    found = []
    for v in variants[1:]:
        difference = paired_difference(v, first) if v["bilm"] == first["bilm"] else None
        if difference is not None:
            found.append({"variant": v["name"], "reference": first["name"], **difference})
    return found


def plot(result: dict, path: Path) -> None:
    """Paired dev gain (mean ± std over seeds) against held-out perplexity, one point per variant."""
    variants = sorted(result["variants"], key=lambda v: v["heldout_ppl"])
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.errorbar(
        [v["heldout_ppl"] for v in variants],
        [v["gain"]["mean"] for v in variants],
        yerr=[v["gain"]["std"] or 0 for v in variants],
        fmt="o",
        capsize=3,
    )
    for v in variants:
        ax.annotate(
            f"{v['name']} (n={v['gain']['n']})",
            (v["heldout_ppl"], v["gain"]["mean"]),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xscale("log")
    ax.set_xlabel("biLM held-out perplexity (log scale)")
    ax.set_ylabel(f"ELMo gain, dev {result['score_label']}")
    ax.set_title(f"{result['task']} at {result['fraction']}% of train: lower perplexity, bigger gain?", fontsize=9)
    ax.axhline(0, color="grey", lw=0.8)
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def discover(folders: list[Path]) -> list[tuple[Path, Path, str]]:
    """(biLM, runs prefix, name) of every DIR/*/variant.json (`register`), in name order; a variant
    whose runs have not finished yet (no model-best) is left out, with a line saying so."""
    found = []
    for folder in folders:
        for record in sorted(folder.glob("*/variant.json")):
            data = json.loads(record.read_text())
            runs = seed_runs(Path(data["runs"]))
            if not runs or not all((run / "model-best" / "meta.json").is_file() for run in runs.values()):
                print(f"{record}: runs {data['runs']}_s* not finished, left out", file=sys.stderr)
                continue
            found.append((Path(data["bilm"]), Path(data["runs"]), data["name"]))
    return found


def register(argv: list[str]) -> int:
    """`variants.py register DIR NAME BILM PREFIX`: records a variant for `--discover DIR`."""
    if len(argv) != 4:
        raise SystemExit("usage: variants.py register DIR NAME BILM PREFIX")
    folder, name, bilm, prefix = argv
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_")
    target = Path(folder) / slug / "variant.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"name": name, "bilm": bilm, "runs": prefix}, indent=2) + "\n")
    print(f"registered {name!r} in {target}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["register"]:
        return register(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline",
        type=Path,
        nargs="+",
        required=True,
        metavar="PREFIX",
        help="prefix(es) of the baseline runs (PREFIX_s{seed}); each seed under one of them",
    )
    parser.add_argument(
        "--variant",
        nargs="+",
        action="append",
        default=[],
        metavar="BILM PREFIX [NAME]",
        help="a pretrained biLM folder, the prefix of the runs trained with it and, optionally, the "
        "variant's name in the report (default: its pretraining steps; {steps} in a name is replaced by them)",
    )
    parser.add_argument(
        "--discover",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="also every variant registered under DIR (DIR/*/variant.json, written by `register`)",
    )
    parser.add_argument("--task", default="ner")
    parser.add_argument("--fraction", type=int, default=10, help="the training fraction the runs used (for the report)")
    parser.add_argument("--score", default="ents_f", help="meta.json performance key (ents_f for NER, tag_acc for POS)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args(argv)
    for given in args.variant:
        if len(given) not in (2, 3):
            parser.error(f"--variant {' '.join(given)}: expected BILM PREFIX [NAME], found {len(given)} values")
    args.variant = [(Path(given[0]), Path(given[1]), given[2] if len(given) == 3 else None) for given in args.variant]
    args.variant += discover(args.discover)
    if not args.variant:
        parser.error("no variant: give --variant BILM PREFIX [NAME] or --discover DIR")
    prov = own_provenance()
    baseline = baseline_scores(args.baseline, args.score)
    variants = [read_variant(bilm, prefix, baseline, args.score, name) for bilm, prefix, name in args.variant]
    steps = find_provenance(
        [run for prefix in args.baseline for run in seed_runs(prefix).values()]
        + [p for bilm, prefix, _ in args.variant for p in [bilm, *seed_runs(prefix).values()]]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "task": args.task,
        "fraction": args.fraction,
        "score": args.score,
        "score_label": "F1" if args.score == "ents_f" else "accuracy" if args.score == "tag_acc" else args.score,
        "baseline": {
            "runs": [str(prefix) for prefix in args.baseline],
            "per_seed": baseline,
            **spread(list(baseline.values())),
        },
        "variants": sorted(variants, key=lambda v: v["heldout_ppl"]),
        "leader_vs_runner_up": leader_vs_runner_up(variants),
        "same_bilm_as_first": against_first_on_its_bilm(variants),  # in the order given: the first --variant first
        "provenance": {"report": prov.record(), "steps": steps, "configs": copy_configs(steps, args.out.parent)},
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.plot:
        plot(result, args.plot)
    for v in result["variants"]:
        print(f"{v['name']:>14}  ppl {v['heldout_ppl']:8.1f}  dev gain {v['gain']['mean']:+.2f} (n={v['gain']['n']})")
    print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
