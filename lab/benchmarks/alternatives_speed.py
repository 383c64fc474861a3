"""Words per second of each arm's trained pipeline through nlp.pipe, on one machine in one run (results/alternatives.md).

    python -m lab.benchmarks.alternatives_speed --runs work/alternatives/campaign/training --text work/alternatives/corpus/dev.spacy \\
        --out results/alternatives_speed.json [--pct 100] [--seed 0] [--threads 2] [--repeats 5]

Loads `ner_{arm}_{pct}_s{seed}/model-best` of every arm (none, static, ELMo, ELMo + static) in this one process,
with torch and the BLAS on `--threads` threads (set before torch is imported), and times `nlp.pipe` over the dev
set's text (its sentences as plain strings, the pipeline's own tokenizer; the test set is not read), the arms taking
turns `--repeats` times after one warm-up pass each, so that a change in the machine's load falls on every arm.
Each arm's words/s is the median over its repeats (words: the tokens the pipeline made). Written to `--out` with
every repeat, each model's folder under `--runs` and digest, the CPU (vendor, family, model), the load average
before and after, the threads, and provenance. Run it on a quiet machine: the figures compare arms within one run
only.
"""  # noqa: E501 - the first line is the script's --help description, whole

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ARMS = ("none", "static", "elmo", "elmo_static")


def texts(path: Path) -> list[str]:
    import spacy
    from spacy.tokens import DocBin

    nlp = spacy.blank("en")
    return [sent.text for doc in DocBin().from_disk(path).get_docs(nlp.vocab) for sent in doc.sents]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("work/alternatives/campaign/training"))
    parser.add_argument("--text", type=Path, default=Path("work/alternatives/corpus/dev.spacy"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pct", default="100")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="nlp.pipe batch size (Docs)")
    args = parser.parse_args(argv)
    models = {arm: args.runs / f"ner_{arm}_{args.pct}_s{args.seed}" / "model-best" for arm in ARMS}
    missing = [str(path) for path in models.values() if not (path / "meta.json").is_file()]
    if missing or not args.text.is_file():
        parser.error(f"not found: {', '.join(missing or [str(args.text)])} (train the campaign's cells first)")
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    import spacy
    import torch

    from lab.experiments.looks_ledger import model_sha256
    from spacy_elmo.provenance import Provenance, cpu_kind

    torch.set_num_threads(args.threads)
    command = [sys.executable, "-m", "lab.benchmarks.alternatives_speed", *(argv if argv is not None else sys.argv[1:])]
    prov = Provenance(command=command, seed=args.seed)
    load_before = os.getloadavg()
    lines = texts(args.text)
    pipelines = {arm: spacy.load(path) for arm, path in models.items()}
    words = {}
    for arm, nlp in pipelines.items():  # warm-up: first calls allocate and, for ELMo, fill nothing (no cache)
        words[arm] = sum(len(doc) for doc in nlp.pipe(lines, batch_size=args.batch_size))
    seconds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for _ in range(args.repeats):
        for arm, nlp in pipelines.items():
            start = time.perf_counter()
            for _doc in nlp.pipe(lines, batch_size=args.batch_size):
                pass
            seconds[arm].append(time.perf_counter() - start)
    result = {
        "about": (
            "Words/s of each arm's trained pipeline through nlp.pipe over FiNER-ORD dev text, in one process, "
            "arms taking turns; written by lab/benchmarks/alternatives_speed.py. Compare within this file only."
        ),
        "cpu": cpu_kind(),
        "threads": args.threads,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "sentences": len(lines),
        "batch_size": args.batch_size,
        "arms": {
            arm: {
                # its folder under --runs and its digest, as the campaign's record of the run gives it
                # (test.model_sha256): a folder of this machine would mean nothing to a reader
                "model": models[arm].relative_to(args.runs).as_posix(),
                "model_sha256": model_sha256(models[arm]),
                "words": words[arm],
                "seconds": [round(s, 4) for s in seconds[arm]],
                "words_per_s": round(words[arm] / statistics.median(seconds[arm])),
            }
            for arm in ARMS
        },
        "provenance": prov.record(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf8")
    for arm in ARMS:
        print(f"{arm:<12} {result['arms'][arm]['words_per_s']:>8} words/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
