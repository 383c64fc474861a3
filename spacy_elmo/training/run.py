"""`build_run`: everything a pretraining (or fine-tuning) run needs, built once into a `Run`.

The typed settings (`settings.read_settings`), this process's place in a torchrun job
(`spacy_elmo.devices`), where the run starts (`start.py`: fresh, resume, or a pretrained model), the
vocabulary (`vocab.txt` in the output directory), the `ElmoForBidirectionalLM` (wrapped in
DistributedDataParallel under torchrun: gloo on CPU, NCCL on GPU), the optimizer, the softmax, the
`TrainState` (step, words seen, training time, data position) and the training batches. The steps
themselves are `steps.py`'s; the loop that logs, checkpoints, evaluates and exports is `pretrain.py`'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..constants import CHECKPOINTS_FOLDER, METRICS_FILE, TOKENIZER_CONFIG_FILE, VOCAB_FILE
from ..devices import Distributed
from ..files import check_output, resolve_files
from ..hf.configuration_elmo import config_error_message
from ..provenance import threads as thread_variables
from ..text_input import check_text_files, make_tokenizer
from .batches import Corpus
from .checkpoints import Checkpoints, MetricsLog, TrainState, check_free_space, check_writable
from .settings import PretrainError, PretrainSettings
from .start import FromElmo, FromLanguageModel, Resume, Start, choose_start, clear_earlier_run, pretrained_start
from .text import iter_sequences
from .vocabulary import Vocabulary, build_char_lexicon, unigram_perplexity

# The devices where torch has a fused kernel for each optimizer. torch refuses fused Adagrad on CUDA
# only at the first step, not when the optimizer is made, so the choice is made here, by device.
FUSED_OPTIMIZER_DEVICES = {"adam": ("cpu", "cuda"), "adagrad": ("cpu",)}


def fused_optimizer(name: str, device: torch.device) -> bool:
    """Whether a run uses optimizer `name` ("adam" or "adagrad") as torch's fused kernel on `device`."""
    return device.type in FUSED_OPTIMIZER_DEVICES[name]


@dataclass
class Run:
    """One run's collaborators (see the module docstring); `state` advances as it trains."""

    settings: PretrainSettings
    output: Path
    start: Start
    dist: Distributed
    threads: dict  # torch threads and thread variables of this process (a checkpoint records them)
    checkpoints: Checkpoints
    metrics: MetricsLog
    state: TrainState
    train_files: list
    heldout_files: list
    tokenize: Callable[[str], list[str]]
    vocab: Vocabulary
    tokenizer: Any  # ElmoTokenizer
    model: Any  # ElmoForBidirectionalLM
    train_model: torch.nn.Module  # the model, or its DistributedDataParallel wrapper
    params: list
    optimizer: torch.optim.Optimizer
    softmax_fn: Any  # SampledSoftmax, or None for the full softmax
    softmax_name: str
    n_params: int
    corpus: Corpus = field(repr=False)

    @property
    def resumed(self) -> bool:
        return isinstance(self.start, Resume)

    def make_corpus(self, files, batch_tokens: int, max_epochs: int = 0) -> Corpus:
        """The batches of `files` as this run reads text (training: `corpus`; held-out evaluation)."""
        data = self.settings.data
        return Corpus(
            files,
            self.vocab,
            self.tokenize,
            encoder=self.tokenizer.encoder,
            batch_tokens=batch_tokens,
            max_tokens=data.max_tokens,
            block_lines=data.block_lines,
            max_line_bytes=data.max_line_bytes,
            shuffle=data.shuffle,
            seed=self.settings.system.seed,
            max_epochs=max_epochs,
            world_size=self.dist.world_size,
            rank=self.dist.rank,
        )


def build_run(settings: PretrainSettings, output: str | Path, *, resume: bool = False, overwrite: bool = False) -> Run:
    """Checks the output directory, the data and the start, then builds the run (in this order, so
    a refused run fails before any slow work, and leaves the output as it was); a new run in an
    output holding an earlier one's files (`overwrite`, or `resume` of one without a checkpoint)
    removes them first. Sets torch's thread count to `system.threads`."""
    output = Path(output)
    system, training, data = settings.system, settings.training, settings.data
    if system.threads:
        torch.set_num_threads(int(system.threads))
    threads = {"torch_threads": torch.get_num_threads(), **thread_variables()}
    try:
        dist = Distributed.from_env(system.device)
    except ValueError as err:
        raise PretrainError(str(err)) from None
    checkpoints = Checkpoints(output / CHECKPOINTS_FOLDER, training.keep_checkpoints)
    metrics = MetricsLog(output / METRICS_FILE, dist.is_main)
    check_output(output, overwrite=True, folder=True, what="--output")  # a folder (what it holds: choose_start)
    check_writable(output)  # before any slow work
    chosen = choose_start(
        settings,
        output,
        checkpoints,
        metrics,
        resume=resume,
        is_main=dist.is_main,
        threads=threads,
        device_type=dist.device.type,
        overwrite=overwrite,
    )
    tokenize = make_tokenizer(data.format, data.lang)
    if settings.paths.train is None:
        raise PretrainError("no training data: set paths.train (e.g. --paths.train 'corpus/*.txt')")
    train_files = resolve_files(settings.paths.train, "paths.train")
    check_text_files(train_files, "paths.train")  # UTF-8 text, not empty: before any work
    heldout = settings.paths.heldout
    heldout_files = resolve_files(heldout, "paths.heldout") if heldout else []
    if heldout_files:
        check_text_files(heldout_files, "paths.heldout")

    start = pretrained_start(settings, chosen)
    if not isinstance(start, Resume) and dist.is_main:
        clear_earlier_run(output)  # (what choose_start let a new run replace)
    dist.barrier()
    text = _Text(settings, tokenize, train_files, heldout_files, metrics, dist.is_main)
    vocab = _vocabulary(start, output, text)
    model_config, char_lexicon = _model_config(start, settings, vocab, text)
    tokenizer = _tokenizer(start, settings, model_config, vocab, char_lexicon)
    n_params = _check_disk_space(settings, output, model_config)
    torch.manual_seed(system.seed)  # the same initial weights in every process
    model = _model(start, model_config, checkpoints, dist.device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = _optimizer(training, params)
    softmax_fn, softmax_name = _softmax(training, model, len(vocab))
    state = TrainState()
    if isinstance(start, Resume):
        state = _load_checkpoint(start.checkpoint, settings, checkpoints, metrics, optimizer, dist)
    else:
        torch.manual_seed(system.seed + 1 + dist.rank)  # dropout/sampling differ per process
    train_model = model
    if dist.world_size > 1:
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [dist.device.index] if dist.device.type == "cuda" else None
        train_model = DistributedDataParallel(model, device_ids=device_ids)
    run = Run(
        settings,
        output,
        start,
        dist,
        threads,
        checkpoints,
        metrics,
        state,
        train_files,
        heldout_files,
        tokenize,
        vocab,
        tokenizer,
        model,
        train_model,
        params,
        optimizer,
        softmax_fn,
        softmax_name,
        n_params,
        corpus=None,  # type: ignore[arg-type]  # (set next, by make_corpus, which reads the run's other fields)
    )
    run.corpus = run.make_corpus(train_files, data.batch_tokens, max_epochs=training.max_epochs)
    return run


@dataclass
class _Text:
    """The training text as the vocabulary and the character lexicon read it."""

    settings: PretrainSettings
    tokenize: Callable[[str], list[str]]
    train_files: list
    heldout_files: list
    metrics: MetricsLog
    is_main: bool

    def sequences(self, files):
        data = self.settings.data
        return iter_sequences(files, self.tokenize, data.max_tokens, data.max_line_bytes, data.block_lines)


def _vocabulary(start: Start, output: Path, text: _Text) -> Vocabulary:
    data = text.settings.data
    own = output / VOCAB_FILE
    if isinstance(start, Resume):
        if not own.is_file():
            raise PretrainError(f"cannot resume: {own} is missing")
        return Vocabulary.load(own)
    if isinstance(start, FromLanguageModel):
        vocab = Vocabulary.load(start.vocab)
        if len(vocab) != start.config.vocab_size:
            raise PretrainError(
                f"{start.vocab} has {len(vocab)} ids but the model's softmax has {start.config.vocab_size}"
            )
    elif text.settings.paths.vocab:
        vocab = Vocabulary.load(text.settings.paths.vocab)
    else:
        # every process counts the same data, so all get the same vocabulary without waiting on rank 0
        vocab = Vocabulary.build(text.sequences(text.train_files), data.min_count, data.max_vocab)
        if len(vocab) <= 3:  # refused before anything is written
            raise PretrainError("the vocabulary has no words: is the training data empty, or data.min_count too high?")
        if text.is_main:
            counts = vocab.counts
            assert counts is not None, "a vocabulary built from data has its counts"
            record = {"event": "vocab", "size": len(vocab), "train_words": sum(counts[2:]), "oov_words": counts[2]}
            if text.heldout_files:
                record["unigram_heldout_ppl"] = unigram_perplexity(vocab, text.sequences(text.heldout_files))
            text.metrics.write(record)
    if len(vocab) <= 3:
        raise PretrainError("the vocabulary has no words: is the training data empty, or data.min_count too high?")
    if text.is_main:
        vocab.save(own)
    return vocab


def _model_config(start: Start, settings: PretrainSettings, vocab: Vocabulary, text: _Text):
    """The model's ElmoConfig, and the character lexicon a fresh run with data.characters = "lexicon" built."""
    from ..hf.configuration_elmo import ElmoConfig

    if isinstance(start, Resume):
        return ElmoConfig.from_pretrained(str(start.checkpoint)), None
    chosen = settings.model.model_dump(exclude_unset=True)  # only the keys the config sets
    if isinstance(start, (FromLanguageModel, FromElmo)):  # the pretrained architecture; dropout is a training choice
        config = ElmoConfig.from_dict(start.config.to_dict())
        config.num_output_representations = 0  # scalar mixes take no part in the LM loss
        if "dropout" in chosen:
            config.dropout = chosen["dropout"]
        config.vocab_size = len(vocab)
        return config, None
    lexicon = None
    if settings.data.characters == "lexicon":  # every process counts the same text: the same lexicon
        lexicon = build_char_lexicon(
            text.sequences(text.train_files), chosen.get("max_characters_per_token", 50), settings.data.char_min_count
        )
        if text.is_main:
            text.metrics.write({"event": "char_lexicon", "size": len(lexicon)})
    sizes: dict[str, Any] = {"vocab_size": len(vocab)}
    if lexicon is not None:
        sizes["char_vocab_size"] = len(lexicon) + 1
    if chosen.get("word_embedding_dim"):  # the input word embedding shares the LM vocabulary's ids
        sizes["word_vocab_size"] = len(vocab)
    try:
        return ElmoConfig(**chosen, **sizes), lexicon
    except (TypeError, ValueError) as err:
        raise PretrainError(f"invalid [model] settings: {config_error_message(err)}") from None


def _tokenizer(start: Start, settings: PretrainSettings, config, vocab: Vocabulary, char_lexicon):
    """The tokenizer saved with the model: the checkpoint's or the pretrained model's (its character
    and word lexicons), else UTF-8 characters (or the lexicon) with the data's language."""
    from ..hf.tokenization_elmo import ElmoTokenizer

    if isinstance(start, Resume) and (start.checkpoint / TOKENIZER_CONFIG_FILE).is_file():
        return ElmoTokenizer.from_pretrained(str(start.checkpoint))
    if isinstance(start, FromElmo) and start.tokenizer is not None:
        return start.tokenizer
    if isinstance(start, (FromLanguageModel, FromElmo)) and (start.path / TOKENIZER_CONFIG_FILE).is_file():
        return ElmoTokenizer.from_pretrained(str(start.path))
    words = {word: i for i, word in enumerate(vocab.words)} if config.word_vocab_size else None
    return ElmoTokenizer(
        max_characters_per_token=config.max_characters_per_token,
        lang=settings.data.lang,
        char_vocab=char_lexicon,
        word_vocab=words,
    )


def _check_disk_space(settings: PretrainSettings, output: Path, config) -> int:
    """Room for the checkpoints kept and the export; returns the model's parameter count."""
    from ..hf.modeling_elmo import ElmoForBidirectionalLM

    with torch.device("meta"):
        n_params = sum(p.numel() for p in ElmoForBidirectionalLM(config).parameters())
    slots = 2 if settings.training.optimizer == "adam" else 1
    checkpoint = 4 * n_params * (1 + slots)
    needed = checkpoint * (settings.training.keep_checkpoints + 1) + 4 * n_params * (2 if settings.export.legacy else 1)
    check_free_space(output, needed)
    return n_params


def _model(start: Start, config, checkpoints: Checkpoints, device: torch.device):
    from ..hf.modeling_elmo import ElmoForBidirectionalLM

    if isinstance(start, Resume):
        return checkpoints.load_model(start.checkpoint, device)
    if isinstance(start, FromLanguageModel):
        model = ElmoForBidirectionalLM.from_pretrained(str(start.path), config=config)
    else:
        model = ElmoForBidirectionalLM(config)
        if isinstance(start, FromElmo):
            weights = {k: v for k, v in start.elmo.state_dict().items() if not k.startswith("scalar_mixes.")}
            model.elmo.load_state_dict(weights)
    return model.to(device).train()


def _optimizer(t, params: list) -> torch.optim.Optimizer:
    kind: type[torch.optim.Optimizer]
    if t.optimizer == "adagrad":
        kind, options = (
            torch.optim.Adagrad,
            dict(
                lr=t.learning_rate,
                initial_accumulator_value=t.adagrad_initial_accumulator,
                weight_decay=t.weight_decay,
            ),
        )
    else:
        kind, options = (
            torch.optim.Adam,
            dict(lr=t.learning_rate, betas=tuple(t.adam_betas), eps=t.adam_eps, weight_decay=t.weight_decay),
        )
    # torch's fused kernel: the same update in one pass per tensor (~5x faster on a CPU than the
    # op-by-op loop; tests/training/test_training_step.py holds it to the loop's float32 accuracy). It writes
    # the parameters without bumping their version counters, which the model's derived-weight
    # and token caches key on: `steps.train_step` bumps them after each step (`mark_updated`).
    if fused_optimizer(t.optimizer, params[0].device):
        try:
            return kind(params, **options, fused=True)
        except (RuntimeError, TypeError):  # a torch older than the fused kernel: the loop
            pass
    return kind(params, **options)


def _softmax(t, model, n_vocab: int):
    """The sampled softmax (or None: the full one) and its name for the metrics."""
    from .sampled_softmax import SampledSoftmax

    sampled = t.softmax == "sampled" or (t.softmax == "auto" and n_vocab > t.full_softmax_max_vocab)
    if sampled and t.n_negative_samples >= n_vocab:
        sampled = False  # sampling (nearly) every word is just a slower full softmax
    if not sampled:
        return None, "full"
    # "auto": the fused implementation (same loss and gradients), eager under autocast
    return SampledSoftmax(
        model.lm_head, t.n_negative_samples, implementation="auto"
    ), f"sampled({t.n_negative_samples})"


def _load_checkpoint(
    path: Path, settings: PretrainSettings, checkpoints: Checkpoints, metrics: MetricsLog, optimizer, dist
) -> TrainState:
    """Optimizer, RNG and train state of checkpoint `path` (its model was loaded by `_model`)."""
    optimizer.load_state_dict(checkpoints.load_optimizer(path, dist.device))
    state, saved = checkpoints.load_state(path)
    if saved.get("world_size", 1) != dist.world_size:
        # the global batch (batch_tokens × processes) changes, and with it how a block is cut into
        # batches: continue from the start of the current block (it may be partly seen again)
        state.position.batch = 0
        if dist.is_main:
            print(
                f"resuming {saved.get('world_size', 1)}-process checkpoint on {dist.world_size} processes: "
                "the global batch size changes; the current data block restarts",
                file=sys.stderr,
            )
    rng = checkpoints.load_rng(path, dist.rank)
    if rng is not None:
        torch.set_rng_state(rng["cpu"])
        if "cuda" in rng and dist.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"], dist.device)
    else:  # resumed on more processes than were saved: the data stays exact, dropout draws do not
        torch.manual_seed(settings.system.seed + 1 + dist.rank + 1_000_003 * state.step)
    metrics.truncate_after(state.step)
    return state


__all__ = ["Run", "build_run", "fused_optimizer", "FUSED_OPTIMIZER_DEVICES"]
