"""Writes a markdown table of the nearest vocabulary words for a few query words (e.g. names).

    python -m lab.reports.similar_report MODEL_DIR OUT.md WORD [WORD ...] [-n 8] [--corpus TEXT]

Uses the same functions as `spacy-elmo similar`: cosine over the biLM's context-independent token
vectors (candidates: the words of the model's vocab.txt) and, with --corpus, over each word's
top-layer vectors averaged over that text (candidates: its words seen --min-count times).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from spacy_elmo.formats.references import load_model
from spacy_elmo.tools.similar import (
    contextual_word_vectors,
    find_vocab,
    most_similar,
    most_similar_in_context,
    read_sentences,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("output", type=Path)
    parser.add_argument("words", nargs="+")
    parser.add_argument("-n", type=int, default=8)
    parser.add_argument("--corpus", type=Path, help="also list contextual neighbours averaged over this text")
    parser.add_argument("--layer", type=int, default=-1, help="biLM layer for --corpus (-1 = top)")
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--max-sentences", type=int, default=0)
    args = parser.parse_args()
    model = load_model(args.model)
    vocab = find_vocab(args.model)
    lines = [
        f"Nearest words ({args.n}) by cosine of token vectors, model `{args.model}`, vocabulary of "
        f"{len(vocab.words):,} words.",
        "",
    ]
    lines += ["| word | nearest words (cosine) |", "|---|---|"]
    for word in args.words:
        found = ", ".join(f"{w} ({s:.2f})" for w, s in most_similar(model, word, vocab, args.n))
        lines.append(f"| {word} | {found} |")
    if args.corpus is not None:
        layer = args.layer % model.config.num_output_layers
        started = time.time()
        words, vectors = contextual_word_vectors(
            model, read_sentences(args.corpus, args.max_sentences), layer, args.min_count
        )
        lines += [
            "",
            f"Contextual: layer-{layer} vectors averaged over each word's occurrences in `{args.corpus}`"
            f"{f' (first {args.max_sentences:,} lines)' if args.max_sentences else ''}, centred on the mean word; "
            f"{len(words):,} words seen {args.min_count}+ times ({time.time() - started:.0f} s).",
            "",
            "| word | nearest words in context (cosine) |",
            "|---|---|",
        ]
        for word in args.words:
            try:
                found = ", ".join(f"{w} ({s:.2f})" for w, s in most_similar_in_context(words, vectors, word, args.n))
            except KeyError:
                found = f"(fewer than {args.min_count} occurrences in the text)"
            lines.append(f"| {word} | {found} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
