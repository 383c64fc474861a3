"""The ELMo gain of every cell as a table: per-seed paired gains, mean ± sd and a 95% interval over seeds.

    python -m lab.reports.gains results/runs/training_seeds results/runs/confirmation \
        --out results/gains.json --table results/gains.md \
        --looks results/test_looks.json --looks-table results/test_looks.md --pages README.md results/README.md

Reads the run records (`{task}_{system}_{pct}_s{seed}.json`, as lab/experiments/train_ner.py --records writes them; only
those with a test score) of each RECORDS_DIR. A gain is ELMo − baseline of the same task, training fraction, seed
and training data (the sha256 of the record's train file), the baseline taken from the ELMo run's own folder when it
has one, else from any folder given. Each folder with baselines is one row group (its data: DATA below); a folder
of ELMo runs only (e.g. a second biLM's, `train_ner.py --elmo TAG PATH`: runs `{task}_elmo_{TAG}_{pct}_s{seed}`)
joins the group of the baselines it pairs with. Per cell the table has a row for the biLM of the untagged ELMo
runs and, at 10% of the groups in SECOND_BILM, one for the second biLM with the shift between the two (its ELMo
score − the first biLM's, paired by seed). A cell with no pair reads "not run".

The 95% interval is mean ± t(0.975, n − 1) · sd / √n over the n paired seeds (sd: the sample standard
deviation), with t from T975 below (exact quantiles to 6 decimals; no scipy). Per-seed gains are taken from the
records' scores (2 decimals) and rounded to 2 decimals; the mean, sd and interval are computed from those values and
rounded to 2 decimals.

`--looks` also writes the ledger of test looks as one table (`--looks-table`): its looks grouped by cell, round
(the commit a look was published at, or scored at) and what was scored, with each ELMo look's gain over the
baseline's look at the same seed (that round's, else the latest before it). `--pages` puts the tables into Markdown
pages between `<!-- gains:start -->` / `<!-- gains:end -->` and `<!-- test-looks:start -->` /
`<!-- test-looks:end -->`, and the pre-registered confirmation's cells alone, the README's summary, between
`<!-- confirmation:start -->` / `<!-- confirmation:end -->` (a page without the markers is left alone); `--check` writes nothing and exits 1 when a
file differs from what it would write. Standard library only; it imports no other script.
"""  # noqa: E501 - the first line is the script's --help description, whole

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

from lab.experiments import looks_ledger

# t(0.975, df) for df = 1 .. 30 (Student's t, two-sided 95%)
T975 = {
    1: 12.706205, 2: 4.302653, 3: 3.182446, 4: 2.776445, 5: 2.570582, 6: 2.446912, 7: 2.364624, 8: 2.306004,
    9: 2.262157, 10: 2.228139, 11: 2.200985, 12: 2.178813, 13: 2.160369, 14: 2.144787, 15: 2.131450, 16: 2.119905,
    17: 2.109816, 18: 2.100922, 19: 2.093024, 20: 2.085963, 21: 2.079614, 22: 2.073873, 23: 2.068658, 24: 2.063899,
    25: 2.059539, 26: 2.055529, 27: 2.051831, 28: 2.048407, 29: 2.045230, 30: 2.042272,
}  # fmt: skip
TASKS = {"ner": "NER (F1)", "pos": "POS (accuracy)"}
CELLS = (("ner", "10"), ("ner", "100"), ("pos", "10"), ("pos", "100"))
# a records folder's data, by the folder's name
DATA = {
    "training_seeds": "CoNLL-2003",
    "confirmation": "confirmation (WNUT-17 NER, UD LinES POS)",
}
# what each side's recipe was chosen on (issue 42: the baselines had no dev search of their own; where that
# is not redone, the asymmetry is printed beside every gain)
TUNING = {
    "training_seeds": "ELMo: dev searches on CoNLL (results/README.md); baseline: none",
    "confirmation": "both: the CoNLL recipes as adopted; nothing chosen on this data",
}
# the groups whose 10% cells also show a second biLM, and its tag in the run names
SECOND_BILM = {"training_seeds": "bilm2"}
RUN = re.compile(r"^(?P<task>[a-z]+)_(?P<system>baseline|elmo)(?:_(?P<tag>[a-z0-9_]+?))?_(?P<pct>\d+)_s(?P<seed>\d+)$")
NOT_RUN = "not run"


def read_records(folders: list[Path]) -> list[dict]:
    """One entry per scored run record: folder, task, fraction, system, tag, seed, score, train sha256, biLM sha256."""
    runs = []
    for folder in folders:
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            record = json.loads(path.read_text(encoding="utf8"))
            match = RUN.match(str(record.get("run") or path.stem))
            score = (record.get("test") or {}).get("score")
            if not match or not isinstance(score, (int, float)):
                continue
            data = record.get("data_sha256") or {}
            train = next((sha for name, sha in sorted(data.items()) if "train" in Path(name).name), None)
            runs.append(
                {
                    "folder": folder.name,
                    "task": match["task"],
                    "fraction": match["pct"],
                    "system": match["system"],
                    "tag": match["tag"],
                    "seed": int(match["seed"]),
                    "score": float(score),
                    "train_sha256": train,
                    # (a record whose biLM lay outside the repository has the weights' hash in its inputs only)
                    "bilm_sha256": record.get("bilm_sha256") or looks_ledger.recipe(record)["bilm_sha256"],
                }
            )
    return runs


def spread(values: list[float]) -> dict:
    """n, mean, sample sd and the 95% interval over seeds (sd and interval None for one value), rounded to 2."""
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return {"n": n, "mean": round(mean, 2), "sd": None, "interval": None}
    sd = statistics.stdev(values)
    if n - 1 not in T975:
        raise SystemExit(f"{n} seeds: T975 holds t(0.975, df) for df 1..{max(T975)} only")
    half = T975[n - 1] * sd / math.sqrt(n)
    return {
        "n": n,
        "mean": round(mean, 2),
        "sd": round(sd, 2),
        "interval": [round(mean - half, 2), round(mean + half, 2)],
    }


def _key(run: dict) -> tuple:
    return run["task"], run["fraction"], run["seed"], run["train_sha256"]


def pair(runs: list[dict]) -> dict:
    """{(group folder, task, fraction, tag): {seed: (gain, ELMo score)}} and the biLM sha256s of each."""
    baselines: dict[str, dict[tuple, float]] = {}
    for run in runs:
        if run["system"] == "baseline":
            baselines.setdefault(run["folder"], {})[_key(run)] = run["score"]
    pairs: dict[tuple, dict] = {}
    for run in runs:
        if run["system"] != "elmo":
            continue
        own = baselines.get(run["folder"], {})
        group = run["folder"] if _key(run) in own else None
        if group is None:  # a folder of ELMo runs only: the baselines of the same data, wherever they are
            group = next((folder for folder, found in baselines.items() if _key(run) in found), None)
        if group is None:
            continue
        cell = pairs.setdefault((group, run["task"], run["fraction"], run["tag"]), {"seeds": {}, "bilm": set()})
        base = baselines[group][_key(run)]
        cell["seeds"][run["seed"]] = (round(run["score"] - base, 2), run["score"])
        cell["bilm"].add(run["bilm_sha256"] or "none recorded")
    return pairs


def rows(folders: list[Path], runs: list[dict]) -> list[dict]:
    """The table's rows: per group (a folder given, or one whose baselines paired), cell and biLM."""
    pairs = pair(runs)
    groups = list(dict.fromkeys([f.name for f in folders if f.name in DATA] + [g for g, *_ in pairs]))
    out = []
    for group in groups:
        second = SECOND_BILM.get(group)
        tags = sorted({t for g, _, _, t in pairs if g == group and t is not None and t != second})
        for task, pct in CELLS:
            first = pairs.get((group, task, pct, None))
            out.append(_row(group, task, pct, None, first, None))
            for tag in ([second] if second and pct == "10" else []) + tags:
                out.append(_row(group, task, pct, tag, pairs.get((group, task, pct, tag)), first))
    return out


def _row(group: str, task: str, pct: str, tag: str | None, cell: dict | None, first: dict | None) -> dict:
    row = {"data": DATA.get(group, group), "records": group, "task": task, "fraction": pct, "bilm": tag or "first"}
    if not cell:
        return {**row, "status": NOT_RUN}
    seeds = dict(sorted(cell["seeds"].items()))
    row.update(status="run", bilm_sha256=sorted(cell["bilm"]), per_seed={str(s): g for s, (g, _) in seeds.items()})
    row.update(spread([g for g, _ in seeds.values()]))
    if tag is not None:
        shared = sorted(set(seeds) & set((first or {}).get("seeds", {})))
        shift = {str(s): round(seeds[s][1] - first["seeds"][s][1], 2) for s in shared} if shared else {}
        row["shift"] = {"per_seed": shift, **spread(list(shift.values()))} if shift else None
    return row


def _signed(value: float) -> str:
    return f"{value:+.2f}"


def _pm(entry: dict) -> str:
    return f"{_signed(entry['mean'])} ± {entry['sd']:.2f}" if entry["sd"] is not None else _signed(entry["mean"])


def _interval(entry: dict) -> str:
    return f"[{_signed(entry['interval'][0])}, {_signed(entry['interval'][1])}]" if entry["interval"] else "n = 1"


def gains_table(table_rows: list[dict]) -> str:
    lines = [
        "| data | task | train % | biLM | n seeds | per-seed gains | mean ± sd | 95% interval "
        "| shift from the first biLM: mean ± sd, 95% interval | recipes chosen by |",
        "|---|---|---:|---|---:|---|---:|---|---|---|",
    ]
    for row in table_rows:
        head = f"| {row['data']} | {TASKS.get(row['task'], row['task'])} | {row['fraction']} | "
        if row["status"] == NOT_RUN:
            shift = NOT_RUN if row["bilm"] != "first" else ""
            lines.append(head + f"{row['bilm']} | {NOT_RUN} | | | | {shift} | {TUNING.get(row['records'], '')} |")
            continue
        bilm = f"{row['bilm']} (`{'`, `'.join(s[:8] for s in row['bilm_sha256'])}`)"
        per_seed = ", ".join(f"s{s} {_signed(g)}" for s, g in row["per_seed"].items())
        shift = ""
        if row["bilm"] != "first":
            shift = f"{_pm(row['shift'])}, {_interval(row['shift'])}" if row.get("shift") else "no shared seed"
        tuning = TUNING.get(row["records"], "")
        lines.append(head + f"{bilm} | {row['n']} | {per_seed} | {_pm(row)} | {_interval(row)} | {shift} | {tuning} |")
    return "\n".join(lines) + "\n"


CONFIRMATION = "confirmation"  # the pre-registered check: the README's summary shows its first-biLM cells
TASK_DATA = {"ner": "WNUT-17 NER (F1)", "pos": "UD English-LinES POS (accuracy)"}


def confirmation_table(table_rows: list[dict]) -> str:
    """The README's summary: the confirmation's cells (the first biLM) with each seed's gain and the 95% interval."""
    lines = [
        "| confirmation: data and task | train % | n seeds | per-seed gains | mean ± sd | 95% interval |",
        "|---|---:|---:|---|---:|---|",
    ]
    for row in table_rows:
        if row["records"] != CONFIRMATION or row["bilm"] != "first":
            continue
        head = f"| {TASK_DATA[row['task']]} | {row['fraction']} | "
        if row["status"] == NOT_RUN:
            lines.append(head + f"{NOT_RUN} | | | |")
            continue
        per_seed = ", ".join(f"s{s} {_signed(g)}" for s, g in row["per_seed"].items())
        lines.append(head + f"{row['n']} | {per_seed} | {_pm(row)} | {_interval(row)} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the ledger of test looks


def _round(look: dict) -> str:
    return (look.get("published_at") or look.get("commit") or "")[:7]


def _what(look: dict) -> str:
    return re.sub(r"_s\d+$", "", str(look.get("run") or ""))


def _recipe(look: dict) -> str:
    recipe = look.get("recipe") or {}
    if not recipe.get("config_sha256"):
        return "not in the files"
    parts = [f"config `{recipe['config_sha256'][:8]}`"]
    if recipe.get("bilm_sha256"):
        tuned = any("fine_tune_layers" in s for s in recipe.get("settings") or [])
        parts.append(f"biLM `{recipe['bilm_sha256'][:8]}`, " + ("top layer fine-tuned" if tuned else "frozen"))
    return ", ".join(parts)


def looks_rows(looks: list[dict]) -> list[dict]:
    """The ledger's looks grouped by cell, round, workflow, what was scored and system; an ELMo look's gain is over
    the baseline's look at the same cell and seed in the same round, else the latest before it."""
    groups: dict[tuple, dict] = {}
    for look in sorted(looks, key=lambda entry: entry["look"]):
        key = (look["task"], str(look["fraction"]), _round(look), look.get("workflow"), _what(look), look["system"])
        group = groups.setdefault(key, {"looks": [], "key": key})
        group["looks"].append(look)
    out = []
    for (task, pct, rnd, workflow, what, system), group in groups.items():
        entries = []
        for look in group["looks"]:
            entry = {"look": look["look"], "seed": look["seed"], "score": look["score"]}
            if system == "elmo":
                base = _baseline_look(looks, look)
                if base is not None:
                    entry["baseline_look"] = base["look"]
                    entry["gain"] = round(look["score"] - base["score"], 2)
            entries.append(entry)
        gains = [e["gain"] for e in entries if "gain" in e]
        out.append(
            {
                "task": task,
                "fraction": pct,
                "round": rnd,
                "workflow": workflow,
                "what": what,
                "system": system,
                "recipe": _recipe(group["looks"][0]),
                "looks": entries,
                "mean_gain": round(statistics.fmean(gains), 2) if gains else None,
            }
        )
    order = {cell: i for i, cell in enumerate(CELLS)}
    return sorted(out, key=lambda r: (order.get((r["task"], r["fraction"]), 99), r["looks"][0]["look"]))


def _baseline_look(looks: list[dict], look: dict) -> dict | None:
    same = [
        other
        for other in looks
        if other["system"] == "baseline"
        and (other["task"], str(other["fraction"]), other["seed"])
        == (look["task"], str(look["fraction"]), look["seed"])
    ]
    this_round = [other for other in same if _round(other) == _round(look)]
    before = [other for other in same if other["look"] < look["look"]]
    chosen = this_round or before
    return max(chosen, key=lambda other: other["look"]) if chosen else None


def _span(numbers: list[int]) -> str:
    return (
        f"{numbers[0]}–{numbers[-1]}"
        if len(numbers) > 1 and numbers[-1] - numbers[0] == len(numbers) - 1
        else (", ".join(map(str, numbers)))
    )


def looks_table(table_rows: list[dict]) -> str:
    lines = [
        "| cell | looks | round | scored | system | recipe | per seed: test score (gain over the baseline look) "
        "| mean gain |",
        "|---|---|---|---|---|---|---|---:|",
    ]
    for row in table_rows:
        seeds = "; ".join(
            f"s{e['seed']} {e['score']:.2f}"
            + (f" ({_signed(e['gain'])} vs look {e['baseline_look']})" if "gain" in e else "")
            for e in row["looks"]
        )
        mean = _signed(row["mean_gain"]) if row["mean_gain"] is not None else ""
        lines.append(
            f"| {row['task']} {row['fraction']}% | {_span([e['look'] for e in row['looks']])} | `{row['round']}` "
            f"| {row['workflow']}: {row['what']} | {row['system']} | {row['recipe']} | {seeds} | {mean} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# writing


def splice(text: str, region: str, body: str) -> str:
    """`text` with what lies between the region's markers replaced by `body` (unchanged without the markers)."""
    start, end = f"<!-- {region}:start -->", f"<!-- {region}:end -->"
    if start not in text or end not in text:
        return text
    head, rest = text.split(start, 1)
    return f"{head}{start}\n{body}{end}{rest.split(end, 1)[1]}"


def outputs(args) -> dict[Path, str]:
    """{path: text} of every file this run writes."""
    runs = read_records(args.records)
    table_rows = rows(args.records, runs)
    about = (
        "Paired ELMo gains per cell, written by lab/reports/gains.py from the run records of "
        + ", ".join(f"{f.parent.name}/{f.name}/" for f in args.records)
        + ": per seed ELMo − baseline (same task, fraction, seed and training data), mean, sample sd and the 95% "
        "interval mean ± t(0.975, n − 1) · sd / √n over seeds (t from a table of exact quantiles)."
    )
    written = {args.out: json.dumps({"about": about, "rows": table_rows}, indent=1, ensure_ascii=False) + "\n"}
    tables = {"gains": gains_table(table_rows), "confirmation": confirmation_table(table_rows)}
    written[args.table] = tables["gains"]
    if args.looks:
        ledger = json.loads(args.looks.read_text(encoding="utf8"))
        tables["test-looks"] = looks_table(looks_rows(ledger["looks"]))
        if args.looks_table:
            written[args.looks_table] = tables["test-looks"]
    for page in args.pages:
        text = written.get(page) or (page.read_text(encoding="utf8") if page.is_file() else "")
        for region, body in tables.items():
            text = splice(text, region, body)
        if text:
            written[page] = text
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", metavar="RECORDS_DIR", help="folders of run records")
    parser.add_argument("--out", type=Path, required=True, help="the gains as JSON")
    parser.add_argument("--table", type=Path, required=True, help="the gains as a Markdown table")
    parser.add_argument("--looks", type=Path, help="the ledger of test looks (results/test_looks.json)")
    parser.add_argument("--looks-table", type=Path, help="its Markdown table")
    parser.add_argument("--pages", type=Path, nargs="*", default=[], help="Markdown pages with the tables' regions")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs(args).items():
        current = path.read_text(encoding="utf8") if path.is_file() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf8")
            print(f"wrote {path}")
    if stale:
        print(f"not what lab/reports/gains.py writes now: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
