"""Training throughput of the biLM (words/s) as a fraction of this machine's fp32 GEMM rate.

    python bench/train_throughput.py [--config configs/pretrain_small.cfg] [--steps 20] [--json out.json]
        [--implementations eager,fused] [--append-results bench/RESULTS.md]

With several `--implementations` (values of `ElmoConfig.lstm_implementation`), every measured batch
is trained once with each, in alternating order, on the same trainer (same batches, same machine
state), so their words/s compare within one run on a noisy machine.  The top-level figures are
those of the last implementation listed; `implementations` holds each one's.

Runs the real training step (`Pretrainer.train_step`: forward, backward, clipping, optimizer) of
the configured architecture on real text (assets/corpus/lm/train.txt when present, else a
generated Zipfian corpus), after a few warm-up steps. The fp32 GEMM rate is measured in the same
run, before and after training (the better value counts, as in `python -m bench`).

    fraction = words/s × 3 × forward FLOPs per word / GEMM FLOP/s

Forward FLOPs are nominal matrix-product FLOPs (bench/flops.py: char CNN over all
max_characters_per_token columns, highway, projection, LSTM gates and cell projection, both
directions) plus the softmax actually used (full: V·P, sampled: (S+1)·P per direction); training
≈ 3× forward. Words exclude the `<S>`/`</S>` positions the model also computes, and the char CNN
runs on distinct words with only the columns the max-pool can see (exact), so the fraction is the
effective rate of the training pipeline, not a count of executed FLOPs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402


def forward_flops_per_position(config) -> float:
    """biLM forward FLOPs per token position, without the softmax (bench/flops.py when present)."""
    try:
        from bench.flops import forward_flops_per_token

        return forward_flops_per_token(config)
    except ImportError:
        cols, dim = config.max_characters_per_token, config.char_embedding_dim
        n_filters = sum(n for _, n in config.filters)
        cnn = sum(2 * (cols - w + 1) * w * dim * n for w, n in config.filters)
        encoder = cnn + config.n_highway * 4.0 * n_filters**2 + 2.0 * n_filters * config.projection_dim
        h, p = config.lstm_dim, config.projection_dim
        return encoder + config.num_layers * 2 * (2 * 2.0 * p * 4 * h + 2.0 * h * p)


def gemm_gflops(sizes=(1024, 2048), repeats: int = 5) -> float:
    """Best median fp32 GFLOP/s of square matmuls (bench/machine.py when present)."""
    try:
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "pretrain_small.cfg"))
    parser.add_argument("--corpus", help="training text (default: assets/corpus/lm/train.txt, else generated)")
    parser.add_argument("--steps", type=int, default=20, help="measured steps")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1, as in the recommended one process per core; 0 = torch default)")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--profile", action="store_true", help="print a torch.profiler table of one step per implementation")
    parser.add_argument("--implementations", default="eager,fused", help="comma-separated lstm_implementation values to compare")
    parser.add_argument("--append-results", help="append a Markdown section with the result to this file (e.g. bench/RESULTS.md)")
    args, extra = parser.parse_known_args(argv)
    implementations = [name.strip() for name in args.implementations.split(",") if name.strip()]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()

    from spacy_elmo.training.pretrain import Pretrainer
    from spacy_elmo.training.settings import load_settings, parse_overrides

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="elmo-train-bench-") as tmp:
        corpus = Path(args.corpus) if args.corpus else ROOT / "assets" / "corpus" / "lm" / "train.txt"
        if not corpus.is_file():
            corpus = synthetic_corpus(Path(tmp) / "corpus.txt")
        overrides = {
            "paths.train": str(corpus), "paths.heldout": None, "export.legacy": False,
            "training.max_steps": args.warmup + args.steps, "training.checkpoint_every": 10**9,
            "data.block_lines": 20_000, **parse_overrides(extra),
        }
        cfg = load_settings(args.config, overrides)
        gemm_before = gemm_gflops()
        trainer = Pretrainer(cfg, Path(tmp) / "out", progress=False)
        config = trainer.model_config
        encoder = trainer.model.elmo.encoder
        batches = trainer.corpus.batches()
        stats = {name: {"words": 0, "positions": 0, "seconds": 0.0, "losses": []} for name in implementations}
        for index in range(args.warmup + args.steps):
            batch, _ = next(batches)
            order = implementations if index % 2 == 0 else implementations[::-1]
            for name in order:
                encoder.config.lstm_implementation = name
                start = time.perf_counter()
                fwd, bwd, _ = trainer.train_step(batch)
                elapsed = time.perf_counter() - start
                record = stats[name]
                record["losses"].append((fwd + bwd) / 2)
                if index >= args.warmup:
                    record["seconds"] += elapsed
                    record["words"] += batch.global_words
                    record["positions"] += batch.global_targets + int(batch.mask.shape[0])  # words + <S> + </S>
        profiles = {}
        if args.profile:
            from torch.profiler import profile, record_function

            batch, _ = next(batches)
            for name in implementations:
                encoder.config.lstm_implementation = name
                # the biLSTM's share of the step: its forward is labelled, its backward shows as the
                # fused Function's / eager ops' backward nodes
                original = encoder.forward

                def labelled(*a, _original=original, **k):
                    with record_function("biLSTM forward"):
                        return _original(*a, **k)

                encoder.forward = labelled
                try:
                    with profile() as prof:
                        with record_function("training step"):
                            trainer.train_step(batch)
                finally:
                    encoder.forward = original
                profiles[name] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
                print(f"--- {name} ---")
                print(profiles[name])
        gemm_after = gemm_gflops()

    softmax_width = len(trainer.vocab) if trainer.softmax_fn is None else trainer.softmax_fn.num_sampled + 1
    softmax = 2 * 2.0 * config.projection_dim * softmax_width  # both directions
    encoder_lstm = forward_flops_per_position(config)
    forward_per_word = encoder_lstm + softmax
    gemm = max(gemm_before, gemm_after)
    per_implementation = {}
    for name in implementations:
        record = stats[name]
        words_per_s = record["words"] / record["seconds"]
        achieved = words_per_s * 3 * forward_per_word / 1e9
        per_implementation[name] = {
            "seconds_per_step": record["seconds"] / args.steps,
            "words_per_s": words_per_s,
            "positions_per_s": record["positions"] / record["seconds"],
            "training_gflops_effective": achieved,
            "fraction_of_gemm": achieved / gemm,
            "loss_first_last": [record["losses"][0], record["losses"][-1]],
        }
    main_result = per_implementation[implementations[-1]]
    result = {
        "config": Path(args.config).name,
        "architecture": f"{config.num_layers}x{config.lstm_dim}_{config.projection_dim}_{config.n_filters}cnn_{config.n_highway}xhighway",
        "softmax": trainer.softmax_name,
        "vocab_size": len(trainer.vocab),
        "corpus": str(corpus.name),
        "threads": torch.get_num_threads(),
        "batch_words_per_step": stats[implementations[-1]]["words"] / args.steps,
        "steps": args.steps,
        "implementation": implementations[-1],
        **main_result,
        "forward_gflop_per_word": forward_per_word / 1e9,
        "gemm_gflops": gemm,
        "gemm_gflops_before_after": [gemm_before, gemm_after],
        "implementations": per_implementation,
        "loadavg": os.getloadavg(),
        "profiles": profiles,
    }
    if len(implementations) > 1:
        base = per_implementation[implementations[0]]["words_per_s"]
        result["speedup_over_" + implementations[0]] = {name: r["words_per_s"] / base for name, r in per_implementation.items()}
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.append_results:
        section = render_section(result, argv if argv is not None else sys.argv[1:], started, load_start)
        path = Path(args.append_results)
        previous = path.read_text(encoding="utf-8") if path.is_file() else "# Benchmark results\n"
        path.write_text(previous.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        print(f"appended to {path}")
    return 0


def render_section(result: dict, argv: list[str], started: str, load_start) -> str:
    """A dated Markdown section: machine, commit, command, and one row per implementation."""
    import platform
    import subprocess

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit, dirty = "unknown", ""
    try:
        from bench.machine import describe

        cpu = describe()["cpu"]
    except ImportError:
        cpu = platform.processor()
    load_end = os.getloadavg()
    base = next(iter(result["implementations"]))
    lines = [
        f"## Training throughput, {started} ({result['config']}, {result['architecture']})",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores; torch {torch.__version__}, {result['threads']} threads, fp32, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}. Commit {commit}{' (with uncommitted changes)' if dirty else ''}. "
        f"Load average at start {'/'.join(f'{x:.2f}' for x in load_start)}, at end {'/'.join(f'{x:.2f}' for x in load_end)}.",
        "",
        f"Command: `python bench/train_throughput.py {' '.join(argv)}` — every measured batch trained once per "
        f"implementation, alternating order ({result['steps']} steps each, {result['batch_words_per_step']:.0f} words per step, "
        f"{result['softmax']} softmax over {result['vocab_size']} ids, corpus {result['corpus']}).",
        f"Roofline: words/s × 3 × forward FLOPs per word ({result['forward_gflop_per_word'] * 1e3:.2f} MFLOP incl. softmax) "
        f"÷ fp32 GEMM rate measured in this run ({result['gemm_gflops']:.1f} GFLOP/s; before/after "
        f"{result['gemm_gflops_before_after'][0]:.1f} / {result['gemm_gflops_before_after'][1]:.1f}).",
        "",
        f"| lstm_implementation | s/step | words/s | GFLOP/s (effective) | training roofline | vs {base} |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    base_rate = result["implementations"][base]["words_per_s"]
    for name, r in result["implementations"].items():
        lines.append(
            f"| {name} | {r['seconds_per_step']:.3f} | {r['words_per_s']:.0f} | {r['training_gflops_effective']:.1f} | "
            f"{100 * r['fraction_of_gemm']:.0f}% | {r['words_per_s'] / base_rate:.2f}× |"
        )
    for name, table in result.get("profiles", {}).items():
        lines += [
            "",
            f"Profile of one training step with `{name}` (torch.profiler, sorted by self CPU time; `training step` is the "
            "whole step, `biLSTM forward` the LSTM's forward):",
            "",
            "```",
            table.rstrip("\n"),
            "```",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
