"""Is the project biLM rebuildable bit-for-bit? (issue 33)

Compares a biLM pretrained again from a clean clone (`weasel run check assets preprocess pretrain`,
the same steps `make main` runs) with the one every published ELMo cell used, as recorded in the
seeds report's provenance (`results/seeds.json`: the sha256 of `work/bilm/model.safetensors` each ELMo
run read). Writes `results/bilm_rebuild.json`: both sha256s, whether they match, the rebuild's
held-out perplexity beside the published one, its corpus hashes, and the rebuild's own commit
(clean tree), machine, thread settings, words/s and time. Run it in the rebuilt clone's folder:

    python scripts/check_bilm_rebuild.py --model work/bilm --published results/seeds.json \
        --published-metrics results/metrics.json --out results/bilm_rebuild.json

The runs that read the biLM are comparable across sessions only while this says `"match": true`;
a rebuild that differs means the runs it feeds must be redone.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from spacy_elmo.provenance import git_state, machine, sha256, utc_now

WEIGHTS = "work/bilm/model.safetensors"


def published_sha256(seeds: dict) -> str:
    """The one biLM sha256 every ELMo run of the seeds report read (an error if they differ)."""
    found = {
        step["inputs"][WEIGHTS]
        for step in seeds["provenance"]["steps"].values()
        if WEIGHTS in (step.get("inputs") or {})
    }
    if len(found) != 1:
        raise SystemExit(f"results/seeds.json: expected one biLM sha256 across its ELMo runs, found {sorted(found)}")
    return found.pop()


def check(model: Path, seeds: dict, metrics: dict) -> dict:
    summary = json.loads((model / "pretrain_summary.json").read_text())
    inputs = json.loads((model / "run_inputs.json").read_text())
    expected, found = published_sha256(seeds), sha256(model / "model.safetensors")
    published = metrics.get("pretrain_summary") or {}
    published_step = seeds["provenance"]["steps"]["work/bilm"]
    pretrained_on = json.loads((model / "provenance.json").read_text()).get("machine", {})
    return {
        "match": expected == found,
        "model_safetensors_sha256": {"published": expected, "rebuilt": found},
        "heldout_ppl": {"published": published.get("heldout_ppl"), "rebuilt": summary.get("heldout_ppl")},
        "published_bilm_commit": published_step["git"]["commit"],
        "cpu": {"published": published_step.get("machine", {}).get("cpu"), "rebuilt": pretrained_on.get("cpu")},
        "published_pretraining": {
            "started_utc": published_step.get("started_utc"),
            "ended_utc": published_step.get("ended_utc"),
            "machine": published_step.get("machine"),
        },
        "rebuild": {
            "git": git_state(),
            "command": inputs.get("command"),
            "inputs": inputs.get("inputs"),
            "threads": inputs.get("threads"),
            "steps": summary.get("step"),
            "words": summary.get("words"),
            "words_per_s": summary.get("words_per_s"),
            "train_seconds": summary.get("train_seconds"),
            "machine": pretrained_on,
            "started_utc": json.loads((model / "provenance.json").read_text()).get("started_utc"),
            "ended_utc": json.loads((model / "provenance.json").read_text()).get("ended_utc"),
            "checked_on": machine(),
            "checked_utc": utc_now(),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("work/bilm"))
    parser.add_argument("--published", type=Path, default=Path("results/seeds.json"))
    parser.add_argument("--published-metrics", type=Path, default=Path("results/metrics.json"))
    parser.add_argument("--out", type=Path, default=Path("results/bilm_rebuild.json"))
    args = parser.parse_args(argv)
    record = check(args.model, json.loads(args.published.read_text()), json.loads(args.published_metrics.read_text()))
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"{args.out}: model.safetensors {'matches' if record['match'] else 'DIFFERS FROM'} the published biLM "
        f"({record['model_safetensors_sha256']['rebuilt'][:12]} vs "
        f"{record['model_safetensors_sha256']['published'][:12]})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
