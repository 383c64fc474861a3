"""`python -m lab.bench`: ELMo inference throughput against this machine's measured limits.

For each released architecture (seeded random weights written in the legacy format and loaded
back with `load_legacy`) and batch size, a separate process measures words/s and peak RSS, in fp32
and in each precision asked for (`--extras bf16,int8`); the machine's fp32 GEMM rate and read
bandwidth are measured in the same run (before and after; the better value is the roofline), and
the biLSTM's products at their exact shapes with each fp32 row (`machine.lstm_product_seconds`).
Each run is appended to bench/results/runs.jsonl (with the CPU's kind: vendor, family, model,
flags), and the two tables are written from it: bench/results/inference.md (every measurement of
every inference run) and bench/results/precision_by_cpu.md (each precision's speed against fp32,
per CPU kind, from the newest run that measured it; kinds never measured listed as such).
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

# OpenMP's wait policy is read once, when torch loads libgomp, so it is settled before torch is imported.
# On a shared (oversubscribed) machine the default spin-waiting makes every parallel region wait for a
# descheduled thread (10x slower on the 2-core development box); `--omp-wait-policy default` keeps the
# environment's own setting.
_policy = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--omp-wait-policy=")), None)
if _policy is None and "--omp-wait-policy" in sys.argv[:-1]:
    _policy = sys.argv[sys.argv.index("--omp-wait-policy") + 1]
if (_policy or "passive").lower() in ("passive", "active"):
    os.environ["OMP_WAIT_POLICY"] = (_policy or "passive").upper()

import torch  # noqa: E402 - after the wait policy is set

from lab import flops, machine  # noqa: E402

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
ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "bench" / "results" / "runs.jsonl"
PRECISIONS = ("bf16", "int8")  # the extras that are a precision: rows at every batch size
# CPU kinds the precision table lists even before a run measured them: (name, flags that tell it)
EXPECTED_CPUS = [
    ("AMD EPYC Zen 4 (family 25, model 17)", {"avx512_bf16", "avx512_vnni"}),
    ("Intel Xeon with AMX", {"amx_bf16", "amx_int8"}),
]
INFERENCE_COLUMNS = [
    "arch",
    "batch",
    "mode",
    "words/s",
    "GFLOP/s",
    "roofline (nominal)",
    "roofline (executed)",
    "bandwidth bound",
    "product bound",
    "peak RSS infer / load (MiB)",
    "notes",
]


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
    """The commit of the checkout holding the measured spacy_elmo (`-dirty` with uncommitted changes), or 'unknown'."""
    from spacy_elmo.provenance import git_state

    state = git_state(directory)
    return (state["commit"] or "unknown")[:7] + ("-dirty" if state["dirty"] else "")


def run_worker(model_dir: Path, batch: int, mode: str, args, source: str | None = None) -> dict:
    command = [sys.executable, "-m", "lab.bench_worker", "--model-dir", str(model_dir), "--batch", str(batch)]
    command += ["--mode", mode, "--threads", str(args.threads), "--min-seconds", str(args.min_seconds)]
    if batch == 1:
        command += ["--batches", "8"]
    elif mode == "pipe":
        command += ["--batches", "2"]
    # --baseline: measure the spacy_elmo package in another directory (e.g. an older checkout)
    paths = [source, str(ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=source or ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"batch": batch, "mode": mode, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(lines[-1])


def fractions(result: dict, config, limits: dict) -> dict:
    """Fractions of the compute roofline (nominal and executed FLOPs), at batch 1 of the bandwidth
    bound (recurrent weights read once per time step, the rest once per batch), and, for fp32 rows,
    of the product bound: the token encoder's executed FLOPs at the GEMM roofline plus the biLSTM's
    products at their own shapes' measured rates (`machine.lstm_product_seconds`), nothing else."""
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
    if "lstm_product_seconds" in result:
        bound = result["encoder_flops_per_batch"] / peak + result["lstm_product_seconds"]
        out["product_bound"] = bound / result["seconds_per_batch"]
    return out


def _speed(result: dict) -> float:
    return result.get("pipe_words_per_s") or result.get("words_per_s") or 0.0


def median_of(results: list[dict]) -> dict:
    """The measurement of median speed among repeats of one job (the lower middle of an even count),
    with every repeat's speed in `repeat_speeds`; a single measurement as it is."""
    if len(results) == 1:
        return results[0]
    ordered = sorted(results, key=_speed)
    return dict(ordered[(len(ordered) - 1) // 2], repeat_speeds=[round(_speed(r), 1) for r in results])


def _repeats(row: dict) -> str:
    return f"median of {len(row['repeat_speeds'])}: " + ", ".join(f"{v:.0f}" for v in row["repeat_speeds"])


def _pct(value) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", default="small,medium,original")
    parser.add_argument("--batches", default="1,32,128")
    parser.add_argument(
        "--extras",
        default="cache,int8,bf16,pipe",
        help="extra rows at batch 32: cache (token cache, Zipfian text), int8, bf16 (set_precision), pipe",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-seconds", type=float, default=4.0)
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="measure every job this many times, in rounds (each round's order the last's reversed); "
        "a row is the measurement of median speed, the others' speeds kept beside it",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--models",
        default=os.environ.get("SPACY_ELMO_BENCH_MODELS", str(Path(tempfile.gettempdir()) / "spacy_elmo_bench")),
    )
    parser.add_argument("--runs", type=Path, default=RUNS, help="the log of runs this run is appended to")
    parser.add_argument("--no-write", action="store_true", help="print only, do not append to the log")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny model, short timings")
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
        help="OMP_WAIT_POLICY for this run (read before torch loads); "
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
    from spacy_elmo.provenance import machine as machine_record

    info = dict(machine_record(), niceness=os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None)
    print(f"machine: {info}", flush=True)
    before = machine.measure(args.quick)
    print(f"GEMM {before['gemm']['peak']:.1f} GFLOP/s, read {before['bandwidth']['peak']:.1f} GB/s", flush=True)

    rows = []
    for arch in archs:
        directory = ensure_model(arch, args.seed, models)
        jobs = [(b, mode) for b in batch_sizes for mode in ["exact", *(e for e in extras if e in PRECISIONS)]]
        jobs += [(32, "cache")] if "cache" in extras else []
        if "pipe" in extras:  # nlp.pipe in fp32 and in each precision asked for
            jobs += [(32, "pipe")] + [(32, f"pipe-{e}") for e in extras if e in PRECISIONS]
        measured: dict[tuple, list[dict]] = {}
        for round_ in range(max(args.repeats, 1)):
            # a shared machine's load drifts: each round runs the jobs in the other order
            for index, (batch, mode) in enumerate(jobs if round_ % 2 == 0 else jobs[::-1]):
                sources = [(None, "")] + ([(args.baseline, "baseline")] if args.baseline else [])
                if index % 2:  # alternate which code goes first, so load changes hit both alike
                    sources.reverse()
                for source, code in sources:
                    result = run_worker(directory, batch, mode, args, source)
                    result["arch"] = arch
                    result["code"] = code
                    measured.setdefault((batch, mode, code), []).append(result)
                    print(json.dumps(result), flush=True)
        rows += [median_of(results) for results in measured.values()]

    after = machine.measure(args.quick)
    limits = {
        "gemm_peak": max(before["gemm"]["peak"], after["gemm"]["peak"]),
        "bandwidth": max(before["bandwidth"]["peak"], after["bandwidth"]["peak"]),
    }
    for row in rows:
        row.update(fractions(row, config_for(row["arch"]), limits))
    record = {
        "title": "Inference benchmark" + (f" ({args.label})" if args.label else ""),
        "kind": "inference",
        "date": f"{started:%Y-%m-%d %H:%M %Z}",
        "commit": code_version(ROOT),
        "baseline_commit": code_version(Path(args.baseline)) if args.baseline else None,
        "threads": args.threads,
        "machine": dict(info, load_average_end=os.getloadavg() if hasattr(os, "getloadavg") else None),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "measured": {"before": before, "after": after, "limits": limits},
        "tables": [{"columns": INFERENCE_COLUMNS, "rows": table_rows(rows)}],
        "results": rows,
    }
    print(json.dumps(record["tables"][0], indent=1))
    if not args.no_write:
        args.runs.parent.mkdir(parents=True, exist_ok=True)
        with args.runs.open("a", encoding="utf-8") as log:
            log.write(json.dumps(record, ensure_ascii=False) + "\n")
        table = write_table(args.runs)
        print(f"appended to {args.runs}; wrote {table}")
    return 0


def table_row(row: dict, fp32: dict | None = None, pipe_fp32: dict | None = None) -> list[str]:
    """One measurement as a row of INFERENCE_COLUMNS; a precision's row says its speed against `fp32`
    (the run's fp32 row of the same model and batch), a precision's pipe row its gain over `pipe_fp32`
    through nlp.pipe and through the raw model."""
    mode = f"{row['mode']} ({row['code']})" if row.get("code") else row["mode"]
    if "error" in row or "pipe_error" in row:  # the error in the notes, every measured column empty
        return [row["arch"], str(row["batch"]), mode, *[""] * 7, str(row.get("error") or row["pipe_error"])]
    rss = f"{row['rss_peak_inference_mib']:.0f} / {row['rss_peak_load_mib']:.0f}"
    if "pipe_over_raw" in row:
        note = f"nlp.pipe = {100 * row['pipe_over_raw']:.0f}% of raw model ({row['raw_words_per_s']:.0f} words/s)"
        if pipe_fp32 is not None and row is not pipe_fp32 and "pipe_over_raw" in pipe_fp32:
            pipe_gain = row["pipe_words_per_s"] / pipe_fp32["pipe_words_per_s"]
            raw_gain = row["raw_words_per_s"] / pipe_fp32["raw_words_per_s"]
            note += f"; over fp32: nlp.pipe {pipe_gain:.2f}×, raw model {raw_gain:.2f}×"
        if "repeat_speeds" in row:
            note += "; " + _repeats(row)
        return [row["arch"], str(row["batch"]), mode, f"{row['pipe_words_per_s']:.0f}", *[""] * 5, rss, note]
    notes = [_repeats(row)] if "repeat_speeds" in row else []
    if fp32 is not None and row["mode"] in PRECISIONS and "words_per_s" in fp32:
        notes.append(f"{row['words_per_s'] / fp32['words_per_s']:.2f}× fp32")
    if "relative_error" in row:
        notes.append(
            f"max abs err {row['max_abs_error']:.2e} (rel {row['relative_error']:.1e}), "
            f"mean {row['mean_abs_error']:.1e}"
        )
    if "cache_hit_rate" in row:
        notes.append(f"cache hit rate {100 * row['cache_hit_rate']:.0f}% (Zipf text)")
    return [
        row["arch"],
        str(row["batch"]),
        mode,
        f"{row['words_per_s']:.0f}",
        f"{row['gflops']:.1f}",
        _pct(row["roofline"]),
        _pct(row["roofline_executed"]),
        _pct(row.get("bandwidth_bound")),
        _pct(row.get("product_bound")),
        rss,
        "; ".join(notes),
    ]


def table_rows(rows: list[dict]) -> list[list[str]]:
    """The rows of one run, each precision's against the run's fp32 row of its model, batch and code."""
    fp32 = {(r["arch"], r["batch"], r.get("code", "")): r for r in rows if r["mode"] == "exact"}
    pipe = {(r["arch"], r.get("code", "")): r for r in rows if r["mode"] == "pipe"}
    return [
        table_row(r, fp32.get((r["arch"], r["batch"], r.get("code", ""))), pipe.get((r["arch"], r.get("code", ""))))
        for r in rows
    ]


# the flags that decide which precision pays (kernels.capabilities): the precision table's and the run's
KIND_FLAGS = ("avx512_bf16", "amx_bf16", "avx512_vnni", "avx_vnni", "amx_int8")


def _cpu(record: dict) -> tuple[str, str]:
    """(vendor family/model, the precision-deciding flags) of a run's CPU; empty for runs before
    records held the CPU's kind."""
    kind = (record.get("machine") or {}).get("cpu_kind") or {}
    if not kind:
        return "", ""
    vendor = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}.get(kind.get("vendor") or "", kind.get("vendor") or "?")
    flags = ", ".join(f for f in KIND_FLAGS if f in (kind.get("flags") or [])) or "none of " + "/".join(KIND_FLAGS)
    return f"{vendor} {kind.get('family')}/{kind.get('model')}", flags


def _load(record: dict) -> str:
    machine_info = record.get("machine") or {}
    start, end = machine_info.get("load_average"), machine_info.get("load_average_end")
    return f"{start[0]:.1f} → {end[0]:.1f}" if start and end else ""


def _records(runs: Path) -> list[dict]:
    lines = runs.read_text(encoding="utf-8").splitlines()
    return [r for r in (json.loads(line) for line in lines if line.strip()) if r["kind"] == "inference"]


def _cells(table: dict, row: list) -> list[str]:
    """A stored row under today's INFERENCE_COLUMNS (a column a run did not have stays empty)."""
    cells = dict(zip(table["columns"], row))
    return [str(cells.get(column, "")) for column in INFERENCE_COLUMNS]


def write_table(runs: Path = RUNS, out: Path | None = None) -> Path:
    """bench/results/inference.md: every measurement of every inference run in `runs`, newest run
    first; and bench/results/precision_by_cpu.md beside it (`write_precision_table`)."""
    columns = ["run", "commit", "threads", "GEMM roofline (GFLOP/s)", "CPU", "flags", "load", *INFERENCE_COLUMNS]
    lines = [
        f"<!-- written by `python -m lab.bench` from {runs.name}: every inference run, newest first -->",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---:" if c in ("batch", "words/s", "GFLOP/s") else "---" for c in columns) + " |",
    ]
    for record in reversed(_records(runs)):
        limits = (record.get("measured") or {}).get("limits") or {}
        run = [
            record["date"],
            record.get("commit") or "",
            str(record.get("threads") or ""),
            f"{limits['gemm_peak']:.1f}" if "gemm_peak" in limits else "",
            *_cpu(record),
            _load(record),
        ]
        for table in record["tables"][:1]:
            for row in table["rows"]:
                lines.append("| " + " | ".join(run + _cells(table, row)) + " |")
    out = out or runs.with_name("inference.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_precision_table(runs, out.with_name("precision_by_cpu.md"))
    return out


def _x(value: float) -> str:
    return f"{value:.2f}×"


def write_precision_table(runs: Path = RUNS, out: Path | None = None) -> Path:
    """bench/results/precision_by_cpu.md: per CPU kind, model and batch, fp32's words/s and each
    precision's words/s against it (and through nlp.pipe against the raw model's gain), from the
    newest run of that kind that measured them; `EXPECTED_CPUS` never measured are listed as such."""
    columns = ["CPU", "flags", "arch", "batch", "fp32 words/s", *PRECISIONS, "nlp.pipe gain (raw model's)", "run"]
    newest: dict[tuple, list[str]] = {}
    for record in _records(runs):
        cpu = _cpu(record)
        results = [r for r in record.get("results", []) if not r.get("code") and "error" not in r]
        if not cpu[0] or not results:
            continue
        for row in (r for r in results if r["mode"] == "exact"):
            arch, batch = row["arch"], row["batch"]
            speed = {
                r["mode"]: _x(r["words_per_s"] / row["words_per_s"])
                for r in results
                if r["arch"] == arch and r["batch"] == batch and r["mode"] in PRECISIONS
            }
            pipes = {
                r["mode"].partition("-")[2] or "fp32": r for r in results if r["arch"] == arch and "pipe_over_raw" in r
            }
            gains = [
                f"{p}: {_x(pipes[p]['pipe_words_per_s'] / pipes['fp32']['pipe_words_per_s'])} "
                f"({_x(pipes[p]['raw_words_per_s'] / pipes['fp32']['raw_words_per_s'])})"
                for p in PRECISIONS
                if p in pipes and "fp32" in pipes
            ]
            if speed:
                run = f"{record['date']}, {record.get('commit') or '?'}, load {_load(record)}"
                cells = [*cpu, arch, str(batch), f"{row['words_per_s']:.0f}", *(speed.get(p, "") for p in PRECISIONS)]
                newest[(cpu[0], arch, batch)] = [*cells, "; ".join(gains) if batch == 32 else "", run]
    lines = [
        f"<!-- written by `python -m lab.bench` from {runs.name}: per CPU kind, its newest run of each row -->",
        "",
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---:" if c in ("batch", "fp32 words/s") else "---" for c in columns) + " |",
    ]
    lines += ["| " + " | ".join(cells) + " |" for _, cells in sorted(newest.items())]
    measured = [set(cells[1].split(", ")) for cells in newest.values()]
    for name, flags in EXPECTED_CPUS:
        if not any(flags <= found for found in measured):
            lines.append("| " + " | ".join([name, ", ".join(sorted(flags)), "not measured", *[""] * 6]) + " |")
    out = out or runs.with_name("precision_by_cpu.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
