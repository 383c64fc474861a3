"""Pretraining (and fine-tuning) loop for the ELMo biLM.

One `Pretrainer` owns everything a run needs, as explicit state:

- settings: a confection config (`configs/pretrain_*.cfg`) checked against `DEFAULTS`;
- the vocabulary (`vocab.txt` in the output directory), the `ElmoForBidirectionalLM`, the optimizer;
- `TrainState`: step, words seen, training time and the `DataPosition` of the stream.

Checkpoints (`OUTPUT/checkpoints/step-NNNNNNNN/`) hold model.safetensors, optimizer.pt and rng.pt
(tensors only: `torch.load(weights_only=True)`), state.json (ints) and the configs. A checkpoint is
written into a temporary directory, renamed into place, and only then named in
`checkpoints/latest`, so a kill at any moment leaves the previous checkpoint intact. `--resume`
restores model, optimizer, RNG states and data position, so the run continues exactly.

Under `torchrun` (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel (gloo on CPU,
NCCL on GPU); every process builds the same global batches and trains on its own rows, and the
loss is scaled so the averaged gradient equals the gradient of the global batch's mean loss.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ..model_card import write_model_card
from .data import Corpus, DataPosition, Vocabulary, make_tokenizer, resolve_files, unigram_perplexity, iter_sequences, write_text_atomic

MODEL_KEYS = (
    "n_characters", "max_characters_per_token", "char_embedding_dim", "filters", "n_highway", "activation",
    "num_layers", "lstm_dim", "projection_dim", "cell_clip", "proj_clip", "use_skip_connections",
    "forget_bias", "dropout", "initializer_range",
)

# Every setting a pretraining config may hold, with its default (None = not set).
DEFAULTS: dict[str, dict[str, Any]] = {
    "paths": {"train": None, "heldout": None, "vocab": None, "init_from": None},
    "system": {"seed": 0, "threads": 0, "device": "auto"},
    "data": {
        "format": "tokenized",  # "tokenized": one whitespace-tokenized sentence per line; "text": spaCy tokenizer
        "lang": "en",  # spaCy language of the tokenizer for format "text"
        "min_count": 1,  # words seen fewer times are <UNK> (as targets)
        "max_vocab": 0,  # at most this many ids, specials included (0 = no limit)
        "max_tokens": 100,  # longer lines are split into sequences of this many words
        "max_line_bytes": 1 << 20,  # longer lines are cut
        "batch_tokens": 2048,  # padded words per process and step (rows × longest row)
        "block_lines": 10000,  # lines read, shuffled and bucketed by length together
        "shuffle": True,
    },
    "model": {key: None for key in MODEL_KEYS},
    "training": {
        "max_steps": 1000,  # 0 = until max_epochs
        "max_epochs": 0,  # 0 = no limit
        "optimizer": "adagrad",  # "adagrad" (bilm-tf) or "adam"
        "learning_rate": 0.2,
        "lr_schedule": "constant",  # "constant", or "linear": decays to 0 at max_steps after lr_decay_start
        "lr_decay_start": 0.5,  # fraction of max_steps at which the linear decay begins
        "warmup_steps": 0,  # linear warm-up from 0 over this many steps
        "adagrad_initial_accumulator": 1.0,
        "adam_betas": [0.9, 0.999],
        "adam_eps": 1e-8,
        "weight_decay": 0.0,
        "clip_norm": 10.0,  # global gradient norm (0 = no clipping)
        "softmax": "auto",  # "full", "sampled", or "auto" (full up to full_softmax_max_vocab ids)
        "full_softmax_max_vocab": 32768,
        "n_negative_samples": 8192,
        "checkpoint_every": 500,
        "keep_checkpoints": 2,
        "eval_every": 0,  # 0 = evaluate on paths.heldout at the end only
        "eval_batch_tokens": 4096,
        "log_every": 10,
    },
    "export": {"legacy": False},
}
# Settings a resumed run must share with the run that wrote the checkpoint.
RESUME_FIXED = ("data", "system.seed")


class PretrainError(ValueError):
    """A run cannot start: bad settings, unusable output directory, missing data or checkpoint."""


class TrainingDiverged(RuntimeError):
    """The loss or the gradient became NaN/inf; training stopped without saving the bad state."""


# --------------------------------------------------------------------------------------------------
# Settings


def parse_overrides(args: list[str]) -> dict[str, Any]:
    """`--section.key value` / `--section.key=value` command-line pairs → {"section.key": value}.

    Values are read as JSON when they parse (numbers, true/false, null, lists), else as strings.
    """
    overrides: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--") or "." not in arg:
            raise PretrainError(f"unrecognized argument {arg!r}: config overrides look like --section.key value")
        if "=" in arg:
            key, value = arg[2:].split("=", 1)
            i += 1
        else:
            if i + 1 >= len(args) or (args[i + 1].startswith("--") and "." in args[i + 1]):
                raise PretrainError(f"config override {arg} needs a value")
            key, value = arg[2:], args[i + 1]
            i += 2
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            overrides[key] = value
    return overrides


def load_settings(config_path: str | Path | None, overrides: dict[str, Any] | None = None, text: str | None = None):
    """Reads a pretraining config (file or `text`), applies dotted overrides, fills in and checks defaults.

    Returns the confection `Config` with every section of `DEFAULTS` complete; unknown sections or
    keys are errors (a typo must not be silently ignored).
    """
    from confection import Config

    overrides = dict(overrides or {})
    for key in overrides:
        section, _, name = key.partition(".")
        if section not in DEFAULTS or name not in DEFAULTS[section]:
            raise PretrainError(f"unknown config setting {key!r} in overrides (sections: {', '.join(DEFAULTS)})")
    if text is None:
        path = Path(config_path)
        if not path.is_file():
            raise PretrainError(f"config file not found: {path}")
        text = path.read_text(encoding="utf-8")
    try:
        config = Config().from_str(text, overrides=overrides)
    except Exception as err:  # confection raises several error types for syntax problems
        raise PretrainError(f"{config_path or 'config'}: cannot parse ({err})") from None
    for section, values in config.items():
        if section not in DEFAULTS:
            raise PretrainError(f"unknown config section [{section}] (expected {', '.join(DEFAULTS)})")
        unknown = sorted(set(values) - set(DEFAULTS[section]))
        if unknown:
            raise PretrainError(f"unknown setting(s) in [{section}]: {', '.join(unknown)}")
    full = Config({s: {**defaults, **config.get(s, {})} for s, defaults in DEFAULTS.items()})
    full["model"] = {k: v for k, v in full["model"].items() if v is not None}
    _check_settings(full)
    return full


def _check_settings(cfg) -> None:
    data, training = cfg["data"], cfg["training"]
    problems = []
    if data["format"] not in ("tokenized", "text"):
        problems.append(f"data.format must be 'tokenized' or 'text', got {data['format']!r}")
    for section, key, low in (
        ("data", "min_count", 1), ("data", "max_tokens", 1), ("data", "batch_tokens", 1), ("data", "block_lines", 1),
        ("data", "max_line_bytes", 16), ("training", "checkpoint_every", 1), ("training", "keep_checkpoints", 1),
        ("training", "log_every", 1), ("training", "eval_batch_tokens", 1), ("training", "n_negative_samples", 1),
    ):
        value = cfg[section][key]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            problems.append(f"{section}.{key} must be an integer >= {low}, got {value!r}")
    if data["max_tokens"] > data["batch_tokens"]:
        problems.append(f"data.max_tokens ({data['max_tokens']}) cannot exceed data.batch_tokens ({data['batch_tokens']})")
    if training["max_steps"] <= 0 and training["max_epochs"] <= 0:
        problems.append("set training.max_steps or training.max_epochs (both are 0)")
    if training["optimizer"] not in ("adagrad", "adam"):
        problems.append(f"training.optimizer must be 'adagrad' or 'adam', got {training['optimizer']!r}")
    if training["softmax"] not in ("auto", "full", "sampled"):
        problems.append(f"training.softmax must be 'auto', 'full' or 'sampled', got {training['softmax']!r}")
    if training["lr_schedule"] not in ("constant", "linear"):
        problems.append(f"training.lr_schedule must be 'constant' or 'linear', got {training['lr_schedule']!r}")
    elif training["lr_schedule"] == "linear" and training["max_steps"] <= 0:
        problems.append("training.lr_schedule 'linear' needs training.max_steps > 0 (it decays to 0 there)")
    start = training["lr_decay_start"]
    if isinstance(start, bool) or not isinstance(start, (int, float)) or not 0.0 <= start < 1.0:
        problems.append(f"training.lr_decay_start must be a number in [0, 1), got {start!r}")
    warmup = training["warmup_steps"]
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        problems.append(f"training.warmup_steps must be an integer >= 0, got {warmup!r}")
    if not training["learning_rate"] > 0:
        problems.append(f"training.learning_rate must be > 0, got {training['learning_rate']!r}")
    if cfg["system"]["device"] not in ("auto", "cpu", "cuda"):
        problems.append(f"system.device must be 'auto', 'cpu' or 'cuda', got {cfg['system']['device']!r}")
    if problems:
        raise PretrainError("invalid pretraining config: " + "; ".join(problems))


def learning_rate_at(training: dict, step: int) -> float:
    """The rate of optimizer step `step` (1-based): warm-up, then constant or a linear decay to 0.

    A pure function of the step, so a resumed run follows the same schedule exactly.
    """
    rate = float(training["learning_rate"])
    warmup = training["warmup_steps"]
    if warmup and step <= warmup:
        rate *= step / warmup
    if training["lr_schedule"] == "linear":
        total = training["max_steps"]
        start = int(training["lr_decay_start"] * total)
        if step > start:
            rate *= max(total - step + 1, 0) / (total - start + 1)
    return rate


def _get(cfg, dotted: str):
    section, _, key = dotted.partition(".")
    return cfg[section] if not key else cfg[section][key]


# --------------------------------------------------------------------------------------------------
# Processes


@dataclass
class Distributed:
    """This process's place in a torchrun job (rank 0 of 1 without torchrun) and its device."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @classmethod
    def from_env(cls, device: str = "auto") -> "Distributed":
        world = int(os.environ.get("WORLD_SIZE", "1"))
        use_cuda = torch.cuda.is_available() if device == "auto" else device == "cuda"
        if use_cuda and not torch.cuda.is_available():
            raise PretrainError("system.device is 'cuda' but no CUDA device is available")
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        dev = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
        if use_cuda:
            torch.cuda.set_device(dev)
        if world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if use_cuda else "gloo")
        rank = dist.get_rank() if world > 1 else 0
        return cls(rank, world, dev)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.world_size > 1:
            dist.all_reduce(tensor)
        return tensor

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """[world_size, *shape]: `tensor` from every process (same shape everywhere)."""
        if self.world_size == 1:
            return tensor.unsqueeze(0)
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor)
        return torch.stack(parts)

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()


@dataclass
class TrainState:
    """The plain-number part of a run: what state.json of a checkpoint holds."""

    step: int = 0
    words: int = 0
    train_seconds: float = 0.0
    position: DataPosition = field(default_factory=DataPosition)

    def to_dict(self) -> dict:
        return {"step": self.step, "words": self.words, "train_seconds": self.train_seconds, "position": self.position.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "TrainState":
        return cls(int(data["step"]), int(data["words"]), float(data["train_seconds"]), DataPosition.from_dict(data["position"]))


# --------------------------------------------------------------------------------------------------
# Output directory and checkpoints


def check_output_dir(output: Path, needed_bytes: int = 0) -> None:
    """Fails early, with a clear message, if `output` cannot hold the run's files."""
    check_writable(output)
    check_free_space(output, needed_bytes)


def check_writable(output: Path) -> None:
    """Creates `output` and writes (then removes) a small probe file, or raises PretrainError."""
    try:
        output.mkdir(parents=True, exist_ok=True)
        probe = output / f".write-test-{os.getpid()}"
        with open(probe, "wb") as handle:
            handle.write(b"\0" * (1 << 16))
            handle.flush()
            os.fsync(handle.fileno())
        probe.unlink()
    except OSError as err:
        raise PretrainError(f"cannot write to output directory {output}: {err.strerror or err}") from None


def check_free_space(output: Path, needed_bytes: int) -> None:
    """Raises PretrainError if the file system of `output` has less than `needed_bytes` free."""
    free = shutil.disk_usage(output).free
    if needed_bytes and free < needed_bytes:
        raise PretrainError(
            f"not enough free disk space in {output}: {free / 2**20:,.0f} MiB free, the checkpoints and "
            f"model need about {needed_bytes / 2**20:,.0f} MiB"
        )


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _save_tensor_file(obj, path: Path) -> None:
    with open(path, "wb") as handle:
        torch.save(obj, handle)
        handle.flush()
        os.fsync(handle.fileno())


class Checkpoints:
    """`OUTPUT/checkpoints`: step-NNNNNNNN directories and the `latest` pointer, written atomically."""

    def __init__(self, root: Path, keep: int = 2):
        self.root, self.keep = root, keep

    def latest(self) -> Path | None:
        """The newest complete checkpoint (per `latest`, else the newest step directory with state.json)."""
        pointer = self.root / "latest"
        if pointer.is_file():
            candidate = self.root / pointer.read_text(encoding="utf-8").strip()
            if (candidate / "state.json").is_file():
                return candidate
        done = sorted(p for p in self.root.glob("step-*") if p.is_dir() and (p / "state.json").is_file())
        return done[-1] if done else None

    def save(self, step: int, files: dict[str, Any]) -> Path:
        """Writes `files` ({name: bytes | str | (writer, obj)}) as checkpoint `step`; returns its directory."""
        self.root.mkdir(parents=True, exist_ok=True)
        name = f"step-{step:08d}"
        final, tmp = self.root / name, self.root / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for filename, content in files.items():
            path = tmp / filename
            if isinstance(content, tuple):
                writer, obj = content
                writer(obj, path)
            else:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(content)
                    handle.flush()
                    os.fsync(handle.fileno())
        _fsync_dir(tmp)
        if final.exists():  # re-saving the same step (e.g. a resumed run that had nothing left to do)
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(self.root)
        write_text_atomic(self.root / "latest", name + "\n")
        _fsync_dir(self.root)
        self._prune(final)
        return final

    def _prune(self, newest: Path) -> None:
        done = sorted(p for p in self.root.glob("step-*") if p.is_dir())
        for old in [p for p in done if p != newest][: max(0, len(done) - self.keep)]:
            shutil.rmtree(old, ignore_errors=True)
        for tmp in self.root.glob(".step-*.tmp"):
            shutil.rmtree(tmp, ignore_errors=True)


def _save_safetensors(state: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous().cpu() for k, v in state.items()}, str(path))
    with open(path, "rb+") as handle:
        os.fsync(handle.fileno())


class MetricsLog:
    """`metrics.jsonl`: one JSON object per line (training records have "step", evaluations "heldout_ppl")."""

    def __init__(self, path: Path, enabled: bool = True):
        self.path, self.enabled = path, enabled

    def truncate_after(self, step: int) -> None:
        """Drops records past `step` (a resumed run rewrites them)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = [r for r in self.records() if r.get("step", 0) <= step]  # (a line torn by a kill is dropped)
        write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def records(self) -> list[dict]:
        """Every complete record of the log."""
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def write(self, record: dict) -> None:
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")


# --------------------------------------------------------------------------------------------------
# The run


class Pretrainer:
    """A pretraining or fine-tuning run writing to `output` (see the module docstring)."""

    def __init__(self, cfg, output: str | Path, *, resume: bool = False, progress: bool = True):
        self.cfg, self.output, self.resume, self.show_progress = cfg, Path(output), resume, progress
        system, training = cfg["system"], cfg["training"]
        if system["threads"]:
            torch.set_num_threads(int(system["threads"]))
        self.dist = Distributed.from_env(system["device"])
        self.checkpoints = Checkpoints(self.output / "checkpoints", training["keep_checkpoints"])
        self.metrics = MetricsLog(self.output / "metrics.jsonl", self.dist.is_main)
        self.state = TrainState()

        check_writable(self.output)  # before any slow work
        self.checkpoint = self.checkpoints.latest()
        if self.checkpoint is not None and not resume:
            raise PretrainError(
                f"{self.output} already holds checkpoints ({self.checkpoint.name}); pass --resume to continue "
                "that run, or choose another output directory"
            )
        if self.checkpoint is not None:
            self._check_resumable()
        else:
            if resume and self.dist.is_main:
                print(f"--resume: no checkpoint in {self.output}, starting a new run", file=sys.stderr)
            self.metrics.truncate_after(-1)  # a fresh run starts a fresh log
        self.tokenize = make_tokenizer(cfg["data"]["format"], cfg["data"]["lang"])
        if cfg["paths"]["train"] is None:
            raise PretrainError("no training data: set paths.train (e.g. --paths.train 'corpus/*.txt')")
        self.train_files = resolve_files(cfg["paths"]["train"])
        heldout = cfg["paths"]["heldout"]
        self.heldout_files = resolve_files(heldout) if heldout else []

        init = self._init_source()
        self.vocab = self._load_vocab(init)
        self.model_config = self._model_config(init)
        self._check_disk_space()
        torch.manual_seed(system["seed"])  # the same initial weights in every process
        self.model = self._build_model(init).to(self.dist.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = self._build_optimizer()
        self.softmax_fn = self._build_softmax()
        if self.checkpoint is not None:
            self._load_checkpoint(self.checkpoint)
        else:
            torch.manual_seed(system["seed"] + 1 + self.dist.rank)  # dropout/sampling differ per process
        self.train_model = self.model
        if self.dist.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            device_ids = [self.dist.device.index] if self.dist.device.type == "cuda" else None
            self.train_model = DistributedDataParallel(self.model, device_ids=device_ids)
        self.corpus = self._corpus(self.train_files, cfg["data"]["batch_tokens"], max_epochs=training["max_epochs"])

    # ---- setup -------------------------------------------------------------------------------------

    def _check_resumable(self) -> None:
        from confection import Config

        saved = Config().from_disk(self.checkpoint / "pretrain.cfg", interpolate=False)
        for dotted in RESUME_FIXED:
            if _get(saved, dotted) != _get(self.cfg, dotted):
                raise PretrainError(
                    f"cannot resume {self.checkpoint}: [{dotted}] differs from the run that wrote it "
                    f"(was {_get(saved, dotted)!r}, now {_get(self.cfg, dotted)!r}); the data position would not match"
                )

    def _init_source(self) -> dict | None:
        """What `paths.init_from` provides: config, weights, and (with an LM head) its vocabulary."""
        reference = self.cfg["paths"]["init_from"]
        if reference is None or self.checkpoint is not None:
            return None
        from ..configuration_elmo import ElmoConfig

        path = Path(str(reference))
        vocab_file = path / "vocab.txt"
        if (path / "config.json").is_file():
            config = ElmoConfig.from_pretrained(str(path))
            if config.vocab_size and vocab_file.is_file() and _has_lm_head(path):
                return {"kind": "lm", "path": path, "config": config, "vocab": vocab_file}
        from ..util import load_model

        elmo = load_model(reference)
        return {"kind": "elmo", "path": path, "config": elmo.config, "elmo": elmo}

    def _load_vocab(self, init: dict | None) -> Vocabulary:
        data, main = self.cfg["data"], self.dist.is_main
        own = self.output / "vocab.txt"
        if self.checkpoint is not None:
            if not own.is_file():
                raise PretrainError(f"cannot resume: {own} is missing")
            return Vocabulary.load(own)
        if init is not None and init["kind"] == "lm":
            vocab = Vocabulary.load(init["vocab"])
            if len(vocab) != init["config"].vocab_size:
                raise PretrainError(f"{init['vocab']} has {len(vocab)} ids but the model's softmax has {init['config'].vocab_size}")
        elif self.cfg["paths"]["vocab"]:
            vocab = Vocabulary.load(self.cfg["paths"]["vocab"])
        else:
            # every process counts the same data, so all get the same vocabulary without waiting on rank 0
            sequences = iter_sequences(self.train_files, self.tokenize, data["max_tokens"], data["max_line_bytes"], data["block_lines"])
            vocab = Vocabulary.build(sequences, data["min_count"], data["max_vocab"])
            if main:
                record = {"event": "vocab", "size": len(vocab), "train_words": sum(vocab.counts[2:]), "oov_words": vocab.counts[2]}
                if self.heldout_files:
                    held = iter_sequences(self.heldout_files, self.tokenize, data["max_tokens"], data["max_line_bytes"], data["block_lines"])
                    record["unigram_heldout_ppl"] = unigram_perplexity(vocab, held)
                self.metrics.write(record)
        if len(vocab) <= 3:
            raise PretrainError("the vocabulary has no words: is the training data empty, or data.min_count too high?")
        if main:
            vocab.save(own)
        return vocab

    def _model_config(self, init: dict | None):
        from ..configuration_elmo import ElmoConfig

        if self.checkpoint is not None:
            return ElmoConfig.from_pretrained(str(self.checkpoint))
        settings = dict(self.cfg["model"])
        if init is not None:  # the architecture is the pretrained model's; only dropout is a training choice
            config = ElmoConfig.from_dict(init["config"].to_dict())
            config.num_output_representations = 0  # scalar mixes take no part in the LM loss
            if "dropout" in settings:
                config.dropout = settings["dropout"]
            config.vocab_size = len(self.vocab)
            return config
        try:
            return ElmoConfig(**settings, vocab_size=len(self.vocab))
        except (TypeError, ValueError) as err:
            raise PretrainError(f"invalid [model] settings: {err}") from None

    def _check_disk_space(self) -> None:
        from ..modeling_elmo import ElmoForBidirectionalLM

        with torch.device("meta"):
            n_params = sum(p.numel() for p in ElmoForBidirectionalLM(self.model_config).parameters())
        slots = 2 if self.cfg["training"]["optimizer"] == "adam" else 1
        checkpoint = 4 * n_params * (1 + slots)
        needed = checkpoint * (self.cfg["training"]["keep_checkpoints"] + 1) + 4 * n_params * (2 if self.cfg["export"]["legacy"] else 1)
        check_free_space(self.output, needed)
        self.n_params = n_params

    def _build_model(self, init: dict | None):
        from ..modeling_elmo import ElmoForBidirectionalLM

        if init is not None and init["kind"] == "lm":
            model = ElmoForBidirectionalLM.from_pretrained(str(init["path"]), config=self.model_config)
        else:
            model = ElmoForBidirectionalLM(self.model_config)
            if init is not None:
                weights = {k: v for k, v in init["elmo"].state_dict().items() if not k.startswith("scalar_mixes.")}
                model.elmo.load_state_dict(weights)
        return model.train()

    def _build_optimizer(self) -> torch.optim.Optimizer:
        t, params = self.cfg["training"], self.params
        if t["optimizer"] == "adagrad":
            return torch.optim.Adagrad(
                params, lr=t["learning_rate"], initial_accumulator_value=t["adagrad_initial_accumulator"],
                weight_decay=t["weight_decay"],
            )
        return torch.optim.Adam(
            params, lr=t["learning_rate"], betas=tuple(t["adam_betas"]), eps=t["adam_eps"], weight_decay=t["weight_decay"]
        )

    def _build_softmax(self):
        from .sampled_softmax import SampledSoftmax

        t = self.cfg["training"]
        n_vocab = len(self.vocab)
        sampled = t["softmax"] == "sampled" or (t["softmax"] == "auto" and n_vocab > t["full_softmax_max_vocab"])
        if sampled and t["n_negative_samples"] >= n_vocab:
            sampled = False  # sampling (nearly) every word is just a slower full softmax
        self.softmax_name = f"sampled({t['n_negative_samples']})" if sampled else "full"
        return SampledSoftmax(self.model.lm_head, t["n_negative_samples"]) if sampled else None

    def _corpus(self, files, batch_tokens: int, max_epochs: int = 0) -> Corpus:
        data = self.cfg["data"]
        return Corpus(
            files, self.vocab, self.tokenize,
            max_chars=self.model_config.max_characters_per_token, batch_tokens=batch_tokens,
            max_tokens=data["max_tokens"], block_lines=data["block_lines"], max_line_bytes=data["max_line_bytes"],
            shuffle=data["shuffle"], seed=self.cfg["system"]["seed"], max_epochs=max_epochs,
            world_size=self.dist.world_size, rank=self.dist.rank,
        )

    # ---- checkpoints -------------------------------------------------------------------------------

    def _rng_states(self) -> dict[str, torch.Tensor]:
        states = {"cpu": self.dist.gather(torch.get_rng_state())}
        if self.dist.device.type == "cuda":
            cuda = torch.cuda.get_rng_state(self.dist.device)
            states["cuda"] = self.dist.gather(cuda.to(self.dist.device)).cpu()
        return states

    def save_checkpoint(self) -> Path | None:
        """Every process contributes its RNG state; rank 0 writes the checkpoint."""
        rng = self._rng_states()
        if not self.dist.is_main:
            return None
        state = self.state.to_dict() | {"world_size": self.dist.world_size}
        path = self.checkpoints.save(self.state.step, {
            "model.safetensors": (_save_safetensors, self.model.state_dict()),
            "optimizer.pt": (_save_tensor_file, self.optimizer.state_dict()),
            "rng.pt": (_save_tensor_file, rng),
            "config.json": self.model_config.to_json_string(),
            "pretrain.cfg": self.cfg.to_str(),
            "state.json": json.dumps(state, indent=2),
        })
        return path

    def _load_checkpoint(self, path: Path) -> None:
        from safetensors.torch import load_file

        self.model.load_state_dict(load_file(str(path / "model.safetensors"), device=str(self.dist.device)))
        self.optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location=self.dist.device, weights_only=True))
        saved = json.loads((path / "state.json").read_text(encoding="utf-8"))
        self.state = TrainState.from_dict(saved)
        if saved.get("world_size", 1) != self.dist.world_size:
            # the global batch (batch_tokens × processes) changes, and with it how a block is cut into
            # batches: continue from the start of the current block (it may be partly seen again)
            self.state.position.batch = 0
            if self.dist.is_main:
                print(f"resuming {saved.get('world_size', 1)}-process checkpoint on {self.dist.world_size} processes: "
                      "the global batch size changes; the current data block restarts", file=sys.stderr)
        rng = torch.load(path / "rng.pt", weights_only=True)
        rank = self.dist.rank
        if rank < rng["cpu"].shape[0]:
            torch.set_rng_state(rng["cpu"][rank])
            if "cuda" in rng and self.dist.device.type == "cuda":
                torch.cuda.set_rng_state(rng["cuda"][rank], self.dist.device)
        else:  # resumed on more processes than were saved: the data stays exact, dropout draws do not
            torch.manual_seed(self.cfg["system"]["seed"] + 1 + rank + 1_000_003 * self.state.step)
        self.metrics.truncate_after(self.state.step)

    # ---- training ----------------------------------------------------------------------------------

    def train_step(self, batch) -> tuple[float, float, float]:
        """One optimizer step on this process's rows; returns the global batch's (forward, backward) mean
        loss and the gradient norm before clipping."""
        batch.to(self.dist.device)
        out = self.train_model(
            input_ids=batch.char_ids, attention_mask=batch.mask, labels=batch.word_ids, softmax_fn=self.softmax_fn
        )
        # sums over this process's targets; scaled so DDP's gradient average is the global mean's gradient
        sums = torch.stack([out.forward_loss, out.backward_loss]) * out.num_targets * batch.weight
        loss = sums.sum() / (2 * batch.global_targets) * self.dist.world_size
        loss.backward()
        total = self.dist.sum(sums.detach().double()) / batch.global_targets
        fwd, bwd = (float(x) for x in total)
        step = self.state.step + 1
        if not (math.isfinite(fwd) and math.isfinite(bwd)):
            raise TrainingDiverged(self._diverged_message(f"the loss is {fwd:.4g} (forward) / {bwd:.4g} (backward)", step))
        clip = self.cfg["training"]["clip_norm"]
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip if clip > 0 else float("inf")))
        if not math.isfinite(norm):
            raise TrainingDiverged(self._diverged_message(f"the gradient norm is {norm}", step))
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate_at(self.cfg["training"], step)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return fwd, bwd, norm

    def _diverged_message(self, what: str, step: int) -> str:
        last = self.checkpoints.latest()
        where = f"the last checkpoint is {last}" if last else "no checkpoint was written"
        return (
            f"training diverged at step {step}: {what}. Stopped without saving this state; {where}. "
            "Lower training.learning_rate or training.clip_norm, or check the data."
        )

    @torch.no_grad()
    def evaluate(self, files=None) -> dict[str, float]:
        """Bidirectional perplexity exp((L_fwd + L_bwd) / 2) on held-out text, full softmax, no dropout."""
        files = files or self.heldout_files
        corpus = self._corpus(files, self.cfg["training"]["eval_batch_tokens"])
        self.model.eval()
        sums = torch.zeros(3, dtype=torch.float64)
        for batch in corpus.eval_batches():
            batch.to(self.dist.device)
            out = self.model(input_ids=batch.char_ids, attention_mask=batch.mask, labels=batch.word_ids)
            n = float(out.num_targets)
            sums += torch.tensor([float(out.forward_loss) * n, float(out.backward_loss) * n, n], dtype=torch.float64)
        self.model.train()
        sums = self.dist.sum(sums.to(self.dist.device)).cpu()
        n = max(float(sums[2]), 1.0)
        fwd, bwd = float(sums[0]) / n, float(sums[1]) / n
        return {
            "heldout_ppl": math.exp((fwd + bwd) / 2),
            "heldout_forward_ppl": math.exp(fwd),
            "heldout_backward_ppl": math.exp(bwd),
            "heldout_targets": int(n),
        }

    def _eval_record(self) -> dict:
        record = {"step": self.state.step, "event": "eval", **self.evaluate()}
        self.metrics.write(record)
        return record

    def run(self) -> dict:
        """Trains until training.max_steps (or max_epochs), then exports; returns the final metrics."""
        t = self.cfg["training"]
        max_steps, log_every = t["max_steps"], t["log_every"]
        progress = None
        if self.dist.is_main and self.show_progress:
            from tqdm import tqdm

            progress = tqdm(total=max_steps or None, initial=self.state.step, unit="step", dynamic_ncols=True, mininterval=1.0)
        if self.dist.is_main:
            self.metrics.write({
                "event": "start", "step": self.state.step, "resumed": self.checkpoint is not None,
                "world_size": self.dist.world_size, "parameters": self.n_params, "vocab_size": len(self.vocab),
                "softmax": self.softmax_name, "device": str(self.dist.device),
            })
        window = {"words": 0, "seconds": 0.0, "fwd": 0.0, "bwd": 0.0, "steps": 0}
        last_eval: dict = {}
        last_saved = self.state.step if self.checkpoint is not None else -1
        try:
            batches = self.corpus.batches(self.state.position)
            while not max_steps or self.state.step < max_steps:
                started = time.perf_counter()
                item = next(batches, None)
                if item is None:
                    break  # max_epochs reached
                batch, position = item
                fwd, bwd, norm = self.train_step(batch)
                seconds = time.perf_counter() - started
                self.state.step += 1
                self.state.words += batch.global_words
                self.state.train_seconds += seconds
                self.state.position = position
                for key, value in (("words", batch.global_words), ("seconds", seconds), ("fwd", fwd), ("bwd", bwd), ("steps", 1)):
                    window[key] += value
                step = self.state.step
                if step % log_every == 0 or step == max_steps:
                    record = self._train_record(window, norm, position)
                    window = dict.fromkeys(window, 0) | {"seconds": 0.0}
                    if progress is not None:
                        progress.set_postfix(loss=f"{record['loss']:.3f}", ppl=f"{record['ppl']:.1f}", tok_s=f"{record['words_per_s']:.0f}", refresh=False)
                if progress is not None:
                    progress.update(1)
                if step % t["checkpoint_every"] == 0:
                    self.save_checkpoint()
                    last_saved = step
                if t["eval_every"] and step % t["eval_every"] == 0 and self.heldout_files:
                    record = last_eval = self._eval_record()
                    if progress is not None:
                        progress.write(f"step {step}: held-out perplexity {record['heldout_ppl']:.2f}")
        finally:
            if progress is not None:
                progress.close()
        if self.state.step == 0:
            raise PretrainError("no training step was run (is training.max_epochs reached already?)")
        if last_saved != self.state.step:
            self.save_checkpoint()
        final = {
            "step": self.state.step, "words": self.state.words, "train_seconds": round(self.state.train_seconds, 3),
            "rank": self.dist.rank,
        }
        if self.heldout_files:  # not again if the last periodic evaluation was at this step
            final |= last_eval if last_eval.get("step") == self.state.step else self._eval_record()
        self.export()
        self.write_summary(final)
        if self.dist.is_main:  # README.md model card, now with the training text and its perplexity
            corpus = next((r["train_words"] for r in self.metrics.records() if r.get("event") == "vocab"), None)
            write_model_card(self.output, self.model, language=self.cfg["data"]["lang"],
                             training={"text": self.train_files, "corpus_words": corpus, **final})
        self.dist.barrier()
        return final

    def write_summary(self, final: dict) -> None:
        """`pretrain_summary.json`: the run in one object (for reports), next to the model."""
        if not self.dist.is_main:
            return
        summary = {k: v for k, v in final.items() if k not in ("rank", "event")}
        seconds = max(self.state.train_seconds, 1e-9)
        summary |= {
            "words_per_s": self.state.words / seconds, "steps_per_s": self.state.step / seconds,
            "parameters": self.n_params, "vocab_size": len(self.vocab), "softmax": self.softmax_name,
            "world_size": self.dist.world_size, "device": str(self.dist.device),
        }
        for record in self.metrics.records():
            if record.get("event") == "vocab" and "unigram_heldout_ppl" in record:
                summary["unigram_heldout_ppl"] = record["unigram_heldout_ppl"]
        write_text_atomic(self.output / "pretrain_summary.json", json.dumps(summary, indent=2) + "\n")

    def _train_record(self, window: dict, norm: float, position: DataPosition) -> dict:
        steps = max(window["steps"], 1)
        fwd, bwd = window["fwd"] / steps, window["bwd"] / steps
        loss = (fwd + bwd) / 2
        record = {
            "step": self.state.step, "epoch": position.epoch, "loss": loss, "ppl": math.exp(min(loss, 50.0)),
            "forward_ppl": math.exp(min(fwd, 50.0)), "backward_ppl": math.exp(min(bwd, 50.0)),
            "grad_norm": norm, "lr": self.optimizer.param_groups[0]["lr"],
            "words": self.state.words, "words_per_s": window["words"] / max(window["seconds"], 1e-9),
            "train_seconds": round(self.state.train_seconds, 3),
        }
        self.metrics.write(record)
        return record

    def export(self) -> None:
        """The final model: HF directory (with LM head), tokenizer, vocab, config; legacy files if asked."""
        if not self.dist.is_main:
            return
        from .. import ElmoTokenizer, save_legacy

        self.model.eval()
        self.model.save_pretrained(str(self.output))
        ElmoTokenizer(max_characters_per_token=self.model_config.max_characters_per_token, lang=self.cfg["data"]["lang"]).save_pretrained(str(self.output))
        write_text_atomic(self.output / "pretrain.cfg", self.cfg.to_str())
        if self.cfg["export"]["legacy"]:
            legacy = self.output / "legacy"
            save_legacy(self.model, legacy)
            self.vocab.save(legacy / "vocab.txt")
        self.model.train()


def _has_lm_head(path: Path) -> bool:
    from safetensors import safe_open

    weights = path / "model.safetensors"
    if not weights.is_file():
        return False
    with safe_open(str(weights), "pt") as handle:
        return "lm_head.weight" in handle.keys()


def pretrain(config_path, output, overrides: dict | None = None, *, resume: bool = False, init_from=None, progress: bool = True) -> dict:
    """Runs `spacy-elmo pretrain`: returns the final metrics (held-out perplexity when paths.heldout is set)."""
    overrides = dict(overrides or {})
    if init_from is not None:
        overrides["paths.init_from"] = str(init_from)
    cfg = load_settings(config_path, overrides)
    threads = torch.get_num_threads()
    created = [p for p in (Path(output), *Path(output).parents) if not p.exists()]  # deepest first
    try:
        try:
            trainer = Pretrainer(cfg, output, resume=resume, progress=progress)
        except Exception:  # refused on its settings or data: leave no empty folder behind
            for folder in created:
                with contextlib.suppress(OSError):  # not empty, or another process removed it
                    folder.rmdir()
            raise
        return trainer.run()
    finally:
        torch.set_num_threads(threads)  # system.threads is for this run only
        if dist.is_initialized():
            dist.destroy_process_group()


__all__ = [
    "DEFAULTS", "PretrainError", "TrainingDiverged", "parse_overrides", "load_settings",
    "Pretrainer", "TrainState", "Checkpoints", "check_output_dir", "pretrain",
]
