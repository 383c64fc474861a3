"""The experiment's report, rendered from the files in a results folder and nothing else.

`pages` is the one function that writes it: the results page (the results folder's README.md, e.g.
results/README.md) between `<!-- results:start -->` and `<!-- results:end -->`, and the few summary lines of the
top-level README.md (between `<!-- results-summary:start -->` and `<!-- results-summary:end -->`).
`python scripts/report.py readme` (and `publish`) call it; tests/project/test_report.py checks that both pages hold
exactly what it returns for results/. The regions are spliced by doc_regions.py, the lab's one marker-splicing helper.
Every sentence here states what the files say (provenance, seeds, goals met or not, wall times against their
budgets); nothing is typed by hand and nothing reads a clock or the machine.
"""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path

from lab import doc_regions, looks_ledger

# per task: its score in `spacy evaluate` output and the score's name in tables
TASK_SCORE = {"ner": ("ents_f", "test F1"), "pos": ("tag_acc", "test accuracy")}
# the generated regions: the results page's report and the README's summary of it
RESULTS, SUMMARY = "results", "results-summary"
START, END = doc_regions.markers(RESULTS)
SUMMARY_START, SUMMARY_END = doc_regions.markers(SUMMARY)
# what the results page holds before its first publish (the title, the region)
PAGE_SKELETON = f"# Results\n\n{START}\n{END}\n"
# the project's goals for the ELMo gain (issue 12: half the gap to the full-data baseline at 10%; issue 21 adds
# POS at 10%), judged on paired means over GOAL_SEEDS seeds
GOALS = {("ner", "10"): 6.0, ("ner", "100"): 2.0, ("pos", "10"): 1.0}
GOAL_SEEDS = 3
# the seeds workflow's wall-time budget on 2 CPU cores, in minutes
SEEDS_BUDGET_MIN = 150
# and `make main`'s (the `all` workflow; issue 21)
ALL_BUDGET_MIN = 60


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


def _pm(cell: dict) -> str:
    return (
        f"{cell['mean']:.2f} ± {cell['std']:.2f} (n={cell['n']})"
        if cell["std"] is not None
        else f"{cell['mean']:.2f} (n=1, no spread)"
    )


def _gain_pm(cell: dict) -> str:
    return (
        f"{cell['mean']:+.2f} ± {cell['std']:.2f} (n={cell['n']})"
        if cell["std"] is not None
        else f"{cell['mean']:+.2f} (n=1, no spread)"
    )


# what the lab's own steps write into results/ as a workflow goes (scripts/train_ner.py's run records,
# scripts/evaluate_runs.py's ledger of test looks): a later step of the same workflow finds them changed. They
# are its outputs, and no computation reads them for its numbers (they only decide what to reuse or refuse).
_BOOKKEEPING = ("results/runs/", f"results/{looks_ledger.LEDGER}")


def _changed_inputs(record: dict) -> list[str]:
    """A record's uncommitted paths other than the workflow's own bookkeeping (_BOOKKEEPING)."""
    git = record.get("git") or {}
    return [p for p in git.get("dirty_paths", []) if not p.startswith(_BOOKKEEPING)] if git.get("dirty") else []


def _commit(record: dict) -> str:
    git = record.get("git") or {}
    if not git.get("commit"):
        return "commit unknown (not a git checkout)"
    text = f"commit `{git['commit'][:12]}`"
    changed = _changed_inputs(record)
    if changed:
        paths = ", ".join(f"`{p}`" for p in changed)
        text += f" **with uncommitted changes (dirty tree: {paths})**"
    elif git.get("dirty"):
        text += " (clean tree but for the run records and test-look ledger that the workflow writes)"
    else:
        text += " (clean tree)"
    return text


def _machine(record: dict) -> str:
    m = record.get("machine") or {}
    gpu = f", GPU {m['gpu']}" if m.get("gpu") else ", CPU only"
    return (
        f"{m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB{gpu}; Python {m.get('python')}, "
        f"torch {m.get('torch')}, spaCy {m.get('spacy')}, transformers {m.get('transformers')}"
    )


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
        return [
            f"**{what}: provenance not recorded** (these results predate provenance recording: commit, "
            "exact configs and step times are unknown).",
            "",
        ]
    records = [block["report"]] if "report" in block else [block]
    records += list(block.get("steps", {}).values())
    commits = sorted({_commit(r) for r in records})
    dirty = any(_changed_inputs(r) for r in records)
    starts = [r["started_utc"] for r in records if r.get("started_utc")]
    ends = [r["ended_utc"] for r in records if r.get("ended_utc")]
    machines = list(dict.fromkeys(_machine(r) for r in records if r.get("machine"))) or [_machine(records[0])]
    where = machines[0] if len(machines) == 1 else f"{len(machines)} machines: " + "; ".join(machines)
    lines = [f"**{what}**: {'; '.join(commits)}; {min(starts)} – {max(ends)} UTC; {where}."]
    if dirty:
        lines[0] = "⚠ **DIRTY TREE: not reproducible from a commit.** " + lines[0]
    seeds = sorted({r["seed"] for r in records if r.get("seed") is not None})
    if seeds:
        lines[0] += f" Seeds: {', '.join(map(str, seeds))}."
    configs = block.get("configs")
    if configs:
        lines[0] += (
            " Configs as run: "
            + ", ".join(f"`configs/{name}` (sha256 {digest[:12]})" for name, digest in sorted(configs.items()))
            + "."
        )
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
            parts.append(
                f"{task} {pct}%: ≥ {goal:+.2f} — not judged ({gain['mean']:+.2f} from {gain['n']} seed(s); "
                f"the goal is a mean over {GOAL_SEEDS})"
            )
            continue
        met = "met" if gain["mean"] >= goal else "**not met**"
        parts.append(f"{task} {pct}%: ≥ {goal:+.2f} — {met} ({gain['mean']:+.2f}, mean of {gain['n']} seed(s))")
    return ["Goals for the ELMo gain (paired means): " + "; ".join(parts) + ".", ""]


def _span_minutes(records: list[dict]) -> float | None:
    """Minutes from the first record's start to the last one's end."""
    return _minutes(
        {"started_utc": min(r["started_utc"] for r in records), "ended_utc": max(r["ended_utc"] for r in records)}
    )


def _pretrain_records(block: dict | None) -> list[dict]:
    """The pretraining steps' records in a provenance block (the steps whose command runs `pretrain`)."""
    return [r for r in (block or {}).get("steps", {}).values() if "pretrain" in (r.get("command") or [])]


def _reused_records(block: dict | None) -> dict[str, dict]:
    """{label: record} of the steps that ended before the block's pretraining started: reused from an
    earlier run (scripts/train_ner.py does not retrain a run whose command and inputs are unchanged, e.g.
    the baselines after a new biLM), so their time is not in this run's span and is added by name."""
    pretrain = [r for r in _pretrain_records(block) if r.get("started_utc")]
    if not pretrain:
        return {}
    first = min(r["started_utc"] for r in pretrain)
    return {
        label: r
        for label, r in (block or {}).get("steps", {}).items()
        if r not in pretrain and r.get("started_utc") and r.get("ended_utc") and r["ended_utc"] <= first
    }


def _busy_minutes(records: list[dict]) -> float:
    """Minutes during which at least one of the records ran (the union of their intervals). Reused steps
    ran interleaved with that earlier run's other steps (the baselines, then the ELMo runs, then both
    evaluated), so their first start to last end would count those other steps' time too."""
    intervals = sorted((r["started_utc"], r["ended_utc"]) for r in records)
    total, (start, end) = 0.0, intervals[0]
    for next_start, next_end in intervals[1:]:
        if next_start > end:
            total += _minutes({"started_utc": start, "ended_utc": end})
            start, end = next_start, next_end
        else:
            end = max(end, next_end)
    return total + _minutes({"started_utc": start, "ended_utc": end})


def _reused_clause(reused: dict[str, dict]) -> tuple[str, float]:
    """The words naming the reused steps, and the minutes they add (the time while any of them ran)."""
    minutes = _busy_minutes(list(reused.values()))
    since = min(r["started_utc"] for r in reused.values())
    return (
        f"reused {', '.join(sorted(reused))}, finished earlier with the same command and inputs "
        f"({minutes:.1f} min while any of them ran, from {since})"
    ), minutes


def seeds_time_lines(block: dict | None) -> list[str]:
    """Wall time of the seeds workflow from its records: the steps it ran, plus the pretraining of the
    biLM it shares, plus any step it reused from an earlier run (so the verdict is for a run from scratch)."""
    steps = (block or {}).get("steps", {})
    pretrain = _pretrain_records(block)
    reused = _reused_records(block)
    rest = [
        r
        for label, r in steps.items()
        if r not in pretrain and label not in reused and r.get("started_utc") and r.get("ended_utc")
    ]
    if not rest:
        return []
    span, busy = _span_minutes(rest), _busy_minutes(rest)
    if span - busy < 1.0:
        total = span
        text = (
            f"Wall time: the seeds trainings and evaluations ran {span:.1f} min "
            "(first start to last end of their records)"
        )
    else:  # run in more than one sitting (a changed cell retrained later): the time between sittings is not the run's
        total = busy
        text = (
            f"Wall time: the seeds trainings and evaluations ran {busy:.1f} min (while any of their records ran: they "
            "ran in "
            f"more than one sitting, {span:.1f} min from first start to last end)"
        )
    if reused:
        clause, minutes = _reused_clause(reused)
        text += f"; they {clause}"
        total += minutes
    minutes = [m for m in (_minutes(r) for r in pretrain) if m is not None]
    if minutes:
        total += sum(minutes)
        verdict = "within" if total <= SEEDS_BUDGET_MIN else "**over**"
        text += (
            f"; the biLM they share was pretrained in {sum(minutes):.1f} min ({_commit(pretrain[0])}); "
            f"{total:.1f} min together, {verdict} the {SEEDS_BUDGET_MIN}-minute budget (data preparation adds about a "
            "minute and records no time)"
        )
    return [text + ".", ""]


def all_time_lines(block: dict | None) -> list[str]:
    """Wall time of an `all` run from its records: the pretraining's start to the report's end, plus the
    time of any step it reused from an earlier run (so the verdict is for a run from scratch)."""
    block = block or {}
    reused = _reused_records(block)
    records = [
        r
        for label, r in [("report", block.get("report")), *block.get("steps", {}).items()]
        if r and label not in reused and r.get("started_utc") and r.get("ended_utc")
    ]
    if not records:
        return []
    span = _span_minutes(records)
    if span is None:
        return []
    seconds = round(span * 60)  # to the second: a run near the budget must not read "60.0 min, within"
    text = (
        f"Wall time of this `all` run: {seconds // 60} min {seconds % 60} s from the first recorded start to the "
        "report's end (fetching the "
        "data and preprocessing record no time: about a minute)"
    )
    total = span
    if reused:
        clause, minutes = _reused_clause(reused)
        total += minutes
        seconds = round(total * 60)
        text += f". It {clause}: with them, a run from scratch takes about {seconds // 60} min {seconds % 60} s"
    verdict = "within" if total <= ALL_BUDGET_MIN else "**over**"
    return [f"{text}, {verdict} the {ALL_BUDGET_MIN}-minute budget of `make main` on the machine named above.", ""]


def make_main_time_lines(metrics: dict) -> list[str]:
    """`make main`'s own wall time, from the start the Makefile records (before it builds .venv) to the report's
    end, and the pretraining speed it reached; nothing for a run not started by `make main` (or before it recorded
    this)."""
    started = (metrics.get("make_main") or {}).get("started_utc")
    report = (metrics.get("provenance") or {}).get("report") or {}
    minutes = _minutes({"started_utc": started, "ended_utc": report.get("ended_utc")}) if started else None
    if minutes is None:
        return []
    seconds = round(minutes * 60)
    speed = (metrics.get("pretrain_summary") or {}).get("words_per_s")
    text = (
        f"`make main` itself, from its start ({started}, before building `.venv`) to the report's end: "
        f"{seconds // 60} min "
        f"{seconds % 60} s, building the environment, fetching the data and preprocessing included"
    )
    if isinstance(speed, (int, float)):
        text += f"; its pretraining ran at {speed:,.0f} words/s"
    verdict = "within" if minutes <= ALL_BUDGET_MIN else "**over**"
    return [f"{text}; {verdict} the {ALL_BUDGET_MIN}-minute budget.", ""]


def _max_steps(record: dict) -> str:
    command = record.get("command") or []
    return next((command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "--training.max_steps"), "?")


# `spacy train` options every run of a cell gets from train_ner.py itself (data, schedule, seed, device, biLM)
_STANDARD_TRAIN_OPTIONS = {
    "--output",
    "--paths.train",
    "--paths.dev",
    "--training.max_steps",
    "--training.eval_frequency",
    "--training.patience",
    "--system.seed",
    "--gpu-id",
    "--paths.elmo",
}


def cell_settings_lines(block: dict | None) -> list[str]:
    """The settings a cell's runs were trained with beyond their config, read from each training run's
    recorded `spacy train` command (e.g. fine-tuning the biLM at 10%); nothing when no cell has any."""
    cells: dict[str, set[tuple[str, ...]]] = {}
    for label, record in sorted(((block or {}).get("steps") or {}).items()):
        command = record.get("command") or []
        match = re.fullmatch(r"(?:.*/)?training_seeds/(\w+?)_(\d+)_s\d+", label)
        if not match or "train" not in command:
            continue
        options = command[command.index("train") + 2 :]  # after `train CONFIG`
        extra = tuple(
            f"{options[i]} {options[i + 1]}"
            for i in range(0, len(options) - 1, 2)
            if options[i].startswith("--") and options[i] not in _STANDARD_TRAIN_OPTIONS
        )
        cells.setdefault(f"{match.group(1).replace('_', ' ')} {match.group(2)}%", set()).add(extra)
    special = {cell: settings for cell, settings in cells.items() if settings != {()}}
    if not special:
        return []
    parts = []
    for cell, settings in sorted(special.items()):
        shown = " / ".join("`" + " ".join(extra) + "`" if extra else "none" for extra in sorted(settings))
        tuned = any(option.startswith("--components.elmo.fine_tune_layers ") for extra in settings for option in extra)
        parts.append(f"{cell}: {shown}" + (" (the biLM's top layers fine-tuned with the task)" if tuned else ""))
    return [
        "Settings beyond a cell's config, from its runs' recorded `spacy train` commands: "
        + "; ".join(parts)
        + ". Every other cell: its config as published, the biLM frozen.",
        "",
    ]


def shared_bilm_lines(seeds_block: dict | None, all_block: dict | None) -> list[str]:
    """Says so when the seeds results were made with another biLM than the last `all` run's, naming both
    pretrainings: an earlier one (a rerun of `all` with a new recipe that `seeds` has not followed yet) or a later
    one (the committed project biLM, `results/bilm`, pretrained after the last `all` run, which pretrains its own)."""
    mine, theirs = (next(iter(_pretrain_records(block)), None) for block in (seeds_block, all_block))
    if not mine or not theirs or mine.get("started_utc") == theirs.get("started_utc"):
        return []
    earlier = str(mine.get("started_utc")) < str(theirs.get("started_utc"))
    why = (
        "`spacy project run seeds` has not been rerun on the new one yet."
        if earlier
        else "the seeds workflow reads the committed project biLM (`results/bilm`), and `make main`, which "
        "pretrains its own, has not been run since it was made."
    )
    return [
        f"⚠ **These seeds results use {'an earlier' if earlier else 'a later'} biLM** than the last `all` run "
        f"below: pretrained {mine.get('started_utc')} ({_commit(mine)}, {_max_steps(mine)} steps), against "
        f"{theirs.get('started_utc')} ({_commit(theirs)}, {_max_steps(theirs)} steps) for `all`; {why}",
        "",
    ]


def _link(results: Path, page: Path, name: str) -> str:
    return Path(os.path.relpath(results / name, page.parent)).as_posix()


def _read_json(path: Path) -> dict:
    """A results file's content; {} when the run that writes it has not happened yet."""
    return json.loads(path.read_text()) if path.is_file() else {}


def _seeds_table(summary: dict) -> list[str]:
    """One row per task and training fraction: mean ± std of each system, the paired gain, and every seed's values."""
    out = [
        "| task | train | baseline | ELMo | paired gain | per seed: baseline / ELMo / gain |",
        "|---|---|---|---|---|---|",
    ]
    for task in sorted(summary):
        label = TASK_SCORE.get(task, ("", task))[1]
        for pct, cell in sorted(summary[task].items(), key=lambda kv: int(kv[0])):
            base, elmo, gain = cell.get("baseline"), cell.get("elmo"), cell.get("gain")
            values = [(part or {}).get("per_seed", {}) for part in (base, elmo, gain)]
            show = lambda value, form: "–" if value is None else format(value, form)  # noqa: E731
            per_seed = [
                f"s{seed}: " + " / ".join(show(v.get(seed), form) for v, form in zip(values, (".2f", ".2f", "+.2f")))
                for seed in sorted(set(values[0]) | set(values[1]), key=int)
            ]
            out.append(
                f"| {task} ({label}) | {pct}% | {_pm(base) if base else '–'} | {_pm(elmo) if elmo else '–'} | "
                f"{_gain_pm(gain) if gain else '–'} | {'; '.join(per_seed)} |"
            )
    return out + [""]


def seed_counts(summary: dict) -> str:
    """How many seeds each cell has, from the data: "every cell with 3 seeds", or the usual count and the
    cells that differ ("3 seeds per cell except pos 100% (1 seed)")."""
    counts = {
        (task, pct): max((cell.get(system) or {}).get("n", 0) for system in ("baseline", "elmo"))
        for task, by_pct in sorted(summary.items())
        for pct, cell in sorted(by_pct.items(), key=lambda kv: int(kv[0]))
    }
    if not counts:
        return "no cells"
    seeds = lambda n: f"{n} seed" + ("s" if n != 1 else "")  # noqa: E731
    usual = max(sorted(set(counts.values())), key=list(counts.values()).count)
    if all(n == usual for n in counts.values()):
        return f"every cell with {seeds(usual)}"
    others = [f"{task} {pct}% ({seeds(n)})" for (task, pct), n in counts.items() if n != usual]
    return f"{seeds(usual)} per cell except {', '.join(others)}"


def test_looks_lines(results: Path, page: Path) -> list[str]:
    """How many times each cell has been scored on test, from the ledger `results/test_looks.json`
    (scripts/evaluate_runs.py appends to it; scripts/reconstruct_test_looks.py rebuilt the earlier looks from
    git history): looks, recipes, repeats of a recipe, the commits the looks were published at, and the looks
    whose recorded reason is a search that a test score started."""
    ledger = _read_json(results / looks_ledger.LEDGER)
    looks = ledger.get("looks") or []
    if not looks:
        return []
    link = _link(results, page, looks_ledger.LEDGER)
    rebuilt = sum(str(entry.get("source", "")).startswith("reconstructed") for entry in looks)
    out = [
        "#### Test looks per cell",
        "",
        f"Every scoring of a model on the test set, from the ledger [{link}]({link}): {len(looks)} looks, {rebuilt} "
        "of them "
        "reconstructed from git history (the commit each was published at), the rest recorded by "
        "`scripts/evaluate_runs.py` "
        "when it scored them. A look is one model scored once (one seed of one cell); a recipe is the config, the "
        "settings, the training data and the biLM. From this ledger on, a cell gets one look per recipe and seed.",
        "",
        "| cell | looks | recipes looked at | looks at a recipe looked at before | recipe not in the files | "
        "published at, or scored at until published (commit: looks) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    cells: dict[tuple[str, str], list[dict]] = {}
    for entry in looks:
        cells.setdefault((entry["task"], str(entry["fraction"])), []).append(entry)
    for (task, pct), entries in sorted(cells.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
        known = [entry for entry in entries if looks_ledger.recipe_known(entry)]
        recipes = {
            (entry["system"], *(json.dumps(entry["recipe"].get(k)) for k in looks_ledger.RECIPE_KEYS))
            for entry in known
        }
        again = [
            (entry, looks_ledger.same_recipe_looks({"looks": entries[:i]}, entry)) for i, entry in enumerate(entries)
        ]
        again = [(entry, same) for entry, same in again if same]
        unchanged = sum(any(e["score"] == entry["score"] for e in same) for entry, same in again)
        repeats = f"{len(again)} ({unchanged} with an earlier look's score)" if again else "0"
        published: dict[str, int] = {}
        for entry in entries:
            where = (entry.get("published_at") or entry.get("commit") or "unpublished")[:7]
            published[where] = published.get(where, 0) + 1
        out.append(
            f"| {task} {pct}% | {len(entries)} | {len(recipes)} | {repeats} | {len(entries) - len(known)} | "
            + ", ".join(f"`{commit}`: {n}" for commit, n in published.items())
            + " |"
        )
    out.append("")
    searches: dict[tuple, list[dict]] = {}
    for entry in looks:
        if str(entry.get("reason", "")).startswith("search started because a test score missed"):
            searches.setdefault((entry["task"], str(entry["fraction"]), entry["system"], entry["reason"]), []).append(
                entry
            )
    for (task, pct, system, reason), entries in searches.items():
        out += [
            f"Looks {', '.join(str(entry['look']) for entry in entries)} ({task} {pct}% {system}, published at "
            f"`{(entries[0].get('published_at') or '?')[:7]}`): {reason}." + _look_before(looks, entries),
            "",
        ]
    return out


def _look_before(looks: list[dict], entries: list[dict]) -> str:
    """The looks at the same cell and system published last before `entries`, with another recipe (the look
    that missed), their scores and their paired gain over the baseline's latest looks of the same seeds."""

    first = min(entry["look"] for entry in entries)
    key = lambda entry: (entry["task"], str(entry["fraction"]))  # noqa: E731
    cell = [entry for entry in looks if key(entry) == key(entries[0]) and entry["look"] < first]
    before = [
        entry
        for entry in cell
        if entry["system"] == entries[0]["system"] and entry.get("recipe") != entries[0].get("recipe")
    ]
    if not before:
        return ""
    published = before[-1].get("published_at")
    before = [entry for entry in before if entry.get("published_at") == published]
    scores = " / ".join(f"s{entry['seed']} {entry['score']:.2f}" for entry in before)
    text = (
        f" The looks before them at this cell: {', '.join(str(e['look']) for e in before)} "
        f"(published at `{(published or '?')[:7]}`): {scores}"
    )
    baseline = {
        entry["seed"]: entry["score"]
        for entry in cell
        if entry["system"] == "baseline" and entry["look"] < before[-1]["look"]
    }
    gains = [entry["score"] - baseline[entry["seed"]] for entry in before if entry["seed"] in baseline]
    if len(gains) == len(before):
        goal = GOALS.get((entries[0]["task"], str(entries[0]["fraction"])))
        text += (
            f", a paired gain of {sum(gains) / len(gains):+.2f} over the baseline's latest looks at the same seeds"
            + (f" (the goal: {goal:+.2f})" if goal is not None else "")
        )
    return text + "."


def headline_section(seeds: dict, metrics: dict | None = None) -> list[str]:
    """The multi-seed headline: provenance, the table of every cell, the goals and the wall time; a warning
    when the last `all` run (`metrics`) pretrained another biLM since."""
    if not seeds.get("summary"):
        return [
            "### Headline: mean ± standard deviation over seeds and paired gains",
            "",
            "No multi-seed run recorded yet (`spacy project run seeds`).",
            "",
        ]
    out = [f"### Headline: {seed_counts(seeds['summary'])}, mean ± standard deviation and paired gains", ""]
    out += provenance_lines("The seeds run", seeds.get("provenance"))
    out += shared_bilm_lines(seeds.get("provenance"), (metrics or {}).get("provenance"))
    out += [
        "Every cell trained once per seed (`--system.seed`, i.e. `training.seed`) on the same data subset "
        "and the same pretrained biLM; each final model scored once on test. ± is the sample standard deviation "
        "over seeds; a paired gain is ELMo − baseline for the same seed.",
        "",
    ]
    out += _seeds_table(seeds["summary"]) + cell_settings_lines(seeds.get("provenance"))
    return out + goal_lines(seeds["summary"]) + seeds_time_lines(seeds.get("provenance"))


def redo_lines(results: Path) -> list[str]:
    """While the seeds run's ELMo runs are being redone with the project biLM (`results/bilm`, whose
    published.json names its model.safetensors sha256; issue 33): which runs read it, and each redone cell's
    per-seed test scores and paired gains from the committed records (runs/training_seeds). Nothing when every
    ELMo record names one biLM (then seeds.json, the headline above, is built from them)."""
    folder = results / "runs" / "training_seeds"
    records = {path.stem: _read_json(path) for path in sorted(folder.glob("*.json"))} if folder.is_dir() else {}
    scored = {run: r for run, r in records.items() if isinstance((r.get("test") or {}).get("score"), (int, float))}
    elmo = {run: r for run, r in scored.items() if r.get("system") == "elmo"}
    bilms = {r.get("bilm_sha256") for r in elmo.values()}
    project = _read_json(results / "bilm" / "published.json").get("files", {}).get("model.safetensors")
    if len(bilms) < 2 or project not in bilms:
        return []
    redone = {run: r for run, r in elmo.items() if r.get("bilm_sha256") == project}
    out = [
        f"**Being redone:** {len(redone)} of the {len(elmo)} ELMo runs' committed records "
        f"([runs/training_seeds](runs/training_seeds)) read the project biLM `results/bilm` (model.safetensors "
        f"sha256 {project[:12]}); the others read the published seeds run's biLM, whose weights are lost "
        "(results/experiments.md). The headline above is the published run's until every ELMo run reads one biLM "
        "(`report.py seeds` refuses a mixed set). The cells redone so far, test score per seed "
        "(baseline / ELMo / paired gain):",
        "",
    ]
    cells: dict = {}
    for r in redone.values():
        cells.setdefault((r["task"], str(r["fraction"])), []).append(r)
    for (task, pct), runs in sorted(cells.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
        parts, gains = [], []
        for r in sorted(runs, key=lambda r: int(r["seed"])):
            base = scored.get(f"{task}_baseline_{pct}_s{r['seed']}")
            if base is None:
                parts.append(f"s{r['seed']}: – / {r['test']['score']:.2f} / –")
                continue
            gains.append(round(r["test"]["score"] - base["test"]["score"], 2))
            parts.append(f"s{r['seed']}: {base['test']['score']:.2f} / {r['test']['score']:.2f} / {gains[-1]:+.2f}")
        spread = ""
        if len(gains) > 1:
            mean = statistics.fmean(gains)
            spread = "; paired gain " + _gain_pm({"mean": mean, "std": statistics.stdev(gains), "n": len(gains)})
            goal = GOALS.get((task, pct))
            if goal is not None and len(gains) >= GOAL_SEEDS:
                spread += f", goal ≥ {goal:+.2f}: " + ("met" if mean >= goal else "**not met**")
        label = TASK_SCORE.get(task, ("", task))[1]
        out.append(f"- {task} {pct}% ({label}): " + ", ".join(parts) + spread)
    return out + [""]


def _ner_lines(metrics: dict) -> list[str]:
    """The one-seed NER table, the best dev F1 each `model-best` was chosen by, and `spacy evaluate`'s speeds."""
    ner = {system: {int(p): s for p, s in per.items()} for system, per in metrics.get("ner", {}).items()}
    if not ner:
        return []
    out = [
        "#### NER, one seed (CoNLL-2003 test, entity-level F1 of `model-best` from `spacy evaluate`)",
        "",
        markdown_table(ner).rstrip("\n"),
        "",
    ]
    curves = metrics.get("dev_f1_by_step", {})
    best = [f"{run} {max(f for _, f in points):.2f}" for run, points in sorted(curves.items()) if points]
    if best:
        out += ["Best dev F1 (the score `model-best` was chosen by): " + ", ".join(best) + ".", ""]
    speeds = [
        f"{system} {pct}%: {s['speed_wps']:,}"
        for system in sorted(ner)
        for pct, s in sorted(ner[system].items())
        if "speed_wps" in s
    ]
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
    text += (
        f"; {bilm['step']:,} steps, {bilm['words']:,} words in {bilm['train_seconds'] / 60:.1f} min of training, "
        f"{bilm['words_per_s']:,.0f} words/s ({bilm.get('world_size', 1)} process(es), {bilm.get('device', '?')}), "
        f"{bilm.get('parameters', 0):,} parameters, {bilm.get('softmax', '?')} softmax over "
        f"{bilm.get('vocab_size', 0):,} words."
    )
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
    return [
        f"Learned layer weights softmax(s) for layers {'/'.join(map(str, range(n)))}: {', '.join(parts)}; "
        f"equal weights would be {1 / n:.2f} each (largest departure {moved:.2f}). "
        f"The largest weight is on {', '.join(top)}.",
        "",
    ]


def _step_time_lines(provenance: dict | None) -> list[str]:
    """Minutes per recorded step, in start order; says so when the run recorded none."""
    steps = (provenance or {}).get("steps", {})
    timed = [(label, _minutes(r)) for label, r in sorted(steps.items(), key=lambda kv: kv[1].get("started_utc", ""))]
    timed = [(label, m) for label, m in timed if m is not None]
    if not timed:
        return ["Step timings: not recorded by this run (see its hand-written log in `bench/RESULTS.md`).", ""]
    return (
        [
            "Time per recorded step (from each step's provenance, UTC start to end; runs in one step may overlap):",
            "",
            "| step | minutes |",
            "|---|---:|",
        ]
        + [f"| {label} | {m:.1f} |" for label, m in timed]
        + [""]
    )


def last_run_section(metrics: dict, results: Path, page: Path) -> list[str]:
    """The last one-seed `all` run: NER table, the biLM, learned layer weights, figures and step times."""
    out = ["### The last `all` run (one seed, `make main`)", ""]
    if not metrics:
        return out + ["No results recorded yet (`spacy project run all`).", ""]
    out += provenance_lines("The last `all` run", metrics.get("provenance"))
    if not metrics.get("provenance"):
        out += [
            f'Recorded by the report itself: written {metrics.get("date", "?")} on "{metrics.get("machine", "?")}".',
            "",
        ]
    out += (
        _ner_lines(metrics)
        + _bilm_lines(metrics.get("pretrain_summary"))
        + _layer_weight_lines(metrics.get("layer_weights", {}))
    )
    figures = [
        (name, alt)
        for name, alt in (
            ("f1_by_fraction.png", "F1 by training fraction"),
            ("layer_weights.png", "learned layer weights"),
            ("dev_curves.png", "dev F1 during training"),
        )
        if (results / name).is_file()
    ]
    if figures:
        out += [" ".join(f"![{alt}]({_link(results, page, name)})" for name, alt in figures), ""]
    return (
        out
        + _step_time_lines(metrics.get("provenance"))
        + all_time_lines(metrics.get("provenance"))
        + make_main_time_lines(metrics)
    )


def probe_section(results: Path, page: Path) -> list[str]:
    """Dev accuracy of a linear probe on each frozen biLM layer and on a learned mix, per task."""
    out = ["#### Layer probes (paper §5.3)", ""]
    probe = _read_json(results / "probe.json")
    if not probe.get("tasks"):
        return out + ["No probe results recorded yet (`spacy project run probe`).", ""]
    out += provenance_lines("The probes", probe.get("provenance"))
    tasks = sorted(probe["tasks"])
    first = probe["tasks"][tasks[0]]
    out += [
        f"A linear classifier on each frozen layer of `{probe['model']}` and on a learned mix of all layers, "
        f"fitted on `{probe['train']}`, scored on `{probe['dev']}` (dev accuracy %). pos: every token's PTB tag; "
        "ner-type: the entity type (PER/LOC/ORG/MISC) of each token inside a gold entity mention.",
        "",
    ]
    row = lambda name, cell: f"| {name} | " + " | ".join(cell(probe["tasks"][t]) for t in tasks) + " |"  # noqa: E731
    out += ["| layer | " + " | ".join(tasks) + " |", "|---|" + "---:|" * len(tasks)]
    out += [row(j, lambda t, j=j: f"{t['layers'][j]['accuracy']:.2f}") for j in range(len(first["layers"]))]
    out += [
        row("learned mix", lambda t: f"{t['mix']['accuracy']:.2f}"),
        row("majority class", lambda t: f"{t['majority_accuracy']:.2f}"),
        row("train / dev tokens", lambda t: f"{t['train_tokens']:,} / {t['dev_tokens']:,}"),
        "",
    ]
    if (results / "probe.png").is_file():
        out += [f"![probe accuracy by layer]({_link(results, page, 'probe.png')})", ""]
    return out


def variants_section(
    results: Path,
    page: Path,
    name: str = "variants",
    title: str = "Language-model perplexity vs ELMo gain (dev)",
    empty: str = "`spacy project run variants` writes `results/variants.json`: each biLM variant's held-out "
    "perplexity and the ELMo gain it gives on dev",
) -> list[str]:
    """Each variant's held-out perplexity against its paired dev gain (dev only: no test scores),
    from `results/{name}.json` and its figure `results/{name}.png` (variants: ppl_vs_gain.png)."""
    out = [f"#### {title}", ""]
    variants = _read_json(results / f"{name}.json")
    if not variants.get("variants"):
        return out + [f"No variants recorded yet ({empty}).", ""]
    out += provenance_lines("The variants", variants.get("provenance"))
    label = variants.get("score_label", variants.get("score"))
    out += [
        f"{variants['task']} at {variants['fraction']}% of train. Gain = dev {label} of ELMo's `model-best` − the "
        f"baseline's ({_pm(variants['baseline'])}) for the same seed; dev only, so variants never touch the test set.",
        "",
        f"| variant | pretraining min | held-out perplexity | ELMo dev {label} | paired dev gain |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [
        f"| {v['name']} | {v['pretrain_minutes']:.1f} | {v['heldout_ppl']:.1f} | {_pm(v['elmo'])} | "
        f"{_gain_pm(v['gain'])} |"
        for v in variants["variants"]
    ]
    top = max(v["gain"]["mean"] for v in variants["variants"])
    best = [v for v in variants["variants"] if v["gain"]["mean"] == top]  # every one at the top, in table order
    named = " and ".join(f"{v['name']} ({_gain_pm(v['gain'])})" for v in best)
    lowest = min(variants["variants"], key=lambda v: v["heldout_ppl"])
    out += [
        "",
        f"Largest mean dev gain: {'tied: ' if len(best) > 1 else ''}{named}; lowest held-out perplexity: "
        f"{lowest['name']} ({lowest['heldout_ppl']:.1f}). No variant is scored on test.",
        "",
    ]
    lead = variants.get("leader_vs_runner_up")
    if lead:
        out += [
            f"{lead['leader']} against the next largest gain, {lead['runner_up']}, paired by seed (dev {label}, the "
            f"seeds both were trained at): {_gain_pm(lead)}, ahead on {lead['ahead_on']} of {lead['n']} seeds.",
            "",
        ]
    for same in variants.get("same_bilm_as_first") or []:
        out += [
            f"{same['variant']} against {same['reference']}, the same biLM, paired by seed (dev {label}, the seeds "
            "both "
            f"were trained at): {_gain_pm(same)}, ahead on {same['ahead_on']} of {same['n']} seeds.",
            "",
        ]
    figure = "ppl_vs_gain.png" if name == "variants" else f"{name}.png"
    if (results / figure).is_file():
        out += [f"![perplexity vs gain]({_link(results, page, figure)})", ""]
    return out


def recipes_section(results: Path, page: Path) -> list[str]:
    """The recipe search of issue 21 (`spacy project run recipes`), rendered like the variants."""
    return variants_section(
        results,
        page,
        "recipes",
        "Recipe search: what the pretraining hour and the NER model buy (dev)",
        "`spacy project run recipes-report` writes `results/recipes.json`: each recipe's biLM perplexity and dev gain",
    )


# Task-side recipe searches with the adopted biLM held fixed: (results/NAME.json, title, what writes it)
TASK_SIDE_RECIPES = (
    (
        "ner_recipes",
        "Recipe search with the adopted biLM: the NER model's side (dev)",
        "`spacy project run recipes-report` in a checkout whose biLM is the adopted one writes `recipes.json`, "
        "published "
        "as `results/ner_recipes.json`: each NER-side variant's paired dev gain",
    ),
    (
        "pos_recipes",
        "Recipe search: the POS tagger (dev)",
        "`spacy project run pos-recipes-report` writes `results/pos_recipes.json`: each tagger-side variant's paired "
        "dev gain",
    ),
    (
        "pos_finetune",
        "Recipe search: the POS tagger with the top biLM layer fine-tuned (dev)",
        "`spacy project run pos-recipes-report . --vars.pos_recipes_name pos_finetune` writes "
        "`results/pos_finetune.json`",
    ),
)


def task_side_recipe_sections(results: Path, page: Path) -> list[str]:
    """The task-side variants (`ner-variant-train`, `pos-variant-train`) on the adopted biLM, rendered like the
    variants."""
    return [
        line for name, title, empty in TASK_SIDE_RECIPES for line in variants_section(results, page, name, title, empty)
    ]


def bilm_comparison_section(results: Path, name: str) -> list[str]:
    """A `scripts/compare_bilms.py` record (e.g. zh_lexicon.json): held-out perplexities side by side."""
    compared = _read_json(results / f"{name}.json")
    if not compared.get("bilms"):
        return []
    out = [f"#### {compared['title']}", ""] + provenance_lines("The biLMs", compared.get("provenance"))
    out += [
        "Held-out perplexity on the same held-out text with the same vocabulary (one seed each; dev text, not test).",
        "",
        "| biLM | characters | parameters | steps | training min | held-out perplexity |",
        "|---|---|---:|---:|---:|---:|",
    ]
    out += [
        f"| {b['name']} | {b['characters']} | {b['parameters']:,} | {b['steps']:,} | {b['train_minutes']:.1f} | "
        f"{b['heldout_ppl']:.1f} |"
        for b in compared["bilms"]
    ]
    return out + [""]


def similar_sections(results: Path, page: Path) -> list[str]:
    """The nearest-word tables exactly as similar_report.py wrote them, and the link to the dev experiments."""
    out = []
    for name, title in (
        ("similar.md", "Nearest words (as written by `scripts/similar_report.py`)"),
        ("similar_zh.md", "Nearest words, Chinese biLM (`spacy project run zh`)"),
    ):
        if (results / name).is_file():
            prov = _read_json(results / f"{Path(name).stem}.provenance.json") or None
            out += [f"#### {title}", ""] + provenance_lines(f"`{name}`", prov)
            out += [(results / name).read_text(encoding="utf8").rstrip("\n"), ""]
    out += bilm_comparison_section(results, "zh_recipe") + bilm_comparison_section(results, "zh_lexicon")
    if (results / "experiments.md").is_file():
        link = _link(results, page, "experiments.md")
        out += [f"Dev-set experiments behind the settings, with what provenance they have: [{link}]({link}).", ""]
    return out


GENERATED = (
    "<!-- Generated by `python scripts/report.py readme` from results/; edits here are overwritten, "
    "and tests/project/test_report.py fails if this differs from what it would write. -->"
)


def render_section(results: Path, page: Path) -> str:
    """The results page's report (what goes between its results markers), from the files in `results` only
    (deterministic: no clock, no machine); links are relative to `page`."""
    out = [GENERATED, ""]
    metrics = _read_json(results / "metrics.json")
    out += headline_section(_read_json(results / "seeds.json"), metrics)
    out += redo_lines(results)
    out += test_looks_lines(results, page)
    out += last_run_section(metrics, results, page)
    out += probe_section(results, page) + variants_section(results, page) + recipes_section(results, page)
    out += task_side_recipe_sections(results, page)
    out += similar_sections(results, page)
    return "\n" + "\n".join(out) + "\n"


def render_summary(results: Path, readme: Path, page: Path) -> str:
    """The README's few lines on the experiment (what goes between its results-summary markers): each cell's
    mean over seeds and paired gain on test, the goals, and a link to the full report on `page`."""
    link = Path(os.path.relpath(page, readme.parent)).as_posix()
    out = [GENERATED.replace("from results/;", f"from results/ (the full report: {link});"), ""]
    summary = _read_json(results / "seeds.json").get("summary")
    if not summary:
        out += ["No multi-seed run recorded yet (`spacy project run seeds`).", ""]
    else:
        out += [
            f"The project's experiment, {seed_counts(summary)} on the CoNLL-2003 test set (mean ± standard deviation "
            "over seeds; the gain paired by seed):",
            "",
            "| task | train | baseline | + ELMo | paired gain |",
            "|---|---|---:|---:|---:|",
        ]
        for task in sorted(summary):
            label = TASK_SCORE.get(task, ("", task))[1]
            for pct, cell in sorted(summary[task].items(), key=lambda kv: int(kv[0])):
                base, elmo, gain = cell.get("baseline"), cell.get("elmo"), cell.get("gain")
                out.append(
                    f"| {task} ({label}) | {pct}% | {_pm(base) if base else '–'} | {_pm(elmo) if elmo else '–'} | "
                    f"{_gain_pm(gain) if gain else '–'} |"
                )
        out += [""] + cell_settings_lines(_read_json(results / "seeds.json").get("provenance")) + goal_lines(summary)
        if redo_lines(results):
            out += [
                "These are the published seeds run's figures; its ELMo runs are being redone with the committed "
                'project biLM, and the cells redone so far are on the results page ("Being redone").',
                "",
            ]
    out += [
        f"How these were measured (the protocol, and which choices saw a test score), the per-seed values, the last "
        f"`all` run, the layer probes, the recipe searches, the ledger of test-set looks and the Chinese biLM: "
        f"[{link}]({link}).",
        "",
    ]
    return "\n" + "\n".join(out) + "\n"


def splice(text: str, section: str, where: str = "the results page") -> str:
    """`text` with its results region replaced by `section` (render_section's output)."""
    return doc_regions.splice(text, RESULTS, section, where=where)


def pages(results: Path, page: Path | None = None, readme: Path | None = None) -> dict[Path, tuple[str, str]]:
    """The one writer of the experiment's report: {path: (current text, text to write)} for the results page
    (`page`, by default the results folder's README.md: its report) and, when given, the top-level `readme` (its
    summary lines), every figure read from the files in `results`."""
    page = page or results / "README.md"
    current = page.read_text(encoding="utf8") if page.is_file() else PAGE_SKELETON
    out = {page: (current, splice(current, render_section(results, page), where=str(page)))}
    if readme is not None:
        current = readme.read_text(encoding="utf8") if readme.is_file() else f"{SUMMARY_START}\n{SUMMARY_END}\n"
        new = doc_regions.splice(current, SUMMARY, render_summary(results, readme, page), where=str(readme))
        out[readme] = (current, new)
    return out
