"""Convert a CoNLL-2003 file (or a WNUT-17 or CoNLL-U one) into a spaCy DocBin (.spacy) for NER or tagging.

Input lines are ``WORD POS CHUNK NER`` with a blank line between sentences and
``-DOCSTART- -X- -X- O`` lines between documents. (``spacy convert -c ner``
expects ``-DOCSTART- -X- O O`` and would not see these boundaries, so the
Docs are built here directly.) ``--format wnut17`` reads ``WORD NER`` lines (no
tags, no documents); ``--format conllu`` reads Universal Dependencies files:
FORM and UPOS (into ``token.tag_``) of each word, ``# newdoc`` lines between
documents, no entities.

Each output Doc holds up to ``--n-sents`` consecutive sentences of one source
document, with sentence starts set, entities from the NER column (IOB1 or
IOB2), and ``token.tag_`` from the POS column (usable for a tagger).

Sub-sampling:
    --fraction F --seed S  keep a fixed random fraction of the sentences
                           (or of the documents, with --sample-by document)
    --limit N              keep only the first N sentences (smoke tests)

With ``--lm-text OUT.txt`` the sentences (after --limit, before --fraction)
are also written one per line, tokens separated by spaces, for biLM
pretraining. Only pass it when converting the training file.

Usage:
    python -m lab.data.preprocess_conll assets/conll2003/train.txt corpus/train.spacy \\
        --lm-text corpus/conll_train.txt
    python -m lab.data.preprocess_conll assets/conll2003/train.txt corpus/train_10pct.spacy \\
        --fraction 0.1 --seed 0
"""

import argparse
import random
from pathlib import Path

import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo

DOCSTART = "-DOCSTART-"


def _rows(line, format):
    """One line as `[word, pos, ner]` (a word), `[DOCSTART]` (a document boundary), `[]` (a sentence's end) or
    None (nothing: a comment, a CoNLL-U multiword token or empty node). A CoNLL-U FORM may hold a space, so
    its columns are split at tabs."""
    if format == "conllu":
        if line.startswith("# newdoc"):
            return [DOCSTART]
        columns = line.split("\t")
        if line.startswith("#") or (line.strip() and not (len(columns) == 10 and columns[0].isdigit())):
            return None  # multiword tokens (1-2) and empty nodes (1.1) are not words of the sentence
        return [columns[1], columns[3], "O"] if line.strip() else []
    fields = line.split()
    if fields and format == "wnut17":
        return [fields[0], None, fields[-1]]
    return [fields[0], fields[1], fields[-1]] if fields and fields[0] != DOCSTART else fields[:1]


def read_conll(path, format="conll2003"):
    """Return documents as lists of sentences; a sentence is a list of
    (word, pos, ner) tuples (pos None for WNUT-17, ner "O" for CoNLL-U)."""
    docs, sents, sent = [], [], []
    for line in Path(path).read_text(encoding="utf8").splitlines() + [""]:
        fields = _rows(line, format)
        if fields is None:
            continue
        if fields and fields[0] == DOCSTART:
            if sent:
                sents.append(sent)
            if sents:
                docs.append(sents)
            sents, sent = [], []
        elif fields:
            sent.append(tuple(fields))
        elif sent:
            sents.append(sent)
            sent = []
    if sents:
        docs.append(sents)
    return docs


def limit_sents(docs, limit):
    """Keep the first `limit` sentences, preserving document structure."""
    kept, total = [], 0
    for sents in docs:
        if total >= limit:
            break
        sents = sents[: limit - total]
        kept.append(sents)
        total += len(sents)
    return kept


def sample(docs, fraction, seed, by):
    """Keep a fixed-seed random fraction of the sentences or documents, in
    their original order."""
    rng = random.Random(seed)
    if by == "document":
        n = max(1, round(len(docs) * fraction))
        keep = set(rng.sample(range(len(docs)), n))
        return [sents for i, sents in enumerate(docs) if i in keep]
    ids = [(i, j) for i, sents in enumerate(docs) for j in range(len(sents))]
    keep = set(rng.sample(ids, max(1, round(len(ids) * fraction))))
    docs = [[s for j, s in enumerate(sents) if (i, j) in keep] for i, sents in enumerate(docs)]
    return [sents for sents in docs if sents]


def make_doc(vocab, sents):
    """Build one Doc from a list of sentences."""
    rows = [row for sent in sents for row in sent]
    words = [word for word, _, _ in rows]
    sent_starts = [j == 0 for sent in sents for j in range(len(sent))]
    tags = [pos for _, pos, _ in rows] if rows[0][1] is not None else None
    doc = Doc(vocab, words=words, tags=tags, sent_starts=sent_starts)
    biluo = [tag for sent in sents for tag in iob_to_biluo([ner for _, _, ner in sent])]
    doc.ents = biluo_tags_to_spans(doc, biluo)
    return doc


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", type=Path, help="CoNLL-2003 file (or WNUT-17, CoNLL-U: --format)")
    parser.add_argument("--format", choices=["conll2003", "wnut17", "conllu"], default="conll2003")
    parser.add_argument("output", type=Path, help="output .spacy file")
    parser.add_argument("--n-sents", type=int, default=10, help="sentences per Doc")
    parser.add_argument("--fraction", type=float, default=1.0, help="fraction to keep")
    parser.add_argument("--seed", type=int, default=0, help="seed for --fraction")
    parser.add_argument("--sample-by", choices=["sentence", "document"], default="sentence")
    parser.add_argument("--limit", type=int, default=0, help="keep first N sentences")
    parser.add_argument("--lm-text", type=Path, help="also write sentences as plain text")
    parser.add_argument("--lang", default="en")
    args = parser.parse_args()

    docs = read_conll(args.input, args.format)
    if args.limit:
        docs = limit_sents(docs, args.limit)
    if args.lm_text:
        args.lm_text.parent.mkdir(parents=True, exist_ok=True)
        with args.lm_text.open("w", encoding="utf8") as f:
            for sents in docs:
                for sent in sents:
                    f.write(" ".join(word for word, _, _ in sent) + "\n")
    if args.fraction < 1.0:
        docs = sample(docs, args.fraction, args.seed, args.sample_by)

    vocab = spacy.blank(args.lang).vocab
    doc_bin = DocBin(store_user_data=False)
    n_sents = n_words = n_ents = 0
    for sents in docs:
        for i in range(0, len(sents), args.n_sents):
            doc = make_doc(vocab, sents[i : i + args.n_sents])
            doc_bin.add(doc)
            n_words += len(doc)
            n_ents += len(doc.ents)
        n_sents += len(sents)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    doc_bin.to_disk(args.output)
    print(
        f"{args.output}: {len(doc_bin)} docs, {n_sents} sentences, "
        f"{n_words} tokens, {n_ents} entities (from {len(docs)} source documents)"
    )
    if args.lm_text:
        print(f"{args.lm_text}: sentences written for LM pretraining")


if __name__ == "__main__":
    main()
