"""Dev scores of pipelines trained in fp32, run with each inference precision of the elmo component (issue 41's
downstream parity): results/precision_parity.json and its table.

    python -m lab.experiments.precision_parity MODEL_DIR... --dev DEV.spacy --out results/precision_parity.json \
        --table results/precision_parity.md

Each MODEL_DIR (a trained pipeline, e.g. `model-best`) is loaded once per precision with
`components.elmo.precision` overridden, and scored on DEV by `nlp.evaluate`, as `spacy evaluate` scores it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import spacy
from spacy.training import Corpus

from lab.experiments.looks_ledger import model_sha256
from spacy_elmo.precision import PRECISIONS
from spacy_elmo.provenance import Provenance, portable, sha256

assert PRECISIONS[0] == "fp32"  # the exact one first: the others are read against it
SCORES = {"ents_f": "NER F1", "tag_acc": "tag accuracy"}


def trained_with(provenance: Path) -> dict | None:
    """The commit and `spacy train` command of a run (its provenance.json, lab/experiments/train_ner.py writes one)."""
    if not provenance.is_file():
        return None
    record = json.loads(provenance.read_text(encoding="utf8"))
    return {"commit": record["git"]["commit"], "dirty": record["git"]["dirty"], "command": record["command"][1:]}


def dev_scores(model: Path, dev: Path) -> dict:
    """{"score": its name, precision: dev score (points)} of one pipeline."""
    row: dict = {}
    for precision in PRECISIONS:
        nlp = spacy.load(model, config={"components": {"elmo": {"precision": precision}}})
        scores = nlp.evaluate(Corpus(str(dev))(nlp))
        row["score"] = next(name for name in SCORES if scores.get(name) is not None)
        row[precision] = round(scores[row["score"]] * 100, 2)
    return row


def table(rows: list[dict]) -> str:
    lines = [
        "| pipeline | dev score | fp32 | bf16 (− fp32) | int8 (− fp32) |",
        "|---|---|---:|---:|---:|",
    ]
    for row in rows:
        low = [f"{row[p]:.2f} ({row[p] - row['fp32']:+.2f})" for p in PRECISIONS[1:]]
        lines.append(f"| {row['pipeline']} | {SCORES[row['score']]} | {row['fp32']:.2f} | {' | '.join(low)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--dev", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--table", type=Path, required=True)
    args = parser.parse_args(argv)
    prov = Provenance(command=["python", "-m", "lab.experiments.precision_parity", *(argv or [])])
    rows = [
        {
            "pipeline": f"{model.parent.name}/{model.name}",  # the run's folder names what was trained
            "sha256": model_sha256(model, skip=()),  # every file, meta.json too
            "training": trained_with(model.parent / "provenance.json"),
            **dev_scores(model, args.dev),
        }
        for model in args.models
    ]
    record = {"dev": portable(str(args.dev)), "dev_sha256": sha256(args.dev), "rows": rows, "provenance": prov.record()}
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf8")
    args.table.write_text(table(rows), encoding="utf8")
    print(table(rows), end="")


if __name__ == "__main__":
    main()
