"""Build the English biLM pretraining corpus.

BBC News articles are tokenized with the ``spacy.blank("en")`` tokenizer and
split into sentences with the rule-based ``sentencizer`` (each paragraph is
processed on its own, so titles and paragraphs never merge). Output is one
sentence per line, tokens separated by single spaces, original case kept.
Like CoNLL-2003, hyphenated words and numbers stay one token ("all-rounder",
"6-4"), so the tokenizer's infix rules that split on hyphens are removed.

A fixed-seed random set of whole BBC articles (about ``--heldout-fraction``
of the sentences) goes to ``heldout.txt``; held-out sentences that also
occur in the training part (the BBC set has duplicate articles) are dropped.
``train.txt`` is the remaining BBC sentences followed by the CoNLL training
sentences written by ``preprocess_conll.py --lm-text``.

Usage:
    python -m lab.data.preprocess_lm_text --bbc-dir assets/bbcnews \\
        --conll-text corpus/conll_train.txt --output-dir corpus/lm
"""

import argparse
import random
import re
from pathlib import Path

import spacy
from spacy.util import compile_infix_regex


def make_nlp():
    """Blank English tokenizer that keeps hyphenated tokens, plus sentencizer."""
    nlp = spacy.blank("en")
    infixes = [rule for rule in nlp.Defaults.infixes if not re.search(rule, "a-b") and not re.search(rule, "1-2")]
    nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
    nlp.add_pipe("sentencizer")
    return nlp


def read_article(path):
    """Return the paragraphs of one article. One file is not valid UTF-8
    (a cp1252 pound sign), so fall back to cp1252."""
    data = path.read_bytes()
    try:
        text = data.decode("utf8")
    except UnicodeDecodeError:
        text = data.decode("cp1252")
    return [line.strip() for line in text.splitlines() if line.strip()]


def article_sentences(nlp, paragraphs):
    """Tokenize and sentence-split the paragraphs of one article."""
    sents = []
    for doc in nlp.pipe(paragraphs):
        for sent in doc.sents:
            tokens = [t.text for t in sent if not t.is_space]
            if tokens:
                sents.append(" ".join(tokens))
    return sents


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bbc-dir", type=Path, default=Path("assets/bbcnews"))
    parser.add_argument("--conll-text", type=Path, required=True, help="CoNLL train sentences, one per line")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--heldout-fraction", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--limit-sents", type=int, default=0, help="keep at most N sentences from each source (smoke tests)"
    )
    args = parser.parse_args()

    nlp = make_nlp()
    files = sorted(args.bbc_dir.glob("*/*.txt"))
    if not files:
        parser.error(f"no articles found under {args.bbc_dir}/*/*.txt")

    rng = random.Random(args.seed)
    n_heldout = max(1, round(len(files) * args.heldout_fraction))
    heldout_files = set(rng.sample(files, n_heldout))

    train, heldout = [], []
    for path in files:
        sents = article_sentences(nlp, read_article(path))
        (heldout if path in heldout_files else train).extend(sents)
    if args.limit_sents:
        train = train[: args.limit_sents]
        heldout = heldout[: max(1, round(args.limit_sents * args.heldout_fraction))]
    seen = set(train)
    heldout = [s for s in heldout if s not in seen]

    conll = [line.strip() for line in args.conll_text.read_text(encoding="utf8").splitlines()]
    conll = [line for line in conll if line]
    if args.limit_sents:
        conll = conll[: args.limit_sents]

    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, lines in [("train.txt", train + conll), ("heldout.txt", heldout)]:
        path = args.output_dir / name
        path.write_text("".join(line + "\n" for line in lines), encoding="utf8")
        n_tokens = sum(len(line.split()) for line in lines)
        print(f"{path}: {len(lines)} sentences, {n_tokens} tokens")
    print(f"BBC: {len(train)} train + {len(heldout)} held-out sentences; CoNLL: {len(conll)}")


if __name__ == "__main__":
    main()
