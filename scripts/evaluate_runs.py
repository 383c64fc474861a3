"""Scores each final trained pipeline once on the test set with `spacy evaluate`, a few at a time.

    python scripts/evaluate_runs.py work/training work/corpus/test.spacy work/metrics [--prefix ner_] [--jobs 2]

Every `{training}/{run}/model-best` (run names from scripts/train_ner.py, e.g. `baseline_10` or
`ner_elmo_10_s1`) is evaluated into `{out}/{run}.json` by spaCy's own `spacy evaluate` function
(`spacy.cli.evaluate.evaluate`, what the command runs), with `{out}/{run}.provenance.json` beside it
(spacy_elmo.provenance). The models are scored in this process, or in `--jobs` worker processes of
one thread each, so spaCy and torch are imported once per worker rather than once per model. Test
is scored once per final model: a run whose score file is newer than its `model-best` is skipped
(delete the file to score again); an older score file (the run was trained again) moves, with its
provenance record, to `{out}.replaced/{run}-{when it was written}.json` before the new model is scored. Only the project's final
configurations are trained into these folders; settings are chosen on dev (README, "Protocol").
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

from train_ner import move_aside  # scripts/, beside this one


def evaluate(run: Path, test: Path, out: Path, gpu_id: int) -> bool:
    """Scores one run's `model-best` on `test` once; False (and the error shown) if that fails."""
    from spacy.cli.evaluate import evaluate as spacy_evaluate

    from spacy_elmo.provenance import Provenance

    model = run / "model-best"
    target = out / f"{run.name}.json"
    if target.is_file() and target.stat().st_mtime >= (model / "meta.json").stat().st_mtime:
        print(f"[{run.name}] already scored on test ({target}); not scoring again", flush=True)
        return True
    if target.is_file():  # the score of an earlier model in this folder: kept, not overwritten
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(target.stat().st_mtime))
        kept = move_aside(run.name, stamp, target, out / f"{run.name}.provenance.json")
        print(f"[{run.name}] model-best is newer than its score: the earlier score moved to {kept}", flush=True)
    # the command this call is: recorded as such, with where it ran
    command = [sys.executable, "-m", "spacy", "evaluate", str(model), str(test), "--output", str(target), "--gpu-id", str(gpu_id)]
    prov = Provenance(command=command)
    try:
        spacy_evaluate(str(model), test, output=target, use_gpu=gpu_id)
        code, error = 0, ""
    except (Exception, SystemExit) as err:  # noqa: BLE001 - spaCy's msg.fail exits; any failure is reported below
        code, error = 1, f"{type(err).__name__}: {err}"
    prov.write(out / f"{run.name}.provenance.json", exit_code=code, model=str(model), test=str(test),
               ran_as="spacy.cli.evaluate.evaluate in a scripts/evaluate_runs.py process")
    if code:
        print(f"[{run.name}] FAILED: {error}", flush=True)
        return False
    print(f"[{run.name}] scored: {target}", flush=True)
    return True


def _evaluate_all(runs: list[Path], test: Path, out: Path, gpu_id: int) -> list[bool]:
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
    args = parser.parse_args(argv)
    runs = sorted(p.parent.parent for p in args.training.glob(f"{args.prefix}*/model-best/meta.json"))
    if not runs:
        parser.error(f"no {args.training}/{args.prefix}*/model-best to evaluate")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(args.jobs, len(runs)))
    if jobs == 1:
        ok = _evaluate_all(runs, args.test, args.out, args.gpu_id)
    else:
        # fresh (spawned) workers of one thread each: the thread settings are read when torch loads
        os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        shares = [runs[i::jobs] for i in range(jobs)]
        work = partial(_evaluate_all, test=args.test, out=args.out, gpu_id=args.gpu_id)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            ok = [flag for share in pool.map(work, shares) for flag in share]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
