"""`spacy-elmo convert`: its arguments; the work is `tools.convert.convert`."""

from __future__ import annotations

from .arguments import add_command, add_no_progress


def run(args) -> int:
    """Any model reference (legacy options.json + weights, an ELMoForManyLangs directory, a URL, an
    HF directory or hub id) → a model directory (config.json, model.safetensors, tokenizer, card)."""
    if len(args.paths) not in (2, 3):
        raise ValueError("convert takes SOURCE OUTPUT or OPTIONS.json WEIGHTS.hdf5 OUTPUT")
    from ..tools.convert import convert

    *source, output = args.paths
    model = convert(
        source, output, lang=args.lang, license=args.license, progress=not args.no_progress, overwrite=args.overwrite
    )
    n_params = sum(p.numel() for p in model.parameters())
    c = model.config
    print(f"Saved ELMo ({c.num_layers} layers, dim {c.output_dim}, {n_params:,} parameters) to {output}")
    return 0


def add_to(sub) -> None:
    p = add_command(sub, "convert", run, usage="spacy-elmo convert [-h] (SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT")
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="SOURCE OUTPUT, where SOURCE is a legacy directory, an ELMoForManyLangs directory, a URL "
        "(an archive, or 'OPTIONS_URL,WEIGHTS_URL'), an HF directory or a hub id; "
        "or OPTIONS.json WEIGHTS.hdf5 OUTPUT",
    )
    p.add_argument(
        "--lang",
        help="spaCy language whose tokenizer splits raw text, saved with the tokenizer "
        "(default: en; xx, spaCy's multi-language tokenizer, for ELMoForManyLangs)",
    )
    p.add_argument("--license", help="licence of the weights for the model card, e.g. apache-2.0")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an OUTPUT folder holding a model convert did not write, replacing its files "
        "(convert's own earlier output is always replaced)",
    )
    add_no_progress(p)
