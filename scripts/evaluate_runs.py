"""Scores each final trained pipeline once on the test set with `spacy evaluate`, a few at a time.

    python scripts/evaluate_runs.py work/training work/corpus/test.spacy work/metrics [--prefix ner_] [--jobs 2]

Every `{training}/{run}/model-best` (run names from scripts/train_ner.py, e.g. `baseline_10` or
`ner_elmo_10_s1`) is evaluated into `{out}/{run}.json`, with `{out}/{run}.provenance.json` beside it
(spacy_elmo.provenance). Test is scored once per final model: a run whose score file is newer than
its `model-best` is skipped (delete the file to score again). Only the project's final
configurations are trained into these folders; settings are chosen on dev (README, "Protocol").
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def evaluate(run: Path, test: Path, out: Path, gpu_id: int, env: dict) -> bool:
    from spacy_elmo.provenance import Provenance

    model = run / "model-best"
    target = out / f"{run.name}.json"
    if target.is_file() and target.stat().st_mtime >= (model / "meta.json").stat().st_mtime:
        print(f"[{run.name}] already scored on test ({target}); not scoring again", flush=True)
        return True
    command = [sys.executable, "-m", "spacy", "evaluate", str(model), str(test), "--output", str(target), "--gpu-id", str(gpu_id)]
    prov = Provenance(command=command)
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    prov.write(out / f"{run.name}.provenance.json", exit_code=done.returncode, model=str(model), test=str(test))
    if done.returncode != 0:
        print(f"[{run.name}] FAILED (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}", flush=True)
        return False
    print(f"[{run.name}] scored: {target}", flush=True)
    return True


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
    env = dict(os.environ)
    if args.jobs > 1:
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        ok = list(pool.map(lambda run: evaluate(run, args.test, args.out, args.gpu_id, env), runs))
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
