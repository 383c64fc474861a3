"""The `spacy-elmo` command line: one module, one sub-command per job."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_convert(args) -> int:
    """Any model reference (legacy options.json + weights, an ELMoForManyLangs directory, a URL, an
    HF directory or hub id) → a model directory (config.json, model.safetensors, tokenizer, card)."""
    from .loading import load_pretrained
    from .model_directory import save_model_directory

    if len(args.paths) not in (2, 3):
        raise ValueError("convert takes SOURCE OUTPUT or OPTIONS.json WEIGHTS.hdf5 OUTPUT")
    *source, output = args.paths
    if len(source) == 2:
        _check_legacy_order(Path(source[0]), Path(source[1]))
    reference = ",".join(source)
    model, tokenizer = load_pretrained(reference, lang=args.lang, progress=not args.no_progress)
    card = {"source": _describe_source(source), "license": args.license, "language": tokenizer.lang}
    save_model_directory(output, model, tokenizer, card=card)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"Saved ELMo ({model.config.num_layers} layers, dim {model.config.output_dim}, {n_params:,} parameters) to {output}")
    return 0


def _check_legacy_order(options: Path, weights: Path) -> None:
    """OPTIONS.json WEIGHTS.hdf5 given the other way round: say so instead of "not valid JSON"."""
    def head(path: Path) -> bytes:
        try:
            with open(path, "rb") as handle:
                return handle.read(8)
        except OSError:
            return b""

    if head(options).startswith(b"\x89HDF") and head(weights).lstrip()[:1] == b"{":
        raise ValueError(f"{options} is an HDF5 file and {weights} JSON: the order is `convert OPTIONS.json WEIGHTS.hdf5 OUTPUT`")


def _describe_source(source: list[str]) -> str:
    """What a model card says the model was converted from (file names, or the URL)."""
    from .download import is_url

    if len(source) == 1 and is_url(source[0]):
        return source[0]
    names = " + ".join(f"`{Path(s).name}`" for s in source)
    efml = len(source) == 1 and (Path(source[0]) / "token_embedder.pkl").is_file()
    return f"the ELMoForManyLangs directory {names}" if efml else names


def cmd_embed(args) -> int:
    """MODEL INPUT OUTPUT.hdf5: all layers per line (bilm-tf layout); MODEL alone: stdin → vectors on stdout."""
    if args.input is not None or args.output is not None:
        if args.input is None or args.output is None:
            print("error: embed needs both INPUT and OUTPUT (or neither, to read stdin)", file=sys.stderr)
            return 2
        from .tools.embed import dump_embeddings

        written = dump_embeddings(
            args.model, args.input, args.output, batch_size=args.batch_size,
            data_format=args.format, lang=args.lang, progress=not args.no_progress,
        )
        print(f"Wrote the layers of {written:,} lines to {args.output}", file=sys.stderr)
        return 0
    import torch

    from .loading import load_pretrained

    model, tokenizer = load_pretrained(args.model)
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


def _run_pretrain(args, init_from=None) -> int:
    from .training.pretrain import pretrain
    from .training.settings import TrainingDiverged, parse_overrides

    try:
        result = pretrain(
            args.config, args.output, parse_overrides(args.overrides),
            resume=args.resume, init_from=init_from, progress=not args.no_progress,
        )
    except TrainingDiverged as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    if result.get("rank", 0) != 0:
        return 0  # under torchrun only rank 0 reports
    summary = f"Trained {result['step']:,} steps ({result['words']:,} words) in {result['train_seconds']:.0f}s"
    if "heldout_ppl" in result:
        summary += f"; held-out perplexity {result['heldout_ppl']:.2f}"
    print(f"{summary}. Model saved to {args.output}", file=sys.stderr)
    return 0


def cmd_pretrain(args) -> int:
    """Trains a biLM from text (config: configs/pretrain_*.cfg; overrides: --section.key value)."""
    return _run_pretrain(args, init_from=args.init_from)


def cmd_finetune(args) -> int:
    """Continues LM training of a pretrained biLM on (domain) text."""
    return _run_pretrain(args, init_from=args.model)


def cmd_similar(args) -> int:
    """Nearest words to WORD by cosine: context-independent token vectors, or (--corpus) each word's
    contextual vectors averaged over a text."""
    from .loading import load_pretrained
    from .tools import similar

    if args.corpus is None:
        model, tokenizer = load_pretrained(args.model)  # first: a wrong model reference is the likelier mistake
        vocab = similar.find_vocab(args.model, args.vocab)
        found = similar.most_similar(model, args.word, vocab, args.n, tokenizer=tokenizer)
    else:
        if not args.corpus.is_file():
            raise FileNotFoundError(f"--corpus {args.corpus}: no such file")
        model, tokenizer = load_pretrained(args.model)
        sentences = similar.read_sentences(args.corpus, args.max_sentences)
        words, vectors = similar.contextual_word_vectors(model, sentences, args.layer, args.min_count, tokenizer=tokenizer)
        try:
            found = similar.most_similar_in_context(words, vectors, args.word, args.n)
        except KeyError as error:
            raise ValueError(f"{args.corpus}: {error.args[0]}") from None
    for word, score in found:
        print(f"{score:.4f}\t{word}")
    return 0


def shipped_configs() -> dict[str, Path]:
    """The configs installed with the package (spacy_elmo/configs: the repository's configs/), by name."""
    folder = Path(__file__).resolve().parent / "configs"
    return {path.stem: path for path in sorted(folder.glob("*.cfg"))}


def cmd_init_config(args) -> int:
    """Writes a shipped config (e.g. ner_elmo, tagger_baseline, pretrain_small) to OUTPUT, to edit or train with."""
    configs = shipped_configs()
    if args.name not in configs:
        raise ValueError(f"no shipped config {args.name!r}; shipped: {', '.join(configs)}")
    if args.output.exists() and not args.force:
        raise ValueError(f"{args.output} exists; pass --force to overwrite it")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(configs[args.name].read_text(encoding="utf-8"), encoding="utf-8")
    print(f"Wrote {args.name} to {args.output}", file=sys.stderr)
    return 0


def cmd_probe(args) -> int:
    """Linear probes of each frozen biLM layer and a learned mix: dev accuracy per layer (paper §5.3)."""
    import json

    from .provenance import Provenance
    from .tools import probe

    prov = Provenance(seed=args.seed)
    result = probe.probe_tasks(args.model, args.train, args.dev, args.task, args.max_sentences, args.seed, args.l2, args.max_iter)
    for task, scores in result["tasks"].items():
        cells = "  ".join(f"L{e['layer']} {e['accuracy']:.2f}" for e in scores["layers"])
        print(f"{task}: {cells}  mix {scores['mix']['accuracy']:.2f}  (majority {scores['majority_accuracy']:.2f}; "
              f"{scores['train_tokens']:,} train / {scores['dev_tokens']:,} dev tokens)")
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        result["provenance"] = prov.record()
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf8")
    if args.plot is not None:
        probe.plot_probe(result, args.plot)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spacy-elmo", description="ELMo for spaCy and Hugging Face")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("convert", help=cmd_convert.__doc__, usage="spacy-elmo convert [-h] (SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="SOURCE OUTPUT, where SOURCE is a legacy directory, an ELMoForManyLangs directory, a URL "
                        "(an archive, or 'OPTIONS_URL,WEIGHTS_URL'), an HF directory or a hub id; "
                        "or OPTIONS.json WEIGHTS.hdf5 OUTPUT")
    p.add_argument("--lang", help="spaCy language whose tokenizer splits raw text, saved with the tokenizer "
                                  "(default: en; xx, spaCy's multi-language tokenizer, for ELMoForManyLangs)")
    p.add_argument("--license", help="licence of the weights for the model card, e.g. apache-2.0")
    p.add_argument("--no-progress", action="store_true", help="no download progress bar")
    p.set_defaults(func=cmd_convert)

    p = sub.add_parser("init-config", help=cmd_init_config.__doc__)
    p.add_argument("name", help=f"shipped config: {', '.join(shipped_configs())}")
    p.add_argument("output", type=Path, help="where to write it (.cfg)")
    p.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    p.set_defaults(func=cmd_init_config)

    p = sub.add_parser("embed", help=cmd_embed.__doc__)
    p.add_argument("model", help="HF directory, hub id, or legacy directory")
    p.add_argument("input", nargs="?", help="text file, one sentence per line ('-' = stdin)")
    p.add_argument("output", nargs="?", help="output .hdf5 (one dataset per line: [L+1, tokens, dim])")
    p.add_argument("--dims", type=int, default=6, help="vector components to print (stdin mode)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    p.add_argument("--format", choices=("tokenized", "text"), default="tokenized",
                   help="tokenized: split lines on whitespace; text: spaCy tokenizer (--lang)")
    p.add_argument("--lang", default="en", help="spaCy language for --format text")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_embed)

    def training_args(p):
        p.add_argument("config", type=Path, help="pretraining config (configs/pretrain_*.cfg)")
        p.add_argument("--output", "-o", type=Path, required=True, help="output directory (checkpoints, metrics, model)")
        p.add_argument("--resume", action="store_true", help="continue from the output directory's last checkpoint")
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        p.set_defaults(accepts_overrides=True)

    p = sub.add_parser("pretrain", help=cmd_pretrain.__doc__,
                       epilog="Config overrides go after the positional arguments: --paths.train 'corpus/*.txt'")
    training_args(p)
    p.add_argument("--init-from", help="start from this pretrained model (fine-tuning)")
    p.set_defaults(func=cmd_pretrain)

    p = sub.add_parser("finetune", help=cmd_finetune.__doc__,
                       epilog="Config overrides go after the positional arguments: --paths.train domain.txt")
    p.add_argument("model", help="pretrained model directory (with vocab.txt and LM head, or any ELMo)")
    training_args(p)
    p.set_defaults(func=cmd_finetune)

    p = sub.add_parser("similar", help=cmd_similar.__doc__)
    p.add_argument("model", help="model directory (with vocab.txt) or legacy files")
    p.add_argument("word", help="query word (need not be in the vocabulary)")
    p.add_argument("-n", type=int, default=10, help="how many neighbours")
    p.add_argument("--vocab", type=Path, help="candidate words, one per line (default: MODEL/vocab.txt)")
    p.add_argument("--corpus", type=Path, help="contextual mode: average each word's vectors over this text "
                   "(one whitespace-tokenized sentence per line); candidates are its words")
    p.add_argument("--layer", type=int, default=2, help="contextual mode: biLM layer (0 = token vectors)")
    p.add_argument("--min-count", type=int, default=2, help="contextual mode: words seen fewer times are skipped")
    p.add_argument("--max-sentences", type=int, default=0, help="contextual mode: read at most this many lines (0 = all)")
    p.set_defaults(func=cmd_similar)

    p = sub.add_parser("probe", help=cmd_probe.__doc__)
    p.add_argument("model", help="HF directory, hub id, or legacy directory")
    p.add_argument("train", type=Path, help=".spacy DocBin to fit the probes on")
    p.add_argument("dev", type=Path, help=".spacy DocBin to score them on")
    p.add_argument("--task", nargs="+", default=["pos"], choices=("pos", "upos", "ner-type"),
                   help="pos: token.tag_; upos: token.pos_; ner-type: entity type of tokens inside entities")
    p.add_argument("--max-sentences", type=int, default=0, help="read at most this many sentences of each file (0 = all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--l2", type=float, default=1e-4, help="l2 penalty on the classifier weights")
    p.add_argument("--max-iter", type=int, default=100, help="L-BFGS iterations per probe")
    p.add_argument("--output", type=Path, help="write the scores (and provenance) as JSON")
    p.add_argument("--plot", type=Path, help="write a PNG of accuracy by layer")
    p.set_defaults(func=cmd_probe)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .legacy import LegacyFormatError
    from .loading import ModelNotFoundError

    args, extra = build_parser().parse_known_args(argv)
    args.overrides = extra
    if extra and not getattr(args, "accepts_overrides", False):
        build_parser().error(f"unrecognized arguments: {' '.join(extra)}")
    from transformers.utils import logging as hf_logging

    hide_bars = getattr(args, "no_progress", False) and hf_logging.is_progress_bar_enabled()
    if hide_bars:  # --no-progress also hides transformers' and huggingface_hub's bars
        hf_logging.disable_progress_bar()
    try:
        return args.func(args)
    except ModelNotFoundError as err:  # the model reference names nothing loadable
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (LegacyFormatError, FileNotFoundError, ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if hide_bars:
            hf_logging.enable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
