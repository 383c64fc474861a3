"""`spacy-elmo similar`: its arguments; the work is `tools.similar.nearest_words`."""

from __future__ import annotations

from pathlib import Path

from .arguments import add_command, add_device, add_no_progress


def run(args) -> int:
    """Nearest words to WORD by cosine: context-independent token vectors, or (--corpus) each word's
    contextual vectors averaged over a text."""
    from ..tools.similar import nearest_words

    found = nearest_words(
        args.model,
        args.word,
        args.n,
        vocab_file=args.vocab,
        corpus=args.corpus,
        layer=args.layer,
        min_count=args.min_count,
        max_sentences=args.max_sentences,
        device=args.device,
        progress=not args.no_progress,
    )
    for word, score in found:
        print(f"{score:.4f}\t{word}")
    return 0


def add_to(sub) -> None:
    p = add_command(sub, "similar", run)
    p.add_argument("model", help="model directory (with vocab.txt) or legacy files")
    p.add_argument("word", help="query word (need not be in the vocabulary)")
    p.add_argument("-n", type=int, default=10, help="how many neighbours")
    p.add_argument("--vocab", type=Path, help="candidate words, one per line (default: MODEL/vocab.txt)")
    p.add_argument(
        "--corpus",
        type=Path,
        help="contextual mode: average each word's vectors over this text "
        "(one whitespace-tokenized sentence per line); candidates are its words",
    )
    p.add_argument("--layer", type=int, default=2, help="contextual mode: biLM layer (0 = token vectors)")
    p.add_argument("--min-count", type=int, default=2, help="contextual mode: words seen fewer times are skipped")
    p.add_argument(
        "--max-sentences", type=int, default=0, help="contextual mode: read at most this many lines (0 = all)"
    )
    add_device(p)
    add_no_progress(p)
