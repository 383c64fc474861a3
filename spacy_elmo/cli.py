"""The `spacy-elmo` command line: one module, one sub-command per job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_convert(args) -> int:
    """Legacy options.json + lm_weights.hdf5 → HF directory (config.json, model.safetensors, tokenizer)."""
    from . import ElmoTokenizer, load_legacy

    model = load_legacy(args.options, args.weights)
    model.save_pretrained(args.output)
    ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token).save_pretrained(args.output)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"Saved ELMo ({model.config.num_layers} layers, dim {model.config.output_dim}, {n_params:,} parameters) to {args.output}")
    return 0


def cmd_embed(args) -> int:
    """Sentences on stdin (one per line, whitespace-tokenized) → layer shapes and vectors on stdout."""
    import torch

    from . import ElmoTokenizer
    from .util import load_model

    model = load_model(args.model)
    tokenizer = ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token)
    lines = [line.split() for line in sys.stdin.read().splitlines() if line.strip()]
    if not lines:
        print("No input: give one whitespace-tokenized sentence per line on stdin.", file=sys.stderr)
        return 1
    torch.set_printoptions(precision=4, sci_mode=False)
    with torch.no_grad():
        for words in lines:
            out = model(**tokenizer([words]))
            layers = torch.stack(out.hidden_states)[:, 0]
            print(f"sentence: {' '.join(words)}")
            print(f"layers: {tuple(layers.shape)}  (L+1 layers, tokens, dim)")
            for i, word in enumerate(words):
                vec = layers.mean(0)[i]
                shown = ", ".join(f"{v:.4f}" for v in vec[: args.dims].tolist())
                print(f"  {word:>15s}  [{shown}{', ...' if vec.numel() > args.dims else ''}]")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spacy-elmo", description="ELMo for spaCy and Hugging Face")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("convert", help=cmd_convert.__doc__)
    p.add_argument("options", type=Path, help="legacy options.json")
    p.add_argument("weights", type=Path, help="legacy lm_weights.hdf5")
    p.add_argument("output", type=Path, help="output directory (HF layout)")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("embed", help=cmd_embed.__doc__)
    p.add_argument("model", help="HF directory, hub id, or legacy directory")
    p.add_argument("--dims", type=int, default=6, help="vector components to print")
    p.set_defaults(func=cmd_embed)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .legacy import LegacyFormatError

    args, extra = build_parser().parse_known_args(argv)
    args.overrides = extra
    if extra and not getattr(args, "accepts_overrides", False):
        build_parser().error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except (LegacyFormatError, FileNotFoundError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
