"""`spacy-elmo embed`: its arguments; the work is `tools.embed` (`dump_embeddings`, `print_embeddings`)."""

from __future__ import annotations

import sys

from ..precision import PRECISIONS
from .arguments import (
    add_command,
    add_device,
    add_no_progress,
    add_number,
    add_overwrite,
    contradiction,
    input_file_or_stdin,
)

DEFAULT_DIMS, DEFAULT_BATCH_SIZE, DEFAULT_LANG = 6, 32, "en"


def run(args) -> int:
    """MODEL INPUT OUTPUT.hdf5: all layers per line (bilm-tf layout); MODEL alone: stdin → vectors on stdout."""
    files = args.input is not None or args.output is not None
    if files and (args.input is None or args.output is None):
        contradiction("embed needs both INPUT and OUTPUT (or neither, to read stdin)")
    if files and args.dims is not None:
        contradiction("--dims applies to printing vectors of standard input (embed MODEL) only")
    if not files and (args.batch_size is not None or args.overwrite):
        contradiction(
            f"{'--batch-size' if args.batch_size is not None else '--overwrite'} applies to INPUT OUTPUT only"
        )
    if args.lang is not None and args.format != "text":
        contradiction("--lang applies to --format text only (tokenized lines are split on whitespace)")
    lang = args.lang or DEFAULT_LANG
    if files:
        from ..tools.embed import dump_embeddings

        written = dump_embeddings(
            args.model,
            args.input,
            args.output,
            batch_size=args.batch_size or DEFAULT_BATCH_SIZE,
            data_format=args.format,
            lang=lang,
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
        dims=args.dims or DEFAULT_DIMS,
        data_format=args.format,
        lang=lang,
        device=args.device,
        precision=args.precision,
    )
    return 0


def add_to(sub) -> None:
    p = add_command(sub, "embed", run)
    p.add_argument("model", metavar="MODEL", help="HF directory, hub id, or legacy directory")
    p.add_argument(
        "input",
        nargs="?",
        metavar="INPUT",
        type=input_file_or_stdin,
        help="UTF-8 text file, one sentence per line ('-' = stdin)",
    )
    p.add_argument(
        "output", nargs="?", metavar="OUTPUT", help="output .hdf5 (one dataset per line: [L+1, tokens, dim])"
    )
    add_number(
        p, "embed", "--dims", default=None, help="vector components to print (stdin mode)", shown_default=DEFAULT_DIMS
    )
    add_number(
        p, "embed", "--batch-size", default=None, help="sentences per forward pass", shown_default=DEFAULT_BATCH_SIZE
    )
    p.add_argument(
        "--format",
        choices=("tokenized", "text"),
        default="tokenized",
        help="tokenized: split lines on whitespace; text: spaCy tokenizer (--lang)",
    )
    p.add_argument("--lang", help=f"spaCy language for --format text (default: {DEFAULT_LANG})")
    add_overwrite(p, "OUTPUT")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="inference precision: fp32 (exact), bf16 (bf16 products, fp32 state; fp32 with a warning "
        "on a CPU without native bf16) or int8 (CPU); default: the model's own (fp32 unless saved otherwise)",
    )
    add_device(p)
    add_no_progress(p)
