"""Collects the project's evaluation results into results/: metrics JSON, a markdown table and PNG figures.

Reads `spacy evaluate` outputs named `{system}_{pct}.json` (system: baseline | elmo, pct: e.g. 10, 100)
from --metrics-dir, the trained ELMo pipelines `training/elmo_{pct}/model-best` to read each
listener's learned layer weights softmax(s) (the paper's Figure 2), and the training logs
`training/{system}_{pct}.log` (written by scripts/train_ner.py) for the dev F1 curves.

    python scripts/report.py --metrics-dir metrics --training-dir training --out results
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = re.compile(r"^(?P<system>[a-z]+)_(?P<pct>\d+)\.json$")
SCORES = ("ents_f", "ents_p", "ents_r", "tag_acc", "cats_macro_f", "cats_score")


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
    """{run: [(step, dev F1 %), ...]} from the `spacy train` console logs `{run}.log` (train_ner.py)."""
    curves = {}
    for log in sorted(training_dir.glob("*_*.log")):
        header, points = None, []
        for line in log.read_text(encoding="utf8", errors="replace").splitlines():
            cells = line.split()
            if "ENTS_F" in cells and "#" in cells:
                header = cells  # "LOSS NER" headers are two words over one number: index F1 from the end
            elif header and len(cells) >= 4 and cells[0].isdigit():
                try:
                    step, f1 = int(cells[header.index("#")]), float(cells[header.index("ENTS_F") - len(header)])
                except (ValueError, IndexError):
                    continue
                points.append((step, f1))
        if points:
            curves[log.stem] = points
    return curves


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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown_table(results: dict) -> str:
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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics-dir", type=Path, default=Path("metrics"))
    parser.add_argument("--training-dir", type=Path, default=Path("training"))
    parser.add_argument("--out", type=Path, default=Path("results"))
    parser.add_argument("--extra", type=Path, nargs="*", default=[], help="more JSON files to embed (e.g. pretraining metrics)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = read_metrics(args.metrics_dir)
    if not results:
        raise SystemExit(f"no metrics files named SYSTEM_PCT.json in {args.metrics_dir}")
    weights = read_layer_weights(args.training_dir)
    curves = read_dev_curves(args.training_dir)
    summary = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, {__import__('os').cpu_count()} cores",
        "ner": results,
        "layer_weights": weights,
        "dev_f1_by_step": curves,
    }
    for extra in args.extra:
        if extra.is_file():
            summary[extra.stem] = json.loads(extra.read_text())
    (args.out / "metrics.json").write_text(json.dumps(summary, indent=2))
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


if __name__ == "__main__":
    main()
