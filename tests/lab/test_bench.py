"""lab/bench.py: a run appended to the log of runs, and the one table written from the log."""

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


def test_the_table_holds_every_inference_measurement_newest_run_first(tmp_path):
    runs = tmp_path / "runs.jsonl"
    records = [
        {"kind": "inference", "date": "2026-01-01 00:00 UTC", "commit": "aaaaaaa", "threads": 2,
         "measured": {"limits": {"gemm_peak": 100.0}},
         "tables": [{"columns": bench.INFERENCE_COLUMNS, "rows": [bench.table_row(ROW)]}]},
        {"kind": "training", "date": "2026-01-02 00:00 UTC", "tables": [{"columns": ["x"], "rows": [["1"]]}]},
        {"kind": "inference", "date": "2026-01-03 00:00 UTC", "commit": None, "threads": 1,
         "tables": [{"columns": bench.INFERENCE_COLUMNS, "rows": [bench.table_row(dict(ROW, mode="exact"))]}]},
    ]  # fmt: skip
    runs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    lines = bench.write_table(runs).read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| 2026")]
    assert rows == [
        "| 2026-01-03 00:00 UTC |  | 1 |  | tiny | 32 | exact | 1234 | 5.0 | 50% | 25% |  | 500 / 400 | "
        "max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
        "| 2026-01-01 00:00 UTC | aaaaaaa | 2 | 100.0 | tiny | 32 | int8 | 1234 | 5.0 | 50% | 25% |  | 500 / 400 | "
        "max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
    ]


def test_the_committed_table_is_what_the_log_gives(tmp_path):
    """bench/results/inference.md is written from bench/results/runs.jsonl, never by hand."""
    written = bench.write_table(bench.RUNS, tmp_path / "inference.md").read_text(encoding="utf-8")
    assert written == (bench.RUNS.parent / "inference.md").read_text(encoding="utf-8")
