"""`spacy-elmo similar`: its arguments; the work is `tools.similar.nearest_words`."""

from __future__ import annotations

from .arguments import add_command, add_device, add_no_progress, add_number, contradiction, input_file

# contextual mode's settings (with --corpus): None on the command line = not given
CONTEXTUAL_DEFAULTS = {"layer": 2, "min_count": 2, "max_sentences": 0}


def run(args) -> int:
    """Nearest words to WORD by cosine: context-independent token vectors, or (--corpus) each word's
    contextual vectors averaged over a text."""
    from ..tools.similar import nearest_words

    given = {name: value for name in CONTEXTUAL_DEFAULTS if (value := getattr(args, name)) is not None}
    if args.corpus is None and given:
        option = "--" + next(iter(given)).replace("_", "-")
        contradiction(f"{option} applies to contextual mode (--corpus FILE) only")
    if args.corpus is not None and args.vocab is not None:
        contradiction("--vocab applies without --corpus only (with --corpus the candidates are the corpus's words)")
    found = nearest_words(
        args.model,
        args.word,
        args.n,
        vocab_file=args.vocab,
        corpus=args.corpus,
        device=args.device,
        progress=not args.no_progress,
        **{**CONTEXTUAL_DEFAULTS, **given},
    )
    for word, score in found:
        print(f"{score:.4f}\t{word}")
    return 0


def add_to(sub) -> None:
    p = add_command(sub, "similar", run)
    p.add_argument("model", metavar="MODEL", help="model directory (with vocab.txt) or legacy files")
    p.add_argument("word", metavar="WORD", help="query word (need not be in the vocabulary)")
    add_number(p, "similar", "-n", default=10, help="how many neighbours")
    p.add_argument(
        "--vocab", type=input_file, help="candidate words, one per line (default: MODEL/vocab.txt; not with --corpus)"
    )
    p.add_argument(
        "--corpus",
        type=input_file,
        help="contextual mode: average each word's vectors over this text "
        "(one whitespace-tokenized sentence per line); candidates are its words",
    )
    defaults = CONTEXTUAL_DEFAULTS
    add_number(
        p, "similar", "--layer", default=None, help="contextual mode: biLM layer", shown_default=defaults["layer"]
    )
    add_number(
        p,
        "similar",
        "--min-count",
        default=None,
        help="contextual mode: words seen fewer times are skipped",
        shown_default=defaults["min_count"],
    )
    add_number(
        p,
        "similar",
        "--max-sentences",
        default=None,
        help="contextual mode: read at most this many lines",
        shown_default=defaults["max_sentences"],
    )
    add_device(p)
    add_no_progress(p)
