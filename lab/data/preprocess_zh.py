"""Build a Chinese biLM corpus from the People's Daily (Jan. 1998) corpus.

Input lines are word-segmented and POS-tagged, e.g.

    19980101-01-001-001/m  迈向/v  充满/v  希望/n  的/u  新/a  世纪/n
    [中央/n  人民/n  广播/vn  电台/n]nt  ...

The leading ``YYYYMMDD-..../m`` id token (if present) and the ``/tag``
suffixes are removed; bracketed compounds are kept as their parts
("中央 人民 广播 电台"), or joined into one word with ``--join-compounds``. Person names, split
by the corpus into surname and given name ("江/nr 泽民/nr"), are joined ("江泽民") unless
``--split-names``.
Each non-empty input line becomes one output line of space-separated words.
A fixed-seed random ``--heldout-fraction`` of the lines goes to heldout.txt.

Also prints word-length statistics in UTF-8 bytes, since ELMo's character
CNN sees at most 50 byte ids per token (48 bytes plus begin/end markers).

Usage:
    python -m lab.data.preprocess_zh assets/zh/199801.txt corpus/zh
"""

import argparse
import random
import re
from pathlib import Path

ID_TOKEN = re.compile(r"^\d{8}-\d{2}-\d{3}-\d{3}/m$")
MAX_BYTES = 48


def parse_line(line, join_compounds=False, join_names=True):
    """Return the words of one tagged line.

    The corpus splits Chinese person names into surname and given name, both tagged /nr
    ("江/nr 泽民/nr"); with `join_names` a surname of 1-2 characters followed by a given name of
    1-2 characters becomes one word ("江泽民"), so names can be looked up as words.
    """
    tokens = line.split()
    if tokens and ID_TOKEN.match(tokens[0]):
        tokens = tokens[1:]
    words, tags, compound = [], [], None
    for token in tokens:
        starts = token.startswith("[") and "/" in token
        if starts:
            token = token[1:]
            compound = []
        ends = compound is not None and re.search(r"\][a-zA-Z]+$", token)
        if ends:
            token = token[: ends.start()]
        word, _, tag = token.rpartition("/") if "/" in token else (token, "", "")
        if compound is None:
            words.append(word)
            tags.append(tag)
        else:
            compound.append(word)
        if ends:
            parts = ["".join(compound)] if join_compounds else compound
            words.extend(parts)
            tags.extend([""] * len(parts))
            compound = None
    if compound:
        words.extend(compound)
        tags.extend([""] * len(compound))
    if join_names:
        words = join_person_names(words, tags)
    return [w for w in words if w]


def join_person_names(words, tags):
    """Joins each /nr surname (1-2 characters) with the /nr given name (1-2 characters) after it."""
    out, i = [], 0
    while i < len(words):
        if (
            i + 1 < len(words)
            and tags[i] == "nr"
            and tags[i + 1] == "nr"
            and 1 <= len(words[i]) <= 2
            and 1 <= len(words[i + 1]) <= 2
        ):
            out.append(words[i] + words[i + 1])
            i += 2
        else:
            out.append(words[i])
            i += 1
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("input", type=Path, help="People's Daily 199801.txt")
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--heldout-fraction", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--join-compounds", action="store_true")
    parser.add_argument("--split-names", action="store_true", help="keep surname and given name apart, as tagged")
    parser.add_argument("--limit-sents", type=int, default=0, help="keep first N lines")
    args = parser.parse_args()

    lines = []
    for raw in args.input.read_text(encoding="utf8").splitlines():
        words = parse_line(raw, args.join_compounds, join_names=not args.split_names)
        if words:
            lines.append(" ".join(words))
    if args.limit_sents:
        lines = lines[: args.limit_sents]

    rng = random.Random(args.seed)
    n_heldout = max(1, round(len(lines) * args.heldout_fraction))
    heldout_ids = set(rng.sample(range(len(lines)), n_heldout))
    heldout = [line for i, line in enumerate(lines) if i in heldout_ids]
    train = [line for i, line in enumerate(lines) if i not in heldout_ids]

    args.output_dir.mkdir(parents=True, exist_ok=True)
    for name, part in [("train.txt", train), ("heldout.txt", heldout)]:
        path = args.output_dir / name
        path.write_text("".join(line + "\n" for line in part), encoding="utf8")
        print(f"{path}: {len(part)} lines, {sum(len(text.split()) for text in part)} words")

    words = [w for line in lines for w in line.split()]
    n_bytes = [len(w.encode("utf8")) for w in words]
    longest = max(words, key=lambda w: len(w.encode("utf8")))
    n_long = sum(n > MAX_BYTES for n in n_bytes)
    print(f"longest word: {longest} ({len(longest.encode('utf8'))} bytes, {len(longest)} chars)")
    print(f"words over {MAX_BYTES} bytes: {n_long} of {len(words)} ({n_long / len(words):.5%})")


if __name__ == "__main__":
    main()
