"""The data of results/alternatives.md: FiNER-ORD (English financial news NER) into place, and into .spacy files.

FiNER-ORD (Shah et al., 2023; gtfintechlab/FiNER-ORD, CC BY-NC 4.0) is English financial news (webz.io articles)
annotated by hand with PER, LOC and ORG, in three official splits: train (135 articles, 3,262 sentences), validation
(24, 402) and test (42, 1,075). Each split is a CSV of `gold_label,gold_token,doc_idx,sent_idx`, one token a row, the
labels 0 O, 1 PER_B, 2 PER_I, 3 LOC_B, 4 LOC_I, 5 ORG_B, 6 ORG_I.

    python -m lab.data.alternatives_data install --from /path/to/FiNER-ORD --dest assets/alternatives/finer_ord
    python -m lab.data.alternatives_data preprocess assets/alternatives/finer_ord work/alternatives/corpus \\
        --fractions 5 10 25 50 100 --seed 0

`install` copies the three splits and the licence out of a clone or git directory of the repository (`--from`: a
folder holding `data/train/train.csv`..., or a git directory, read at `--commit`) and checks each file against the
sha256 pinned below; a mismatch stops it. The files are not committed (the project commits no fetched data); their
checksums are, here and in project.yml's assets.

`preprocess` writes `dev.spacy` (validation), `test.spacy`, and `train_{pct}.spacy` for each training fraction: one
fixed-seed order of the training sentences, of which each fraction keeps the first round(n * pct / 100), so every
subset holds every smaller one (nested); the kept sentences stay in their articles' order, 10 to a Doc, as
preprocess_conll.py writes CoNLL-2003. A summary (`corpus.json`: counts and sha256 of every file) is written beside.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
import sys
from pathlib import Path

SOURCE = "gtfintechlab/FiNER-ORD"
COMMIT = "3c41d89adb1a4becd1b47f52ddd7a72454249c3a"
# file in the repository -> (name under --dest, sha256)
FILES = {
    "data/train/train.csv": ("train.csv", "12d81f719a58b0f78866a4ce6640195b6d9eb4d82f33194fa368ae1e7b599ac9"),
    "data/train/val.csv": ("val.csv", "9cad96d9719569db9f7de843f23461bd37884e283ec3a07e211319d3a275ee97"),
    "data/test/test.csv": ("test.csv", "51d305cb7e4431592a6880fe1c88b7b7ce35026f4249ce22d2d9cd84b4150b5b"),
    "LICENSE.md": ("LICENSE.md", "176fdd712458a69435102791f06cf14bc66f86089351415c9df9c3c263798631"),
}
LABELS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC", 5: "B-ORG", 6: "I-ORG"}


def sha256_bytes(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def read_source(source: Path, path: str, commit: str) -> bytes:
    """One file of the repository: from a work tree (`source/path`) or a git directory (`git show commit:path`)."""
    if (source / path).is_file():
        return (source / path).read_bytes()
    shown = subprocess.run(["git", f"--git-dir={source}", "show", f"{commit}:{path}"], capture_output=True, check=False)
    if shown.returncode:
        raise SystemExit(f"--from {source}: no {path} there (neither a file nor in git at {commit[:7]})")
    return shown.stdout


def install(source: Path, dest: Path, commit: str = COMMIT) -> None:
    """Copies the pinned files from `source` to `dest`, each checked against its sha256 before it is written."""
    dest.mkdir(parents=True, exist_ok=True)
    for path, (name, digest) in FILES.items():
        data = read_source(source, path, commit)
        found = sha256_bytes(data)
        if found != digest:
            raise SystemExit(f"{source}/{path}: sha256 {found}, expected {digest} ({SOURCE} at {commit[:7]})")
        (dest / name).write_bytes(data)
        print(f"{dest / name}: sha256 {digest[:12]}… as pinned")


def check(folder: Path) -> None:
    """Stops with one line if a split is missing or differs from its pin."""
    from spacy_elmo.provenance import sha256

    for path, (name, digest) in FILES.items():
        file = folder / name
        if not file.is_file():
            raise SystemExit(
                f"{file} missing: python -m lab.data.alternatives_data install --from <a clone of {SOURCE}>"
            )
        if sha256(file) != digest:
            raise SystemExit(f"{file}: sha256 {sha256(file)}, expected {digest} ({SOURCE}:{path} at {COMMIT[:7]})")


def read_split(path: Path) -> list[list[list[tuple[str, None, str]]]]:
    """Articles as lists of sentences, a sentence as (word, None, IOB2 tag) rows, in the file's order."""
    docs: dict[str, dict[str, list[tuple[str, None, str]]]] = {}
    with path.open(encoding="utf8", newline="") as file:
        for line, row in enumerate(csv.DictReader(file), start=2):
            label = int(row["gold_label"])
            if label not in LABELS or not row["gold_token"]:
                raise SystemExit(f"{path}:{line}: gold_label {row['gold_label']!r} / token {row['gold_token']!r}")
            sentence = docs.setdefault(row["doc_idx"], {}).setdefault(row["sent_idx"], [])
            sentence.append((row["gold_token"], None, LABELS[label]))
    return [list(sentences.values()) for sentences in docs.values()]


def nested_subsets(docs: list, fractions: list[float], seed: int) -> dict[float, list]:
    """{fraction: docs keeping the first round(n * fraction) sentences of one seeded order}: nested by construction."""
    ids = [(i, j) for i, sents in enumerate(docs) for j in range(len(sents))]
    order = ids[:]
    random.Random(seed).shuffle(order)
    subsets = {}
    for fraction in fractions:
        keep = set(order[: max(1, round(len(ids) * fraction))])
        kept = [[s for j, s in enumerate(sents) if (i, j) in keep] for i, sents in enumerate(docs)]
        subsets[fraction] = [sents for sents in kept if sents]
    return subsets


def write_docbin(docs: list, output: Path, n_sents: int = 10) -> dict:
    import spacy
    from spacy.tokens import DocBin

    from lab.data.preprocess_conll import make_doc

    vocab = spacy.blank("en").vocab
    doc_bin = DocBin(store_user_data=False)
    counts = {"sentences": 0, "tokens": 0, "entities": 0, "articles": len(docs)}
    for sents in docs:
        for i in range(0, len(sents), n_sents):
            doc = make_doc(vocab, sents[i : i + n_sents])
            doc_bin.add(doc)
            counts["tokens"] += len(doc)
            counts["entities"] += len(doc.ents)
        counts["sentences"] += len(sents)
    output.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(output)
    print(f"{output}: {counts['sentences']} sentences, {counts['tokens']} tokens, {counts['entities']} entities")
    return counts


def preprocess(data: Path, out: Path, fractions: list[str], seed: int) -> dict:
    from spacy_elmo.provenance import sha256

    check(data)
    summary: dict = {"source": f"{SOURCE} at {COMMIT}", "seed": seed, "files": {}}
    for split, name in (("dev", "val.csv"), ("test", "test.csv")):
        target = out / f"{split}.spacy"
        summary["files"][target.name] = {**write_docbin(read_split(data / name), target), "sha256": sha256(target)}
    train = read_split(data / "train.csv")
    subsets = nested_subsets(train, [float(pct) / 100 for pct in fractions], seed)
    for pct in fractions:
        target = out / f"train_{pct}.spacy"
        counts = write_docbin(subsets[float(pct) / 100], target)
        summary["files"][target.name] = {**counts, "fraction": float(pct) / 100, "sha256": sha256(target)}
    (out / "corpus.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("install", help="copy the pinned files out of a clone or git directory of the repository")
    p.add_argument("--from", dest="source", type=Path, required=True)
    p.add_argument("--dest", type=Path, default=Path("assets/alternatives/finer_ord"))
    p.add_argument("--commit", default=COMMIT)
    p = sub.add_parser("preprocess", help="the splits -> dev/test/train_{pct}.spacy (nested training subsets)")
    p.add_argument("data", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--fractions", nargs="+", default=["5", "10", "25", "50", "100"])
    p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "install":
        install(args.source, args.dest, args.commit)
        return 0
    bad = [pct for pct in args.fractions if not pct.isdigit() or not 0 < int(pct) <= 100]
    if bad:
        parser.error(f"--fractions {' '.join(bad)}: expected whole percentages in 1..100")
    preprocess(args.data, args.out, args.fractions, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
