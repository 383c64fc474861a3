"""Writes the project's results: collects them into results/ (metrics JSON, tables, figures) and writes the README's results section from them.

    python scripts/report.py collect --metrics-dir metrics --training-dir training --out results \
        --provenance bilm training metrics results
    python scripts/report.py seeds --metrics-dir metrics_seeds --out results     # mean ± std, paired gains
    python scripts/report.py publish --from work/results --results results --readme README.md
    python scripts/report.py readme --results results --readme README.md [--check]

`collect` reads `spacy evaluate` outputs named `{system}_{pct}.json` (system: baseline | elmo, pct: e.g. 10, 100)
from --metrics-dir, the trained ELMo pipelines `training/elmo_{pct}/model-best` to read each
listener's learned layer weights softmax(s) (the paper's Figure 2), and the training logs
`training/{system}_{pct}.log` (written by scripts/train_ner.py) for the dev F1 curves.

`seeds` reads `{task}_{system}_{pct}_s{seed}.json` (task: ner | pos) and writes seeds.json: per-seed
scores, mean ± sample std per cell, and the paired per-seed ELMo gains.

`readme` renders results/ (whatever is there, nothing typed) into README.md between
`<!-- results:start -->` and `<!-- results:end -->`; `--check` only compares, and exits 1 if the
README's section differs from what it would write (tests/test_report.py runs it). `publish` copies a
run's results folder into results/ and then does `readme`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
from pathlib import Path

from spacy_elmo.provenance import sha256 as _sha256

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAME = re.compile(r"^(?P<system>[a-z]+)_(?P<pct>\d+)\.json$")
SEED_NAME = re.compile(r"^(?P<task>[a-z]+)_(?P<system>[a-z]+)_(?P<pct>\d+)_s(?P<seed>\d+)\.json$")
TASK_SCORE = {"ner": ("ents_f", "test F1"), "pos": ("tag_acc", "test accuracy")}
START, END = "<!-- results:start -->", "<!-- results:end -->"
# the project's goals for the ELMo gain (issue 12: half the gap to the full-data baseline at 10%; issue 21 adds
# POS at 10%), judged on paired means over GOAL_SEEDS seeds
GOALS = {("ner", "10"): 6.0, ("ner", "100"): 2.0, ("pos", "10"): 1.0}
GOAL_SEEDS = 3
# the seeds workflow's wall-time budget on 2 CPU cores, in minutes
SEEDS_BUDGET_MIN = 150
# and `make main`'s (the `all` workflow; issue 21)
ALL_BUDGET_MIN = 60
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
    save_figure(fig, path)


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
            candidates = sorted([base / "provenance.json", *base.glob("*/provenance.json"), *base.glob("*.provenance.json")])
        for path in candidates:
            if not path.is_file():
                continue
            label = path.parent if path.name == "provenance.json" else path.with_name(path.name[: -len(".provenance.json")])
            key = f"{label.parent.name}/{label.name}"
            if key in found:  # the same short label in two places (e.g. work/bilm_zh of two checkouts): keep both
                key = str(label)
            found[key] = json.loads(path.read_text())
    return found


def _versioned(name: str, digest: str) -> str:
    """The file name of a second version of config `name`: NAME.<sha256[:8]>.cfg."""
    return f"{Path(name).stem}.{digest[:8]}{Path(name).suffix}"


def copy_configs(steps: dict, out: Path) -> dict:
    """Copies every config the steps used into out/configs/ (named by file, sha256-checked); {name: sha256}."""
    copied = {}
    for record in steps.values():
        for entry in record.get("configs", []):
            copy, digest = entry.get("copy"), entry.get("sha256")
            if not copy or not Path(copy).is_file():
                continue
            name = Path(entry["path"]).name
            if name in copied and copied[name] != digest:
                name = _versioned(name, digest)  # two versions of one config
            (out / "configs").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(copy, out / "configs" / name)
            copied[name] = digest
    return copied


def own_provenance(command=None, seed=None, started=None):
    from spacy_elmo.provenance import Provenance

    prov = Provenance(command=command, seed=seed)
    if started:
        prov.started = started
    return prov


# ---------------------------------------------------------------------------------------------
# seeds


def read_seed_metrics(metrics_dir: Path) -> dict:
    """{task: {pct: {system: {seed: score %}}}} from `{task}_{system}_{pct}_s{seed}.json` files."""
    cells: dict = {}
    for path in sorted(metrics_dir.glob("*.json")):
        match = SEED_NAME.match(path.name)
        if not match or match["task"] not in TASK_SCORE:
            continue
        key = TASK_SCORE[match["task"]][0]
        value = json.loads(path.read_text()).get(key)
        if not isinstance(value, (int, float)):
            continue
        value = float(value) * 100 if value <= 1.0 else float(value)
        cells.setdefault(match["task"], {}).setdefault(match["pct"], {}).setdefault(match["system"], {})[match["seed"]] = round(value, 2)
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
            entry = {system: {"per_seed": dict(sorted(seeds.items(), key=lambda kv: int(kv[0]))), **spread(list(seeds.values()))}
                     for system, seeds in by_system.items()}
            base, elmo = by_system.get("baseline", {}), by_system.get("elmo", {})
            paired = sorted(set(base) & set(elmo), key=int)
            if paired:
                gains = {seed: round(elmo[seed] - base[seed], 2) for seed in paired}
                entry["gain"] = {"per_seed": gains, **spread(list(gains.values()))}
            summary.setdefault(task, {})[pct] = entry
    return summary


# ---------------------------------------------------------------------------------------------
# the README section


def _pm(cell: dict) -> str:
    return f"{cell['mean']:.2f} ± {cell['std']:.2f} (n={cell['n']})" if cell["std"] is not None else f"{cell['mean']:.2f} (n=1, no spread)"


def _gain_pm(cell: dict) -> str:
    return f"{cell['mean']:+.2f} ± {cell['std']:.2f} (n={cell['n']})" if cell["std"] is not None else f"{cell['mean']:+.2f} (n=1, no spread)"


def _commit(record: dict) -> str:
    git = record.get("git") or {}
    if not git.get("commit"):
        return "commit unknown (not a git checkout)"
    text = f"commit `{git['commit'][:12]}`"
    if git.get("dirty"):
        paths = ", ".join(f"`{p}`" for p in git.get("dirty_paths", []))
        text += f" **with uncommitted changes (dirty tree: {paths})**"
    else:
        text += " (clean tree)"
    return text


def _machine(record: dict) -> str:
    m = record.get("machine") or {}
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ", CPU only"
    return (f"{m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB{gpu}; Python {m.get('python')}, "
            f"torch {m.get('torch')}, spaCy {m.get('spacy')}, transformers {m.get('transformers')}")


def _minutes(record: dict) -> float | None:
    import datetime

    try:
        parse = lambda s: datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
        return (parse(record["ended_utc"]) - parse(record["started_utc"])).total_seconds() / 60
    except (KeyError, ValueError, TypeError):
        return None


def provenance_lines(what: str, block: dict | None) -> list[str]:
    """Plain statement of where `what` came from; says so when it was not recorded or the tree was dirty."""
    if not block:
        return [f"**{what}: provenance not recorded** (these results predate provenance recording: commit, "
                "exact configs and step times are unknown).", ""]
    records = [block["report"]] if "report" in block else [block]
    records += list(block.get("steps", {}).values())
    commits = sorted({_commit(r) for r in records})
    dirty = any((r.get("git") or {}).get("dirty") for r in records)
    starts = [r["started_utc"] for r in records if r.get("started_utc")]
    ends = [r["ended_utc"] for r in records if r.get("ended_utc")]
    lines = [f"**{what}**: {'; '.join(commits)}; {min(starts)} – {max(ends)} UTC; {_machine(records[0])}."]
    if dirty:
        lines[0] = "⚠ **DIRTY TREE: not reproducible from a commit.** " + lines[0]
    seeds = sorted({r["seed"] for r in records if r.get("seed") is not None})
    if seeds:
        lines[0] += f" Seeds: {', '.join(map(str, seeds))}."
    configs = block.get("configs")
    if configs:
        lines[0] += " Configs as run: " + ", ".join(f"`configs/{name}` (sha256 {digest[:12]})" for name, digest in sorted(configs.items())) + "."
    return lines + [""]


def goal_lines(summary: dict) -> list[str]:
    """Whether the mean paired ELMo gains reach the project's goals, stated plainly either way; a cell with
    fewer than GOAL_SEEDS seeds is not judged (its mean is shown)."""
    parts = []
    for (task, pct), goal in GOALS.items():
        gain = summary.get(task, {}).get(pct, {}).get("gain")
        if gain is None:
            parts.append(f"{task} {pct}%: ≥ {goal:+.2f} — not measured")
            continue
        if gain["n"] < GOAL_SEEDS:
            parts.append(f"{task} {pct}%: ≥ {goal:+.2f} — not judged ({gain['mean']:+.2f} from {gain['n']} seed(s); "
                         f"the goal is a mean over {GOAL_SEEDS})")
            continue
        met = "met" if gain["mean"] >= goal else "**not met**"
        parts.append(f"{task} {pct}%: ≥ {goal:+.2f} — {met} ({gain['mean']:+.2f}, mean of {gain['n']} seed(s))")
    return ["Goals for the ELMo gain (paired means): " + "; ".join(parts) + ".", ""]


def _span_minutes(records: list[dict]) -> float | None:
    """Minutes from the first record's start to the last one's end."""
    return _minutes({"started_utc": min(r["started_utc"] for r in records), "ended_utc": max(r["ended_utc"] for r in records)})


def _pretrain_records(block: dict | None) -> list[dict]:
    """The pretraining steps' records in a provenance block (the steps whose command runs `pretrain`)."""
    return [r for r in (block or {}).get("steps", {}).values() if "pretrain" in (r.get("command") or [])]


def seeds_time_lines(block: dict | None) -> list[str]:
    """Wall time of the seeds workflow from its records: the steps it ran, plus the pretraining of the biLM it shares."""
    steps = (block or {}).get("steps", {})
    pretrain = _pretrain_records(block)
    rest = [r for r in steps.values() if r not in pretrain and r.get("started_utc") and r.get("ended_utc")]
    if not rest:
        return []
    span = _span_minutes(rest)
    text = f"Wall time: the seeds trainings and evaluations ran {span:.1f} min (first start to last end of their records)"
    minutes = [m for m in (_minutes(r) for r in pretrain) if m is not None]
    if minutes:
        total = span + sum(minutes)
        verdict = "within" if total <= SEEDS_BUDGET_MIN else "**over**"
        text += (f"; the biLM they share was pretrained in {sum(minutes):.1f} min ({_commit(pretrain[0])}); "
                 f"{total:.1f} min together, {verdict} the {SEEDS_BUDGET_MIN}-minute budget (data preparation adds about a "
                 "minute and records no time)")
    return [text + ".", ""]


def all_time_lines(block: dict | None) -> list[str]:
    """Wall time of an `all` run from its records: the first step's start (the pretraining) to the report's end."""
    block = block or {}
    records = [r for r in [block.get("report"), *block.get("steps", {}).values()] if r and r.get("started_utc") and r.get("ended_utc")]
    if not records:
        return []
    span = _span_minutes(records)
    if span is None:
        return []
    verdict = "within" if span <= ALL_BUDGET_MIN else "**over**"
    seconds = round(span * 60)  # to the second: a run near the budget must not read "60.0 min, within"
    return [f"Wall time of this `all` run: {seconds // 60} min {seconds % 60} s from the first recorded start to the report's end (fetching the "
            f"data and preprocessing record no time: about a minute), {verdict} the {ALL_BUDGET_MIN}-minute budget of "
            "`make main` on the machine named above.", ""]


def _max_steps(record: dict) -> str:
    command = record.get("command") or []
    return next((command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "--training.max_steps"), "?")


def shared_bilm_lines(seeds_block: dict | None, all_block: dict | None) -> list[str]:
    """Says so when the seeds results were made with another biLM than the last `all` run's (a rerun of `all`
    with a new recipe that `seeds` has not followed yet), naming both pretrainings."""
    mine, theirs = (next(iter(_pretrain_records(block)), None) for block in (seeds_block, all_block))
    if not mine or not theirs or mine.get("started_utc") == theirs.get("started_utc"):
        return []
    return [f"⚠ **These seeds results use an earlier biLM** than the last `all` run below: pretrained "
            f"{mine.get('started_utc')} ({_commit(mine)}, {_max_steps(mine)} steps), against "
            f"{theirs.get('started_utc')} ({_commit(theirs)}, {_max_steps(theirs)} steps) for `all`; "
            "`spacy project run seeds` has not been rerun on the new one yet.", ""]


def _link(results: Path, readme: Path, name: str) -> str:
    return Path(os.path.relpath(results / name, readme.parent)).as_posix()


def _read_json(path: Path) -> dict:
    """A results file's content; {} when the run that writes it has not happened yet."""
    return json.loads(path.read_text()) if path.is_file() else {}


def _seeds_table(summary: dict) -> list[str]:
    """One row per task and training fraction: mean ± std of each system, the paired gain, and every seed's values."""
    out = ["| task | train | baseline | ELMo | paired gain | per seed: baseline / ELMo / gain |", "|---|---|---|---|---|---|"]
    for task in sorted(summary):
        label = TASK_SCORE.get(task, ("", task))[1]
        for pct, cell in sorted(summary[task].items(), key=lambda kv: int(kv[0])):
            base, elmo, gain = cell.get("baseline"), cell.get("elmo"), cell.get("gain")
            values = [(part or {}).get("per_seed", {}) for part in (base, elmo, gain)]
            show = lambda value, form: "–" if value is None else format(value, form)  # noqa: E731
            per_seed = [f"s{seed}: " + " / ".join(show(v.get(seed), form) for v, form in zip(values, (".2f", ".2f", "+.2f")))
                        for seed in sorted(set(values[0]) | set(values[1]), key=int)]
            out.append(f"| {task} ({label}) | {pct}% | {_pm(base) if base else '–'} | {_pm(elmo) if elmo else '–'} | "
                       f"{_gain_pm(gain) if gain else '–'} | {'; '.join(per_seed)} |")
    return out + [""]


def seed_counts(summary: dict) -> str:
    """How many seeds each cell has, from the data: "every cell with 3 seeds", or the usual count and the
    cells that differ ("3 seeds per cell except pos 100% (1 seed)")."""
    counts = {(task, pct): max((cell.get(system) or {}).get("n", 0) for system in ("baseline", "elmo"))
              for task, by_pct in sorted(summary.items()) for pct, cell in sorted(by_pct.items(), key=lambda kv: int(kv[0]))}
    if not counts:
        return "no cells"
    seeds = lambda n: f"{n} seed" + ("s" if n != 1 else "")  # noqa: E731
    usual = max(sorted(set(counts.values())), key=list(counts.values()).count)
    if all(n == usual for n in counts.values()):
        return f"every cell with {seeds(usual)}"
    others = [f"{task} {pct}% ({seeds(n)})" for (task, pct), n in counts.items() if n != usual]
    return f"{seeds(usual)} per cell except {', '.join(others)}"


def headline_section(seeds: dict, metrics: dict | None = None) -> list[str]:
    """The multi-seed headline: provenance, the table of every cell, the goals and the wall time; a warning
    when the last `all` run (`metrics`) pretrained another biLM since."""
    if not seeds.get("summary"):
        return ["### Headline: mean ± standard deviation over seeds and paired gains", "",
                "No multi-seed run recorded yet (`spacy project run seeds`).", ""]
    out = [f"### Headline: {seed_counts(seeds['summary'])}, mean ± standard deviation and paired gains", ""]
    out += provenance_lines("The seeds run", seeds.get("provenance"))
    out += shared_bilm_lines(seeds.get("provenance"), (metrics or {}).get("provenance"))
    out += ["Every cell trained once per seed (`--system.seed`, i.e. `training.seed`) on the same data subset "
            "and the same pretrained biLM; each final model scored once on test. ± is the sample standard deviation "
            "over seeds; a paired gain is ELMo − baseline for the same seed.", ""]
    out += _seeds_table(seeds["summary"])
    return out + goal_lines(seeds["summary"]) + seeds_time_lines(seeds.get("provenance"))


def _ner_lines(metrics: dict) -> list[str]:
    """The one-seed NER table, the best dev F1 each `model-best` was chosen by, and `spacy evaluate`'s speeds."""
    ner = {system: {int(p): s for p, s in per.items()} for system, per in metrics.get("ner", {}).items()}
    if not ner:
        return []
    out = ["#### NER, one seed (CoNLL-2003 test, entity-level F1 of `model-best` from `spacy evaluate`)", "",
           markdown_table(ner).rstrip("\n"), ""]
    curves = metrics.get("dev_f1_by_step", {})
    best = [f"{run} {max(f for _, f in points):.2f}" for run, points in sorted(curves.items()) if points]
    if best:
        out += ["Best dev F1 (the score `model-best` was chosen by): " + ", ".join(best) + ".", ""]
    speeds = [f"{system} {pct}%: {s['speed_wps']:,}" for system in sorted(ner) for pct, s in sorted(ner[system].items()) if "speed_wps" in s]
    if speeds:
        out += ["Test-set speed reported by `spacy evaluate` (words/s): " + ", ".join(speeds) + ".", ""]
    return out


def _bilm_lines(bilm: dict | None) -> list[str]:
    """The pretrained biLM in one sentence: perplexities, steps, words, time, speed, size."""
    if not bilm:
        return []
    text = f"The biLM: held-out perplexity **{bilm['heldout_ppl']:.1f}**"
    if "heldout_forward_ppl" in bilm:
        text += f" (forward {bilm['heldout_forward_ppl']:.1f}, backward {bilm['heldout_backward_ppl']:.1f})"
    if "unigram_heldout_ppl" in bilm:
        text += f"; a unigram model scores {bilm['unigram_heldout_ppl']:.1f}"
    text += (f"; {bilm['step']:,} steps, {bilm['words']:,} words in {bilm['train_seconds'] / 60:.1f} min of training, "
             f"{bilm['words_per_s']:,.0f} words/s ({bilm.get('world_size', 1)} process(es), {bilm.get('device', '?')}), "
             f"{bilm.get('parameters', 0):,} parameters, {bilm.get('softmax', '?')} softmax over {bilm.get('vocab_size', 0):,} words.")
    return [text, ""]


def _layer_weight_lines(weights: dict) -> list[str]:
    """Each ELMo component's learned softmax(s) over the biLM layers, against equal weights."""
    mixes = [(pipeline, comp, w) for pipeline, comps in sorted(weights.items()) for comp, w in sorted(comps.items())]
    if not mixes:
        return []
    n = len(mixes[0][2])
    parts = [f"{'/'.join(f'{x:.2f}' for x in w)} ({pipeline} {comp})" for pipeline, comp, w in mixes]
    top = [f"layer {max(range(len(w)), key=w.__getitem__)} in {pipeline}" for pipeline, _, w in mixes]
    moved = max(abs(x - 1 / len(w)) for _, _, w in mixes for x in w)
    return [f"Learned layer weights softmax(s) for layers {'/'.join(map(str, range(n)))}: {', '.join(parts)}; "
            f"equal weights would be {1 / n:.2f} each (largest departure {moved:.2f}). "
            f"The largest weight is on {', '.join(top)}.", ""]


def _step_time_lines(provenance: dict | None) -> list[str]:
    """Minutes per recorded step, in start order; says so when the run recorded none."""
    steps = (provenance or {}).get("steps", {})
    timed = [(label, _minutes(r)) for label, r in sorted(steps.items(), key=lambda kv: kv[1].get("started_utc", ""))]
    timed = [(label, m) for label, m in timed if m is not None]
    if not timed:
        return ["Step timings: not recorded by this run (see its hand-written log in `bench/RESULTS.md`).", ""]
    return (["Time per recorded step (from each step's provenance, UTC start to end; runs in one step may overlap):", "",
             "| step | minutes |", "|---|---:|"] + [f"| {label} | {m:.1f} |" for label, m in timed] + [""])


def last_run_section(metrics: dict, results: Path, readme: Path) -> list[str]:
    """The last one-seed `all` run: NER table, the biLM, learned layer weights, figures and step times."""
    out = ["### The last `all` run (one seed, `make main`)", ""]
    if not metrics:
        return out + ["No results recorded yet (`spacy project run all`).", ""]
    out += provenance_lines("The last `all` run", metrics.get("provenance"))
    if not metrics.get("provenance"):
        out += [f"Recorded by the report itself: written {metrics.get('date', '?')} on \"{metrics.get('machine', '?')}\".", ""]
    out += _ner_lines(metrics) + _bilm_lines(metrics.get("pretrain_summary")) + _layer_weight_lines(metrics.get("layer_weights", {}))
    figures = [(name, alt) for name, alt in (("f1_by_fraction.png", "F1 by training fraction"),
               ("layer_weights.png", "learned layer weights"), ("dev_curves.png", "dev F1 during training"))
               if (results / name).is_file()]
    if figures:
        out += [" ".join(f"![{alt}]({_link(results, readme, name)})" for name, alt in figures), ""]
    return out + _step_time_lines(metrics.get("provenance")) + all_time_lines(metrics.get("provenance"))


def probe_section(results: Path, readme: Path) -> list[str]:
    """Dev accuracy of a linear probe on each frozen biLM layer and on a learned mix, per task."""
    out = ["#### Layer probes (paper §5.3)", ""]
    probe = _read_json(results / "probe.json")
    if not probe.get("tasks"):
        return out + ["No probe results recorded yet (`spacy project run probe`).", ""]
    out += provenance_lines("The probes", probe.get("provenance"))
    tasks = sorted(probe["tasks"])
    first = probe["tasks"][tasks[0]]
    out += [f"A linear classifier on each frozen layer of `{probe['model']}` and on a learned mix of all layers, "
            f"fitted on `{probe['train']}`, scored on `{probe['dev']}` (dev accuracy %). pos: every token's PTB tag; "
            "ner-type: the entity type (PER/LOC/ORG/MISC) of each token inside a gold entity mention.", ""]
    row = lambda name, cell: f"| {name} | " + " | ".join(cell(probe["tasks"][t]) for t in tasks) + " |"  # noqa: E731
    out += ["| layer | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    out += [row(j, lambda t, j=j: f"{t['layers'][j]['accuracy']:.2f}") for j in range(len(first["layers"]))]
    out += [row("learned mix", lambda t: f"{t['mix']['accuracy']:.2f}"),
            row("majority class", lambda t: f"{t['majority_accuracy']:.2f}"),
            row("train / dev tokens", lambda t: f"{t['train_tokens']:,} / {t['dev_tokens']:,}"), ""]
    if (results / "probe.png").is_file():
        out += [f"![probe accuracy by layer]({_link(results, readme, 'probe.png')})", ""]
    return out


def variants_section(results: Path, readme: Path, name: str = "variants", title: str = "Language-model perplexity vs ELMo gain (dev)",
                     empty: str = "`spacy project run variants` writes `results/variants.json`: each biLM variant's held-out "
                                  "perplexity and the ELMo gain it gives on dev") -> list[str]:
    """Each variant's held-out perplexity against its paired dev gain (dev only: no test scores),
    from `results/{name}.json` and its figure `results/{name}.png` (variants: ppl_vs_gain.png)."""
    out = [f"#### {title}", ""]
    variants = _read_json(results / f"{name}.json")
    if not variants.get("variants"):
        return out + [f"No variants recorded yet ({empty}).", ""]
    out += provenance_lines("The variants", variants.get("provenance"))
    label = variants.get("score_label", variants.get("score"))
    out += [f"{variants['task']} at {variants['fraction']}% of train. Gain = dev {label} of ELMo's `model-best` − the "
            f"baseline's ({_pm(variants['baseline'])}) for the same seed; dev only, so variants never touch the test set.", "",
            f"| variant | pretraining min | held-out perplexity | ELMo dev {label} | paired dev gain |",
            "|---|---:|---:|---:|---:|"]
    out += [f"| {v['name']} | {v['pretrain_minutes']:.1f} | {v['heldout_ppl']:.1f} | {_pm(v['elmo'])} | {_gain_pm(v['gain'])} |"
            for v in variants["variants"]]
    top = max(v["gain"]["mean"] for v in variants["variants"])
    best = [v for v in variants["variants"] if v["gain"]["mean"] == top]  # every one at the top, in table order
    named = " and ".join(f"{v['name']} ({_gain_pm(v['gain'])})" for v in best)
    lowest = min(variants["variants"], key=lambda v: v["heldout_ppl"])
    out += ["", f"Largest mean dev gain: {'tied: ' if len(best) > 1 else ''}{named}; lowest held-out perplexity: "
                f"{lowest['name']} ({lowest['heldout_ppl']:.1f}). No variant is scored on test.", ""]
    figure = "ppl_vs_gain.png" if name == "variants" else f"{name}.png"
    if (results / figure).is_file():
        out += [f"![perplexity vs gain]({_link(results, readme, figure)})", ""]
    return out


def recipes_section(results: Path, readme: Path) -> list[str]:
    """The recipe search of issue 21 (`spacy project run recipes`), rendered like the variants."""
    return variants_section(
        results, readme, "recipes", "Recipe search: what the pretraining hour and the NER model buy (dev)",
        "`spacy project run recipes-report` writes `results/recipes.json`: each recipe's biLM perplexity and dev gain",
    )


def bilm_comparison_section(results: Path, name: str) -> list[str]:
    """A `scripts/compare_bilms.py` record (e.g. zh_lexicon.json): held-out perplexities side by side."""
    compared = _read_json(results / f"{name}.json")
    if not compared.get("bilms"):
        return []
    out = [f"#### {compared['title']}", ""] + provenance_lines("The biLMs", compared.get("provenance"))
    out += ["Held-out perplexity on the same held-out text with the same vocabulary (one seed each; dev text, "
            "not test).", "", "| biLM | characters | parameters | steps | training min | held-out perplexity |",
            "|---|---|---:|---:|---:|---:|"]
    out += [f"| {b['name']} | {b['characters']} | {b['parameters']:,} | {b['steps']:,} | {b['train_minutes']:.1f} | "
            f"{b['heldout_ppl']:.1f} |" for b in compared["bilms"]]
    return out + [""]


def similar_sections(results: Path, readme: Path) -> list[str]:
    """The nearest-word tables exactly as similar_report.py wrote them, and the link to the dev experiments."""
    out = []
    for name, title in (("similar.md", "Nearest words (as written by `scripts/similar_report.py`)"),
                        ("similar_zh.md", "Nearest words, Chinese biLM (`spacy project run zh`)")):
        if (results / name).is_file():
            prov = _read_json(results / f"{Path(name).stem}.provenance.json") or None
            out += [f"#### {title}", ""] + provenance_lines(f"`{name}`", prov)
            out += [(results / name).read_text(encoding="utf8").rstrip("\n"), ""]
    out += bilm_comparison_section(results, "zh_recipe") + bilm_comparison_section(results, "zh_lexicon")
    if (results / "experiments.md").is_file():
        link = _link(results, readme, "experiments.md")
        out += [f"Dev-set experiments behind the settings, with what provenance they have: [{link}]({link}).", ""]
    return out


def render_section(results: Path, readme: Path) -> str:
    """The README's results section, from the files in `results` only (deterministic: no clock, no machine)."""
    out = [START, "<!-- Generated by `python scripts/report.py readme` from results/; edits here are overwritten, "
           "and tests/test_report.py fails if this differs from what it would write. -->", ""]
    metrics = _read_json(results / "metrics.json")
    out += headline_section(_read_json(results / "seeds.json"), metrics)
    out += last_run_section(metrics, results, readme)
    out += probe_section(results, readme) + variants_section(results, readme) + recipes_section(results, readme)
    out += similar_sections(results, readme)
    out.append(END)
    return "\n".join(out) + "\n"


def splice(readme_text: str, section: str) -> str:
    """readme_text with the part from START to END (and its newline) replaced by `section`."""
    if START not in readme_text or END not in readme_text:
        raise SystemExit(f"the README has no {START} … {END} markers to write between")
    head, rest = readme_text.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + section + tail.removeprefix("\n")


# ---------------------------------------------------------------------------------------------
# commands


def cmd_collect(args) -> int:
    prov = own_provenance()
    args.out.mkdir(parents=True, exist_ok=True)
    results = read_metrics(args.metrics_dir)
    if not results:
        raise SystemExit(f"no metrics files named SYSTEM_PCT.json in {args.metrics_dir}")
    weights = read_layer_weights(args.training_dir)
    curves = read_dev_curves(args.training_dir)
    steps = find_provenance(args.provenance)
    summary = {"ner": results, "layer_weights": weights, "dev_f1_by_step": curves}
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


def cmd_seeds(args) -> int:
    prov = own_provenance()
    cells = read_seed_metrics(args.metrics_dir)
    if not cells:
        raise SystemExit(f"no metrics files named TASK_SYSTEM_PCT_sSEED.json in {args.metrics_dir}")
    steps = find_provenance(args.provenance)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "scores": {task: TASK_SCORE[task][0] for task in cells},
        "summary": summarize_seeds(cells),
        "provenance": {"report": prov.record(), "steps": steps, "configs": copy_configs(steps, args.out)},
    }
    (args.out / "seeds.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["summary"], indent=1))
    print(f"wrote {args.out / 'seeds.json'}")
    return 0


def cmd_readme(args) -> int:
    section = render_section(args.results, args.readme)
    current = args.readme.read_text(encoding="utf8") if args.readme.is_file() else f"{START}\n{END}\n"
    updated = splice(current, section)
    if args.check:
        if updated != current:
            print(f"{args.readme}: the results section differs from what `python scripts/report.py readme "
                  f"--results {args.results}` writes now: rerun it (never edit the section by hand)", file=sys.stderr)
            return 1
        print(f"{args.readme}: results section up to date")
        return 0
    args.readme.write_text(updated, encoding="utf8")
    print(f"wrote the results section of {args.readme} from {args.results}/")
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
            data["provenance"]["configs"] = {renamed.get((name, digest), name): digest for name, digest in configs.items()}
            target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        else:
            shutil.copyfile(path, target)
    return {name: new for (name, _), new in renamed.items()}


def cmd_publish(args) -> int:
    for name, new in publish_folder(args.source, args.results).items():
        print(f"configs/{name}: an earlier published result uses another version; this run's is configs/{new}")
    print(f"copied {args.source}/ into {args.results}/")
    return cmd_readme(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect", help="spacy evaluate outputs + trained pipelines → metrics.json, table, figures")
    p.add_argument("--metrics-dir", type=Path, default=Path("metrics"))
    p.add_argument("--training-dir", type=Path, default=Path("training"))
    p.add_argument("--out", type=Path, default=Path("results"))
    p.add_argument("--extra", type=Path, nargs="*", default=[], help="more JSON files to embed (e.g. pretraining metrics)")
    p.add_argument("--provenance", type=Path, nargs="*", default=[],
                   help="folders (or files) holding the steps' provenance.json / NAME.provenance.json records")
    p.set_defaults(func=cmd_collect)
    p = sub.add_parser("seeds", help="per-seed spacy evaluate outputs → seeds.json (mean ± std, paired gains)")
    p.add_argument("--metrics-dir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--provenance", type=Path, nargs="*", default=[])
    p.set_defaults(func=cmd_seeds)
    for name, func in (("readme", cmd_readme), ("publish", cmd_publish)):
        p = sub.add_parser(name, help="write the README's results section from a results folder"
                           if name == "readme" else "copy a run's results folder into results/, then `readme`")
        if name == "publish":
            p.add_argument("--from", dest="source", type=Path, required=True, help="the run's results folder")
        p.add_argument("--results", type=Path, default=Path("results"))
        p.add_argument("--readme", type=Path, default=Path("README.md"))
        p.add_argument("--check", action="store_true", help="only compare; exit 1 if the README section is stale")
        p.set_defaults(func=func)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
