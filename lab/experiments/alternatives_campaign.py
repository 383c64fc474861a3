"""The campaign of results/alternatives.md: four arms x five training sizes x three seeds of NER on FiNER-ORD, each
trained, then scored once on test, resumably, two trainings at a time.

    python -m lab.experiments.alternatives_campaign run [--stop-file FILE]     # train and score what is left
    python -m lab.experiments.alternatives_campaign status                                  # one line per cell
    python -m lab.experiments.alternatives_campaign publish --results results  # records + looks into results/

Arms (results/alternatives.md, "Arms"): `none` (configs/ner_baseline.cfg), `static` (configs/ner_static.cfg with the
committed floret vectors, `--paths.vectors`), `elmo` (configs/ner_elmo.cfg with the committed project biLM) and
`elmo_static` (configs/ner_elmo_static.cfg with both). An ELMo arm fine-tunes the biLM's top layer, as the adopted
10% recipe does, at the sizes below the geometric mean of the two adopted points (sqrt(10 x 100) = 31.6%: 5, 10
and 25%), and keeps it frozen, as the 100% recipe does, above it (50, 100%). Every training is train_ner.py's
`spacy train` command with the adopted recipe (4,000 steps, dev every 400, patience 2,000) on one thread.

The cells run seed by seed (every arm and size of seed 0, then seed 1, ...), so that what is done is whole seeds.
Before each training the stop file is checked: if it exists, no new training starts, the ones running finish and
are scored, and the command exits 0 (remove the file and run it again to go on). Nothing waits on the wall clock,
so the process group may be stopped (SIGSTOP) and continued (SIGCONT) at any time.

Everything goes under `--out` (work/alternatives/campaign, which git ignores, so the tree stays clean while the
records are written): `training/{run}/` and `{run}.log` (train_ner.py), `records/{run}.json` (its record, plus
the arm, size, seed, whether the biLM was fine-tuned, the vectors' sha256 and the test score), `metrics/{run}.json`
(`spacy evaluate` on test, by lab/experiments/evaluate_runs.py, one look per run, in the ledger `looks.json`), and
`progress.json` (every cell's state, written after each event). A finished training with the same command, inputs
and threads is not trained again, and a scored one is not scored again, so running the same command resumes; a
training cut off (no provenance.json) is trained again from the start. A cell whose committed record
(`--published`, results/runs/alternatives/) has the same command, inputs and threads and a test score is done.
`publish` copies the records into results/runs/alternatives/ and the ledger to results/alternatives_looks.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from lab.experiments import train_ner

ARMS = {
    "none": {"config": "configs/ner_baseline.cfg", "elmo": False, "vectors": False},
    "static": {"config": "configs/ner_static.cfg", "elmo": False, "vectors": True},
    "elmo": {"config": "configs/ner_elmo.cfg", "elmo": True, "vectors": False},
    "elmo_static": {"config": "configs/ner_elmo_static.cfg", "elmo": True, "vectors": True},
}
FRACTIONS = ["5", "10", "25", "50", "100"]
SEEDS = [0, 1, 2]
# the adopted recipe's fine-tuning settings (project.yml's seeds_ner_elmo_10_settings)
FINE_TUNE = ["--training.frozen_components", "[]", "--training.annotating_components", "[]"]
FINE_TUNE += ["--components.elmo.fine_tune_layers", "1"]
# below it an ELMo arm fine-tunes the top biLM layer (the adopted 10% recipe), at or above it the biLM is frozen
# (the adopted 100% recipe): the geometric mean of the two training fractions the recipes were adopted at
FINE_TUNE_BELOW_PCT = math.sqrt(10 * 100)
RECIPE = {"max_steps": 4000, "eval_frequency": 400, "patience": 2000}
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def fine_tuned(arm: str, pct: str) -> bool:
    return ARMS[arm]["elmo"] and float(pct) < FINE_TUNE_BELOW_PCT


def cells(args: argparse.Namespace) -> list[dict]:
    """Every cell, seed by seed, then size by size, then arm by arm, with its `spacy train` command."""
    found = []
    for seed in args.seeds:
        for pct in args.fractions:
            for arm in args.arms:
                name = f"ner_{arm}_{pct}_s{seed}"
                command = [sys.executable, "-m", "spacy", "train", ARMS[arm]["config"]]
                options = {
                    "--output": args.out / "training" / name,
                    "--paths.train": args.corpus / f"train_{pct}.spacy",
                    "--paths.dev": args.corpus / "dev.spacy",
                    "--training.max_steps": args.max_steps,
                    "--training.eval_frequency": args.eval_frequency,
                    "--training.patience": RECIPE["patience"],
                    "--system.seed": seed,
                    "--gpu-id": -1,
                }
                command += [str(part) for option in options.items() for part in option]
                if ARMS[arm]["elmo"]:
                    command += ["--paths.elmo", str(args.bilm)]
                if ARMS[arm]["vectors"]:
                    command += ["--paths.vectors", str(args.vectors)]
                if fine_tuned(arm, pct):
                    command += FINE_TUNE
                found.append(
                    {
                        "run": name,
                        "arm": arm,
                        "pct": pct,
                        "seed": seed,
                        "fine_tuned": fine_tuned(arm, pct),
                        "command": command,
                    }
                )
    return found


class Progress:
    """progress.json: the campaign's commit and process, and every cell's state; rewritten whole after each event."""

    def __init__(self, path: Path, cell_list: list[dict], header: dict):
        self.path, self.lock = path, threading.Lock()
        self.header = header
        self.cells = {c["run"]: {k: c[k] for k in ("run", "arm", "pct", "seed", "fine_tuned")} for c in cell_list}
        for entry in self.cells.values():
            entry["state"] = "pending"

    def set(self, run: str, **fields) -> None:
        from spacy_elmo.provenance import utc_now

        with self.lock:
            self.cells[run].update(fields, updated_utc=utc_now())
            self.write()

    def write(self) -> None:
        from spacy_elmo.files import write_text_atomic
        from spacy_elmo.provenance import utc_now

        states = [c["state"] for c in self.cells.values()]
        counts = {state: states.count(state) for state in sorted(set(states))}
        body = {**self.header, "updated_utc": utc_now(), "counts": counts, "cells": list(self.cells.values())}
        write_text_atomic(self.path, json.dumps(body, indent=1) + "\n")


def vectors_sha256(folder: Path) -> str | None:
    from spacy_elmo.provenance import sha256

    table = folder / "vocab" / "vectors"
    return sha256(table) if table.is_file() else None


def annotate_record(path: Path, cell: dict, vectors: str | None) -> dict | None:
    """Adds the arm, size, seed, fine-tuning and the vectors' sha256 to a run's record (train_ner wrote the rest)."""
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf8"))
    record.update(
        arm=cell["arm"],
        train_pct=int(cell["pct"]),
        fine_tuned=cell["fine_tuned"],
        vectors_sha256=vectors if ARMS[cell["arm"]]["vectors"] else None,
    )
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    return record


def score(cell: dict, args: argparse.Namespace, lock: threading.Lock) -> float | None:
    """Scores the cell's model-best on test once (evaluate_runs.py, the ledger refusing a second look)."""
    command = [
        sys.executable,
        "-m",
        "lab.experiments.evaluate_runs",
        str(args.out / "training"),
        str(args.corpus / "test.spacy"),
    ]
    command += [str(args.out / "metrics"), "--prefix", cell["run"], "--ledger", str(args.out / "looks.json")]
    command += ["--records", str(args.out / "records")]
    with lock:  # one scoring at a time: the ledger is read, checked and appended by one process
        done = subprocess.run(command, env={**os.environ, **THREADS}, capture_output=True, text=True, check=False)
    print(done.stdout.rstrip(), flush=True)
    if done.returncode:
        print(f"[{cell['run']}] scoring: exit {done.returncode}\n{done.stderr[-2000:]}", flush=True)
    return test_score(args.out / "records" / f"{cell['run']}.json")


def test_score(record: Path) -> float | None:
    try:
        return json.loads(record.read_text(encoding="utf8"))["test"]["score"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def unrecorded_score(cell: dict, args: argparse.Namespace) -> Path | None:
    """A score file of the cell's model that no look of the ledger holds (the campaign was killed between
    `spacy evaluate` and the ledger's entry): moved aside, so that the model is scored and recorded again."""
    metrics = args.out / "metrics" / f"{cell['run']}.json"
    ledger = args.out / "looks.json"
    looks = json.loads(ledger.read_text(encoding="utf8")).get("looks", []) if ledger.is_file() else []
    if not metrics.is_file() or any(look.get("run") == f"training/{cell['run']}" for look in looks):
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(metrics.stat().st_mtime))
    return train_ner.move_aside(cell["run"], stamp, metrics, metrics.with_name(f"{cell['run']}.provenance.json"))


def published_done(cell: dict, args: argparse.Namespace, env: dict) -> bool:
    """Whether a committed record stands for this cell (same command, inputs, threads, scored on test)."""
    from spacy_elmo.provenance import input_hashes, threads

    if not args.published or not (args.published / f"{cell['run']}.json").is_file():
        return False
    inputs = input_hashes(cell["command"], exclude=[args.out / "training" / cell["run"]])
    return train_ner.reusable_record(args.published, cell["run"], cell["command"], inputs, threads(env)) is not None


def work(cell: dict, args: argparse.Namespace, progress: Progress, locks: dict, env: dict, vectors: str | None) -> str:
    """One cell: trained (or found finished), then scored; returns its final state."""
    run = cell["run"]
    if published_done(cell, args, env):
        progress.set(run, state="done (committed record)")
        return "done"
    if args.stop_file and Path(args.stop_file).exists():
        progress.set(run, state="pending")
        return "stopped"
    progress.set(run, state="training")
    ok = train_ner.run_one(run, cell["command"], cell["seed"], args.out / "training", env, args.out / "records")
    if not ok:
        progress.set(run, state="failed (training)", log=str(args.out / "training" / f"{run}.log"))
        return "failed"
    with locks["records"]:
        record = annotate_record(args.out / "records" / f"{run}.json", cell, vectors)
    fields = {}
    if record:
        fields = {"minutes": record.get("minutes"), "dev_ents_f": (record.get("best_dev") or {}).get("ents_f")}
        git = (record.get("provenance") or {}).get("git") or {}
        if git.get("commit") != args.commit or git.get("dirty"):
            print(
                f"[{run}] WARNING: trained at {git.get('commit')} (dirty: {git.get('dirty')}), the campaign started "
                f"at {args.commit} with a clean tree",
                flush=True,
            )
    progress.set(run, state="scoring", **fields)
    if test_score(args.out / "records" / f"{run}.json") is None:
        with locks["ledger"]:
            moved = unrecorded_score(cell, args)
        if moved is not None:
            print(f"[{run}] a score with no look in the ledger (cut off before its entry) moved to {moved}", flush=True)
    test = score(cell, args, locks["ledger"])
    with locks["records"]:
        annotate_record(args.out / "records" / f"{run}.json", cell, vectors)
    progress.set(run, state="done" if test is not None else "failed (scoring)", test_ents_f=test)
    return "done" if test is not None else "failed"


def run_campaign(args: argparse.Namespace) -> int:
    from spacy_elmo.provenance import git_state, machine, utc_now

    git = git_state()
    args.commit = git["commit"]
    if git["dirty"]:
        print(f"WARNING: the tree is dirty ({', '.join(git['dirty_paths'][:5])}): records will say so", flush=True)
    for path in [args.corpus / f"train_{pct}.spacy" for pct in args.fractions] + [
        args.corpus / "dev.spacy",
        args.corpus / "test.spacy",
        args.bilm / "model.safetensors",
        args.vectors / "vocab" / "vectors",
    ]:
        if not path.is_file():
            raise SystemExit(f"{path} missing (results/alternatives.md, 'Compute plan', says how to make it)")
    cell_list = cells(args)
    env = {**os.environ, **THREADS}
    header = {
        "about": "results/alternatives.md's campaign (lab/experiments/alternatives_campaign.py): every cell's state",
        "commit": args.commit,
        "dirty": git["dirty"],
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "started_utc": utc_now(),
        "machine": machine(env),
        "stop_file": str(args.stop_file) if args.stop_file else None,
        "jobs": args.jobs,
        "log": str(args.log) if args.log else None,
    }
    progress = Progress(args.out / "progress.json", cell_list, header)
    for folder in ("records", "training", "metrics"):
        (args.out / folder).mkdir(parents=True, exist_ok=True)
    progress.write()
    vectors = vectors_sha256(args.vectors)
    locks = {"ledger": threading.Lock(), "records": threading.Lock()}
    todo: queue.Queue = queue.Queue()
    for cell in cell_list:
        todo.put(cell)
    outcomes: list[str] = []

    def worker() -> None:
        while True:
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            try:
                outcomes.append(work(cell, args, progress, locks, env, vectors))
            except Exception as error:  # noqa: BLE001 - one cell's failure is recorded; the others go on
                print(f"[{cell['run']}] FAILED: {type(error).__name__}: {error}", flush=True)
                progress.set(cell["run"], state="failed", error=f"{type(error).__name__}: {error}")
                outcomes.append("failed")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, args.jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stopped = outcomes.count("stopped")
    print(
        f"campaign: {outcomes.count('done')} done, {outcomes.count('failed')} failed, {stopped} not started"
        + (f" (stop file {args.stop_file})" if stopped else ""),
        flush=True,
    )
    return 1 if "failed" in outcomes else 0


def status(args: argparse.Namespace) -> int:
    path = args.out / "progress.json"
    if not path.is_file():
        print(f"no {path}: the campaign has not started here")
        return 1
    body = json.loads(path.read_text(encoding="utf8"))
    print(f"commit {body['commit']}, pid {body['pid']} (group {body['pgid']}), updated {body['updated_utc']}")
    print("counts: " + ", ".join(f"{state} {n}" for state, n in body["counts"].items()))
    for cell in body["cells"]:
        scores = f"dev {cell.get('dev_ents_f')} test {cell.get('test_ents_f')} min {cell.get('minutes')}"
        print(f"{cell['run']:<24} {cell['state']:<24} {scores if 'minutes' in cell else ''}")
    return 0


def publish(args: argparse.Namespace) -> int:
    """Copies the scored records into results/runs/alternatives/ and the ledger to results/alternatives_looks.json."""
    target = args.results / "runs" / "alternatives"
    target.mkdir(parents=True, exist_ok=True)
    copied = 0
    for path in sorted((args.out / "records").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf8"))
        if (record.get("test") or {}).get("score") is not None:
            shutil.copy2(path, target / path.name)
            copied += 1
    if (args.out / "looks.json").is_file():
        shutil.copy2(args.out / "looks.json", args.results / "alternatives_looks.json")
    print(f"{copied} scored records -> {target}; ledger -> {args.results / 'alternatives_looks.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["run", "status", "publish"])
    parser.add_argument("--out", type=Path, default=Path("work/alternatives/campaign"))
    parser.add_argument("--corpus", type=Path, default=Path("work/alternatives/corpus"))
    parser.add_argument("--bilm", type=Path, default=Path("results/bilm"))
    parser.add_argument("--vectors", type=Path, default=Path("results/static_vectors"))
    parser.add_argument("--published", type=Path, default=Path("results/runs/alternatives"))
    parser.add_argument("--results", type=Path, default=Path("results"), help="publish: the results folder")
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--fractions", nargs="+", default=FRACTIONS)
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument("--jobs", type=int, default=2, help="trainings at once, one thread each")
    parser.add_argument("--stop-file", type=Path, help="no new training starts while this file exists")
    parser.add_argument(
        "--max-steps", type=int, default=RECIPE["max_steps"], help="the recipe's; fewer for a smoke check only"
    )
    parser.add_argument("--eval-frequency", type=int, default=RECIPE["eval_frequency"], help="as --max-steps")
    parser.add_argument("--log", type=Path, help="where this command's output goes (recorded in progress.json)")
    args = parser.parse_args(argv)
    if args.command == "status":
        return status(args)
    if args.command == "publish":
        return publish(args)
    return run_campaign(args)


if __name__ == "__main__":
    sys.exit(main())
