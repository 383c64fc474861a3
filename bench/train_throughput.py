"""Training throughput of the biLM: words/s of the real training step, and the FLOPs it executes.

    python bench/train_throughput.py [--config configs/pretrain_small.cfg] [--corpus TEXT] [--steps 20]
        [--layouts 2x1,1x2 | --procs P --threads T] [--baseline DIR] [--implementations auto] [--profile]
        [--json OUT.json] [--append-results bench/RESULTS.md] [--label TEXT] [--section.key value ...]

    # the project's pretraining step (2 processes x 1 thread), this checkout against main at a commit:
    git worktree add /tmp/base <commit>
    OMP_WAIT_POLICY=PASSIVE python bench/train_throughput.py --config configs/pretrain_project.cfg \
        --layouts 2x1 --baseline /tmp/base --steps 40 --profile --append-results bench/RESULTS.md

Every measured *variant* — this checkout's spacy_elmo and, with `--baseline DIR`, the spacy_elmo in
DIR (e.g. `git worktree add DIR <commit>`; a commit with the public step API, `build_run` and
`train_steps`: issue 34 on), each with every `--implementations` value of
`ElmoConfig.lstm_implementation`, in each `--layouts` entry PxT — runs in its own worker processes:
P data-parallel ranks (gloo, DistributedDataParallel: what `torchrun --nproc_per_node P -m
spacy_elmo pretrain` runs), each with T torch threads (`system.threads`).  Every layout trains on
the same global batch: `data.batch_tokens` (the config's, or `--data.batch_tokens`) × the first
layout's P words, split over its P ranks.  The workers build the same run (`build_run`) from the
same config and text, so every variant trains on the same batches.  The variants take turns step by step, in
alternating order, so load changes on a shared machine hit them alike; each step's time ratio to
the first variant (the baseline, when given) is taken on the same batch, and the report gives the
median and spread of those ratios besides the totals.

A step is what `spacy-elmo pretrain` times: the next `StepInfo` of the public step generator
`training.steps.train_steps` — taking the next batch from the data stream and `train_step`
(forward, backward, gradient all-reduce, clipping, optimizer); its `seconds` and `data_seconds`.

FLOPs are counted as the step executes them (`executed_flops`): the char CNN on each batch's
distinct words, over the columns `kernels.char_cnn.column_plan` keeps (chunks padded to
`MIN_ROWS`), the highway layers and projection on the distinct words, the biLSTM on every padded
position (rows × (longest row + 2 boundaries), both directions, every layer), and the softmax at
its real size (sampled: targets × (negatives + 1) per direction; full: targets × vocabulary);
matrix products only, training = 3 × forward (backward computes two products per forward one).
The *nominal* count (char CNN over all `max_characters_per_token` columns for every position, as
`bench.flops.forward_flops_per_token`) is reported beside it.  The roofline is the executed
training FLOP/s ÷ (P·T cores × the single-thread fp32 GEMM rate, measured in this run before
and after; the better value counts).

`--profile` adds, per variant, one step under torch.profiler split into parts (data, char CNN,
highway + projection, biLSTM, softmax, dropout, clipping, optimizer; backward work attributed to
the part whose forward created it; the rest — loss, DDP all-reduce, glue — as "other").
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import random
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = "@@bench "  # worker → parent lines on stdout start with this
PARTS = ("data", "char CNN", "highway + projection", "biLSTM", "softmax", "dropout", "clipping", "optimizer")


# ---- FLOPs ----------------------------------------------------------------------------------------


def _flops_module():
    """bench/flops.py of this checkout (loaded by path: a baseline's `bench` package may shadow it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_flops", ROOT / "bench" / "flops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def executed_flops(config, stats: dict) -> dict[str, float]:
    """Forward matrix-product FLOPs of one rank's step, per part, from the worker's `stats`:
    `cnn_chunks` [(rows, columns)] as the char CNN ran, `distinct` words, `rows` × `positions`
    (padded LSTM steps per row), `targets` per direction and `softmax_width` (negatives + 1, or V)."""
    flops = _flops_module()
    encoder_rest = flops.token_encoder_flops(config) - flops.char_cnn_flops(config)  # highway + projection
    return {
        "char CNN": sum(rows * flops.char_cnn_flops(config, columns) for rows, columns in stats["cnn_chunks"]),
        "highway + projection": stats["encoder_rows"] * encoder_rest,
        "biLSTM": stats["rows"] * stats["positions"] * flops.lstm_flops_per_token(config),
        "softmax": 2 * stats["targets"] * stats["softmax_width"] * 2.0 * config.projection_dim,
    }


def nominal_flops(config, stats: dict) -> float:
    """The same step counted as `bench.flops.forward_flops_per_token` does: every real position
    (words + boundaries) through the full char CNN, no padding, plus the softmax."""
    flops = _flops_module()
    softmax = 2 * stats["targets"] * stats["softmax_width"] * 2.0 * config.projection_dim
    return stats["tokens"] * flops.forward_flops_per_token(config) + softmax


# ---- worker (runs the measured code) --------------------------------------------------------------


def batch_stats(char_ids, mask, config, softmax_width: int) -> dict:
    """What one rank's training step computes for a batch ([rows, words, chars] ids, [rows, words]
    mask), as the loaded spacy_elmo runs it: the char CNN's chunks (rows, columns) from
    `kernels.char_cnn.column_plan` on the distinct words (boundaries included), the rows the
    highway layers see, the LSTM's padded positions, the targets per direction."""
    import torch

    from spacy_elmo.hf.modeling_elmo import add_sentence_boundaries
    from spacy_elmo.kernels import char_cnn

    ids, full_mask = add_sentence_boundaries(char_ids, mask.bool())[:2]  # older code returns 2, newer 3 values
    words = torch.unique(ids[full_mask], dim=0)
    _, chunks = char_cnn.column_plan(words, max(width for width, _ in config.filters))
    minimum = getattr(char_cnn, "MIN_ROWS", 1)  # every call is padded to this many rows
    return {
        "rows": int(ids.shape[0]),
        "positions": int(ids.shape[1]),
        "tokens": int(full_mask.sum()),
        "distinct": int(words.shape[0]),
        "encoder_rows": max(int(words.shape[0]), minimum),
        "cnn_chunks": [(max(stop - start, minimum), columns) for start, stop, columns in chunks],
        "targets": int(mask.sum()) + int(mask.shape[0]),
        "softmax_width": softmax_width,
    }


def worker(spec: dict) -> int:
    """One rank of one variant: builds the run with the code in spec["code"] (`build_run`), then
    answers "step" / "profile" / "quit" lines on stdin with one PROTOCOL line each on stdout; a step
    is the next `StepInfo` of the run's public step generator (`train_steps`)."""
    sys.path.insert(0, spec["code"])
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the code prints stays off the protocol channel

    def reply(message: dict) -> None:
        out.write(PROTOCOL + json.dumps(message) + "\n")
        out.flush()

    import torch

    from spacy_elmo.training.run import build_run
    from spacy_elmo.training.settings import read_settings
    from spacy_elmo.training.steps import train_steps

    run = build_run(read_settings(spec["config"], spec["overrides"]), Path(spec["output"]))
    config = run.model.elmo.encoder.config
    config.lstm_implementation = spec["implementation"]
    softmax_width = len(run.vocab) if run.softmax_fn is None else run.softmax_fn.num_sampled + 1
    labels = {"label": lambda part: contextlib.nullcontext()}  # the profiler's, while it runs

    def labelled_batches():
        """The run's batches from its data position, the taking of each labelled "data"."""
        batches = run.corpus.batches(run.state.position)
        while True:
            with labels["label"]("data"):
                item = next(batches, None)
            if item is None:
                return
            yield item

    steps = train_steps(run, labelled_batches())

    def step(label=lambda part: contextlib.nullcontext()) -> dict:
        labels["label"] = label
        cpu = time.process_time()
        info = next(steps)
        cpu = time.process_time() - cpu  # every thread of this process
        return {
            "seconds": info.seconds,
            "data_seconds": info.data_seconds,
            "cpu_seconds": cpu,
            "loss": info.loss,
            "global_words": info.batch.global_words,
            "global_targets": info.batch.global_targets,
            "executed": batch_stats(info.batch.char_ids, info.batch.mask, config, softmax_width),
        }

    reply(
        {
            "ready": True,
            "softmax": run.softmax_name,
            "vocab_size": len(run.vocab),
            "threads": torch.get_num_threads(),
            "world_size": run.dist.world_size,
            "config": {
                k: getattr(config, k)
                for k in (
                    "max_characters_per_token",
                    "char_embedding_dim",
                    "filters",
                    "n_highway",
                    "num_layers",
                    "lstm_dim",
                    "projection_dim",
                )
            },
            "architecture": (
                f"{config.num_layers}x{config.lstm_dim}_{config.projection_dim}_"
                f"{config.n_filters}cnn_{config.n_highway}xhighway"
            ),
        }
    )
    for line in sys.stdin:
        command = line.strip()
        if command == "step":
            reply(step())
        elif command == "profile":
            reply(profile_step(run, step))
        elif command == "quit":
            break
    return 0


def profile_step(run, step) -> dict:
    """One step under torch.profiler, its time split into PARTS (see the module docstring)."""
    import torch
    from torch.profiler import profile, record_function

    model = run.model
    encoder = model.elmo.token_encoder
    patched = []

    def label(obj, name: str, part: str) -> None:
        original = getattr(obj, name, None)
        if original is None:
            return

        def labelled(*args, **kwargs):
            with record_function("part:" + part):
                return original(*args, **kwargs)

        patched.append((obj, name, obj.__dict__.get(name)))
        setattr(obj, name, labelled)

    label(encoder, "char_features", "char CNN")
    label(encoder, "token_vectors", "highway + projection")
    for layer in model.elmo.encoder.layers:
        label(layer, "forward", "biLSTM")
        label(layer, "forward_fused", "biLSTM")
    label(run, "softmax_fn", "softmax")
    label(model.lm_head, "forward", "softmax")  # the full softmax's product (when not sampled)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            label(module, "forward", "dropout")
    label(run.optimizer, "step", "optimizer")
    label(run.optimizer, "zero_grad", "optimizer")
    label(torch.nn.utils, "clip_grad_norm_", "clipping")
    try:
        with profile() as prof:
            with record_function("part:step"):
                result = step(lambda part: record_function("part:" + part))
    finally:
        for obj, name, previous in reversed(patched):
            if previous is None:
                delattr(obj, name)
            else:
                setattr(obj, name, previous)
    events = prof.events()
    ranges = [e for e in events if e.name.startswith("part:") and e.name != "part:step"]
    total = next(e for e in events if e.name == "part:step").cpu_time_total / 1e3

    def part_of(event):
        for r in ranges:
            if (
                r.thread == event.thread
                and r.time_range.start <= event.time_range.start
                and event.time_range.end <= r.time_range.end
            ):
                return r.name[5:]
        return None

    # a forward op that creates no autograd node reports the next node's sequence number, so the
    # last forward op (in time) reporting a number is the one that created that node; ops run by
    # the backward pass report numbers too and are skipped
    backward_ranges = sorted(
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.name.startswith("autograd::engine::evaluate_function:")
    )
    starts = [start for start, _ in backward_ranges]

    def in_backward(event) -> bool:
        k = bisect.bisect_right(starts, event.time_range.start) - 1
        return k >= 0 and backward_ranges[k][1] >= event.time_range.end

    created_by = {}
    for e in sorted(events, key=lambda e: e.time_range.start):
        if e.sequence_nr >= 0 and not e.name.startswith("autograd::") and not in_backward(e):
            created_by[e.sequence_nr] = part_of(e)
    forward: dict[str, float] = {}
    for r in ranges:
        forward[r.name[5:]] = forward.get(r.name[5:], 0.0) + r.cpu_time_total / 1e3
    backward: dict[str, float] = {}
    for e in events:
        if e.name.startswith("autograd::engine::evaluate_function:"):
            part = created_by.get(e.sequence_nr)
            if part is not None:
                backward[part] = backward.get(part, 0.0) + e.cpu_time_total / 1e3
    parts = {}
    for part in PARTS:
        fwd, bwd = forward.get(part, 0.0), backward.get(part, 0.0)
        parts[part] = {"forward_ms": fwd, "backward_ms": bwd}
    attributed = sum(p["forward_ms"] + p["backward_ms"] for p in parts.values())
    parts["other"] = {"forward_ms": max(total - attributed, 0.0), "backward_ms": 0.0}
    return {"profile": parts, "step_ms": total, "words": result["global_words"]}


# ---- parent ----------------------------------------------------------------------------------------


class Variant:
    """The worker processes (ranks) of one (code, implementation, layout) variant."""

    def __init__(
        self, name: str, code: Path, implementation: str, spec: dict, procs: int, threads: int, tmp: Path, env: dict
    ):
        self.name, self.code, self.implementation = name, code, implementation
        self.layout = (procs, threads)
        self.records: list[dict] = []
        self.logs = []
        self.procs = []
        port = _free_port()
        for rank in range(procs):
            log = open(tmp / f"{name.replace(' ', '_')}-rank{rank}.log", "w+", encoding="utf-8")
            rank_env = dict(
                env,
                OMP_NUM_THREADS=str(threads),
                PYTHONPATH=os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")])),
            )
            if procs > 1:
                rank_env.update(
                    WORLD_SIZE=str(procs),
                    RANK=str(rank),
                    LOCAL_RANK=str(rank),
                    LOCAL_WORLD_SIZE=str(procs),
                    MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port),
                )
            else:
                for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
                    rank_env.pop(key, None)
            worker_spec = dict(
                spec, code=str(code), implementation=implementation, output=str(tmp / f"out-{name.replace(' ', '_')}")
            )
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(worker_spec)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=rank_env,
                cwd=str(code),
            )
            self.procs.append(proc)
            self.logs.append(log)
        self.info = self.collect()[0]

    def collect(self) -> list[dict]:
        replies = []
        for proc, log in zip(self.procs, self.logs):
            while True:
                line = proc.stdout.readline()
                if not line:
                    log.seek(0)
                    tail = "\n".join(log.read().strip().splitlines()[-15:])
                    raise RuntimeError(f"variant {self.name!r}: a worker stopped (exit {proc.poll()}):\n{tail}")
                if line.startswith(PROTOCOL):
                    replies.append(json.loads(line[len(PROTOCOL) :]))
                    break
        return replies

    def send(self, command: str) -> list[dict]:
        for proc in self.procs:
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
        return self.collect()

    def step(self) -> dict:
        replies = self.send("step")
        record = dict(replies[0])
        record["seconds"] = max(r["seconds"] for r in replies)  # the ranks wait for each other in the all-reduce
        record["data_seconds"] = max(r["data_seconds"] for r in replies)
        record["cpu_seconds"] = sum(r["cpu_seconds"] for r in replies)  # all threads of all ranks
        record["executed"] = [r["executed"] for r in replies]
        return record

    def close(self) -> None:
        for proc in self.procs:
            try:
                proc.stdin.write("quit\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
        for proc, log in zip(self.procs, self.logs):
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gemm_gflops(threads: int, sizes=(1024, 2048), repeats: int = 5) -> float:
    """Best median fp32 GFLOP/s of square matmuls at `threads` threads (bench/machine.py when present)."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        try:
            sys.path.insert(0, str(ROOT))
            from bench.machine import gemm_rate

            return gemm_rate(sizes, repeats)["peak"]
        except ImportError:
            best = 0.0
            for n in sizes:
                a, b, out = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
                torch.mm(a, b, out=out)
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    torch.mm(a, b, out=out)
                    times.append(time.perf_counter() - start)
                best = max(best, 2.0 * n**3 / statistics.median(times) / 1e9)
            return best
    finally:
        torch.set_num_threads(saved)


def synthetic_corpus(path: Path, n_words: int = 300_000, seed: int = 0) -> Path:
    """Zipfian text over 30k made-up words, sentences of 5–40 words (when no real corpus is around)."""
    rng = random.Random(seed)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 10))) for _ in range(30_000)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    lines, total = [], 0
    while total < n_words:
        n = rng.randint(5, 40)
        lines.append(" ".join(rng.choices(vocab, weights, k=n)))
        total += n
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _parse_overrides(extra: list[str]) -> dict:
    """`--section.key value` pairs (values parsed as JSON where they can be, as the CLI does)."""
    overrides, i = {}, 0
    while i < len(extra):
        key = extra[i]
        if not key.startswith("--") or "." not in key or i + 1 >= len(extra):
            raise SystemExit(f"unexpected argument {key!r}: overrides are --section.key value")
        value = extra[i + 1]
        try:
            overrides[key[2:]] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key[2:]] = value
        i += 2
    return overrides


def summarize(variant: Variant, config, warmup: int, gemm: float) -> dict:
    cores = variant.layout[0] * variant.layout[1]
    measured = variant.records[warmup:]
    seconds = sum(r["seconds"] for r in measured)
    words = sum(r["global_words"] for r in measured)
    executed = {part: 0.0 for part in ("char CNN", "highway + projection", "biLSTM", "softmax")}
    nominal = distinct = tokens = 0.0
    for record in measured:
        for stats in record["executed"]:
            for part, value in executed_flops(config, stats).items():
                executed[part] += value
            nominal += nominal_flops(config, stats)
            distinct += stats["distinct"]
            tokens += stats["tokens"]
    training = 3 * sum(executed.values())
    return {
        "code": str(variant.code),
        "implementation": variant.implementation,
        "steps": len(measured),
        "seconds_per_step": seconds / len(measured),
        "data_seconds_per_step": sum(r["data_seconds"] for r in measured) / len(measured),
        "words_per_s": words / seconds,
        "words_per_step": words / len(measured),
        "words_per_cpu_s": words / sum(r["cpu_seconds"] for r in measured),
        "distinct_words_per_token": distinct / tokens,
        "executed_training_gflop_per_step": training / len(measured) / 1e9,
        "executed_forward_share": {part: value / sum(executed.values()) for part, value in executed.items()},
        "nominal_training_gflop_per_step": 3 * nominal / len(measured) / 1e9,
        "executed_gflops": training / seconds / 1e9,
        "layout": f"{variant.layout[0]}x{variant.layout[1]}",
        "roofline_executed": training / seconds / 1e9 / (gemm * cores),
        "roofline_nominal": 3 * nominal / seconds / 1e9 / (gemm * cores),
        "loss_first_last": [variant.records[0]["loss"], variant.records[-1]["loss"]],
    }


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker(json.loads(argv[1]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "pretrain_small.cfg"))
    parser.add_argument(
        "--corpus",
        help="training text (default: the project's work/corpus/lm/train.txt or "
        "assets/corpus/lm/train.txt when present, else generated Zipfian text)",
    )
    parser.add_argument("--steps", type=int, default=20, help="measured steps per variant")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--layouts",
        default=None,
        help="comma-separated PxT: P data-parallel processes (gloo, as torchrun's "
        "--nproc_per_node) × T torch threads each; every layout trains on the same global batch (default 1x1)",
    )
    parser.add_argument(
        "--procs", type=int, default=1, help="shorthand for one layout: --procs P --threads T = --layouts PxT"
    )
    parser.add_argument("--threads", type=int, default=1, help="see --procs")
    parser.add_argument(
        "--baseline",
        help="also measure the spacy_elmo package in this directory (e.g. `git worktree add DIR <commit>`), "
        "step by step alternating with this checkout's; ratios are taken against it",
    )
    parser.add_argument(
        "--implementations", default="auto", help="comma-separated lstm_implementation values (each one a variant)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after the measured steps, one step per variant under torch.profiler, split into parts",
    )
    parser.add_argument(
        "--omp-wait-policy",
        default="passive",
        choices=["passive", "active", "default"],
        help="OMP_WAIT_POLICY for the workers (passive: a shared machine's load does not stall every parallel region)",
    )
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--label", default="", help="text added to the report's heading")
    parser.add_argument(
        "--append-results", help="append a Markdown section with the result to this file (e.g. bench/RESULTS.md)"
    )
    args, extra = parser.parse_known_args(argv)
    overrides_extra = _parse_overrides(extra)
    implementations = [name.strip() for name in args.implementations.split(",") if name.strip()]
    args.layouts = args.layouts or f"{args.procs}x{args.threads}"
    try:
        layouts = [tuple(int(n) for n in item.lower().split("x")) for item in args.layouts.split(",") if item.strip()]
        assert layouts and all(len(layout) == 2 and min(layout) >= 1 for layout in layouts)
    except (ValueError, AssertionError):
        parser.error(f"--layouts: expected comma-separated PxT (e.g. 2x1,1x2), found {args.layouts!r}")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()

    env = dict(os.environ)
    if args.omp_wait_policy != "default":
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    codes = ([("baseline", Path(args.baseline).resolve())] if args.baseline else []) + [("this", ROOT)]
    with tempfile.TemporaryDirectory(prefix="elmo-train-bench-") as tmp_name:
        tmp = Path(tmp_name)
        candidates = (
            [Path(args.corpus)]
            if args.corpus
            else [ROOT / "work" / "corpus" / "lm" / "train.txt", ROOT / "assets" / "corpus" / "lm" / "train.txt"]
        )
        corpus = next((path for path in candidates if path.is_file()), None)
        if corpus is None and args.corpus:
            parser.error(f"--corpus: {args.corpus} is not a file")
        corpus = corpus or synthetic_corpus(tmp / "corpus.txt")
        overrides = {
            "paths.train": str(corpus.resolve()),
            "paths.heldout": None,
            "export.legacy": False,
            "training.max_steps": 10**6,
            "training.checkpoint_every": 10**9,
            "training.eval_every": 0,
            **overrides_extra,
        }
        from confection import Config

        batch_tokens = (
            overrides.get("data.batch_tokens")
            or Config().from_disk(args.config, interpolate=False)["data"]["batch_tokens"]
        )
        global_batch = batch_tokens * layouts[0][0]
        gemm_before = gemm_gflops(1)
        variants = []
        try:
            for code_name, code in codes:
                for implementation in implementations:
                    for procs, threads in layouts:
                        name = " ".join(
                            [code_name]
                            + ([implementation] if len(implementations) > 1 else [])
                            + ([f"{procs}x{threads}"] if len(layouts) > 1 else [])
                        )
                        layout = {"system.threads": threads, "data.batch_tokens": global_batch // procs}
                        spec = {"config": str(Path(args.config).resolve()), "overrides": overrides | layout}
                        variants.append(Variant(name, code, implementation, spec, procs, threads, tmp, env))
                    print(
                        f"{name}: ready ({variants[-1].info['architecture']}, {variants[-1].info['softmax']} softmax)",
                        file=sys.stderr,
                    )
            for index in range(args.warmup + args.steps):
                order = variants if index % 2 == 0 else variants[::-1]
                for variant in order:
                    variant.records.append(variant.step())
                words = {v.records[-1]["global_words"] for v in variants}
                if len(words) != 1:
                    raise RuntimeError(
                        f"step {index}: the variants trained on different batches ({sorted(words)} words)"
                    )
                print(
                    f"step {index}: " + ", ".join(f"{v.name} {v.records[-1]['seconds']:.3f} s" for v in variants),
                    file=sys.stderr,
                )
            profiles = {}
            if args.profile:
                for variant in variants:
                    profiles[variant.name] = variant.send("profile")[0]
        finally:
            for variant in variants:
                variant.close()
        gemm_after = gemm_gflops(1)

    info = variants[-1].info
    config = SimpleNamespace(**info["config"])
    gemm = max(gemm_before, gemm_after)
    results = {v.name: summarize(v, config, args.warmup, gemm) for v in variants}
    reference = variants[0]
    ratios = {}
    for variant in variants[1:]:
        pairs = list(zip(reference.records[args.warmup :], variant.records[args.warmup :]))
        per_step = [a["seconds"] / b["seconds"] for a, b in pairs]
        per_step_cpu = [a["cpu_seconds"] / b["cpu_seconds"] for a, b in pairs]
        ratios[variant.name] = {
            "words_per_s_ratio": results[variant.name]["words_per_s"] / results[reference.name]["words_per_s"],
            "words_per_cpu_s_ratio": results[variant.name]["words_per_cpu_s"]
            / results[reference.name]["words_per_cpu_s"],
            "per_step_cpu_median": statistics.median(per_step_cpu),
            "per_step_cpu_quartiles": statistics.quantiles(per_step_cpu, n=4)
            if len(per_step_cpu) > 1
            else per_step_cpu * 3,
            "per_step_median": statistics.median(per_step),
            "per_step_quartiles": statistics.quantiles(per_step, n=4) if len(per_step) > 1 else per_step * 3,
            "per_step_min_max": [min(per_step), max(per_step)],
        }
    result = {
        "config": Path(args.config).name,
        "architecture": info["architecture"],
        "softmax": info["softmax"],
        "vocab_size": info["vocab_size"],
        "corpus": corpus.name,
        "layouts": args.layouts,
        "global_batch_tokens": global_batch,
        "steps": args.steps,
        "warmup": args.warmup,
        "variants": results,
        "ratios_vs": reference.name,
        "ratios": ratios,
        "gemm_gflops": gemm,
        "gemm_gflops_before_after": [gemm_before, gemm_after],
        "loadavg": os.getloadavg(),
        "profiles": profiles,
        "omp_wait_policy": env.get("OMP_WAIT_POLICY", "unset"),
    }
    last = results[variants[-1].name]
    # the last variant's figures at the top level, as `python -m bench` reads them
    result.update(
        words_per_s=last["words_per_s"], fraction_of_gemm=last["roofline_executed"], threads=variants[-1].layout[1]
    )
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.append_results:
        section = render_section(result, argv, started, load_start, args.label, {v.name: v.code for v in variants})
        path = Path(args.append_results)
        previous = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmark results\n"
        path.write_text(previous.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        print(f"appended to {path}")
    return 0


def commit_words(directory: Path) -> str:
    """bench.run.code_version, worded for this section: "(with uncommitted changes)" for its "-dirty"."""
    sys.path.insert(0, str(ROOT))
    from bench.run import code_version

    version = code_version(directory)
    return version.removesuffix("-dirty") + (" (with uncommitted changes)" if version.endswith("-dirty") else "")


def render_section(result: dict, argv: list[str], started: str, load_start, label: str, codes: dict) -> str:
    """A dated Markdown section: machine, commits, command, one row per variant, ratios, profiles."""
    import platform

    import torch

    try:
        sys.path.insert(0, str(ROOT))
        from bench.machine import describe

        cpu = describe()["cpu"]
    except ImportError:
        cpu = platform.processor()
    load_end = os.getloadavg()
    names = list(result["variants"])
    commits = {directory: commit_words(directory) for directory in set(codes.values())}
    code_lines = "; ".join(f"{name}: `{codes[name]}` at {commits[codes[name]]}" for name in names)
    lines = [
        f"## Training throughput, {started} ({result['config']}, {result['architecture']})"
        + (f" ({label})" if label else ""),
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores; torch {torch.__version__}; processes × threads per variant: "
        f"{result['layouts']} (global batch {result['global_batch_tokens']} padded words), fp32, "
        f"OMP_WAIT_POLICY={result['omp_wait_policy']}. "
        f"Load average at start {'/'.join(f'{x:.2f}' for x in load_start)}, at end "
        f"{'/'.join(f'{x:.2f}' for x in load_end)}.",
        "",
        f"Code: {code_lines}.",
        "",
        f"Command: `python bench/train_throughput.py {shlex.join(argv)}` — the variants take turns step by step "
        f"(alternating order; {result['warmup']} warm-up + {result['steps']} measured steps each, the same batches: "
        f"{result['variants'][names[-1]]['words_per_step']:.0f} words per step; {result['softmax']} softmax over "
        f"{result['vocab_size']} ids; corpus {result['corpus']}). A step = next batch + `train_step` (one "
        "`train_steps` step).",
        f"FLOPs as executed (distinct words, cut char-CNN columns, padded LSTM positions, the softmax's real width; "
        "training = 3 × forward matrix products); roofline = executed training FLOP/s ÷ (cores used × single-thread "
        "fp32 GEMM "
        f"rate measured in this run: {result['gemm_gflops']:.1f} GFLOP/s; before/after "
        f"{result['gemm_gflops_before_after'][0]:.1f} / {result['gemm_gflops_before_after'][1]:.1f}). Nominal = the "
        "char CNN over "
        "all columns for every position (bench.flops.forward_flops_per_token).",
        "",
        "words/CPU·s = words ÷ the CPU time of every thread of every rank (less sensitive to other jobs' load than "
        "words/s).",
        "",
        "| variant | s/step | words/s | words/CPU·s | executed GFLOP/step | GFLOP/s | roofline (executed) | roofline "
        "(nominal) | data s/step |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in result["variants"].items():
        lines.append(
            f"| {name} | {r['seconds_per_step']:.3f} | {r['words_per_s']:.0f} | {r['words_per_cpu_s']:.0f} | "
            f"{r['executed_training_gflop_per_step']:.1f} | {r['executed_gflops']:.1f} | "
            f"{100 * r['roofline_executed']:.0f}% | "
            f"{100 * r['roofline_nominal']:.0f}% | {r['data_seconds_per_step']:.3f} |"
        )
    for name, ratio in result["ratios"].items():
        q, qc = ratio["per_step_quartiles"], ratio["per_step_cpu_quartiles"]
        lines += [
            "",
            f"**{name} vs {result['ratios_vs']}: words/s ratio {ratio['words_per_s_ratio']:.2f}×** (per step, same "
            "batch: median "
            f"{ratio['per_step_median']:.2f}×, quartiles {q[0]:.2f}–{q[2]:.2f}×, range "
            f"{ratio['per_step_min_max'][0]:.2f}–"
            f"{ratio['per_step_min_max'][1]:.2f}×); words/CPU·s ratio {ratio['words_per_cpu_s_ratio']:.2f}× (per step "
            "median "
            f"{ratio['per_step_cpu_median']:.2f}×, quartiles {qc[0]:.2f}–{qc[2]:.2f}×).",
        ]
    first = result["variants"][names[-1]]
    share = ", ".join(f"{part} {100 * value:.0f}%" for part, value in first["executed_forward_share"].items())
    lines += [
        "",
        f"Executed forward FLOPs by part ({names[-1]}): {share}; distinct words per position "
        f"{first['distinct_words_per_token']:.2f}.",
    ]
    if result["profiles"]:
        profiled = list(result["profiles"])
        lines += [
            "",
            "Profile of one step per variant (torch.profiler on rank 0, ms; backward work attributed to the part "
            "whose forward "
            "created it; profiler overhead included):",
            "",
            "| part | " + " | ".join(f"{n} fwd | {n} bwd" for n in profiled) + " |",
            "| --- | " + " | ".join("---: | ---:" for _ in profiled) + " |",
        ]
        for part in (*PARTS, "other"):
            cells = []
            for n in profiled:
                p = result["profiles"][n]["profile"][part]
                cells += [f"{p['forward_ms']:.1f}", f"{p['backward_ms']:.1f}" if p["backward_ms"] else ""]
            lines.append(f"| {part} | " + " | ".join(cells) + " |")
        lines.append(
            "| whole step | " + " | ".join(f"{result['profiles'][n]['step_ms']:.1f} | " for n in profiled) + " |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
