"""The `spacy-elmo` command line: one module, one sub-command per job.

Only the standard library is imported here: each command imports what it uses (torch,
transformers, spaCy) when it runs, so `spacy-elmo --help` answers at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__
from .shipped_configs import shipped_configs  # standard library only


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
            data_format=args.format, lang=args.lang, progress=not args.no_progress, device=args.device,
        )
        print(f"Wrote the layers of {written:,} lines to {args.output}", file=sys.stderr)
        return 0
    import torch

    from .loading import load_pretrained
    from .devices import pick_device
    from .text_input import make_tokenizer, read_lines, stdin_bytes

    model, tokenizer = load_pretrained(args.model)
    model = model.to(pick_device(args.device))
    tokenize = make_tokenizer(args.format, args.lang)
    lines = [words for words in (tokenize(line.strip()) for line in read_lines(stdin_bytes(), "<stdin>")) if words]
    if not lines:
        raise ValueError("<stdin>: no input: give one sentence per line on stdin")
    torch.set_printoptions(precision=4, sci_mode=False)
    with torch.no_grad():
        for words in lines:
            out = model(**tokenizer([words]).to(model.device))
            layers = torch.stack(out.hidden_states)[:, 0].float().cpu()
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
    except KeyboardInterrupt:  # Ctrl-C: one line (from the first process only), not a traceback
        if int(os.environ.get("RANK", "0")) == 0:
            print(_interrupted(args.output), file=sys.stderr)
        return 130
    if result.get("rank", 0) != 0:
        return 0  # under torchrun only rank 0 reports
    summary = f"Trained {result['step']:,} steps ({result['words']:,} words) in {result['train_seconds']:.0f}s"
    if "heldout_ppl" in result:
        summary += f"; held-out perplexity {result['heldout_ppl']:.2f}"
    print(f"{summary}. Model saved to {args.output}", file=sys.stderr)
    return 0


def _interrupted(output: Path) -> str:
    """What an interrupted pretraining left: the checkpoint `--resume` continues from."""
    from .training.checkpoints import Checkpoints

    last = Checkpoints(Path(output) / "checkpoints").latest()
    if last is None:
        return f"interrupted: no checkpoint was written to {output} yet"
    return f"interrupted: {output} keeps its last checkpoint ({last.name}); the same command with --resume continues from it"


def cmd_pretrain(args) -> int:
    """Trains a biLM from text (config: `spacy-elmo init-config pretrain_small`; overrides: --section.key value)."""
    return _run_pretrain(args, init_from=args.init_from)


def cmd_finetune(args) -> int:
    """Continues LM training of a pretrained biLM on (domain) text."""
    return _run_pretrain(args, init_from=args.model)


def cmd_similar(args) -> int:
    """Nearest words to WORD by cosine: context-independent token vectors, or (--corpus) each word's
    contextual vectors averaged over a text."""
    from .loading import load_pretrained
    from .tools import similar
    from .devices import pick_device

    if args.corpus is None:
        model, tokenizer = load_pretrained(args.model)  # first: a wrong model reference is the likelier mistake
        model = model.to(pick_device(args.device))
        vocab = similar.find_vocab(args.model, args.vocab)
        found = similar.most_similar(model, args.word, vocab, args.n, tokenizer=tokenizer)
    else:
        from .text_input import check_text_files

        if not args.corpus.is_file():
            raise FileNotFoundError(f"--corpus {args.corpus}: no such file")
        check_text_files([args.corpus], "--corpus")
        model, tokenizer = load_pretrained(args.model)
        model = model.to(pick_device(args.device))
        sentences = similar.read_sentences(args.corpus, args.max_sentences)
        words, vectors = similar.contextual_word_vectors(
            model, sentences, args.layer, args.min_count, progress=not args.no_progress, tokenizer=tokenizer
        )
        try:
            found = similar.most_similar_in_context(words, vectors, args.word, args.n)
        except KeyError as error:
            raise ValueError(f"{args.corpus}: {error.args[0]}") from None
    for word, score in found:
        print(f"{score:.4f}\t{word}")
    return 0


def cmd_init_config(args) -> int:
    """Writes a shipped config (e.g. ner_elmo, tagger_baseline, pretrain_small) to OUTPUT ('-' = stdout),
    complete and ready for `spacy debug config` / `spacy train` (or `spacy-elmo pretrain`)."""
    from .shipped_configs import find_config, render_config
    from .training.settings import parse_overrides

    text = render_config(args.name, lang=args.lang, gpu=args.gpu, overrides=parse_overrides(args.overrides))
    if str(args.output) == "-":
        sys.stdout.write(text)
        return 0
    if args.output.exists() and not args.force:
        raise ValueError(f"{args.output} exists; pass --force to overwrite it")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"Wrote {find_config(args.name).stem} to {args.output}", file=sys.stderr)
    return 0


def cmd_probe(args) -> int:
    """Linear probes of each frozen biLM layer and a learned mix: dev accuracy per layer (paper §5.3)."""
    import json

    from .provenance import Provenance
    from .tools import probe

    prov = Provenance(seed=args.seed)
    result = probe.probe_tasks(
        args.model, args.train, args.dev, args.task, args.max_sentences, args.seed, args.l2, args.max_iter,
        device=args.device, progress=not args.no_progress,
    )
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


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default in --help when it has one worth showing (not None / False)."""

    def _get_help_string(self, action):
        if action.default in (None, False, argparse.SUPPRESS) or action.default == [] or "%(default)" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


DEVICE_HELP = "where the biLM runs: auto (CUDA when available), cpu or cuda"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spacy-elmo", description="ELMo for spaCy and Hugging Face")
    parser.add_argument("--version", action="version", version=f"spacy-elmo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func, **kwargs) -> argparse.ArgumentParser:
        doc = func.__doc__
        p = sub.add_parser(name, help=doc, description=doc, formatter_class=_HelpFormatter, **kwargs)
        p.set_defaults(func=func)
        return p

    def no_progress(p) -> None:
        p.add_argument("--no-progress", action="store_true", help="no progress bars (transformers' and the hub's included)")

    p = command("convert", cmd_convert, usage="spacy-elmo convert [-h] (SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="SOURCE OUTPUT, where SOURCE is a legacy directory, an ELMoForManyLangs directory, a URL "
                        "(an archive, or 'OPTIONS_URL,WEIGHTS_URL'), an HF directory or a hub id; "
                        "or OPTIONS.json WEIGHTS.hdf5 OUTPUT")
    p.add_argument("--lang", help="spaCy language whose tokenizer splits raw text, saved with the tokenizer "
                                  "(default: en; xx, spaCy's multi-language tokenizer, for ELMoForManyLangs)")
    p.add_argument("--license", help="licence of the weights for the model card, e.g. apache-2.0")
    no_progress(p)

    p = command("init-config", cmd_init_config,
                epilog="Settings to change go after the positional arguments, as in spacy train: --paths.elmo DIR")
    p.add_argument("name", help=f"shipped config (with or without .cfg): {', '.join(shipped_configs())}")
    p.add_argument("output", type=Path, help="where to write it (.cfg); '-' = stdout")
    p.add_argument("--lang", "-l", help="spaCy language: [nlp] lang and that language's own tokenizer from spaCy's defaults "
                                        "(spacy.zh.ChineseTokenizer for zh, …), as spacy init config --lang writes them; "
                                        "[data] lang of a pretraining config; default: the config's (en)")
    p.add_argument("--gpu", "-G", action="store_true",
                   help="for a GPU: gpu_allocator = pytorch (spaCy configs), device = cuda (pretraining configs)")
    p.add_argument("--force", "-F", action="store_true", help="overwrite OUTPUT if it exists")
    p.set_defaults(accepts_overrides=True)

    p = command("embed", cmd_embed)
    p.add_argument("model", help="HF directory, hub id, or legacy directory")
    p.add_argument("input", nargs="?", help="UTF-8 text file, one sentence per line ('-' = stdin)")
    p.add_argument("output", nargs="?", help="output .hdf5 (one dataset per line: [L+1, tokens, dim])")
    p.add_argument("--dims", type=int, default=6, help="vector components to print (stdin mode)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per forward pass")
    p.add_argument("--format", choices=("tokenized", "text"), default="tokenized",
                   help="tokenized: split lines on whitespace; text: spaCy tokenizer (--lang)")
    p.add_argument("--lang", default="en", help="spaCy language for --format text")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help=DEVICE_HELP)
    no_progress(p)

    def training_args(p):
        p.add_argument("config", type=Path, help="pretraining config (spacy-elmo init-config pretrain_small ...)")
        p.add_argument("--output", "-o", type=Path, required=True, help="output directory (checkpoints, metrics, model)")
        p.add_argument("--resume", action="store_true", help="continue from the output directory's last checkpoint")
        no_progress(p)
        p.set_defaults(accepts_overrides=True)

    p = command("pretrain", cmd_pretrain,
                epilog="Config overrides go after the positional arguments: --paths.train 'corpus/*.txt'")
    training_args(p)
    p.add_argument("--init-from", help="start from this pretrained model (fine-tuning)")

    p = command("finetune", cmd_finetune,
                epilog="Config overrides go after the positional arguments: --paths.train domain.txt")
    p.add_argument("model", help="pretrained model directory (with vocab.txt and LM head, or any ELMo)")
    training_args(p)

    p = command("similar", cmd_similar)
    p.add_argument("model", help="model directory (with vocab.txt) or legacy files")
    p.add_argument("word", help="query word (need not be in the vocabulary)")
    p.add_argument("-n", type=int, default=10, help="how many neighbours")
    p.add_argument("--vocab", type=Path, help="candidate words, one per line (default: MODEL/vocab.txt)")
    p.add_argument("--corpus", type=Path, help="contextual mode: average each word's vectors over this text "
                   "(one whitespace-tokenized sentence per line); candidates are its words")
    p.add_argument("--layer", type=int, default=2, help="contextual mode: biLM layer (0 = token vectors)")
    p.add_argument("--min-count", type=int, default=2, help="contextual mode: words seen fewer times are skipped")
    p.add_argument("--max-sentences", type=int, default=0, help="contextual mode: read at most this many lines (0 = all)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help=DEVICE_HELP)
    no_progress(p)

    p = command("probe", cmd_probe)
    p.add_argument("model", help="HF directory, hub id, or legacy directory")
    p.add_argument("train", type=Path, help=".spacy DocBin to fit the probes on")
    p.add_argument("dev", type=Path, help=".spacy DocBin to score them on")
    p.add_argument("--task", nargs="+", default=["pos"], choices=("pos", "upos", "ner-type"),
                   help="pos: token.tag_; upos: token.pos_; ner-type: entity type of tokens inside entities")
    p.add_argument("--max-sentences", type=int, default=0, help="read at most this many sentences of each file (0 = all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the probes' initialization")
    p.add_argument("--l2", type=float, default=1e-4, help="l2 penalty on the classifier weights")
    p.add_argument("--max-iter", type=int, default=100, help="L-BFGS iterations per probe")
    p.add_argument("--output", type=Path, help="write the scores (and provenance) as JSON")
    p.add_argument("--plot", type=Path, help="write a PNG of accuracy by layer")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help=DEVICE_HELP)
    no_progress(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    args.overrides = extra
    if extra and not getattr(args, "accepts_overrides", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if getattr(args, "no_progress", False):  # --no-progress also hides transformers' and the hub's bars
            from .quiet import no_progress_bars

            with no_progress_bars():
                return args.func(args)
        return args.func(args)
    except (FileNotFoundError, ValueError, OSError) as err:
        # the modules that raise these are imported by then: checking the classes costs nothing
        from .loading import ModelNotFoundError

        for line in str(err).splitlines() or [type(err).__name__]:  # several problems: one line each
            print(f"error: {line}", file=sys.stderr)
        return 1 if isinstance(err, ModelNotFoundError) else 2  # 1: the model reference names nothing loadable
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
