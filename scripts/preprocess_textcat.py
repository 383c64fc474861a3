"""Convert the BBC News articles into spaCy DocBins for text classification.

Each article ``<bbc-dir>/<category>/<nnn>.txt`` becomes one Doc with
mutually exclusive ``doc.cats`` over the five categories. Articles are split
at random (fixed seed) into train/dev/test.

Note: preprocess_lm_text.py uses the same articles as unlabeled biLM text,
so the biLM has seen the dev/test article text (not their labels).

Usage:
    python scripts/preprocess_textcat.py assets/bbcnews corpus/textcat
"""

import argparse
import random
from pathlib import Path

import spacy
from spacy.tokens import DocBin


def read_text(path):
    """Article text; one file is cp1252 rather than UTF-8."""
    data = path.read_bytes()
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError:
        text = data.decode("cp1252")
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bbc_dir", type=Path)
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--dev-fraction", type=float, default=0.1)
    parser.add_argument("--test-fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=0, help="keep N random articles")
    args = parser.parse_args()

    files = sorted(args.bbc_dir.glob("*/*.txt"))
    labels = sorted({path.parent.name for path in files})
    random.Random(args.seed).shuffle(files)
    if args.limit:
        files = files[: args.limit]
    n_dev = round(len(files) * args.dev_fraction)
    n_test = round(len(files) * args.test_fraction)
    splits = {
        "dev": files[:n_dev],
        "test": files[n_dev : n_dev + n_test],
        "train": files[n_dev + n_test :],
    }

    nlp = spacy.blank("en")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, paths in splits.items():
        doc_bin = DocBin(store_user_data=False)
        for path in sorted(paths):
            doc = nlp.make_doc(read_text(path))
            doc.cats = {label: float(label == path.parent.name) for label in labels}
            doc_bin.add(doc)
        doc_bin.to_disk(args.output_dir / f"{name}.spacy")
        print(f"{args.output_dir / name}.spacy: {len(paths)} articles")


if __name__ == "__main__":
    main()
