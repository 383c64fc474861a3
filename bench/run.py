"""`python -m bench`: ELMo inference throughput against this machine's measured limits.

For each released architecture (seeded random weights written in the legacy format and loaded
back with `load_legacy`) and batch size, a separate process measures words/s and peak RSS; the
machine's fp32 GEMM rate and read bandwidth are measured in the same run (before and after; the
better value is the roofline).  Results are printed and appended to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from . import flops, machine

ARCHITECTURES = {
    # name: (legacy name, ElmoConfig overrides); all use the 2048cnn filters, 16-dim char embeddings
    "small": ("2x1024_128_2048cnn_1xhighway", dict(lstm_dim=1024, projection_dim=128, n_highway=1)),
    "medium": ("2x2048_256_2048cnn_1xhighway", dict(lstm_dim=2048, projection_dim=256, n_highway=1)),
    "original": ("2x4096_512_2048cnn_2xhighway", dict(lstm_dim=4096, projection_dim=512, n_highway=2)),
    # a few-MB model for smoke runs (`--quick`)
    "tiny": (
        "2x256_32_small-cnn_1xhighway",
        dict(
            lstm_dim=256,
            projection_dim=32,
            n_highway=1,
            filters=[[1, 16], [2, 16], [3, 32], [4, 64]],
            char_embedding_dim=8,
        ),
    ),
}
FILTERS_2048 = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def config_for(arch: str):
    from spacy_elmo import ElmoConfig

    overrides = dict(filters=FILTERS_2048, char_embedding_dim=16)
    overrides.update(ARCHITECTURES[arch][1])
    return ElmoConfig(**overrides)


def ensure_model(arch: str, seed: int, root: Path) -> Path:
    """options.json + lm_weights.hdf5 of a seeded random `ElmoModel` (written once, then reused)."""
    from spacy_elmo import ElmoModel, save_legacy

    directory = root / f"{arch}-seed{seed}"
    if (directory / "done").is_file():
        return directory
    torch.manual_seed(seed)
    model = ElmoModel(config_for(arch))
    save_legacy(model, directory)
    (directory / "done").write_text("1")
    return directory


def code_version(directory: Path) -> str:
    """The git commit of the checkout holding the measured spacy_elmo (`-dirty` with uncommitted
    changes to tracked files), or 'unknown'."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("-dirty" if dirty else "")


def run_worker(model_dir: Path, batch: int, mode: str, args, source: str | None = None) -> dict:
    command = [
        sys.executable,
        "-m",
        "bench.worker",
        "--model-dir",
        str(model_dir),
        "--batch",
        str(batch),
        "--mode",
        mode,
        "--threads",
        str(args.threads),
        "--min-seconds",
        str(args.min_seconds),
    ]
    if batch == 1:
        command += ["--batches", "8"]
    elif mode == "pipe":
        command += ["--batches", "2"]
    # --source / --baseline: measure the spacy_elmo package in another directory (e.g. an older checkout)
    source = source or args.source
    paths = [source, str(ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=source or ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"batch": batch, "mode": mode, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(lines[-1])


def fractions(result: dict, config, limits: dict) -> dict:
    """Fractions of the compute roofline (nominal and executed FLOPs) and, at batch 1, of the
    bandwidth bound (recurrent weights read once per time step, the rest once per batch)."""
    if "positions_per_s" not in result:
        return {}
    peak = limits["gemm_peak"] * 1e9
    nominal = result["positions_per_s"] * flops.forward_flops_per_token(config)
    executed_cnn = result["executed_char_cnn_flops_per_word"] * result["unique_words_per_position"]
    executed = result["positions_per_s"] * (
        flops.forward_flops_per_token(config) - flops.char_cnn_flops(config) + executed_cnn
    )
    out = {"gflops": nominal / 1e9, "roofline": nominal / peak, "roofline_executed": executed / peak}
    if result["batch"] == 1:
        weights = flops.weight_bytes(config)
        steps = result["positions_per_s"] * result["seconds_per_batch"]
        bound = (steps * weights["per_step"] + weights["per_batch"]) / (limits["bandwidth"] * 1e9)
        out["bandwidth_bound"] = bound / result["seconds_per_batch"]
    return out


def train_throughput(args) -> str:
    """Runs bench/train_throughput.py (another benchmark, when present) and summarizes its result."""
    script = HERE / "train_throughput.py"
    if not script.is_file():
        return "bench/train_throughput.py does not exist yet: training tokens/s not measured."
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "train.json"
        command = [sys.executable, str(script), "--threads", str(args.threads), "--json", str(out)]
        try:
            proc = subprocess.run(
                command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=args.train_timeout
            )
        except subprocess.TimeoutExpired:
            return f"bench/train_throughput.py did not finish within {args.train_timeout} s."
        if proc.returncode != 0 or not out.is_file():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            return f"bench/train_throughput.py failed (exit {proc.returncode}):\n\n```\n{tail}\n```"
        result = json.loads(out.read_text(encoding="utf-8"))
    try:
        return (
            f"{result['architecture']} ({result['config']}, {result['softmax']} softmax, {result['threads']} threads): "
            f"{result['words_per_s']:.0f} words/s, {100 * result['fraction_of_gemm']:.0f}% of the GEMM rate "
            f"({result['gemm_gflops']:.1f} GFLOP/s measured by that run); from bench/train_throughput.py."
        )
    except (KeyError, TypeError):
        return "bench/train_throughput.py: " + json.dumps(result)


def _pct(value) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default="small,medium,original")
    parser.add_argument("--batches", default="1,32,128")
    parser.add_argument(
        "--extras",
        default="cache,int8,bf16,pipe,train",
        help="extra rows at batch 32: cache (token cache, Zipfian text), int8, bf16 (set_precision), pipe, train",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-seconds", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--models",
        default=os.environ.get("SPACY_ELMO_BENCH_MODELS", str(Path(tempfile.gettempdir()) / "spacy_elmo_bench")),
    )
    parser.add_argument("--results", default=str(HERE / "RESULTS.md"))
    parser.add_argument("--no-write", action="store_true", help="print only, do not append to RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny model, short timings")
    parser.add_argument("--train-timeout", type=int, default=900)
    parser.add_argument("--source", help="directory holding the spacy_elmo package to measure (default: this checkout)")
    parser.add_argument(
        "--baseline",
        help="also measure the spacy_elmo package in this directory (e.g. `git worktree add "
        "DIR <commit>`), job by job alternating with the measured code, in the same run",
    )
    parser.add_argument("--label", default="", help="text added to the report's heading (e.g. 'baseline')")
    parser.add_argument(
        "--omp-wait-policy",
        default="passive",
        choices=["passive", "active", "default"],
        help="OMP_WAIT_POLICY for this run (read by `python -m bench` before torch loads); "
        "passive keeps a shared machine's load from stalling every parallel region",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.archs, args.batches, args.min_seconds = "tiny", "1,32", 0.5
        args.extras = ",".join(e for e in args.extras.split(",") if e in ("cache", "int8", "bf16"))
    torch.set_num_threads(args.threads)
    archs = [a for a in args.archs.split(",") if a]
    batch_sizes = [int(b) for b in args.batches.split(",") if b]
    extras = [e for e in args.extras.split(",") if e]
    models = Path(args.models)

    started = datetime.datetime.now().astimezone()
    info = machine.describe()
    print(f"machine: {info}", flush=True)
    before = machine.measure(args.quick)
    print(f"GEMM {before['gemm']['peak']:.1f} GFLOP/s, read {before['bandwidth']['peak']:.1f} GB/s", flush=True)

    rows = []
    for arch in archs:
        directory = ensure_model(arch, args.seed, models)
        jobs = [(b, "exact") for b in batch_sizes] + [(32, e) for e in extras if e in ("cache", "int8", "bf16", "pipe")]
        for index, (batch, mode) in enumerate(jobs):
            sources = [(None, "")] + ([(args.baseline, "baseline")] if args.baseline else [])
            if index % 2:  # alternate which code goes first, so load changes hit both alike
                sources.reverse()
            for source, code in sources:
                result = run_worker(directory, batch, mode, args, source)
                result["arch"] = arch
                result["code"] = code
                rows.append(result)
                print(json.dumps(result), flush=True)

    after = machine.measure(args.quick)
    limits = {
        "gemm_peak": max(before["gemm"]["peak"], after["gemm"]["peak"]),
        "bandwidth": max(before["bandwidth"]["peak"], after["bandwidth"]["peak"]),
    }
    for row in rows:
        row.update(fractions(row, config_for(row["arch"]), limits))
    train = train_throughput(args) if "train" in extras and not args.source else None
    report = render(started, info, before, after, limits, rows, train, args)
    print(report)
    if not args.no_write:
        path = Path(args.results)
        previous = (
            path.read_text(encoding="utf-8")
            if path.is_file()
            else "# Benchmark results\n\nAppended by `python -m bench` (and other benchmarks); newest last.\n"
        )
        path.write_text(previous.rstrip("\n") + "\n\n" + report, encoding="utf-8")
        print(f"appended to {path}")
        if path.resolve() == (HERE / "RESULTS.md").resolve():
            from . import performance_doc

            performance_doc.main([])  # docs/performance.md's tables follow the record
            print(f"rewrote {performance_doc.DOC}'s results tables")
    return 0


def render(started, info, before, after, limits, rows, train, args) -> str:
    load_end = os.getloadavg() if hasattr(os, "getloadavg") else None
    lines = [
        f"## Inference benchmark, {started:%Y-%m-%d %H:%M %Z}" + (f" ({args.label})" if args.label else ""),
        "",
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; torch {info['torch']}, "
        f"{args.threads} threads, fp32, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}; "
        f"CUDA: {info['cuda'] or 'none'}. "
        f"Load average at start {_load(info['loadavg'])}, at end {_load(load_end)}"
        + (f"; run at niceness {info['niceness']} (shared machine)." if info.get("niceness") else "."),
        "",
        *([f"spacy_elmo measured from `{args.source}` (`--source`).", ""] if args.source else []),
        f"Code: {code_version(Path(args.source) if args.source else ROOT)}"
        + (
            f"; baseline rows (`--baseline {args.baseline}`): {code_version(Path(args.baseline))}, "
            "each job run for both codes in turn"
            if args.baseline
            else ""
        )
        + ".",
        "",
        f"Measured in this run: fp32 GEMM {before['gemm']['peak']:.1f} / {after['gemm']['peak']:.1f} GFLOP/s "
        "(before/after; "
        f"roofline = {limits['gemm_peak']:.1f}), read bandwidth {before['bandwidth']['peak']:.1f} / "
        f"{after['bandwidth']['peak']:.1f} GB/s (bound uses {limits['bandwidth']:.1f}).",
    ]
    if before.get("skinny"):
        skinny = ", ".join(
            f"M={m}: {r:.1f} ({100 * r / limits['gemm_peak']:.0f}%)" for m, r in before["skinny"].items()
        )
        lines.append(f"Recurrent-shape GEMM [2,M,512]·[2,512,16384]: {skinny} GFLOP/s.")
    lines += [
        "",
        "| arch | batch | mode | words/s | GFLOP/s | roofline (nominal) | roofline (executed) | bandwidth bound | "
        "peak RSS infer / load (MiB) | notes |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        if row.get("code"):
            row = dict(row, mode=f"{row['mode']} ({row['code']})")
        if "error" in row or "pipe_error" in row:
            lines.append(
                f"| {row['arch']} | {row['batch']} | {row['mode']} | | | | | | | "
                f"{row.get('error') or row.get('pipe_error')} |"
            )
            continue
        notes = []
        if "relative_error" in row:
            notes.append(
                f"max abs err {row['max_abs_error']:.2e} (rel {row['relative_error']:.1e}), mean "
                f"{row['mean_abs_error']:.1e}"
            )
        if "cache_hit_rate" in row:
            notes.append(f"cache hit rate {100 * row['cache_hit_rate']:.0f}% (Zipf text)")
        if "pipe_over_raw" in row:
            lines.append(
                f"| {row['arch']} | {row['batch']} | pipe | {row['pipe_words_per_s']:.0f} | | | | | "
                f"{row['rss_peak_inference_mib']:.0f} / {row['rss_peak_load_mib']:.0f} | nlp.pipe = "
                f"{100 * row['pipe_over_raw']:.0f}% of raw model ({row['raw_words_per_s']:.0f} words/s) |"
            )
            continue
        lines.append(
            f"| {row['arch']} | {row['batch']} | {row['mode']} | {row['words_per_s']:.0f} | {row['gflops']:.1f} | "
            f"{_pct(row['roofline'])} | {_pct(row['roofline_executed'])} | {_pct(row.get('bandwidth_bound'))} | "
            f"{row['rss_peak_inference_mib']:.0f} / {row['rss_peak_load_mib']:.0f} | {'; '.join(notes)} |"
        )
    lines += [
        "",
        "words/s counts sentence words (~25 per sentence); the roofline uses positions/s (words + <S>, </S>) × "
        "`bench.flops.forward_flops_per_token` ÷ the GEMM rate. *Executed* counts the char-CNN work actually done "
        "(unique words, columns cut after the word; see spacy_elmo/kernels/char_cnn.py), *nominal* the full 50-column "
        "CNN per position. "
        "Bandwidth bound (batch 1): recurrent weights read once per time step, the rest once per sentence, at the "
        "measured "
        "read bandwidth. exact/int8/bf16 rows: token cache off, nearly all-distinct words; cache row: default "
        "settings on Zipfian text.",
    ]
    if train is not None:
        lines += ["", "Training throughput: " + train]
    return "\n".join(lines) + "\n"


def _load(load) -> str:
    return "n/a" if not load else "/".join(f"{x:.2f}" for x in load)
