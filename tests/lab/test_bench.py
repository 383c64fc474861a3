"""lab/bench.py: a run appended to the log of runs, and the tables written from the log: every
measurement (inference.md) and each precision's speed per CPU kind (precision_by_cpu.md)."""

from __future__ import annotations

import json

from lab import bench

ROW = {
    "arch": "tiny",
    "batch": 32,
    "mode": "int8",
    "code": "",
    "words_per_s": 1234.4,
    "gflops": 5.04,
    "roofline": 0.5,
    "roofline_executed": 0.25,
    "rss_peak_inference_mib": 500.2,
    "rss_peak_load_mib": 400.0,
    "max_abs_error": 0.001,
    "relative_error": 0.01,
    "mean_abs_error": 0.0001,
}
EPYC = {
    "vendor": "AuthenticAMD",
    "family": 25,
    "model": 17,
    "flags": ["avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"],
}


def _run(date: str, rows: list[dict], kind: dict | None = EPYC, **extra) -> dict:
    machine = {"cpu_kind": kind, "load_average": [0.5, 0.4, 0.3], "load_average_end": [0.75, 0.5, 0.3]}
    return {
        "kind": "inference", "date": date, "commit": "bbbbbbb", "threads": 2, "machine": machine if kind else {},
        "measured": {"limits": {"gemm_peak": 200.0}},
        "tables": [{"columns": bench.INFERENCE_COLUMNS, "rows": bench.table_rows(rows)}], "results": rows, **extra,
    }  # fmt: skip


def test_the_table_holds_every_inference_measurement_newest_run_first(tmp_path):
    runs = tmp_path / "runs.jsonl"
    old_columns = [c for c in bench.INFERENCE_COLUMNS if c != "product bound"]  # a run from before that column
    old_row = bench.table_row(ROW)
    del old_row[old_columns.index("bandwidth bound") + 1]
    records = [
        {"kind": "inference", "date": "2026-01-01 00:00 UTC", "commit": "aaaaaaa", "threads": 2,
         "measured": {"limits": {"gemm_peak": 100.0}}, "tables": [{"columns": old_columns, "rows": [old_row]}]},
        {"kind": "training", "date": "2026-01-02 00:00 UTC", "tables": [{"columns": ["x"], "rows": [["1"]]}]},
        _run("2026-01-03 00:00 UTC", [dict(ROW, mode="exact", words_per_s=617.2, product_bound=0.8), ROW]),
    ]  # fmt: skip
    runs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    lines = bench.write_table(runs).read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| 2026")]
    new_run = (
        "| 2026-01-03 00:00 UTC | bbbbbbb | 2 | 200.0 | AMD 25/17 | avx512_bf16, avx512_vnni | 0.5 → 0.8 | tiny | 32 |"
    )
    assert rows == [
        f"{new_run} exact | 617 | 5.0 | 50% | 25% |  | 80% | 500 / 400 | "
        "max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
        f"{new_run} int8 | 1234 | 5.0 | 50% | 25% |  |  | 500 / 400 | "
        "2.00× fp32; max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
        "| 2026-01-01 00:00 UTC | aaaaaaa | 2 | 100.0 |  |  |  | tiny | 32 | int8 | 1234 | 5.0 | 50% | 25% |  |  | "
        "500 / 400 | max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
    ]


def test_a_precisions_pipe_row_gives_its_gain_through_nlp_pipe_and_the_raw_model():
    pipe = {"arch": "small", "batch": 32, "rss_peak_inference_mib": 1, "rss_peak_load_mib": 1}
    fp32 = dict(pipe, mode="pipe", pipe_words_per_s=100.0, raw_words_per_s=110.0, pipe_over_raw=100 / 110)
    bf16 = dict(pipe, mode="pipe-bf16", pipe_words_per_s=140.0, raw_words_per_s=165.0, pipe_over_raw=140 / 165)
    notes = [row[-1] for row in bench.table_rows([fp32, bf16])]
    assert notes == [
        "nlp.pipe = 91% of raw model (110 words/s)",
        "nlp.pipe = 85% of raw model (165 words/s); over fp32: nlp.pipe 1.40×, raw model 1.50×",
    ]


def test_the_precision_table_has_each_cpu_kinds_newest_rows_and_names_kinds_never_measured(tmp_path):
    """Per CPU kind, model and batch: fp32's words/s and each precision's against it from the newest
    run that measured them; the kinds the project expects but never ran on say "not measured"."""
    runs = tmp_path / "runs.jsonl"

    def rows(fp32: float, bf16: float, int8: float, batch: int = 32) -> list[dict]:
        base = dict(ROW, arch="small", batch=batch)
        return [dict(base, mode="exact", words_per_s=fp32), dict(base, mode="bf16", words_per_s=bf16),
                dict(base, mode="int8", words_per_s=int8)]  # fmt: skip

    pipe = {"arch": "small", "batch": 32, "rss_peak_inference_mib": 1, "rss_peak_load_mib": 1}
    pipes = [
        dict(pipe, mode="pipe", pipe_words_per_s=100.0, raw_words_per_s=100.0, pipe_over_raw=1.0),
        dict(pipe, mode="pipe-bf16", pipe_words_per_s=150.0, raw_words_per_s=160.0, pipe_over_raw=0.94),
    ]
    records = [
        _run("2026-01-01 00:00 UTC", rows(100, 110, 120)),  # superseded by the next run of the same kind
        _run("2026-01-02 00:00 UTC", rows(200, 360, 400) + rows(50, 55, 90, batch=1) + pipes),
        _run("2026-01-03 00:00 UTC", rows(300, 300, 300), kind=None),  # no CPU kind recorded: not in this table
    ]
    runs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    lines = bench.write_precision_table(runs).read_text(encoding="utf-8").splitlines()
    rows_written = [line for line in lines if line.startswith("| AMD") or line.startswith("| Intel")]
    run = "2026-01-02 00:00 UTC, bbbbbbb, load 0.5 → 0.8"
    assert rows_written == [
        f"| AMD 25/17 | avx512_bf16, avx512_vnni | small | 1 | 50 | 1.10× | 1.80× |  | {run} |",
        f"| AMD 25/17 | avx512_bf16, avx512_vnni | small | 32 | 200 | 1.80× | 2.00× | bf16: 1.50× (1.60×) | {run} |",
        "| Intel Xeon with AMX | amx_bf16, amx_int8 | not measured |  |  |  |  |  |  |",
    ]


def test_the_product_bound_is_the_encoders_flops_at_the_roofline_plus_the_lstms_products():
    config = bench.config_for("tiny")
    row = {"batch": 32, "positions_per_s": 1000.0, "seconds_per_batch": 0.5, "executed_char_cnn_flops_per_word": 1e4,
           "unique_words_per_position": 1.0, "lstm_product_seconds": 0.1, "encoder_flops_per_batch": 2e10}  # fmt: skip
    fractions = bench.fractions(row, config, {"gemm_peak": 100.0, "bandwidth": 50.0})
    assert abs(fractions["product_bound"] - (2e10 / 100e9 + 0.1) / 0.5) < 1e-12


def test_the_committed_tables_are_what_the_log_gives(tmp_path):
    """bench/results/inference.md and precision_by_cpu.md are written from bench/results/runs.jsonl, never by hand."""
    written = bench.write_table(bench.RUNS, tmp_path / "inference.md").read_text(encoding="utf-8")
    assert written == (bench.RUNS.parent / "inference.md").read_text(encoding="utf-8")
    by_cpu = (tmp_path / "precision_by_cpu.md").read_text(encoding="utf-8")
    assert by_cpu == (bench.RUNS.parent / "precision_by_cpu.md").read_text(encoding="utf-8")


def test_repeated_jobs_give_the_measurement_of_median_speed_with_every_repeats_speed():
    """`--repeats`: of one job's measurements the row is the one of median speed (whole, so its
    speed, errors and RSS belong together), every repeat's speed beside it and in the table's notes."""
    results = [dict(ROW, words_per_s=s, max_abs_error=s / 1e6) for s in (900.0, 1300.0, 1100.0)]
    row = bench.median_of(results)
    assert row["words_per_s"] == 1100.0 and row["max_abs_error"] == 1100.0 / 1e6
    assert row["repeat_speeds"] == [900.0, 1300.0, 1100.0]
    assert bench.median_of(results[:2])["words_per_s"] == 900.0  # the lower middle of an even count
    assert bench.median_of(results[:1]) is results[0]
    assert bench.table_row(row)[-1].startswith("median of 3: 900, 1300, 1100; ")
    pipe = dict(ROW, mode="pipe", pipe_words_per_s=50.0, raw_words_per_s=60.0, pipe_over_raw=50 / 60)
    piped = bench.median_of([pipe, dict(pipe, pipe_words_per_s=70.0), dict(pipe, pipe_words_per_s=40.0)])
    assert piped["pipe_words_per_s"] == 50.0 and bench.table_row(piped)[-1].endswith("median of 3: 50, 70, 40")
