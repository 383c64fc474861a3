"""`spacy-elmo convert`: its arguments; the work is `tools.convert.convert`."""

from __future__ import annotations

from .arguments import add_command, add_no_progress, add_overwrite, contradiction

PATHS = "(SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT"


def run(args) -> int:
    """Any model reference (legacy options.json + weights, an ELMoForManyLangs directory, a URL, an
    HF directory or hub id) → a model directory (config.json, model.safetensors, tokenizer, card)."""
    if len(args.paths) not in (2, 3):
        contradiction(f"convert takes {PATHS}, got {len(args.paths)} path{'s' * (len(args.paths) != 1)}")
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
    p = add_command(sub, "convert", run)
    paths = p.add_argument(
        "paths",
        nargs="+",
        help="SOURCE OUTPUT, where SOURCE is a legacy directory, an ELMoForManyLangs directory, a URL "
        "(an archive, or 'OPTIONS_URL,WEIGHTS_URL'), an HF directory or a hub id; "
        "or OPTIONS.json WEIGHTS.hdf5 OUTPUT",
    )
    paths.usage = PATHS  # type: ignore[attr-defined]  # (arguments.HelpFormatter shows it so)
    p.add_argument(
        "--lang",
        help="spaCy language whose tokenizer splits raw text, saved with the tokenizer "
        "(default: the source's own, else en; xx, spaCy's multi-language tokenizer, for ELMoForManyLangs)",
    )
    p.add_argument("--license", help="licence of the weights for the model card, e.g. apache-2.0")
    add_overwrite(p, "the model files of an OUTPUT folder (other files there stay)")
    add_no_progress(p)
