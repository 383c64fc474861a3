"""Writes a markdown table of the nearest vocabulary words for a few query words (e.g. names).

    python scripts/similar_report.py MODEL_DIR OUT.md WORD [WORD ...] [-n 8]

Uses the same functions as `spacy-elmo similar` (cosine over the biLM's context-independent token
vectors; candidates are the words of the model's vocab.txt).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from spacy_elmo.training.similar import find_vocab, most_similar
from spacy_elmo.util import load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("output", type=Path)
    parser.add_argument("words", nargs="+")
    parser.add_argument("-n", type=int, default=8)
    args = parser.parse_args()
    model = load_model(args.model)
    vocab = find_vocab(args.model)
    lines = [f"Nearest words ({args.n}) by cosine of token vectors, model `{args.model}`, vocabulary of {len(vocab.words):,} words.", ""]
    lines += ["| word | nearest words (cosine) |", "|---|---|"]
    for word in args.words:
        found = ", ".join(f"{w} ({s:.2f})" for w, s in most_similar(model, word, vocab, args.n))
        lines.append(f"| {word} | {found} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
