"""Writes the committed run records (scripts/train_ner.py --records) of the seeds run published before records existed,
from the provenance and scores in results/seeds.json, so that a later session can reuse them.

    python scripts/reconstruct_run_records.py [--seeds results/seeds.json] [--out results/runs/training_seeds]

For every training run in seeds.json's provenance (`training_seeds/{run}`) with its test score (`summary`) and its
evaluation record (`metrics_seeds/{run}`), it writes `{out}/{run}.json` in train_ner.py's record format, marked
`"source": "reconstructed ..."`. What seeds.json does not hold stays empty: the dev curve and best dev score (the
runs' logs and models are gone). The thread settings were not recorded by the train_ner.py of those runs (it
recorded its own environment's); they are inferred from how the seeds workflow ran them (`--jobs 2`, which gives each
training one thread: train_ner.py's `run_all`) and marked so (`threads_source`). A record is reused by train_ner.py
only when the command, every input hash (config, data, biLM) and these thread settings match; an existing record
that is not a reconstructed one is never overwritten.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import looks_ledger  # scripts/, beside this one

ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}  # train_ner.py run_all, --jobs > 1


def records_from(seeds: dict, source: str, ledger: dict | None = None) -> dict[str, dict]:
    """{run: record} for every seeds-run training that seeds.json holds with its test score (with the number of its
    look in `ledger`, results/test_looks.json, where the ledger has it)."""
    from spacy_elmo.provenance import threads

    steps = (seeds.get("provenance") or {}).get("steps") or {}
    summary = seeds.get("summary") or {}
    found = {}
    for label, prov in steps.items():
        match = re.fullmatch(r"training_seeds/(\w+)", label)
        parsed = looks_ledger.parse_run(match.group(1)) if match else None
        if not parsed or parsed["seed"] is None or not prov.get("inputs") or prov.get("exit_code") != 0:
            continue
        run = match.group(1)
        score = (
            (((summary.get(parsed["task"]) or {}).get(parsed["fraction"]) or {}).get(parsed["system"]) or {})
            .get("per_seed", {})
            .get(str(parsed["seed"]))
        )
        evaluation = steps.get(f"metrics_seeds/{run}")
        if score is None or not evaluation:
            continue
        look = next(
            (
                entry["look"]
                for entry in (ledger or {}).get("looks", [])
                if entry.get("run") == f"metrics_seeds/{run}" and entry.get("utc") == evaluation.get("ended_utc")
            ),
            None,
        )
        found[run] = {
            **looks_ledger.run_fields(run, parsed, prov),
            "threads": threads(ONE_THREAD),
            "threads_source": (
                "inferred, not recorded: the seeds workflow ran train_ner.py with --jobs 2, which gives each training "
                "one thread; the record of the time held the script's own environment"
            ),
            "command": prov["command"][1:],
            "inputs": prov["inputs"],
            "best_dev": None,
            "dev_curve": [],
            "minutes": prov.get("minutes"),
            "test": {
                "score_name": looks_ledger.TASK_SCORE[parsed["task"]],
                "score": score,
                "look": look,
                "model_sha256": None,
                "test_sha256": None,
                "provenance": evaluation,
            },
            "provenance": prov,
            "source": source,
        }
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=Path, default=Path("results") / "seeds.json")
    parser.add_argument("--out", type=Path, default=Path("results") / "runs" / "training_seeds")
    args = parser.parse_args(argv)
    from spacy_elmo.provenance import git_state

    commit = (git_state().get("commit") or "unknown")[:7]
    source = (
        f"reconstructed from {args.seeds} at {commit} by scripts/reconstruct_run_records.py "
        "(no dev curve: the logs are gone)"
    )
    records = records_from(
        json.loads(args.seeds.read_text(encoding="utf8")),
        source,
        looks_ledger.load(args.seeds.parent / looks_ledger.LEDGER),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    for run, record in sorted(records.items()):
        path = args.out / f"{run}.json"
        if path.is_file() and not str(json.loads(path.read_text(encoding="utf8")).get("source", "")).startswith(
            "reconstructed"
        ):
            continue  # a record train_ner.py wrote: newer than seeds.json's, kept
        path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
        written.append(run)
    print(f"wrote {len(written)} records into {args.out}: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
