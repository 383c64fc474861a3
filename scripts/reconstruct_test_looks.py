"""Rebuilds the test looks published before the ledger existed, from git history, into results/test_looks.json.

    python scripts/reconstruct_test_looks.py [--out results/test_looks.json] [--repo .]

It walks every commit up to the one that started the ledger (LEDGER_STARTED: later looks were recorded when
they were scored) that changed `results/metrics.json` (the `all` workflow's one-seed NER scores) or
`results/seeds.json` (the seeds run's per-seed scores), oldest first, reads both files as they were at that
commit, and writes one entry per scoring it had not seen at an earlier commit. A scoring is identified by
its `spacy evaluate` provenance record (run and start time) where the file has one; before provenance was
recorded, by the run and its score (a score unchanged from the previous commit is the same look). Each
entry names the commit it was published at (`published_at`), the commit and UTC time it was scored at
where the record gives them, the recipe (scripts/looks_ledger.py `recipe`: config, settings, data and biLM
sha256, from the training run's provenance) where recorded, and a reason. It also adds the candidates of
the NER schedule and ELMo-placement search, scored on test during a dev selection before the dev-only
protocol (their table, published in bench/RESULTS.md at 30a7566, now in results/experiments.md).

The entries it writes replace the reconstructed ones of an existing ledger; entries appended by
scripts/evaluate_runs.py are kept after them, renumbered. Rerunning it on the same history writes the same file.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import looks_ledger  # scripts/, beside this one

FILES = ("results/metrics.json", "results/seeds.json")
# the commit that started the ledger: looks published after it were recorded by evaluate_runs.py when they
# were scored, so the walk stops there (a later rerun must not add them a second time)
LEDGER_STARTED = "71b437e"
CANDIDATES = ("30a7566", "bench/RESULTS.md")
# What happened around a look, from the commit messages and results/experiments.md (words, no figures: the
# figures are the entries' scores). Keyed by (commit published at, task, fraction, system).
EVENTS = {
    ("497f05a", "ner", "10", "elmo"): (
        "the frozen biLM (the adopted lr 0.004 biLM): the cell's paired gain over the baseline "
        "missed the +6 goal, and the dev search that led to fine-tuning the top biLM layer (results/ner_recipes.json: "
        "its runs' provenance records start after this look was published) followed"
    ),
    ("604d628", "ner", "10", "elmo"): (
        "search started because a test score missed: the frozen-biLM cell published at 497f05a missed the +6 goal; "
        "fine-tuning the top biLM layer was then chosen on dev only (results/ner_recipes.json) and adopted at dd28a56, "
        "and this cell was retrained and scored once with it"
    ),
    ("497f05a", "pos", "10", "elmo"): (
        "the frozen biLM: the cell's paired gain missed the +1 goal, and the dev search for the "
        "tagger (results/pos_recipes.json, results/pos_finetune.json) followed; the adopted fine-tuning recipe has "
        "not been scored on test"
    ),
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def show(repo: Path, commit: str, path: str) -> str | None:
    done = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=repo, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def commits(repo: Path) -> list[tuple[str, str]]:
    """(full hash, ISO date) of every commit up to LEDGER_STARTED that changed one of FILES, oldest first."""
    lines = git(repo, "log", "--reverse", "--format=%H %cI", LEDGER_STARTED, "--", *FILES).split("\n")
    return [tuple(line.split(" ", 1)) for line in lines if line.strip()]


def _percent(value: float) -> float:
    return round(value * 100 if value <= 1.0 else value, 2)


def _project_seed(repo: Path, commit: str) -> int | None:
    """The `all` workflow's seed in project.yml at `commit` (vars.seed), for runs whose record does not give it."""
    text = show(repo, commit, "project.yml") or ""
    match = re.search(r"^  seed: (\d+)\s*$", text, re.M)
    return int(match.group(1)) if match else None


def scores_at(repo: Path, commit: str) -> list[dict]:
    """Every test score the two results files hold at `commit`, with the records beside it."""
    found = []
    text = show(repo, commit, "results/metrics.json")
    if text:
        data = json.loads(text)
        steps = (data.get("provenance") or {}).get("steps") or {}
        for system, by_pct in (data.get("ner") or {}).items():
            for pct, scores in by_pct.items():
                if "ents_f" not in scores:
                    continue
                run = f"{system}_{pct}"
                train = steps.get(f"training/{run}")
                seed = (train or {}).get("seed")
                found.append(
                    {
                        "workflow": "all",
                        "run": f"metrics/{run}",
                        "task": "ner",
                        "fraction": str(pct),
                        "system": system,
                        "seed": seed if seed is not None else _project_seed(repo, commit),
                        "score": scores["ents_f"],
                        "evaluate": steps.get(f"metrics/{run}"),
                        "train": train,
                        "file": "results/metrics.json",
                    }
                )
    text = show(repo, commit, "results/seeds.json")
    if text:
        data = json.loads(text)
        steps = (data.get("provenance") or {}).get("steps") or {}
        for task, by_pct in (data.get("summary") or {}).items():
            for pct, by_system in by_pct.items():
                for system, cell in by_system.items():
                    if system == "gain":
                        continue
                    for seed, score in cell.get("per_seed", {}).items():
                        run = f"{task}_{system}_{pct}_s{seed}"
                        found.append(
                            {
                                "workflow": "seeds",
                                "run": f"metrics_seeds/{run}",
                                "task": task,
                                "fraction": str(pct),
                                "system": system,
                                "seed": int(seed),
                                "score": score,
                                "evaluate": steps.get(f"metrics_seeds/{run}"),
                                "train": steps.get(f"training_seeds/{run}"),
                                "file": "results/seeds.json",
                            }
                        )
    return found


def candidate_looks(repo: Path) -> list[dict]:
    """The NER schedule / ELMo-placement candidates scored on test in the dev search of 2026-11-26 (bench/RESULTS.md
    at 30a7566), except the two rows that are the earlier project run (its scores are in results/metrics.json)."""
    commit, path = CANDIDATES
    text = show(repo, commit, path) or ""
    header = "| NER model | schedule | 10%: best dev F1 | 10%: test F1 | 100%: best dev F1 | 100%: test F1 |"
    if header not in text:
        return []
    full = git(repo, "rev-parse", commit).strip()
    date = git(repo, "show", "-s", "--format=%cI", full).strip()
    looks = []
    for line in text.split(header, 1)[1].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip().strip("*") for cell in line.strip("|").split("|")]
        model, schedule = cells[0], cells[1]
        if "earlier project run" in schedule:
            continue
        for pct, value in (("10", cells[3]), ("100", cells[5])):
            if not value:
                continue
            looks.append(
                {
                    "workflow": "dev search",
                    "run": f"{model}, {schedule}",
                    "task": "ner",
                    "fraction": pct,
                    "system": "baseline" if model.startswith("baseline") else "elmo",
                    "candidate": f"{model}, {schedule}",
                    "seed": 0,
                    "score": float(value),
                    "evaluate": None,
                    "train": None,
                    "file": f"{path} (now results/experiments.md)",
                    "published_at": full,
                    "published_utc": date,
                }
            )
    return looks


def _utc(iso: str) -> str:
    """A git ISO date as the ledger's UTC form (2026-11-27T19:08:15Z)."""
    import datetime

    return datetime.datetime.fromisoformat(iso).astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def reconstruct(repo: Path) -> list[dict]:
    """The looks published in the history of FILES (and the search candidates), in the order they were published."""
    seen: dict[tuple, dict] = {}
    looks: list[dict] = []
    history = [(full, date, scores_at(repo, full)) for full, date in commits(repo)]
    candidates = candidate_looks(repo)
    for full, date, scores in history:
        if candidates and candidates[0]["published_at"] == full:
            scores, candidates = candidates + scores, []
        for score in scores:
            prov = score["evaluate"] or {}
            identity = (
                ("evaluated", score["run"], prov["started_utc"])
                if prov.get("started_utc")
                else (score["workflow"], score["run"], score.get("candidate"), score["score"])
            )
            if identity in seen:
                continue
            git_record = prov.get("git") or {}
            look = {
                "task": score["task"],
                "fraction": score["fraction"],
                "system": score["system"],
                "seed": score["seed"],
                "workflow": score["workflow"],
                "run": score["run"],
                "recipe": looks_ledger.recipe(score["train"]),
                "score_name": looks_ledger.TASK_SCORE[score["task"]],
                "score": score["score"],
                "model_sha256": None,
                "commit": git_record.get("commit"),
                "dirty": git_record.get("dirty"),
                "dirty_paths": looks_ledger.dirty_paths(git_record),
                "utc": prov.get("ended_utc"),
                "published_at": score.get("published_at", full),
                "published_utc": _utc(score.get("published_utc", date)),
                "source": f"reconstructed from git history: {score['file']} at {score.get('published_at', full)[:7]} "
                "(scripts/reconstruct_test_looks.py)",
            }
            if score.get("candidate"):
                look["candidate"] = score["candidate"]
            look["reason"] = _reason(look, looks)
            seen[identity] = look
            looks.append(look)
    return looks


def _reason(look: dict, earlier: list[dict]) -> str:
    event = EVENTS.get((look["published_at"][:7], look["task"], look["fraction"], look["system"]))
    if event and event.startswith("search started"):
        return event
    reason = _plain_reason(look, earlier)
    return f"{reason}; {event}" if event else reason


def _plain_reason(look: dict, earlier: list[dict]) -> str:
    if look.get("candidate"):
        return (
            "a candidate of the NER schedule / ELMo placement search, scored on test beside its dev score before the "
            "dev-only protocol (results/experiments.md)"
        )
    if not looks_ledger.recipe_known(look):
        if look["recipe"].get("settings") is None:
            return (
                "a published run from before training provenance was recorded: its recipe is not known from the files"
            )
        return (
            "its training record holds no input hashes (recorded before they were): the data and biLM it used are "
            "not known from the files, so it is matched with no other look"
        )
    same = looks_ledger.same_recipe_looks({"looks": earlier}, look)
    if same:
        again = "the same score" if any(entry["score"] == look["score"] for entry in same) else "another score"
        where = same[-1]["workflow"]
        return (
            f"the same recipe as an earlier look (the `{where}` workflow's run, published at "
            f"{same[-1]['published_at'][:7]}), "
            f"trained and scored again by the `{look['workflow']}` workflow: {again}"
        )
    return "first look at this recipe"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path("."))
    parser.add_argument("--out", type=Path, default=Path("results") / looks_ledger.LEDGER)
    args = parser.parse_args(argv)
    rebuilt = reconstruct(args.repo)
    live = [
        entry
        for entry in looks_ledger.load(args.out)["looks"]
        if not str(entry.get("source", "")).startswith("reconstructed")
    ]
    ledger = {"about": looks_ledger.ABOUT, "looks": []}
    for index, entry in enumerate(rebuilt + live, start=1):
        ledger["looks"].append({"look": index, **{k: v for k, v in entry.items() if k != "look"}})
    looks_ledger.save(args.out, ledger)
    print(
        f"wrote {args.out}: {len(rebuilt)} looks reconstructed from git history, {len(live)} recorded by "
        "evaluate_runs.py kept"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
