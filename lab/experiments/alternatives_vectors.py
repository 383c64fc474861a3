"""Static vectors for results/alternatives.md: floret trained on the biLM's own pretraining text, and their settings'
search on dev.

    python -m lab.experiments.alternatives_vectors build work/corpus/lm/train.txt OUT --dim 100 --epoch 10 \\
        --minn 4 --maxn 5 --bucket 50000
    python -m lab.experiments.alternatives_vectors search work/corpus/lm/train.txt --corpus work/alternatives/corpus \\
        --out work/alternatives/vector_search --results results/alternatives_vectors.json

`build` checks that the text is the one the project biLM was pretrained on (its sha256 against `--bilm`'s
run_inputs.json, where `publish-bilm` recorded what the pretraining read), trains floret on it (`floret` from PyPI:
cbow, floret mode, 2 hashes per word and subword, one thread, floret's fixed seed), saves the table
(`vectors.floret`), turns it into a spaCy vectors pipeline with `spacy init vectors en ... --mode floret` (`OUT/`,
what `[initialize] vectors` / `--paths.vectors` reads) and writes `OUT/build.json`: the settings, the sha256 of the
text and of the vector table (`vocab/vectors`), the floret version, its minutes and provenance. The floret table is
removed once spaCy has read it (spaCy's folder holds the same numbers).

`search` builds one vector set per candidate setting and trains the static arm (`configs/ner_static.cfg`) with
each at one training fraction and seed (10%, seed 0), reading the **dev** score only: the adopted NER recipe (dev
every 400 steps, patience 2,000, one thread per run, train_ner.py) cut to 2,000 steps (`--steps`), all candidates
at once (`--jobs`), to keep the search cheap on a shared machine. The candidates vary one setting at a time around
a centre (dimension 100, 10 epochs, subwords of 4-5 characters, 50,000 hash rows): dimension 300, 20 epochs,
subwords of 3-6, 20,000 or 100,000 rows. The choice is the candidate with the best dev F1 (a tie goes to the smaller
table). `--results` gets every candidate's settings, table size, build and training minutes, dev F1 and dev curve,
and the choice, with provenance; the test set is never read.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CENTRE = {"dim": 100, "epoch": 10, "minn": 4, "maxn": 5, "bucket": 50000}
# one setting at a time around the centre (each a dict of the settings that differ)
VARIATIONS = [
    {"dim": 300},
    {"epoch": 20},
    {"minn": 3, "maxn": 6},
    {"bucket": 20000},
    {"bucket": 100000},
]
FIXED = {"model": "cbow", "mode": "floret", "hashCount": 2, "minCount": 5, "thread": 1}


def name_of(settings: dict) -> str:
    """A run name part for a setting: d100_e10_n4x5_b50000."""
    return f"d{settings['dim']}_e{settings['epoch']}_n{settings['minn']}x{settings['maxn']}_b{settings['bucket']}"


def bilm_text_sha256(bilm: Path) -> str | None:
    """The sha256 of the training text the biLM's pretraining read (its run_inputs.json)."""
    try:
        inputs = json.loads((bilm / "run_inputs.json").read_text(encoding="utf8"))["inputs"]
    except (OSError, ValueError, KeyError):
        return None
    return next((digest for path, digest in inputs.items() if path.endswith("lm/train.txt")), None)


def check_text(text: Path, bilm: Path) -> str:
    """The text's sha256, after checking it is the biLM's pretraining text; stops with one line if not."""
    from spacy_elmo.provenance import sha256

    expected = bilm_text_sha256(bilm)
    if expected is None:
        raise SystemExit(f"{bilm}/run_inputs.json: no lm/train.txt among the inputs of the biLM's pretraining")
    found = sha256(text)
    if found != expected:
        raise SystemExit(
            f"{text}: sha256 {found[:12]}…, but {bilm} was pretrained on {expected[:12]}… "
            "(rebuild it with the preprocess step: lab.data.preprocess_conll --lm-text, "
            "then lab.data.preprocess_lm_text)"
        )
    return found


def build(text: Path, out: Path, settings: dict, bilm: Path) -> dict:
    """floret on `text` with `settings`, then `spacy init vectors --mode floret` into `out`; returns build.json."""
    import floret

    from spacy_elmo.provenance import Provenance, sha256

    text_sha = check_text(text, bilm)
    done = out / "build.json"
    if done.is_file():
        record = json.loads(done.read_text(encoding="utf8"))
        if record.get("settings") == settings and record.get("text_sha256") == text_sha:
            print(f"[{out}] built earlier with these settings and text: kept", flush=True)
            return record
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "lab.experiments.alternatives_vectors", "build", str(text), str(out)]
    command += [f"--{key}={value}" for key, value in settings.items()]
    prov = Provenance(command=command, seed=0)
    started = time.time()
    model = floret.train_unsupervised(str(text), verbose=0, **FIXED, **settings)
    table = out / "vectors.floret"
    model.save_floret_vectors(str(table))
    floret_minutes = (time.time() - started) / 60
    made = subprocess.run(
        [sys.executable, "-m", "spacy", "init", "vectors", "en", str(table), str(out), "--mode", "floret"],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode:
        raise SystemExit(f"spacy init vectors {table}: failed\n{(made.stdout + made.stderr)[-2000:]}")
    table_sha = sha256(table)
    table.unlink()  # ~0.5 GB of text at dim 300; spaCy's vocab/vectors holds the same numbers
    record = prov.record(
        settings=settings,
        fixed=FIXED,
        floret_version=_version("floret"),
        text=str(text),
        text_sha256=text_sha,
        floret_table_sha256=table_sha,
        vectors_sha256=sha256(out / "vocab" / "vectors"),
        vectors_bytes=(out / "vocab" / "vectors").stat().st_size,
        floret_minutes=round(floret_minutes, 2),
    )
    done.write_text(json.dumps(record, indent=1) + "\n", encoding="utf8")
    print(f"[{out}] built in {floret_minutes:.1f} min: {record['vectors_bytes'] / 1e6:.0f} MB table", flush=True)
    return record


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def best_dev(record_path: Path) -> float | None:
    try:
        return json.loads(record_path.read_text(encoding="utf8"))["best_dev"]["ents_f"]
    except (OSError, ValueError, KeyError):
        return None


def search(args: argparse.Namespace) -> dict:
    """Builds and trains every candidate (the centre and the one-at-a-time variations), then picks the best on dev."""
    from lab.experiments import train_ner

    candidates = [dict(CENTRE)] + [{**CENTRE, **change} for change in VARIATIONS]
    records = args.out / "records"
    (args.out / "training").mkdir(parents=True, exist_ok=True)
    commands = {}
    for settings in candidates:
        folder = args.out / "vectors" / name_of(settings)
        build(args.text, folder, settings, args.bilm)
        name = f"ner_static_{name_of(settings)}_{args.fraction}_s{args.seed}"
        command = [sys.executable, "-m", "spacy", "train", str(args.config)]
        command += ["--output", str(args.out / "training" / name)]
        command += ["--paths.train", str(args.corpus / f"train_{args.fraction}.spacy")]
        command += ["--paths.dev", str(args.corpus / "dev.spacy")]
        command += ["--training.max_steps", str(args.steps), "--training.eval_frequency", str(args.eval_frequency)]
        command += ["--training.patience", str(args.patience), "--system.seed", str(args.seed)]
        command += ["--gpu-id", "-1", "--paths.vectors", str(folder)]
        commands[name] = (command, args.seed)
    failed = train_ner.run_all(commands, args.out / "training", args.jobs, records)
    if failed:
        raise SystemExit(f"{failed} search run(s) failed: their logs are in {args.out / 'training'}")
    results: dict = {"candidates": []}
    for settings, name in zip(candidates, commands):
        vectors = json.loads((args.out / "vectors" / name_of(settings) / "build.json").read_text("utf8"))
        record = json.loads((records / f"{name}.json").read_text(encoding="utf8"))
        results["candidates"].append(
            {
                "name": name_of(settings),
                "settings": settings,
                "dev_ents_f": record["best_dev"]["ents_f"],
                "dev_curve": record["dev_curve"],
                "training_minutes": record["minutes"],
                "floret_minutes": vectors["floret_minutes"],
                "vectors_bytes": vectors["vectors_bytes"],
                "vectors_sha256": vectors["vectors_sha256"],
                "run": name,
                "training_provenance": record["provenance"],
                "build_provenance": {k: vectors[k] for k in ("git", "machine", "started_utc", "ended_utc")},
            }
        )
    chosen = max(results["candidates"], key=lambda c: (c["dev_ents_f"], -c["vectors_bytes"]))
    results.update(
        {
            "about": (
                "The static vectors' settings for results/alternatives.md, chosen on FiNER-ORD dev only: the static "
                "arm (configs/ner_static.cfg) trained once per candidate, at one training fraction and seed, with the "
                "adopted recipe cut to the steps below; written by alternatives_vectors.py search. Test data was "
                "not read."
            ),
            "text": str(args.text),
            "text_sha256": check_text(args.text, args.bilm),
            "fixed": FIXED,
            "centre": CENTRE,
            "fraction": args.fraction,
            "seed": args.seed,
            "recipe": {"max_steps": args.steps, "eval_frequency": args.eval_frequency, "patience": args.patience},
            "rule": "the best dev F1 (ents_f) over every candidate; a tie goes to the smaller table",
            "chosen": {"name": chosen["name"], "settings": chosen["settings"], "dev_ents_f": chosen["dev_ents_f"]},
        }
    )
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf8")
    print(f"chosen: {chosen['name']} (dev F1 {chosen['dev_ents_f']}); all candidates in {args.results}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="floret on the biLM's text, then spacy init vectors --mode floret")
    p.add_argument("text", type=Path)
    p.add_argument("out", type=Path)
    for key, value in CENTRE.items():
        p.add_argument(f"--{key}", type=int, default=value)
    p.add_argument("--bilm", type=Path, default=Path("results/bilm"), help="the biLM whose text this must be")
    p = sub.add_parser("search", help="the settings' search on dev (the static arm at one fraction and seed)")
    p.add_argument("text", type=Path)
    p.add_argument("--corpus", type=Path, required=True, help="folder with train_{pct}.spacy and dev.spacy")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--results", type=Path, required=True)
    p.add_argument("--config", type=Path, default=Path("configs/ner_static.cfg"))
    p.add_argument("--bilm", type=Path, default=Path("results/bilm"))
    p.add_argument("--fraction", default="10")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=2000, help="the recipe's 4,000 cut in half: cheap")
    p.add_argument("--eval-frequency", type=int, default=400)
    p.add_argument("--patience", type=int, default=2000)
    p.add_argument("--jobs", type=int, default=len(VARIATIONS) + 1, help="trainings at once (one thread each)")
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.text, args.out, {key: getattr(args, key) for key in CENTRE}, args.bilm)
        return 0
    for path in (args.corpus / f"train_{args.fraction}.spacy", args.corpus / "dev.spacy", args.config):
        if not path.is_file():
            parser.error(f"{path} not found (lab.data.alternatives_data preprocess writes the corpus)")
    if args.jobs > 1:  # one thread per floret and spaCy run: the runs share the cores
        os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    search(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
