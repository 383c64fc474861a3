"""Scores each final trained pipeline once on the test set with `spacy evaluate`, a few at a time.

    python -m lab.experiments.evaluate_runs work/training work/corpus/test.spacy work/metrics [--prefix ner_] [--jobs 2]

Every finished run's `{training}/{run}/model-best` (lab/experiments/train_ner.py's runs, e.g. `baseline_10`, with the
provenance.json it writes as a run ends) is evaluated into `{out}/{run}.json` by spaCy's own `spacy evaluate` function
(`spacy.cli.evaluate.evaluate`, what the command runs), with `{out}/{run}.provenance.json` beside it
(spacy_elmo.provenance). The models are scored in this process, or in `--jobs` worker processes of
one thread each, so spaCy and torch are imported once per worker rather than once per model. Test
is scored once per final model: a run whose score file is newer than its `model-best` is skipped
(delete the file to score again); an older score file (the run was trained again) moves, with its
provenance record, to `{out}.replaced/{run}-{when it was written}.json` before the new model is scored. Only the
project's final configurations are trained into these folders; settings are chosen on dev (results/README.md,
"Protocol").

With `--ledger results/test_looks.json` every scoring is appended to the ledger of test looks
(lab/experiments/looks_ledger.py): the run's task, fraction, system, seed and recipe (from its training record), the
score, the model's sha256, commit, UTC time and why. A cell gets one look per recipe: a run whose task,
fraction, system, seed and recipe (config, settings, data, biLM) already have a look is refused with one
line, unless its model is bit-identical to the one looked at (no new information) or `--again REASON` says
why it is scored again (the reason goes into the ledger). With `--records DIR`, the run's committed record
`DIR/{run}.json` (written by lab/experiments/train_ner.py) gets the test score.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

from lab.experiments import looks_ledger
from lab.experiments.train_ner import move_aside


def evaluate(run: Path, test: Path, out: Path, gpu_id: int) -> str:
    """Scores one run's `model-best` on `test` once: "scored", "kept" (scored before), or "" if that failed (the
    error shown)."""
    from spacy.cli.evaluate import evaluate as spacy_evaluate

    from spacy_elmo.provenance import Provenance

    model = run / "model-best"
    target = out / f"{run.name}.json"
    if scored_before(run, out):
        print(f"[{run.name}] already scored on test ({target}); not scoring again", flush=True)
        return "kept"
    if target.is_file():  # the score of an earlier model in this folder: kept, not overwritten
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(target.stat().st_mtime))
        kept = move_aside(run.name, stamp, target, out / f"{run.name}.provenance.json")
        print(f"[{run.name}] model-best is newer than its score: the earlier score moved to {kept}", flush=True)
    # the command this call is: recorded as such, with where it ran
    command = [sys.executable, "-m", "spacy", "evaluate", str(model), str(test), "--output", str(target)]
    command += ["--gpu-id", str(gpu_id)]
    prov = Provenance(command=command)
    try:
        spacy_evaluate(str(model), test, output=target, use_gpu=gpu_id)
        code, error = 0, ""
    except (Exception, SystemExit) as err:  # noqa: BLE001 - spaCy's msg.fail exits; any failure is reported below
        code, error = 1, f"{type(err).__name__}: {err}"
    prov.write(
        out / f"{run.name}.provenance.json",
        exit_code=code,
        model=str(model),
        test=str(test),
        ran_as="spacy.cli.evaluate.evaluate in a lab/experiments/evaluate_runs.py process",
    )
    if code:
        print(f"[{run.name}] FAILED: {error}", flush=True)
        return ""
    print(f"[{run.name}] scored: {target}", flush=True)
    return "scored"


def scored_before(run: Path, out: Path) -> bool:
    """Whether `run`'s model-best already has its score in `out` (newer than the model): not scored again."""
    target = out / f"{run.name}.json"
    return target.is_file() and target.stat().st_mtime >= (run / "model-best" / "meta.json").stat().st_mtime


def planned_look(run: Path, test_sha256: str) -> dict:
    """The ledger entry a scoring of `run` on the test file of sha256 `test_sha256` would be, before its score:
    what it is (from its name and its training record) and its recipe."""
    try:
        train = json.loads((run / "provenance.json").read_text(encoding="utf8"))
    except (OSError, ValueError):
        train = {}
    parsed = looks_ledger.parse_run(run.name) or {"task": "ner", "system": run.name, "fraction": None, "seed": None}
    seed = parsed["seed"] if parsed["seed"] is not None else train.get("seed")
    return {
        "task": parsed["task"],
        "fraction": parsed["fraction"],
        "system": parsed["system"],
        "seed": seed,
        "workflow": run.parent.name,
        "run": f"{run.parent.name}/{run.name}",
        "recipe": looks_ledger.recipe(train),
        "threads": (train.get("machine") or {}).get("threads"),
        "score_name": looks_ledger.TASK_SCORE.get(parsed["task"], "ents_f"),
        "model_sha256": looks_ledger.model_sha256(run / "model-best"),
        "test_sha256": test_sha256,
    }


def check_look(look: dict, ledger: dict, again: str | None) -> str | None:
    """The reason this look is allowed (recorded with it), or None: refused (one cell + recipe, one look)."""
    same = looks_ledger.same_recipe_looks(ledger, look)
    if not same:
        return "first look at this recipe" + (f"; {again}" if again else "")
    twin = next((entry for entry in same if entry.get("model_sha256") == look["model_sha256"]), None)
    if twin is not None:
        return f"the same model as look {twin['look']} (bit-identical model-best): the same score, no new information"
    if again:
        return f"again (looks {', '.join(str(entry['look']) for entry in same)} had this recipe): {again}"
    return None


def record_look(look: dict, reason: str, run: Path, out: Path, ledger_path: Path, records: Path | None = None) -> dict:
    """Appends the scoring of `run` (its score file and provenance in `out`) to the ledger; returns the entry.
    `records`: the runs' committed records, where the dirty paths are found if the provenance lacks them."""
    scores = json.loads((out / f"{run.name}.json").read_text(encoding="utf8"))
    prov = json.loads((out / f"{run.name}.provenance.json").read_text(encoding="utf8"))
    value = scores.get(look["score_name"])
    git = prov.get("git") or {}
    record_path = records / f"{run.name}.json" if records else None
    record = json.loads(record_path.read_text(encoding="utf8")) if record_path and record_path.is_file() else None
    entry = {
        **look,
        "score": round(float(value) * 100, 2) if isinstance(value, (int, float)) else None,
        "commit": git.get("commit"),
        "dirty": git.get("dirty"),
        "dirty_paths": looks_ledger.dirty_paths(git, record),
        "utc": prov.get("ended_utc"),
        "published_at": None,
        "reason": reason,
        "source": "lab/experiments/evaluate_runs.py",
    }
    return looks_ledger.append(ledger_path, entry)


def add_test_score(records: Path, run: Path, entry: dict, out: Path) -> None:
    """Adds the test score (and the look's number) to the run's committed record `records/{run}.json`, if it has one."""
    path = records / f"{run.name}.json"
    if not path.is_file():
        return
    record = json.loads(path.read_text(encoding="utf8"))
    prov = json.loads((out / f"{run.name}.provenance.json").read_text(encoding="utf8"))
    record["test"] = {
        "score_name": entry["score_name"],
        "score": entry["score"],
        "look": entry["look"],
        "model_sha256": entry["model_sha256"],
        "test_sha256": entry["test_sha256"],
        "provenance": prov,
    }
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf8")


def _evaluate_all(runs: list[Path], test: Path, out: Path, gpu_id: int) -> list[str]:
    """One worker's share of the runs, one after the other."""
    return [evaluate(run, test, out, gpu_id) for run in runs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("training", type=Path, help="folder of runs, each with model-best/")
    parser.add_argument("test", type=Path, help="test .spacy file")
    parser.add_argument("out", type=Path, help="folder for {run}.json")
    parser.add_argument("--prefix", default="", help="only runs whose name starts with this")
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--ledger", type=Path, help="the ledger of test looks to check and append to (results/test_looks.json)"
    )
    parser.add_argument(
        "--again",
        default="",
        metavar="REASON",
        help="score a run whose cell and recipe already had a look; REASON goes into the ledger",
    )
    parser.add_argument(
        "--records",
        type=Path,
        help="folder of the runs' committed records (train_ner.py --records): adds the test score",
    )
    args = parser.parse_args(argv)
    runs = sorted(p.parent.parent for p in args.training.glob(f"{args.prefix}*/model-best/meta.json"))
    for run in [run for run in runs if not (run / "provenance.json").is_file()]:  # train_ner writes it as a run ends
        print(f"[{run.name}] not scored: still training, or stopped before the end (no provenance.json)", flush=True)
        runs.remove(run)
    if not runs:
        parser.error(f"no {args.training}/{args.prefix}*/model-best to evaluate")
    args.out.mkdir(parents=True, exist_ok=True)
    looks, refused = {}, []
    if args.ledger:  # decided here, before any scoring, and written here: the workers never touch the ledger
        from spacy_elmo.provenance import sha256

        ledger = looks_ledger.load(args.ledger)
        test_sha256 = sha256(args.test)
        for run in [run for run in runs if not scored_before(run, args.out)]:
            look = planned_look(run, test_sha256)
            reason = check_look(look, ledger, args.again.strip() or None)
            if reason is None:
                earlier = looks_ledger.same_recipe_looks(ledger, look)
                print(
                    f"[{run.name}] refused: {look['task']} {look['fraction']}% {look['system']} seed {look['seed']} "
                    f"with this recipe already had a test look (look {earlier[-1]['look']}: {earlier[-1]['score']}); "
                    "one look per recipe - pass --again REASON to score it anyway (the reason is recorded)",
                    flush=True,
                )
                refused.append(run)
            else:
                looks[run] = (look, reason)
        runs = [run for run in runs if run not in refused]
    if not runs:
        return 1
    jobs = max(1, min(args.jobs, len(runs)))
    if jobs == 1:
        ok = _evaluate_all(runs, args.test, args.out, args.gpu_id)
    else:
        # fresh (spawned) workers of one thread each: the thread settings are read when torch loads
        os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        shares = [runs[i::jobs] for i in range(jobs)]
        work = partial(_evaluate_all, test=args.test, out=args.out, gpu_id=args.gpu_id)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            flags = [flag for share in pool.map(work, shares) for flag in share]
            done = dict(zip([run for share in shares for run in share], flags))
            ok = [done[run] for run in runs]
    for run, status in zip(runs, ok):
        if status == "scored" and run in looks:
            entry = record_look(*looks[run], run, args.out, args.ledger, args.records)
            print(f"[{run.name}] test look {entry['look']} recorded in {args.ledger}: {entry['reason']}", flush=True)
            if args.records:
                add_test_score(args.records, run, entry, args.out)
        elif status == "scored" and args.records and (args.records / f"{run.name}.json").is_file():
            print(f"[{run.name}] no --ledger: the test score is not added to its record", flush=True)
    return 0 if all(ok) and not refused else 1


if __name__ == "__main__":
    sys.exit(main())
