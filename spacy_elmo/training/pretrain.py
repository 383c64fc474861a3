"""Pretraining (and fine-tuning) of the ELMo biLM: the run itself.

One `Pretrainer` owns everything a run needs, as explicit state: the settings (`settings.py`: a
confection config validated by a pydantic schema), this process's place in a torchrun job
(`distributed.py`), the vocabulary (`vocab.txt` in the output directory), the
`ElmoForBidirectionalLM`, the optimizer, and the `TrainState` (step, words seen, training time,
data position). Checkpoints, the `latest` pointer, resume and metrics.jsonl live in
`checkpoints.py`; `--resume` restores model, optimizer, RNG states and data position, so the run
continues exactly.

Under `torchrun` (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel (gloo on CPU,
NCCL on GPU); every process builds the same global batches and trains on its own rows, and the
loss is scaled so the averaged gradient equals the gradient of the global batch's mean loss.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from pathlib import Path

import torch

from ..configuration_elmo import config_error_message
from ..model_directory import save_model_directory
from ..provenance import threads as thread_variables
from .batches import Corpus, DataPosition
from .checkpoints import Checkpoints, MetricsLog, TrainState, check_free_space, check_writable, fault_point, write_text_atomic
from .text import check_text_files, iter_sequences, make_tokenizer, resolve_files
from .vocabulary import Vocabulary, build_char_lexicon, unigram_perplexity
from .distributed import Distributed
from .settings import PretrainError, TrainingDiverged, check_resumable, learning_rate_at, load_settings

# The devices where torch has a fused kernel for each optimizer. torch refuses fused Adagrad on CUDA
# only at the first step, not when the optimizer is made, so the choice is made here, by device.
FUSED_OPTIMIZER_DEVICES = {"adam": ("cpu", "cuda"), "adagrad": ("cpu",)}


def fused_optimizer(name: str, device: torch.device) -> bool:
    """Whether the pretrainer runs optimizer `name` ("adam" or "adagrad") as torch's fused kernel on `device`."""
    return device.type in FUSED_OPTIMIZER_DEVICES[name]


class Pretrainer:
    """A pretraining or fine-tuning run writing to `output` (see the module docstring)."""

    def __init__(self, cfg, output: str | Path, *, resume: bool = False, progress: bool = True):
        self.cfg, self.output, self.resume, self.show_progress = cfg, Path(output), resume, progress
        system, training = cfg["system"], cfg["training"]
        if system["threads"]:
            torch.set_num_threads(int(system["threads"]))
        # what this process trains with (a checkpoint records it; a resume needs the same on a CPU)
        self.threads = {"torch_threads": torch.get_num_threads(), **thread_variables()}
        try:
            self.dist = Distributed.from_env(system["device"])
        except ValueError as err:
            raise PretrainError(str(err)) from None
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
        self.train_files = resolve_files(cfg["paths"]["train"], "paths.train")
        check_text_files(self.train_files, "paths.train")  # UTF-8 text, not empty: before any work
        heldout = cfg["paths"]["heldout"]
        self.heldout_files = resolve_files(heldout, "paths.heldout") if heldout else []
        if self.heldout_files:
            check_text_files(self.heldout_files, "paths.heldout")

        init = self._init_source()
        self.vocab = self._load_vocab(init)
        self.model_config = self._model_config(init)
        self.tokenizer = self._tokenizer(init)
        self._check_disk_space()
        torch.manual_seed(system["seed"])  # the same initial weights in every process
        self.model = self._build_model(init)
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
        check_resumable(saved, self.cfg, self.checkpoint)
        before = self.checkpoints.load_state(self.checkpoint)[1].get("threads")  # None: written before they were kept
        if before and self.dist.device.type == "cpu" and before["torch_threads"] != self.threads["torch_threads"]:
            raise PretrainError(
                f"cannot resume {self.checkpoint} exactly: it was trained with {_threads_text(before)}, this run has "
                f"{_threads_text(self.threads)}, and another thread count sums in another order; resume with the same "
                "system.threads or OMP_NUM_THREADS, or start a new output directory"
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
        from ..loading import load_pretrained

        elmo, tokenizer = load_pretrained(reference)
        return {"kind": "elmo", "path": path, "config": elmo.config, "elmo": elmo, "tokenizer": tokenizer}

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
            if len(vocab) <= 3:  # refused before anything is written
                raise PretrainError("the vocabulary has no words: is the training data empty, or data.min_count too high?")
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
        self.char_lexicon = self._build_char_lexicon(settings.get("max_characters_per_token", 50))
        sizes = {"vocab_size": len(self.vocab)}
        if self.char_lexicon is not None:
            sizes["char_vocab_size"] = len(self.char_lexicon) + 1
        if settings.get("word_embedding_dim"):  # the input word embedding shares the LM vocabulary's ids
            sizes["word_vocab_size"] = len(self.vocab)
        try:
            return ElmoConfig(**settings, **sizes)
        except (TypeError, ValueError) as err:
            raise PretrainError(f"invalid [model] settings: {config_error_message(err)}") from None

    def _build_char_lexicon(self, max_chars: int) -> dict[str, int] | None:
        """With data.characters = "lexicon": the characters of the training text (every process
        counts the same text, so all get the same lexicon)."""
        data = self.cfg["data"]
        if data["characters"] != "lexicon":
            return None
        sequences = iter_sequences(self.train_files, self.tokenize, data["max_tokens"], data["max_line_bytes"], data["block_lines"])
        lexicon = build_char_lexicon(sequences, max_chars, data["char_min_count"])
        if self.dist.is_main:
            self.metrics.write({"event": "char_lexicon", "size": len(lexicon)})
        return lexicon

    def _tokenizer(self, init: dict | None):
        """The tokenizer saved with the model: the checkpoint's or the pretrained model's (its
        character and word lexicons), else UTF-8 characters with the data's language."""
        from ..tokenization_elmo import ElmoTokenizer

        if self.checkpoint is not None and (self.checkpoint / "tokenizer_config.json").is_file():
            return ElmoTokenizer.from_pretrained(str(self.checkpoint))
        if init is not None and init.get("tokenizer") is not None:
            return init["tokenizer"]
        if init is not None and (init["path"] / "tokenizer_config.json").is_file():
            return ElmoTokenizer.from_pretrained(str(init["path"]))
        config = self.model_config
        words = {word: i for i, word in enumerate(self.vocab.words)} if config.word_vocab_size else None
        return ElmoTokenizer(
            max_characters_per_token=config.max_characters_per_token, lang=self.cfg["data"]["lang"],
            char_vocab=getattr(self, "char_lexicon", None), word_vocab=words,
        )

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

        if self.checkpoint is not None:
            return self.checkpoints.load_model(self.checkpoint, self.dist.device)
        if init is not None and init["kind"] == "lm":
            model = ElmoForBidirectionalLM.from_pretrained(str(init["path"]), config=self.model_config)
        else:
            model = ElmoForBidirectionalLM(self.model_config)
            if init is not None:
                weights = {k: v for k, v in init["elmo"].state_dict().items() if not k.startswith("scalar_mixes.")}
                model.elmo.load_state_dict(weights)
        return model.to(self.dist.device).train()

    def _build_optimizer(self) -> torch.optim.Optimizer:
        t, params = self.cfg["training"], self.params
        if t["optimizer"] == "adagrad":
            kind, settings = torch.optim.Adagrad, dict(
                lr=t["learning_rate"], initial_accumulator_value=t["adagrad_initial_accumulator"], weight_decay=t["weight_decay"],
            )
        else:
            kind, settings = torch.optim.Adam, dict(
                lr=t["learning_rate"], betas=tuple(t["adam_betas"]), eps=t["adam_eps"], weight_decay=t["weight_decay"],
            )
        # torch's fused kernel: the same update in one pass per tensor (~5x faster on a CPU than the
        # op-by-op loop; tests/test_training_step.py holds it to the loop's float32 accuracy). It writes
        # the parameters without bumping their version counters, which the model's derived-weight
        # and token caches key on: `train_step` bumps them after each step (`_mark_updated`).
        if fused_optimizer(t["optimizer"], params[0].device):
            try:
                return kind(params, **settings, fused=True)
            except (RuntimeError, TypeError):  # a torch older than the fused kernel: the loop
                pass
        return kind(params, **settings)

    def _build_softmax(self):
        from .sampled_softmax import SampledSoftmax

        t = self.cfg["training"]
        n_vocab = len(self.vocab)
        sampled = t["softmax"] == "sampled" or (t["softmax"] == "auto" and n_vocab > t["full_softmax_max_vocab"])
        if sampled and t["n_negative_samples"] >= n_vocab:
            sampled = False  # sampling (nearly) every word is just a slower full softmax
        self.softmax_name = f"sampled({t['n_negative_samples']})" if sampled else "full"
        # "auto": the fused implementation (same loss and gradients), eager under autocast
        return SampledSoftmax(self.model.lm_head, t["n_negative_samples"], implementation="auto") if sampled else None

    def _corpus(self, files, batch_tokens: int, max_epochs: int = 0) -> Corpus:
        data = self.cfg["data"]
        return Corpus(
            files, self.vocab, self.tokenize,
            encoder=self.tokenizer.encoder, batch_tokens=batch_tokens,
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
        state = self.state.to_dict() | {"world_size": self.dist.world_size, "threads": self.threads}
        return self.checkpoints.save(
            self.state.step, self.model, self.tokenizer, self.optimizer.state_dict(), rng,
            {"pretrain.cfg": self.cfg.to_str(), "state.json": json.dumps(state, indent=2)},
        )

    def _load_checkpoint(self, path: Path) -> None:
        """Optimizer, RNG and train state of checkpoint `path` (its model was loaded by `_build_model`)."""
        self.optimizer.load_state_dict(self.checkpoints.load_optimizer(path, self.dist.device))
        self.state, saved = self.checkpoints.load_state(path)
        if saved.get("world_size", 1) != self.dist.world_size:
            # the global batch (batch_tokens × processes) changes, and with it how a block is cut into
            # batches: continue from the start of the current block (it may be partly seen again)
            self.state.position.batch = 0
            if self.dist.is_main:
                print(f"resuming {saved.get('world_size', 1)}-process checkpoint on {self.dist.world_size} processes: "
                      "the global batch size changes; the current data block restarts", file=sys.stderr)
        rng = self.checkpoints.load_rng(path, self.dist.rank)
        if rng is not None:
            torch.set_rng_state(rng["cpu"])
            if "cuda" in rng and self.dist.device.type == "cuda":
                torch.cuda.set_rng_state(rng["cuda"], self.dist.device)
        else:  # resumed on more processes than were saved: the data stays exact, dropout draws do not
            torch.manual_seed(self.cfg["system"]["seed"] + 1 + self.dist.rank + 1_000_003 * self.state.step)
        self.metrics.truncate_after(self.state.step)

    # ---- training ----------------------------------------------------------------------------------

    def train_step(self, batch) -> tuple[float, float, float]:
        """One optimizer step on this process's rows; returns the global batch's (forward, backward) mean
        loss and the gradient norm before clipping."""
        batch.to(self.dist.device)
        device = self.dist.device.type
        with torch.autocast(device, dtype=torch.bfloat16, enabled=self.cfg["training"]["precision"] == "bf16"):
            out = self.train_model(
                input_ids=batch.char_ids, attention_mask=batch.mask, labels=batch.word_ids, softmax_fn=self.softmax_fn,
                input_word_ids=batch.input_word_ids,
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
        self._mark_updated()
        self.optimizer.zero_grad(set_to_none=True)
        return fwd, bwd, norm

    def _mark_updated(self) -> None:
        """Bumps every trained parameter's version counter, as an in-place update does: a fused
        optimizer step does not, and the inference kernel's prepacked weights and the token cache
        (used by held-out evaluation) must see that the weights changed."""
        if getattr(self.optimizer, "defaults", {}).get("fused"):
            for parameter in self.params:
                torch.autograd.graph.increment_version(parameter)

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
            out = self.model(input_ids=batch.char_ids, attention_mask=batch.mask, labels=batch.word_ids, input_word_ids=batch.input_word_ids)
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
                fault_point("step", self.state.step)
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
        self.export(final)
        self.write_summary(final)
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

    def export(self, final: dict) -> None:
        """The final model: its model directory (with LM head, tokenizer, and a card naming the
        training text, its size and the held-out perplexity), vocab, config; legacy files if asked."""
        if not self.dist.is_main:
            return
        from .. import save_legacy

        self.model.eval()
        corpus = next((r["train_words"] for r in self.metrics.records() if r.get("event") == "vocab"), None)
        card = {"training": {"text": self.train_files, "corpus_words": corpus, **final}}
        save_model_directory(self.output, self.model, self.tokenizer, card=card)
        write_text_atomic(self.output / "pretrain.cfg", self.cfg.to_str())
        if self.cfg["export"]["legacy"]:
            legacy = self.output / "legacy"
            save_legacy(self.model, legacy)
            self.vocab.save(legacy / "vocab.txt")
        self.model.train()


def _threads_text(threads: dict) -> str:
    variables = ", ".join(f"{k}={v}" for k, v in threads.items() if k != "torch_threads") or "no thread variables"
    return f"{threads['torch_threads']} torch threads per process ({variables})"


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
        Distributed.close()


__all__ = ["Pretrainer", "pretrain"]
