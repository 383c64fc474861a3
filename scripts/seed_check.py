"""Summarises a few `spacy train` runs of one command at different seeds: each run's dev curve and best dev score,
from its console log and its model-best/meta.json, with the inputs' sha256 and the machine (issue 33's check that the
POS baseline's seed reaches the tagger).

    python scripts/seed_check.py --score tag_acc --column TAG_ACC --out results/pos_seed_check \
        --command "the spacy train command, SEED for the seed" \
        --input configs/tagger_baseline.cfg --input train_10.spacy \
        0:RUN_DIR_0:LOG_0 1:RUN_DIR_1:LOG_1

Copies each log (ANSI colours removed) into --out and writes --out/summary.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import train_ner  # scripts/, beside this one


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="SEED:RUN_DIR:LOG")
    parser.add_argument("--score", default="tag_acc", help="meta.json performance key")
    parser.add_argument("--column", default="TAG_ACC", help="the score's column in the console log")
    parser.add_argument("--command", required=True, help="the command the runs share (SEED for the seed)")
    parser.add_argument("--input", action="append", default=[], type=Path, help="a file the runs read (hashed)")
    parser.add_argument("--about", default="")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    from spacy_elmo.provenance import git_state, machine, sha256

    args.out.mkdir(parents=True, exist_ok=True)
    runs = {}
    for spec in args.runs:
        seed, run, log = spec.split(":", 2)
        copy = args.out / f"seed{seed}.log"
        copy.write_text(
            re.sub(r"\x1b\[[0-9;]*m", "", Path(log).read_text(encoding="utf8", errors="replace")), encoding="utf8"
        )
        best = json.loads((Path(run) / "model-best" / "meta.json").read_text())["performance"][args.score]
        runs[seed] = {
            "log": copy.name,
            "dev_curve": train_ner.dev_curve(copy, args.column),
            f"best_dev_{args.score}": round(best * 100, 2),
        }
    summary = {
        "about": args.about,
        "command": args.command,
        "inputs": {str(p): sha256(p) for p in args.input},
        "git": git_state(),
        "machine": machine(),
        "runs": runs,
        "written_by": "python scripts/seed_check.py " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf8")
    print(json.dumps(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
