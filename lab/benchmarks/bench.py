"""`python -m lab.benchmarks.bench`: ELMo inference throughput against this machine's limits, measured apart from it.

For each released architecture (seeded random weights written in the legacy format and loaded
back with `load_legacy`) and batch size, a separate process measures words/s and peak RSS, in fp32
and in each precision asked for (`--extras bf16,int8`), `--repeats` times in rounds. Each row is set against
denominators measured without the model, several samples each, their median and spread recorded:

* the square-GEMM peak of the row's own precision (fp32, bf16, int8: `machine.gemm_rates`), sampled (each
  sample in its own process, as the rows are) before the first round and after each round, a repeat taking the
  better of the samples beside it;
* the time of the row's matrix products alone at their exact shapes in their bound precisions
  (`machine.lstm_product_seconds`, `machine.linear_product_seconds`, in the row's process after its timing);
* at batch 1, the read rate of buffers the size of the row's per-step weights in the precision it streams
  them, touched as the model touches them (`machine.step_read_rate`), and of a buffer larger than the caches
  for the weights a sentence reads once, in the row's process after its timing.

Every fraction is computed per repeat, so it carries its range over the repeats; a target is met or missed
only when that whole range is on one side of it (`verdict`). A fraction above 100% means its denominator is
not a ceiling: the table refuses it (prints "refused", draws no verdict from it) and the run says so on
stderr, for the denominator's measurement to be fixed; it is never clamped. Each run is appended to
bench/results/runs.jsonl (with the CPU's kind: vendor, family, model, flags, and its caches), and the two
tables are written from it:
bench/results/inference.md (every measurement of every inference run) and bench/results/precision_by_cpu.md
(each precision's speed against fp32, and the targets, per CPU kind, from the newest run that measured them;
kinds never measured listed as such).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from lab import ROOT
from lab.benchmarks import flops, machine
from spacy_elmo.precision import PRECISIONS as LIBRARY_PRECISIONS

# the benchmarked architectures are the pretraining configs' models: configs/pretrain_<arch>.cfg's [model]
ARCHITECTURES = ("tiny", "small", "medium", "original")  # tiny: a few-MB model for smoke runs (`--quick`)

RUNS = ROOT / "bench" / "results" / "runs.jsonl"
# the extras that are a precision (the library's, but its exact fp32): rows at every batch size
PRECISIONS = tuple(p for p in LIBRARY_PRECISIONS if p != "fp32")
PRECISION_OF_MODE = {"exact": "fp32", "bf16": "bf16", "int8": "int8"}
SCHEMA = 2  # inference records with measured denominators and per-repeat fractions (issue 64); before: 1
# CPU kinds the precision table lists even before a run measured them: (name, flags that tell it)
EXPECTED_CPUS = [
    ("AMD EPYC Zen 4 (family 25, model 17)", {"avx512_bf16", "avx512_vnni"}),
    ("Intel Xeon with AMX", {"amx_bf16", "amx_int8"}),
]
COLUMNS = [
    "arch",
    "batch",
    "mode",
    "words/s",
    "GFLOP/s (executed)",
    "roofline (executed)",
    "roofline (its shapes)",
    "read bound",
    "MiB/step",
    "read GB/s",
    "peak RSS infer / load (MiB)",
    "notes",
]
# the columns of the runs before measured denominators (schema 1), as their records store their rows
OLD_COLUMNS = [
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
    """The ElmoConfig of configs/pretrain_<arch>.cfg's [model]: the sizes a user pretrains."""
    from spacy_elmo import ElmoConfig
    from spacy_elmo.training.settings import read_settings

    model = read_settings(ROOT / "configs" / f"pretrain_{arch}.cfg").model.model_dump(exclude_unset=True)
    return ElmoConfig(**model)


def ensure_model(arch: str, seed: int, root: Path) -> Path:
    """options.json + lm_weights.hdf5 of a seeded random `ElmoModel` (written once, then reused)."""
    from spacy_elmo import ElmoModel, save_legacy

    directory = root / f"{arch}-seed{seed}"
    config = config_for(arch)
    # the sizes it was written with: a model written before configs/pretrain_<arch>.cfg changed is written again
    sizes = json.dumps({k: v for k, v in config.to_dict().items() if k != "transformers_version"}, sort_keys=True)
    done = directory / "done"
    if done.is_file() and done.read_text(encoding="utf-8") == sizes:
        return directory
    torch.manual_seed(seed)
    model = ElmoModel(config)
    save_legacy(model, directory)
    done.write_text(sizes, encoding="utf-8")
    return directory


def code_version(directory: Path) -> str:
    """The commit of the checkout holding the measured spacy_elmo (`-dirty` with uncommitted changes), or 'unknown'."""
    from spacy_elmo.provenance import git_state

    state = git_state(directory)
    return (state["commit"] or "unknown")[:7] + ("-dirty" if state["dirty"] else "")


def child_env(args, source: str | None = None) -> dict[str, str]:
    """The environment of a measuring process: the run's OpenMP wait policy and, with --baseline, the spacy_elmo
    package of another directory (e.g. an older checkout) first on the path."""
    paths = [source, str(ROOT), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    # OpenMP reads its wait policy once, when torch loads libgomp: only a fresh process can be given one. On a
    # shared (oversubscribed) machine the default spin-waiting makes every parallel region wait for a descheduled
    # thread (10x slower on the 2-core development box); `--omp-wait-policy default` keeps the environment's.
    if args.omp_wait_policy != "default":
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    return env


def sample_limits(args, precisions: list[str]) -> dict:
    """One `machine.measure` sample, taken in a fresh process under the rows' environment (`child_env`)."""
    command = [sys.executable, "-m", "lab.benchmarks.machine", "--precisions", ",".join(precisions)]
    command += ["--threads", str(args.threads)] + (["--quick"] if args.quick else [])
    proc = subprocess.run(command, capture_output=True, text=True, env=child_env(args), cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"lab.benchmarks.machine failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def run_worker(model_dir: Path, batch: int, mode: str, args, source: str | None = None) -> dict:
    command = [
        sys.executable,
        "-m",
        "lab.benchmarks.bench_worker",
        "--model-dir",
        str(model_dir),
        "--batch",
        str(batch),
    ]
    command += ["--mode", mode, "--threads", str(args.threads), "--min-seconds", str(args.min_seconds)]
    if batch == 1:
        command += ["--batches", "8"]
    elif mode == "pipe":
        command += ["--batches", "2"]
    proc = subprocess.run(command, capture_output=True, text=True, env=child_env(args, source), cwd=source or ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"batch": batch, "mode": mode, "error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(lines[-1])


def fractions(result: dict, config, limits: dict) -> dict:
    """One measurement's fractions of its limits (`limits`: the run's GEMM peaks per precision, GFLOP/s, beside
    the measurement): the executed FLOPs (the char CNN's work actually done on the distinct words) against
    the better of the square-GEMM peak of the row's precision and the rate its own products reached alone at their
    shapes (`roofline_executed`, against `roofline_peak_gflops`; `roofline` counts the nominal char CNN);
    its products alone at their own shapes and precisions against its time (`shapes_bound`: the biLSTM's and
    the linears' measured at their shapes, the char CNN's FLOPs at the GEMM peak of its precision); at batch 1
    the time to read what it streams per step (the recurrent weights) at the best read rate measured for them, plus
    the larger of reading the rest once per sentence at the best large-buffer rate and computing that part's
    products at the row's ceiling, against its time (`read_bound`)."""
    if "positions_per_s" not in result:
        return {}
    peaks = limits["gemm"]

    def peak(precision: str) -> float:
        return (peaks.get(precision) or peaks["fp32"]) * 1e9

    row_peak = peak(PRECISION_OF_MODE.get(result["mode"], "fp32"))
    # the row's products alone at their own shapes may run faster than square ones (skinny int8 products
    # on some CPUs): the better of the two rates is the ceiling of what the row executes
    products_seconds = result.get("lstm_product_seconds", 0.0) + result.get("linear_product_seconds", 0.0)
    if result.get("shapes_flops_per_batch") and products_seconds > 0:
        row_peak = max(row_peak, result["shapes_flops_per_batch"] / products_seconds)
    nominal = result["positions_per_s"] * flops.forward_flops_per_token(config)
    executed_cnn = result["executed_char_cnn_flops_per_word"] * result["unique_words_per_position"]
    executed = result["positions_per_s"] * (
        flops.forward_flops_per_token(config) - flops.char_cnn_flops(config) + executed_cnn
    )
    out = {
        "gflops": executed / 1e9,
        "roofline": nominal / row_peak,
        "roofline_executed": executed / row_peak,
        "roofline_peak_gflops": row_peak / 1e9,
    }
    seconds = result["seconds_per_batch"]
    if "linear_product_seconds" in result:
        cnn = result["char_cnn_flops_per_batch"] / peak((result.get("bound_products") or {}).get("char_cnn", "fp32"))
        out["shapes_bound"] = (result["lstm_product_seconds"] + result["linear_product_seconds"] + cnn) / seconds
    if result.get("step_read_rates"):
        steps = result["positions_per_s"] * seconds
        bound = steps * result["bytes_per_step"] / (max(result["step_read_rates"]) * 1e9)
        once = result["bytes_per_batch"] / (max(result["batch_read_rates"]) * 1e9)
        # a sentence's once-only products (its input projections, the linears on its words, the char CNN) can
        # take longer to compute than to read: the larger of the two is the lower bound of that part
        once = max(once, result.get("batch_flops_per_batch", 0.0) / row_peak)
        out["read_bound"] = (bound + once) / seconds
    return out


RANGED = ("words_per_s", "gflops", "roofline_executed", "shapes_bound", "read_bound")
# the fractions of a limit, by the column that shows them
FRACTION_COLUMNS = {
    "roofline_executed": "roofline (executed)",
    "shapes_bound": "roofline (its shapes)",
    "read_bound": "read bound",
}


def _speed(result: dict) -> float:
    return result.get("pipe_words_per_s") or result.get("words_per_s") or 0.0


def median_of(results: list[dict], limits: list[dict] | None = None, config=None) -> dict:
    """The measurement of median speed among repeats of one job (the lower middle of an even count), with every
    repeat's speed in `repeat_speeds` and, given the limits beside each repeat (`limits[r]`, round r's) and the
    config, every repeat's fractions (`fractions`) in `repeat_values` (name → the repeats' values, in round
    order); a single measurement as it is, its fractions added."""
    if limits is not None and config is not None:
        results = [dict(r, **fractions(r, config, limit)) for r, limit in zip(results, limits)]
    if len(results) == 1:
        return results[0]
    ordered = sorted(results, key=_speed)
    row = dict(ordered[(len(ordered) - 1) // 2], repeat_speeds=[round(_speed(r), 1) for r in results])
    values = {name: [r[name] for r in results if name in r] for name in RANGED}
    row["repeat_values"] = {name: v for name, v in values.items() if len(v) == len(results)}
    return row


def verdict(values: list[float], at_least: float) -> str:
    """ "met" when every value is at least `at_least`, "missed" when every one is below it, else "undecided"
    (the repeats straddle it); "refused" for a fraction that some repeat put above 100% (`refused`)."""
    if refused(values):
        return "refused"
    if min(values) >= at_least:
        return "met"
    if max(values) < at_least:
        return "missed"
    return "undecided"


def round_limits(samples: list[dict]) -> list[dict]:
    """Per round r, the limits beside it: each precision's GEMM peak, the better of the samples taken before
    and after the round (samples[r], samples[r + 1])."""
    out = []
    for before, after in zip(samples, samples[1:]):
        names = set(before["gemm"]) | set(after["gemm"])
        peaks = {p: max(s["gemm"][p]["peak"] for s in (before, after) if p in s["gemm"]) for p in names}
        out.append({"gemm": peaks, "bandwidth": max(before["bandwidth"]["peak"], after["bandwidth"]["peak"])})
    return out


def spread(values: list[float]) -> dict:
    """Median, least and greatest of samples."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "samples": values}


def _pct(value) -> str:
    return "" if value is None else f"{100 * value:.0f}%"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.benchmarks.bench", description=__doc__.split("\n\n")[0])
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
        help="OMP_WAIT_POLICY of the measuring processes (read when torch loads); "
        "passive keeps a shared machine's load from stalling every parallel region",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.archs, args.batches, args.min_seconds = "tiny", "1,32", 0.5
        args.extras = ",".join(e for e in args.extras.split(",") if e in ("cache", "int8", "bf16"))
    archs = [a for a in args.archs.split(",") if a]
    unknown = [a for a in archs if a not in ARCHITECTURES]
    if unknown:
        parser.error(f"--archs: unknown architecture {unknown[0]!r}, expected one of {', '.join(ARCHITECTURES)}")
    batch_sizes = [int(b) for b in args.batches.split(",") if b]
    extras = [e for e in args.extras.split(",") if e]
    models = Path(args.models)

    started = datetime.datetime.now().astimezone()
    from spacy_elmo.provenance import machine as machine_record

    info = dict(machine_record(), niceness=os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None)
    info["caches"] = machine.cache_sizes()
    print(f"machine: {info}", flush=True)
    from spacy_elmo.kernels.capabilities import int8_available, native_bf16_available

    # the GEMM peaks of the precisions this CPU computes (a precision it lacks computes fp32: fp32's peak)
    measured_precisions = ["fp32"] + [
        p for p, has in (("bf16", native_bf16_available), ("int8", int8_available)) if has()
    ]

    def sample() -> dict:
        limits = sample_limits(args, measured_precisions)
        peaks = ", ".join(f"{p} {v['peak']:.1f}" for p, v in limits["gemm"].items())
        print(f"GEMM peaks (GFLOP/s) {peaks}; read {limits['bandwidth']['peak']:.1f} GB/s", flush=True)
        return limits

    rounds = max(args.repeats, 1)
    samples = [sample()]
    measured: dict[tuple, list[dict]] = {}
    jobs = {}
    for arch in archs:
        directory = ensure_model(arch, args.seed, models)
        arch_jobs = [(b, mode) for b in batch_sizes for mode in ["exact", *(e for e in extras if e in PRECISIONS)]]
        arch_jobs += [(32, "cache")] if "cache" in extras else []
        if "pipe" in extras:  # nlp.pipe in fp32 and in each precision asked for
            arch_jobs += [(32, "pipe")] + [(32, f"pipe-{e}") for e in extras if e in PRECISIONS]
        jobs[arch] = (directory, arch_jobs)
    for round_ in range(rounds):
        for arch, (directory, arch_jobs) in jobs.items():
            # a shared machine's load drifts: each round runs the jobs in the other order
            for index, (batch, mode) in enumerate(arch_jobs if round_ % 2 == 0 else arch_jobs[::-1]):
                sources = [(None, "")] + ([(args.baseline, "baseline")] if args.baseline else [])
                if index % 2:  # alternate which code goes first, so load changes hit both alike
                    sources.reverse()
                for source, code in sources:
                    result = run_worker(directory, batch, mode, args, source)
                    result["arch"] = arch
                    result["code"] = code
                    result["round"] = round_
                    measured.setdefault((arch, batch, mode, code), []).append(result)
                    print(json.dumps(result), flush=True)
        samples.append(sample())  # after each round: the samples beside round r are r and r + 1

    limits = round_limits(samples)
    rows = [median_of(results, limits, config_for(key[0])) for key, results in measured.items()]
    gemm = {p: spread([s["gemm"][p]["peak"] for s in samples if p in s["gemm"]]) for p in measured_precisions}
    record = {
        "title": "Inference benchmark" + (f" ({args.label})" if args.label else ""),
        "kind": "inference",
        "schema": SCHEMA,
        "date": f"{started:%Y-%m-%d %H:%M %Z}",
        "commit": code_version(ROOT),
        "baseline_commit": code_version(Path(args.baseline)) if args.baseline else None,
        "threads": args.threads,
        "repeats": rounds,
        "machine": dict(info, load_average_end=os.getloadavg() if hasattr(os, "getloadavg") else None),
        "omp_wait_policy": child_env(args).get("OMP_WAIT_POLICY"),
        "measured": {
            "samples": samples,
            "gemm_peaks": gemm,
            "bandwidth": spread([s["bandwidth"]["peak"] for s in samples]),
            "round_limits": limits,
        },
        "tables": [{"columns": COLUMNS, "rows": table_rows(rows)}],
        "results": rows,
    }
    print(json.dumps(record["tables"][0], indent=1))
    for row in rows:
        if refusals(row):
            where = f"{row['arch']} batch {row['batch']} {row['mode']}"
            print(f"refused: {where}: {', '.join(refusals(row))} above its denominator", file=sys.stderr)
    if not args.no_write:
        args.runs.parent.mkdir(parents=True, exist_ok=True)
        with args.runs.open("a", encoding="utf-8") as log:
            log.write(json.dumps(record, ensure_ascii=False) + "\n")
        table = write_table(args.runs)
        print(f"appended to {args.runs}; wrote {table}")
    return 0


def _ranged(values: list[float], fmt) -> str:
    """The median of repeats' values, with their least and greatest when there are several: "93% (88–97%)"."""
    text = fmt(statistics.median(values))
    return text if len(values) < 2 else f"{text} ({fmt(min(values))}–{fmt(max(values))})"


def repeat_values(row: dict, name: str) -> list[float]:
    """A measured value of `row` over its repeats (the one measurement's where it has no repeats)."""
    return (row.get("repeat_values") or {}).get(name) or ([row[name]] if name in row else [])


def refused(values: list[float]) -> bool:
    """Whether a fraction of a limit is refused: some repeat ran faster than its denominator, which therefore is not
    the ceiling it was measured to be (its measurement needs fixing); no such fraction is printed or judged."""
    return any(value > 1.0 for value in values)


def _fraction(row: dict, name: str) -> str:
    """A fraction of a limit over the repeats, "refused" where a repeat beat its denominator (`refused`)."""
    values = repeat_values(row, name)
    if not values:
        return ""
    return "refused" if refused(values) else _ranged(values, _pct)


def refusals(row: dict) -> list[str]:
    """The fractions of `row` refused (`refused`), each as "<column> (k of n repeats)"."""
    out = []
    for name, column in FRACTION_COLUMNS.items():
        values = repeat_values(row, name)
        if refused(values):
            out.append(f"{column} ({sum(v > 1.0 for v in values)} of {len(values)} repeats)")
    return out


def speed_ratios(row: dict, base: dict) -> list[float]:
    """`row`'s words/s over `base`'s, repeat by repeat (the same round: the same load), or of the medians."""
    mine, theirs = row.get("repeat_speeds"), base.get("repeat_speeds")
    if mine and theirs and len(mine) == len(theirs):
        return [a / b for a, b in zip(mine, theirs)]
    return [_speed(row) / _speed(base)]


def _x(value: float) -> str:
    return f"{value:.2f}×"


def table_row(row: dict, fp32: dict | None = None, pipe_fp32: dict | None = None) -> list[str]:
    """One measurement as a row of COLUMNS; a precision's row says its speed against `fp32` (the run's fp32 row
    of the same model and batch, repeat by repeat), a precision's pipe row its gain over `pipe_fp32` through
    nlp.pipe and through the raw model."""
    mode = f"{row['mode']} ({row['code']})" if row.get("code") else row["mode"]
    empty = len(COLUMNS) - 6
    if "error" in row or "pipe_error" in row:  # the error in the notes, every measured column empty
        return [
            row["arch"],
            str(row["batch"]),
            mode,
            *[""] * (len(COLUMNS) - 4),
            str(row.get("error") or row["pipe_error"]),
        ]
    rss = f"{row['rss_peak_inference_mib']:.0f} / {row['rss_peak_load_mib']:.0f}"
    speeds = row.get("repeat_speeds") or [_speed(row)]
    if "pipe_over_raw" in row:
        note = f"nlp.pipe = {100 * row['pipe_over_raw']:.0f}% of raw model ({row['raw_words_per_s']:.0f} words/s)"
        if pipe_fp32 is not None and row is not pipe_fp32 and "pipe_over_raw" in pipe_fp32:
            pipe_gain = row["pipe_words_per_s"] / pipe_fp32["pipe_words_per_s"]
            raw_gain = row["raw_words_per_s"] / pipe_fp32["raw_words_per_s"]
            note += f"; over fp32: nlp.pipe {pipe_gain:.2f}×, raw model {raw_gain:.2f}×"
        return [row["arch"], str(row["batch"]), mode, _ranged(speeds, "{:.0f}".format), *[""] * empty, rss, note]
    notes = []
    if fp32 is not None and row["mode"] in PRECISIONS and "words_per_s" in fp32:
        notes.append(f"{_ranged(speed_ratios(row, fp32), _x)} fp32")
    if "relative_error" in row:
        notes.append(
            f"max abs err {row['max_abs_error']:.2e} (rel {row['relative_error']:.1e}), "
            f"mean {row['mean_abs_error']:.1e}"
        )
    if "cache_hit_rate" in row:
        notes.append(f"cache hit rate {100 * row['cache_hit_rate']:.0f}% (Zipf text)")
    if refusals(row):
        notes.append("refused, a repeat faster than its denominator: " + ", ".join(refusals(row)))
    read = row.get("step_read_rates")
    return [
        row["arch"],
        str(row["batch"]),
        mode,
        _ranged(speeds, "{:.0f}".format),
        _ranged((row.get("repeat_values") or {}).get("gflops") or [row["gflops"]], "{:.1f}".format),
        _fraction(row, "roofline_executed"),
        _fraction(row, "shapes_bound"),
        _fraction(row, "read_bound"),
        f"{row['bytes_per_step'] / 2**20:.1f}" if read else "",
        _ranged(read, "{:.1f}".format) if read else "",
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


def _caches(record: dict) -> str:
    """The data caches of a run's CPU: "L1d 48 KiB, L2 1 MiB, L3 32 MiB (shared by 0-1)"."""
    parts = []
    for cache in (record.get("machine") or {}).get("caches") or []:
        if cache["type"] == "Instruction":
            continue
        size = cache["bytes"]
        text = f"{size // 2**20} MiB" if size >= 2**20 else f"{size // 2**10} KiB"
        name = f"L{cache['level']}" + ("d" if cache["type"] == "Data" else "")
        parts.append(
            f"{name} {text}"
            + (
                f" (shared by {cache['shared_cpu_list']})"
                if "," in cache["shared_cpu_list"] or "-" in cache["shared_cpu_list"]
                else ""
            )
        )
    return ", ".join(parts)


def _load(record: dict) -> str:
    machine_info = record.get("machine") or {}
    start, end = machine_info.get("load_average"), machine_info.get("load_average_end")
    return f"{start[0]:.1f} → {end[0]:.1f}" if start and end else ""


def _records(runs: Path) -> list[dict]:
    lines = runs.read_text(encoding="utf-8").splitlines()
    return [r for r in (json.loads(line) for line in lines if line.strip()) if r["kind"] == "inference"]


def _cells(table: dict, row: list, columns: list[str]) -> list[str]:
    """A stored row under `columns` (a column a run did not have stays empty)."""
    cells = dict(zip(table["columns"], row))
    return [str(cells.get(column, "")) for column in columns]


OLD_FRACTIONS = ("roofline (nominal)", "roofline (executed)", "bandwidth bound", "product bound")


def _refuse_old(column: str, cell: str) -> str:
    """A stored cell of an earlier run, "refused" where it is a fraction above 100% (`refused`)."""
    if column in OLD_FRACTIONS and cell.endswith("%") and refused([float(cell.split("%")[0]) / 100]):
        return "refused"
    return cell


def _peaks(record: dict) -> str:
    """The run's GEMM peaks, median (least–greatest) over its samples, per precision."""
    peaks = (record.get("measured") or {}).get("gemm_peaks") or {}
    return "; ".join(f"{p} {_ranged(v['samples'], '{:.0f}'.format)}" for p, v in peaks.items())


def _table(columns: list[str], lines: list[list[str]]) -> list[str]:
    right = ("batch", "words/s", "GFLOP/s", "GFLOP/s (executed)", "MiB/step")
    return [
        "| " + " | ".join(columns) + " |",
        "| " + " | ".join("---:" if c in right else "---" for c in columns) + " |",
        *("| " + " | ".join(cells) + " |" for cells in lines),
    ]


def write_table(runs: Path = RUNS, out: Path | None = None) -> Path:
    """bench/results/inference.md: every measurement of every inference run in `runs`, newest run first: the
    runs with measured denominators (schema 2) under COLUMNS, the earlier ones under theirs
    (OLD_COLUMNS); and bench/results/precision_by_cpu.md beside it (`write_precision_table`)."""
    new, old = [], []
    for record in reversed(_records(runs)):
        if record.get("schema", 1) >= SCHEMA:
            threads, repeats = str(record.get("threads") or ""), str(record.get("repeats") or 1)
            run = [record["date"], record.get("commit") or "", threads, repeats, _peaks(record), *_cpu(record)]
            run += [_caches(record), _load(record)]
            new += [run + _cells(table, row, COLUMNS) for table in record["tables"][:1] for row in table["rows"]]
        else:
            limits = (record.get("measured") or {}).get("limits") or {}
            peak = f"{limits['gemm_peak']:.1f}" if "gemm_peak" in limits else ""
            run = [
                record["date"],
                record.get("commit") or "",
                str(record.get("threads") or ""),
                peak,
                *_cpu(record),
                _load(record),
            ]
            old += [
                run + [_refuse_old(c, cell) for c, cell in zip(OLD_COLUMNS, _cells(table, row, OLD_COLUMNS))]
                for table in record["tables"][:1]
                for row in table["rows"]
            ]
    run_columns = ["run", "commit", "threads", "repeats", "GEMM peaks (GFLOP/s)", "CPU", "flags", "caches", "load"]
    lines = [
        f"<!-- written by `python -m lab.benchmarks.bench` from {runs.name}: every inference run, newest first -->",
        "",
        "Runs with denominators measured without the model (python -m lab.benchmarks.bench, docs/performance.md):",
        "each fraction is the median over the run's repeats (their range in brackets); roofline (executed): the",
        "executed FLOPs against the better of the square-GEMM peak of the row's precision and the rate of its own",
        "products alone at their shapes; roofline (its shapes): the row's matrix products alone at their shapes",
        "and precisions against its time; read bound (batch 1): its per-step weights (MiB/step) at the read rate",
        "measured for them (read GB/s) and the rest once per sentence (read, or computed where that takes",
        "longer), against its time. A fraction that some",
        "repeat put above 100% is refused (its denominator was not a ceiling), never printed or clamped.",
        "",
        *_table(run_columns + COLUMNS, new),
        "",
        "Earlier runs (a 1 GiB read buffer and fp32's square-GEMM peak for every row: their fractions above",
        "100% were those denominators' errors, refused here):",
        "",
        *_table(["run", "commit", "threads", "GEMM roofline (GFLOP/s)", "CPU", "flags", "load", *OLD_COLUMNS], old),
    ]
    out = out or runs.with_name("inference.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_precision_table(runs, out.with_name("precision_by_cpu.md"))
    return out


# the targets the precision table judges per CPU kind (issue 64): a row's fraction over the repeats of its run
TARGETS = [
    {"target": "batch 1 at least 80% of the read bound (issue 64)", "batch": 1, "modes": ("exact", "int8"),
     "value": "read_bound", "at_least": 0.8},
]  # fmt: skip


def write_precision_table(runs: Path = RUNS, out: Path | None = None) -> Path:
    """bench/results/precision_by_cpu.md: per CPU kind, model and batch, fp32's words/s and each
    precision's words/s against it, repeat by repeat (and through nlp.pipe against the raw model's gain), from
    the newest run of that kind that measured them; `EXPECTED_CPUS` never measured are listed as such; then
    each of `TARGETS` per CPU kind from the newest run that measured it, met or missed only when the whole range
    of its repeats is on one side (`verdict`)."""
    columns = ["CPU", "flags", "arch", "batch", "fp32 words/s", *PRECISIONS, "nlp.pipe gain (raw model's)", "run"]
    newest: dict[tuple, list[str]] = {}
    targets: dict[tuple, list[str]] = {}
    for record in _records(runs):
        cpu = _cpu(record)
        results = [r for r in record.get("results", []) if not r.get("code") and "error" not in r]
        if not cpu[0] or not results:
            continue
        run = f"{record['date']}, {record.get('commit') or '?'}, load {_load(record)}"
        for row in (r for r in results if r["mode"] == "exact"):
            arch, batch = row["arch"], row["batch"]
            speed = {
                r["mode"]: _ranged(speed_ratios(r, row), _x)
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
                fp32 = _ranged(row.get("repeat_speeds") or [row["words_per_s"]], "{:.0f}".format)
                cells = [*cpu, arch, str(batch), fp32, *(speed.get(p, "") for p in PRECISIONS)]
                newest[(cpu[0], arch, batch)] = [*cells, "; ".join(gains) if batch == 32 else "", run]
        for target in TARGETS:
            for row in results:
                if row["batch"] != target["batch"] or row["mode"] not in target["modes"] or target["value"] not in row:
                    continue
                values = repeat_values(row, target["value"])
                cells = [
                    *cpu,
                    target["target"],
                    row["arch"],
                    row["mode"],
                    "refused" if refused(values) else _ranged(values, _pct),
                    verdict(values, target["at_least"]),
                    run,
                ]
                targets[(cpu[0], target["target"], row["arch"], row["mode"])] = cells
    lines = [
        f"<!-- written by `python -m lab.benchmarks.bench` from {runs.name}: per CPU kind, its newest run of a row -->",
        "",
        *_table(columns, [cells for _, cells in sorted(newest.items())]),
    ]
    measured = [set(cells[1].split(", ")) for cells in newest.values()]
    for name, flags in EXPECTED_CPUS:
        if not any(flags <= found for found in measured):
            lines.append("| " + " | ".join([name, ", ".join(sorted(flags)), "not measured", *[""] * 6]) + " |")
    if targets:
        lines += [
            "",
            "Targets, per CPU kind from its newest run that measured them: met or missed only when the whole range of",
            "the run's repeats is on one side of the target, else undecided (refused: a repeat beat the denominator).",
            "",
            *_table(
                ["CPU", "flags", "target", "arch", "mode", "median (range)", "verdict", "run"],
                [cells for _, cells in sorted(targets.items())],
            ),  # fmt: skip
        ]
    out = out or runs.with_name("precision_by_cpu.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    raise SystemExit(main())
