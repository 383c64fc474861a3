"""`spacy-elmo embed`: its arguments; the work is `tools.embed` (`dump_embeddings`, `print_embeddings`)."""

from __future__ import annotations

import sys

from ..precision import PRECISIONS
from .arguments import USER_ERROR, add_command, add_device, add_no_progress


def run(args) -> int:
    """MODEL INPUT OUTPUT.hdf5: all layers per line (bilm-tf layout); MODEL alone: stdin → vectors on stdout."""
    if args.input is not None or args.output is not None:
        if args.input is None or args.output is None:
            print("error: embed needs both INPUT and OUTPUT (or neither, to read stdin)", file=sys.stderr)
            return USER_ERROR
        from ..tools.embed import dump_embeddings

        written = dump_embeddings(
            args.model,
            args.input,
            args.output,
            batch_size=args.batch_size,
            data_format=args.format,
            lang=args.lang,
            progress=not args.no_progress,
            device=args.device,
            overwrite=args.overwrite,
            precision=args.precision,
        )
        print(f"Wrote the layers of {written:,} lines to {args.output}", file=sys.stderr)
        return 0
    from ..tools.embed import print_embeddings

    print_embeddings(
        args.model,
        dims=args.dims,
        data_format=args.format,
        lang=args.lang,
        device=args.device,
        precision=args.precision,
    )
    return 0


def add_to(sub) -> None:
    p = add_command(sub, "embed", run)
    p.add_argument("model", help="HF directory, hub id, or legacy directory")
    p.add_argument("input", nargs="?", help="UTF-8 text file, one sentence per line ('-' = stdin)")
    p.add_argument("output", nargs="?", help="output .hdf5 (one dataset per line: [L+1, tokens, dim])")
    p.add_argument("--dims", type=int, default=6, help="vector components to print (stdin mode)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    p.add_argument(
        "--format",
        choices=("tokenized", "text"),
        default="tokenized",
        help="tokenized: split lines on whitespace; text: spaCy tokenizer (--lang)",
    )
    p.add_argument("--lang", default="en", help="spaCy language for --format text")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing OUTPUT that embed did not write (its own earlier output is always replaced)",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="inference precision: fp32 (exact), bf16 (bf16 products, fp32 state; fp32 with a warning "
        "on a CPU without native bf16) or int8 (CPU); default: the model's own (fp32 unless saved otherwise)",
    )
    add_device(p)
    add_no_progress(p)
