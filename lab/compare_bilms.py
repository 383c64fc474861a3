"""Held-out perplexity of biLMs trained on the same text with different settings, side by side.

    python -m lab.compare_bilms --bilm "UTF-8 bytes" work/bilm_zh --bilm "character lexicon" work/bilm_zh_lexicon \
        --title "Chinese biLM: UTF-8 bytes vs a character lexicon" --out work/results/zh_lexicon.json

Each biLM folder is a finished `spacy-elmo pretrain` output: its `pretrain_summary.json` gives the
held-out perplexity (on the held-out text given to pretraining: dev text, never test), steps and
minutes, its config.json the character set and sizes. The perplexities compare only when the runs
share the held-out text and the vocabulary (pass `--paths.vocab` to the second run), which this
script checks. Every biLM's provenance is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lab.report import find_provenance, own_provenance
from spacy_elmo.provenance import sha256


def read_bilm(name: str, folder: Path) -> dict:
    summary_path, config_path = folder / "pretrain_summary.json", folder / "config.json"
    for path in (summary_path, config_path):
        if not path.is_file():
            raise SystemExit(f"{path}: missing (is {folder} a finished `spacy-elmo pretrain` output?)")
    summary, config = json.loads(summary_path.read_text()), json.loads(config_path.read_text())
    if not isinstance(summary.get("heldout_ppl"), (int, float)):
        raise SystemExit(f"{summary_path}: heldout_ppl: expected a number (was the run given paths.heldout?)")
    vocab = folder / "vocab.txt"
    return {
        "name": name,
        "bilm": str(folder),
        "characters": f"lexicon of {config['char_vocab_size']:,} ids"
        if config.get("char_vocab_size")
        else "UTF-8 bytes",
        "parameters": summary.get("parameters"),
        "steps": summary["step"],
        "train_minutes": round(summary["train_seconds"] / 60, 1),
        "heldout_ppl": round(summary["heldout_ppl"], 2),
        "vocab_sha256": sha256(vocab) if vocab.is_file() else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bilm", nargs=2, action="append", required=True, metavar=("NAME", "FOLDER"))
    parser.add_argument("--title", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    prov = own_provenance()
    bilms = [read_bilm(name, Path(folder)) for name, folder in args.bilm]
    if len({b["vocab_sha256"] for b in bilms}) != 1:
        raise SystemExit(
            "the biLMs have different vocabularies: their perplexities do not compare (pass --paths.vocab)"
        )
    steps = find_provenance([Path(b["bilm"]) for b in bilms])
    result = {"title": args.title, "bilms": bilms, "provenance": {"report": prov.record(), "steps": steps}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for b in bilms:
        print(f"{b['name']:>20}  {b['characters']:>26}  ppl {b['heldout_ppl']:8.2f}  {b['train_minutes']:.1f} min")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
