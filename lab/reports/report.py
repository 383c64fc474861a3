"""Writes the project's results: collects them into results/ (metrics JSON, tables, figures) and publishes a run's results folder.

    python -m lab.reports.report collect --metrics-dir metrics --training-dir training --out results \
        --provenance bilm training metrics results
    python -m lab.reports.report seeds --metrics-dir metrics_seeds --out results     # mean ± std, paired gains
    python -m lab.reports.report publish --from work/results --results results

`collect` reads `spacy evaluate` outputs named `{system}_{pct}.json` (system: baseline | elmo, pct: e.g. 10, 100)
from --metrics-dir, the trained ELMo pipelines `training/elmo_{pct}/model-best` to read each
listener's learned layer weights softmax(s) (the paper's Figure 2), and the training logs
`training/{system}_{pct}.log` (written by lab/experiments/train_ner.py) for the dev F1 curves.

`seeds` reads `{task}_{system}_{pct}_s{seed}.json` (task: ner | pos) and writes seeds.json: per-seed
scores, mean ± sample std per cell, and the paired per-seed ELMo gains.

`publish` copies a run's results folder into results/. It writes no prose: the results page (results/README.md)
is written by hand and cites the tables and figures; the gains table is lab/reports/gains.py's.
"""  # noqa: E501 - the first line is the script's --help description, whole

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import matplotlib

from lab import ROOT  # the checkout: configs at a recorded commit are read from its git
from lab.experiments.looks_ledger import TASK_SCORE
from lab.experiments.train_ner import dev_curve
from spacy_elmo.provenance import Provenance
from spacy_elmo.provenance import sha256 as _sha256

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = re.compile(r"^(?P<system>[a-z]+)_(?P<pct>\d+)\.json$")
SEED_NAME = re.compile(r"^(?P<task>[a-z]+)_(?P<system>[a-z]+)_(?P<pct>\d+)_s(?P<seed>\d+)\.json$")
SCORES = ("ents_f", "ents_p", "ents_r", "tag_acc", "cats_macro_f", "cats_score")


def save_figure(fig, path: Path) -> None:
    """Every report figure the same way: tight layout, 120 dpi PNG, figure closed."""
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_metrics(metrics_dir: Path) -> dict:
    """{system: {pct: {score: value in %}}} from spacy evaluate JSON files."""
    results: dict = {}
    for path in sorted(metrics_dir.glob("*.json")):
        match = NAME.match(path.name)
        if not match:
            continue
        data = json.loads(path.read_text())
        scores = {}
        for key in SCORES:
            if isinstance(data.get(key), (int, float)):
                value = float(data[key])
                scores[key] = round(value * 100 if value <= 1.0 else value, 2)
        if isinstance(data.get("speed"), (int, float)):
            scores["speed_wps"] = round(float(data["speed"]))
        results.setdefault(match["system"], {})[int(match["pct"])] = scores
    return results


def markdown_table(results: dict) -> str:
    """The one-seed NER table: F1 (P / R) per system and training fraction, and the ELMo gain."""
    pcts = sorted({p for per in results.values() for p in per})
    lines = ["| system | " + " | ".join(f"{p}% train: F1 (P / R)" for p in pcts) + " |", "|---|" + "---|" * len(pcts)]
    for system in sorted(results):
        cells = []
        for p in pcts:
            s = results[system].get(p, {})
            cells.append(f"{s['ents_f']:.2f} ({s['ents_p']:.2f} / {s['ents_r']:.2f})" if "ents_f" in s else "–")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    if "baseline" in results and "elmo" in results:
        gains = []
        for p in pcts:
            b, e = results["baseline"].get(p, {}), results["elmo"].get(p, {})
            gains.append(f"{e['ents_f'] - b['ents_f']:+.2f}" if "ents_f" in b and "ents_f" in e else "–")
        lines.append("| ELMo gain (F1) | " + " | ".join(gains) + " |")
    return "\n".join(lines) + "\n"


def read_layer_weights(training_dir: Path) -> dict:
    """{pipeline: {component: [softmax weights]}} from each trained ELMo pipeline's scalar mixes."""
    import spacy

    found = {}
    for model_dir in sorted(training_dir.glob("elmo_*/model-best")):
        nlp = spacy.load(model_dir)
        per_component = {}
        for name, pipe in nlp.pipeline:
            model = getattr(pipe, "model", None)
            if model is None or name == "elmo":
                continue
            for node in model.walk():
                if node.name == "elmo-scalar-mix" and node.has_param("s"):
                    s = node.ops.to_numpy(node.get_param("s"))
                    e = [float(x) for x in (2.718281828459045 ** (s - s.max()))]
                    per_component[name] = [round(x / sum(e), 4) for x in e]
                    break
        found[model_dir.parent.name] = per_component
    return found


def read_dev_curves(training_dir: Path) -> dict:
    """{run: [[step, dev F1 %], ...]} from the `spacy train` console logs `{run}.log` (train_ner.py)."""
    curves = {log.stem: dev_curve(log, "ENTS_F") for log in sorted(training_dir.glob("*_*.log"))}
    return {run: points for run, points in curves.items() if points}


def plot_dev_curves(curves: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for run, points in sorted(curves.items()):
        system, _, pct = run.partition("_")
        points = [(step, f1) for step, f1 in points if step > 0]  # step 0 is the untrained model
        if not points:
            continue
        ax.plot(*zip(*points), ls="-" if system == "elmo" else "--", marker=".", label=f"{system} {pct}%")
    ax.set_xlabel("training step")
    ax.set_ylabel("dev F1 (%)")
    ax.set_title("NER dev F1 during training")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save_figure(fig, path)


def plot_sample_efficiency(results: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for system, marker in (("baseline", "o"), ("elmo", "s")):
        if system not in results:
            continue
        pcts = sorted(p for p in results[system] if "ents_f" in results[system][p])
        ax.plot(pcts, [results[system][p]["ents_f"] for p in pcts], marker=marker, label=system)
    ax.set_xscale("log")
    ax.set_xticks([p for p in sorted({p for r in results.values() for p in r})])
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}%"))
    ax.set_xlabel("share of CoNLL-2003 training sentences")
    ax.set_ylabel("test F1 (%)")
    ax.set_title("NER: ELMo vs baseline by training size")
    ax.grid(alpha=0.3)
    ax.legend()
    save_figure(fig, path)


def plot_layer_weights(weights: dict, path: Path) -> None:
    bars = [(f"{pipeline}\n{component}", w) for pipeline, comps in weights.items() for component, w in comps.items()]
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(bars) + 2), 3.6))
    if bars:
        n_layers = len(bars[0][1])
        width = 0.8 / n_layers
        for j in range(n_layers):
            ax.bar([i + j * width for i in range(len(bars))], [w[j] for _, w in bars], width, label=f"layer {j}")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(bars))])
        ax.set_xticklabels([label for label, _ in bars], fontsize=8)
        ax.axhline(1.0 / n_layers, color="grey", lw=0.8, ls="--", label="equal")
        ax.set_ylim(0, 1.3 * max(max(w) for _, w in bars))  # room for the legend above the bars
        ax.legend(fontsize=8, ncol=n_layers + 1, loc="upper center")
    ax.set_ylabel("softmax(s) layer weight")
    ax.set_title("Learned ELMo layer weights per component")
    save_figure(fig, path)


# ---------------------------------------------------------------------------------------------
# provenance


def find_provenance(paths: list[Path]) -> dict:
    """{label: record} from `DIR/provenance.json`, `DIR/*/provenance.json` and `DIR/*.provenance.json`
    (or a file given directly); the label is the path without the provenance file name."""
    found = {}
    for base in paths:
        if base.is_file():
            candidates = [base]
        else:
            candidates = sorted(
                [base / "provenance.json", *base.glob("*/provenance.json"), *base.glob("*.provenance.json")]
            )
        for path in candidates:
            if not path.is_file():
                continue
            label = (
                path.parent if path.name == "provenance.json" else path.with_name(path.name[: -len(".provenance.json")])
            )
            key = f"{label.parent.name}/{label.name}"
            if key in found:  # the same short label in two places (e.g. work/bilm_zh of two checkouts): keep both
                key = str(label)
            found[key] = json.loads(path.read_text())
    return found


def _versioned(name: str, digest: str) -> str:
    """The file name of a second version of config `name`: NAME.<sha256[:8]>.cfg."""
    return f"{Path(name).stem}.{digest[:8]}{Path(name).suffix}"


def _config_text(entry: dict, record: dict) -> bytes | None:
    """The bytes of a config a step used: its copy in the step's output folder, or, for a step run in an earlier
    session (its committed run record; the folder is gone), the file at the step's recorded commit, when its
    sha256 is the one recorded (a config that was uncommitted then gives None)."""
    copy = entry.get("copy")
    if copy and Path(copy).is_file():
        return Path(copy).read_bytes()
    commit = (record.get("git") or {}).get("commit")
    if not commit or not entry.get("path") or not entry.get("sha256"):
        return None
    shown = subprocess.run(["git", "show", f"{commit}:{entry['path']}"], capture_output=True, cwd=ROOT)
    if shown.returncode != 0 or hashlib.sha256(shown.stdout).hexdigest() != entry["sha256"]:
        return None
    return shown.stdout


def copy_configs(steps: dict, out: Path) -> dict:
    """Copies every config the steps used into out/configs/ (named by file, sha256-checked); {name: sha256}."""
    copied = {}
    for record in steps.values():
        for entry in record.get("configs", []):
            digest = entry.get("sha256")
            if digest in copied.values():
                continue
            text = _config_text(entry, record)
            if text is None:
                continue
            name = Path(entry["path"]).name
            if name in copied and copied[name] != digest:
                name = _versioned(name, digest)  # two versions of one config
            (out / "configs").mkdir(parents=True, exist_ok=True)
            (out / "configs" / name).write_bytes(text)
            copied[name] = digest
    return copied


# ---------------------------------------------------------------------------------------------
# seeds


def read_seed_records(records: Path | None, cells: dict, steps: dict) -> list[str]:
    """Adds to `cells` (read_seed_metrics) the test scores of the committed run records `records/{run}.json`
    (lab/experiments/train_ner.py --records, scored by evaluate_runs.py) of runs with no score file here: runs reused
    from a record in a later session, whose model is not in this work folder. Their training and evaluation
    provenance go into `steps` under the labels the files would have had. Returns the runs added."""
    added = []
    for path in sorted(records.glob("*.json")) if records and records.is_dir() else []:
        match = SEED_NAME.match(path.name)
        record = json.loads(path.read_text(encoding="utf8"))
        test = record.get("test") or {}
        if not match or match["task"] not in TASK_SCORE or not isinstance(test.get("score"), (int, float)):
            continue
        seeds = cells.setdefault(match["task"], {}).setdefault(match["pct"], {}).setdefault(match["system"], {})
        if match["seed"] in seeds:
            continue
        seeds[match["seed"]] = round(float(test["score"]), 2)
        run = path.stem
        if record.get("provenance"):
            steps.setdefault(f"training_seeds/{run}", record["provenance"])
        if test.get("provenance"):
            steps.setdefault(f"metrics_seeds/{run}", test["provenance"])
        added.append(run)
    return added


def read_seed_metrics(metrics_dir: Path) -> dict:
    """{task: {pct: {system: {seed: score %}}}} from `{task}_{system}_{pct}_s{seed}.json` files."""
    cells: dict = {}
    for path in sorted(metrics_dir.glob("*.json")):
        match = SEED_NAME.match(path.name)
        if not match or match["task"] not in TASK_SCORE:
            continue
        key = TASK_SCORE[match["task"]]
        value = json.loads(path.read_text()).get(key)
        if not isinstance(value, (int, float)):
            continue
        value = float(value) * 100 if value <= 1.0 else float(value)
        seeds = cells.setdefault(match["task"], {}).setdefault(match["pct"], {}).setdefault(match["system"], {})
        seeds[match["seed"]] = round(value, 2)
    return cells


def spread(values: list[float]) -> dict:
    """mean, sample standard deviation (n-1; None for one value), n."""
    return {
        "mean": round(statistics.fmean(values), 2),
        "std": round(statistics.stdev(values), 2) if len(values) > 1 else None,
        "n": len(values),
    }


def summarize_seeds(cells: dict) -> dict:
    """Per task and fraction: each system's spread, and the paired per-seed gains elmo − baseline."""
    summary: dict = {}
    for task, by_pct in cells.items():
        for pct, by_system in by_pct.items():
            entry = {
                system: {
                    "per_seed": dict(sorted(seeds.items(), key=lambda kv: int(kv[0]))),
                    **spread(list(seeds.values())),
                }
                for system, seeds in by_system.items()
            }
            base, elmo = by_system.get("baseline", {}), by_system.get("elmo", {})
            paired = sorted(set(base) & set(elmo), key=int)
            if paired:
                gains = {seed: round(elmo[seed] - base[seed], 2) for seed in paired}
                entry["gain"] = {"per_seed": gains, **spread(list(gains.values()))}
            summary.setdefault(task, {})[pct] = entry
    return summary


# ---------------------------------------------------------------------------------------------
# commands


def cmd_collect(args) -> int:
    prov = Provenance(args.argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = read_metrics(args.metrics_dir)
    if not results:
        raise SystemExit(f"no metrics files named SYSTEM_PCT.json in {args.metrics_dir}")
    weights = read_layer_weights(args.training_dir)
    curves = read_dev_curves(args.training_dir)
    steps = find_provenance(args.provenance)
    summary = {"ner": results, "layer_weights": weights, "dev_f1_by_step": curves}
    if args.make_started.strip():  # the Makefile's `main` target: its own start, before it built .venv
        summary["make_main"] = {"started_utc": args.make_started.strip()}
    for extra in args.extra:
        if extra.is_file():
            summary[extra.stem] = json.loads(extra.read_text())
    summary["provenance"] = {"report": prov.record(), "steps": steps, "configs": copy_configs(steps, args.out)}
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = markdown_table(results)
    (args.out / "table.md").write_text(table)
    plot_sample_efficiency(results, args.out / "f1_by_fraction.png")
    plot_layer_weights(weights, args.out / "layer_weights.png")
    written = "metrics.json, table.md, f1_by_fraction.png, layer_weights.png"
    if curves:
        plot_dev_curves(curves, args.out / "dev_curves.png")
        written += ", dev_curves.png"
    print(table)
    print(json.dumps(weights, indent=1))
    print(f"wrote {args.out}/: {written}")
    return 0


def bilms_of_elmo_runs(records: Path | None, cells: dict) -> dict[str, list[str]]:
    """{biLM sha256: [run, ...]} over the ELMo runs of `cells` that have a committed record `records/{run}.json`
    (train_ner.py --records writes bilm_sha256 into each)."""
    found: dict[str, list[str]] = {}
    for task, by_pct in cells.items():
        for pct, by_system in by_pct.items():
            for seed in by_system.get("elmo", {}):
                run = f"{task}_elmo_{pct}_s{seed}"
                path = records / f"{run}.json" if records else None
                if path is not None and path.is_file():
                    sha = json.loads(path.read_text(encoding="utf8")).get("bilm_sha256") or "none recorded"
                    found.setdefault(sha, []).append(run)
    return found


def cmd_seeds(args) -> int:
    prov = Provenance(args.argv)
    cells = read_seed_metrics(args.metrics_dir)
    steps = find_provenance(args.provenance)
    added = read_seed_records(args.records, cells, steps)
    if added:
        print(f"from committed run records in {args.records} (no score file here): {', '.join(added)}")
    if not cells:
        raise SystemExit(f"no metrics files named TASK_SYSTEM_PCT_sSEED.json in {args.metrics_dir}")
    bilms = bilms_of_elmo_runs(args.records, cells)
    if len(bilms) > 1:  # the headline compares cells: every ELMo cell must read the same biLM (issue 33)
        listed = "; ".join(f"{sha[:12]}: {', '.join(sorted(runs))}" for sha, runs in sorted(bilms.items()))
        raise SystemExit(
            f"{args.records}: the ELMo runs read {len(bilms)} different biLMs (model.safetensors "
            f"sha256 {listed}); retrain the runs of the other biLM (lab/experiments/train_ner.py) before a "
            f"seeds report"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "scores": {task: TASK_SCORE[task] for task in cells},
        "summary": summarize_seeds(cells),
        "provenance": {"report": prov.record(), "steps": steps, "configs": copy_configs(steps, args.out)},
    }
    (args.out / "seeds.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {args.out / 'seeds.json'}")
    return 0


def publish_folder(source: Path, results: Path) -> dict[str, str]:
    """Copies a run's results folder into results/ without losing what earlier runs published there.

    Config copies are shared by every results file of results/configs/. When the run used another version
    of a config that an earlier published result points to (same name, other contents), the new version is
    written beside it as `NAME.<sha256[:8]>.cfg` (the rule `copy_configs` applies inside one run) and the
    run's JSON files are rewritten to point to that file; the earlier copy stays as its results recorded it.
    Returns {config name in the run: name it was published under} for the renamed ones."""
    results.mkdir(parents=True, exist_ok=True)
    renamed: dict[tuple[str, str], str] = {}
    if (source / "configs").is_dir():
        (results / "configs").mkdir(exist_ok=True)
        for path in sorted((source / "configs").iterdir()):
            target, digest = results / "configs" / path.name, _sha256(path)
            if target.is_file() and _sha256(target) != digest:
                target = target.with_name(_versioned(path.name, digest))
                renamed[(path.name, digest)] = target.name
            shutil.copyfile(path, target)
    for path in sorted(source.iterdir()):
        target = results / path.name
        if path.name == "configs" and path.is_dir():
            continue
        if path.is_dir():
            shutil.copytree(path, target, dirs_exist_ok=True)
            continue
        data = json.loads(path.read_text(encoding="utf-8")) if renamed and path.suffix == ".json" else None
        configs = (data.get("provenance") or {}).get("configs") if isinstance(data, dict) else None
        if configs and any(item in renamed for item in configs.items()):
            data["provenance"]["configs"] = {
                renamed.get((name, digest), name): digest for name, digest in configs.items()
            }
            target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            shutil.copyfile(path, target)
    return {name: new for (name, _), new in renamed.items()}


def cmd_publish(args) -> int:
    for name, new in publish_folder(args.source, args.results).items():
        print(f"configs/{name}: an earlier published result uses another version; this run's is configs/{new}")
    print(f"copied {args.source}/ into {args.results}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="spacy evaluate outputs + trained pipelines → metrics.json, table, figures")
    p.add_argument("--metrics-dir", type=Path, default=Path("metrics"))
    p.add_argument("--training-dir", type=Path, default=Path("training"))
    p.add_argument("--out", type=Path, default=Path("results"))
    p.add_argument(
        "--extra", type=Path, nargs="*", default=[], help="more JSON files to embed (e.g. pretraining metrics)"
    )
    p.add_argument(
        "--provenance",
        type=Path,
        nargs="*",
        default=[],
        help="folders (or files) holding the steps' provenance.json / NAME.provenance.json records",
    )
    p.add_argument(
        "--make-started",
        default="",
        help="UTC start of `make main` (the Makefile passes it): its own wall time is reported",
    )
    p.set_defaults(func=cmd_collect)
    p = sub.add_parser("seeds", help="per-seed spacy evaluate outputs → seeds.json (mean ± std, paired gains)")
    p.add_argument("--metrics-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--provenance", type=Path, nargs="*", default=[])
    p.add_argument(
        "--records",
        type=Path,
        help="committed run records (train_ner.py --records): scores of runs with no score file here",
    )
    p.set_defaults(func=cmd_seeds)
    p = sub.add_parser("publish", help="copy a run's results folder into results/")
    p.add_argument("--from", dest="source", type=Path, required=True, help="the run's results folder")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.set_defaults(func=cmd_publish)
    args = parser.parse_args(argv)
    args.argv = ["python", "-m", "lab.reports.report", *(sys.argv[1:] if argv is None else argv)]  # for its records
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
