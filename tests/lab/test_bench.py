"""lab/benchmarks/bench.py: a run appended to the log of runs, and the tables written from the log: every
measurement (inference.md) and each precision's speed per CPU kind (precision_by_cpu.md); the fractions of the
denominators measured independently of the model (lab/machine.py), per repeat, and the verdicts drawn from
their ranges."""

from __future__ import annotations

import argparse
import json
import os
import re

import pytest
import torch

from lab.benchmarks import bench, bench_worker, flops, machine

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
        "schema": bench.SCHEMA, "repeats": 1,
        "measured": {"gemm_peaks": {"fp32": bench.spread([200.0, 190.0]), "int8": bench.spread([700.0, 720.0])}},
        "tables": [{"columns": bench.COLUMNS, "rows": bench.table_rows(rows)}], "results": rows, **extra,
    }  # fmt: skip


def test_the_table_holds_every_inference_measurement_newest_run_first(tmp_path):
    """Runs with measured denominators under today's columns, the earlier ones (their own columns, a column a
    run did not have left empty) in a section of their own."""
    runs = tmp_path / "runs.jsonl"
    old_columns = [c for c in bench.OLD_COLUMNS if c != "product bound"]  # a run from before that column
    old_row = ["tiny", "32", "int8", "1234", "5.0", "50%", "25%", "", "500 / 400", "2.00× fp32"]
    fp32 = dict(ROW, mode="exact", words_per_s=617.2, gflops=4.0, shapes_bound=0.8)
    records = [
        {"kind": "inference", "date": "2026-01-01 00:00 UTC", "commit": "aaaaaaa", "threads": 2,
         "measured": {"limits": {"gemm_peak": 100.0}}, "tables": [{"columns": old_columns, "rows": [old_row]}]},
        {"kind": "training", "date": "2026-01-02 00:00 UTC", "tables": [{"columns": ["x"], "rows": [["1"]]}]},
        _run("2026-01-03 00:00 UTC", [fp32, ROW]),
    ]  # fmt: skip
    runs.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    lines = bench.write_table(runs).read_text(encoding="utf-8").splitlines()
    rows = [line for line in lines if line.startswith("| 2026")]
    new_run = (
        "| 2026-01-03 00:00 UTC | bbbbbbb | 2 | 1 | fp32 195 (190–200); int8 710 (700–720) | AMD 25/17 | "
        "avx512_bf16, avx512_vnni |  | 0.5 → 0.8 | tiny | 32 |"
    )
    assert rows == [
        f"{new_run} exact | 617 | 4.0 | 25% | 80% |  |  |  | 500 / 400 | "
        "max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
        f"{new_run} int8 | 1234 | 5.0 | 25% |  |  |  |  | 500 / 400 | "
        "2.00× fp32; max abs err 1.00e-03 (rel 1.0e-02), mean 1.0e-04 |",
        "| 2026-01-01 00:00 UTC | aaaaaaa | 2 | 100.0 |  |  |  | tiny | 32 | int8 | 1234 | 5.0 | 50% | 25% |  |  | "
        "500 / 400 | 2.00× fp32 |",
    ]
    assert lines.index(rows[1]) < lines.index(next(line for line in lines if line.startswith("Earlier runs")))


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


def test_each_fraction_is_against_its_own_denominator():
    """roofline (executed): against the GEMM peak of the row's precision; roofline (its shapes): the products
    alone at their shapes (the char CNN's FLOPs at its precision's peak) over the time; read bound (batch 1): per
    step the streamed bytes at the best read rate measured for them, once per sentence the rest at the best
    large-buffer rate, over the time."""
    config = bench.config_for("tiny")
    row = {"batch": 1, "mode": "int8", "positions_per_s": 1000.0, "seconds_per_batch": 0.02,
           "executed_char_cnn_flops_per_word": 1e4, "unique_words_per_position": 1.0,
           "lstm_product_seconds": 0.004, "linear_product_seconds": 0.001, "char_cnn_flops_per_batch": 4e8,
           "bound_products": {"char_cnn": "fp32"}, "bytes_per_step": 2e8, "bytes_per_batch": 1e8,
           "step_read_rates": [40.0, 50.0], "batch_read_rates": [20.0, 25.0]}  # fmt: skip
    limits = {"gemm": {"fp32": 100.0, "int8": 400.0}}
    got = bench.fractions(row, config, limits)
    executed = 1000.0 * (flops.forward_flops_per_token(config) - flops.char_cnn_flops(config) + 1e4)
    assert got["roofline_executed"] == pytest.approx(executed / 400e9)  # int8's own peak, not fp32's
    assert got["shapes_bound"] == pytest.approx((0.004 + 0.001 + 4e8 / 100e9) / 0.02)
    steps = 1000.0 * 0.02
    assert got["read_bound"] == pytest.approx((steps * 2e8 / 50e9 + 1e8 / 25e9) / 0.02)
    # a sentence's once-only products take longer to compute (2e9 at int8's 400 GFLOP/s: 5 ms) than to read (4 ms)
    computing = bench.fractions(dict(row, batch_flops_per_batch=2e9), config, limits)
    assert computing["read_bound"] == pytest.approx((steps * 2e8 / 50e9 + 2e9 / 400e9) / 0.02)
    reading = bench.fractions(dict(row, batch_flops_per_batch=1e9), config, limits)  # 2.5 ms: reading bounds it
    assert reading["read_bound"] == pytest.approx(got["read_bound"])
    # a CPU without int8 products computes fp32: the row goes against fp32's peak
    assert bench.fractions(row, config, {"gemm": {"fp32": 100.0}})["roofline_executed"] == pytest.approx(
        executed / 100e9
    )
    # the row's products alone at their shapes ran faster than square ones: their rate is the ceiling
    fast = dict(row, shapes_flops_per_batch=5e9)  # 5e9 FLOPs in 0.005 s: 1000 GFLOP/s
    got = bench.fractions(fast, config, limits)
    assert got["roofline_peak_gflops"] == pytest.approx(1000.0)
    assert got["roofline_executed"] == pytest.approx(executed / 1000e9)
    slow = dict(row, shapes_flops_per_batch=5e8)  # 100 GFLOP/s: the square peak stays the ceiling
    assert bench.fractions(slow, config, limits)["roofline_executed"] == pytest.approx(executed / 400e9)


def test_a_fraction_some_repeat_put_above_100_percent_is_refused_never_printed_or_clamped():
    """A repeat faster than its denominator shows the denominator is not a ceiling: the cell says "refused" (not
    the fraction, not 100%), the notes name the column and how many repeats beat it, the rest of the row stands."""
    row = dict(ROW, mode="exact", batch=1, read_bound=1.3, shapes_bound=0.5, bytes_per_step=2**20,
               step_read_rates=[30.0, 31.0])  # fmt: skip
    cells = dict(zip(bench.COLUMNS, bench.table_row(row)))
    assert cells["read bound"] == "refused" and cells["roofline (its shapes)"] == "50%"
    assert "refused, a repeat faster than its denominator: read bound (1 of 1 repeats)" in cells["notes"]
    assert cells["read GB/s"] == "30.5 (30.0–31.0)"
    # the median below 100% does not save it: one repeat above is enough
    repeated = dict(row, read_bound=0.9, repeat_values={"read_bound": [0.9, 0.95, 1.02], "shapes_bound": [0.5] * 3})
    cells = dict(zip(bench.COLUMNS, bench.table_row(repeated)))
    assert cells["read bound"] == "refused" and "read bound (1 of 3 repeats)" in cells["notes"]
    assert cells["roofline (its shapes)"] == "50% (50%–50%)"
    exactly_full = dict(row, read_bound=1.0)
    assert dict(zip(bench.COLUMNS, bench.table_row(exactly_full)))["read bound"] == "100%"


def test_no_table_prints_a_fraction_above_100_percent(tmp_path):
    """Neither table prints a percentage above 100, from today's runs or from earlier runs' stored cells (whose
    fractions above 100% were their denominators' errors), nor draws a verdict from such a fraction."""
    runs = tmp_path / "runs.jsonl"
    over = dict(ROW, mode="exact", batch=1, arch="small", read_bound=0.95, bytes_per_step=2**20,
                step_read_rates=[30.0], repeat_values={"read_bound": [0.95, 1.2]},
                repeat_speeds=[600.0, 620.0])  # fmt: skip
    old_row = ["tiny", "1", "int8", "250", "55.3", "23%", "22%", "253%", "", "634 / 1432", "4.62× fp32"]
    old = {"kind": "inference", "date": "2026-01-01 00:00 UTC", "commit": "aaaaaaa", "threads": 2,
           "measured": {"limits": {"gemm_peak": 100.0}},
           "tables": [{"columns": [c for c in bench.OLD_COLUMNS if c != "product bound"],
                       "rows": [old_row]}]}  # fmt: skip
    runs.write_text(json.dumps(old) + "\n" + json.dumps(_run("2026-01-03 00:00 UTC", [over])) + "\n")
    inference = bench.write_table(runs).read_text(encoding="utf-8")
    by_cpu = (tmp_path / "precision_by_cpu.md").read_text(encoding="utf-8")
    for text in (inference, by_cpu):
        assert all(_percents_at_most_100(cell) for cell in _fraction_cells(text))
    assert len(_fraction_cells(inference)) == 5 and len(_fraction_cells(by_cpu)) == 1
    assert "| 23% | 22% | refused |" in inference  # the earlier run's 253% read bound
    target = next(line for line in by_cpu.splitlines() if "read bound" in line)
    assert "| refused | refused |" in target  # the range's cell and the verdict
    for path in (bench.RUNS.parent / "inference.md", bench.RUNS.parent / "precision_by_cpu.md"):
        assert all(_percents_at_most_100(cell) for cell in _fraction_cells(path.read_text(encoding="utf-8"))), path


def _fraction_cells(text: str) -> list[str]:
    """The cells of a written table's columns that hold fractions of a limit (today's, earlier runs', targets')."""
    fraction_columns = {*bench.FRACTION_COLUMNS.values(), *bench.OLD_FRACTIONS, "median (range)"}
    cells, columns = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        parts = [part.strip() for part in line.strip("|").split("|")]
        if columns is None:
            columns = parts
        elif not set(parts) <= {"---", "---:"}:
            cells += [cell for column, cell in zip(columns, parts) if column in fraction_columns and cell]
    return cells


def _percents_at_most_100(cell: str) -> bool:
    return all(int(p) <= 100 for p in re.findall(r"(\d+)%", cell))


def test_a_target_is_met_or_missed_only_when_the_whole_range_is_on_one_side():
    assert bench.verdict([0.81, 0.85, 0.9], 0.8) == "met"
    assert bench.verdict([0.5, 0.79], 0.8) == "missed"
    assert bench.verdict([0.78, 0.82], 0.8) == "undecided"
    assert bench.verdict([0.79], 0.8) == "missed" and bench.verdict([0.8], 0.8) == "met"
    assert bench.verdict([0.85, 1.01], 0.8) == "refused"  # a repeat beat its denominator: no verdict


def test_a_repeat_takes_the_better_gemm_peak_of_the_samples_beside_it():
    samples = [
        {"gemm": {"fp32": {"peak": 100.0}, "int8": {"peak": 500.0}}, "bandwidth": {"peak": 20.0}},
        {"gemm": {"fp32": {"peak": 120.0}, "int8": {"peak": 450.0}}, "bandwidth": {"peak": 21.0}},
        {"gemm": {"fp32": {"peak": 110.0}, "int8": {"peak": 480.0}}, "bandwidth": {"peak": 19.0}},
    ]
    assert bench.round_limits(samples) == [
        {"gemm": {"fp32": 120.0, "int8": 500.0}, "bandwidth": 21.0},
        {"gemm": {"fp32": 120.0, "int8": 480.0}, "bandwidth": 21.0},
    ]


def test_the_read_buffers_are_the_bytes_each_precision_streams_as_the_decider_bound_them():
    """At batch 1 the per-step bytes are the recurrent weights in the precision the model bound for one row:
    int8 (and its per-column scales and offsets) and bf16 for original's, fp32 for small's, which the decider
    keeps fp32 at one row (`kernels.products.ONE_ROW_FP32_MAX_BYTES`); read off a model's own bound products."""
    from spacy_elmo import ElmoModel
    from spacy_elmo.kernels.capabilities import int8_available

    if not int8_available():
        pytest.skip("int8 computes fp32 on this CPU (kernels.capabilities.INT8_CPUS)")  # every CPU kind here has it
    small = ElmoModel(bench.config_for("small")).eval()
    small.set_precision("int8")
    products = bench_worker.bound_products(small)
    assert products["lstm"]["hidden_weight"] == {"one_row": "fp32", "rows": "int8"} and products["char_cnn"] == "int8"
    assert [p for _, _, p in products["linears"]] == ["int8"] * 3
    assert flops.streamed_weights(small.config, products)["bytes_per_step"] == 2 * 2 * (128 * 4096 + 1024 * 128) * 4
    original = bench.config_for("original")
    lstm = {n: {"one_row": "int8", "rows": "int8"} for n in ("input_weight", "hidden_weight", "proj_weight")}
    streamed = flops.streamed_weights(original, {"lstm": lstm})
    assert streamed["bytes_per_step"] == 2 * 2 * (512 * 16384 + 16384 * 8 + 4096 * 512 + 512 * 8)
    assert streamed["per_step"][0][0] == [(512, 16384), (1, 16384 * 8), (4096, 512), (1, 512 * 8)]
    assert flops.streamed_weights(original, {})["bytes_per_step"] == flops.weight_bytes(original)["per_step"]


def test_the_step_read_rate_reads_every_byte_of_the_layout_with_each_kernel():
    layout = [[[(64, 4096), (32, 1024)], [(64, 4096), (32, 1024)]]]  # one layer, two directions
    got = machine.step_read_rate(layout, steps=3, threads=2)
    assert got["bytes_per_step"] == 2 * (64 * 4096 + 32 * 1024) and got["steps"] == 3
    assert set(got["per_kernel"]) == {"sum", "amax", "vector·matrix"}
    assert got["peak"] == max(got["per_kernel"].values()) > 0
    assert machine.step_read_rate(layout, steps=2, threads=1)["peak"] > 0  # the directions in turn


def test_the_gemm_rates_of_each_precision_this_cpu_computes():
    from spacy_elmo.kernels.capabilities import int8_available, native_bf16_available

    precisions = ["fp32"] + [p for p, has in (("bf16", native_bf16_available), ("int8", int8_available)) if has()]
    rates = machine.gemm_rates((64, 128), repeats=1, precisions=precisions)
    assert list(rates) == precisions and all(r["peak"] == max(r["per_size"].values()) > 0 for r in rates.values())
    x, w = torch.randn(3, 64), torch.randn(64, 32)
    for precision in precisions:  # every kernel a precision is timed with computes x·W (within its rounding)
        for calls in machine.product_kernels(precision, x, [w]).values():
            torch.testing.assert_close(calls[0]().float(), x @ w, rtol=0.05, atol=0.3)


def test_the_committed_tables_are_what_the_log_gives(tmp_path):
    """bench/results/inference.md and precision_by_cpu.md are written from bench/results/runs.jsonl, never by hand."""
    written = bench.write_table(bench.RUNS, tmp_path / "inference.md").read_text(encoding="utf-8")
    assert written == (bench.RUNS.parent / "inference.md").read_text(encoding="utf-8")
    by_cpu = (tmp_path / "precision_by_cpu.md").read_text(encoding="utf-8")
    assert by_cpu == (bench.RUNS.parent / "precision_by_cpu.md").read_text(encoding="utf-8")


def test_repeated_jobs_give_the_measurement_of_median_speed_with_every_repeats_speed_and_fractions():
    """`--repeats`: of one job's measurements the row is the one of median speed (whole, so its
    speed, errors and RSS belong together), every repeat's speed and fractions beside it (each against the
    limits of its own round), the table showing their median and range."""
    results = [dict(ROW, words_per_s=s, max_abs_error=s / 1e6) for s in (900.0, 1300.0, 1100.0)]
    row = bench.median_of(results)
    assert row["words_per_s"] == 1100.0 and row["max_abs_error"] == 1100.0 / 1e6
    assert row["repeat_speeds"] == [900.0, 1300.0, 1100.0]
    assert bench.median_of(results[:2])["words_per_s"] == 900.0  # the lower middle of an even count
    assert bench.median_of(results[:1]) is results[0]
    assert bench.table_row(row)[bench.COLUMNS.index("words/s")] == "1100 (900–1300)"
    timed = {"positions_per_s": 100.0, "seconds_per_batch": 0.5, "executed_char_cnn_flops_per_word": 0.0,
             "unique_words_per_position": 1.0}  # fmt: skip
    config = bench.config_for("tiny")
    limits = [{"gemm": {"fp32": 1.0, "int8": g}} for g in (10.0, 20.0, 40.0)]
    row = bench.median_of([dict(r, **timed) for r in results], limits, config)
    per_token = flops.forward_flops_per_token(config) - flops.char_cnn_flops(config)
    assert row["repeat_values"]["roofline_executed"] == pytest.approx(
        [100 * per_token / (g * 1e9) for g in (10, 20, 40)]
    )
    fp32 = dict(ROW, mode="exact", words_per_s=500.0, repeat_speeds=[450.0, 650.0, 500.0])
    assert bench.speed_ratios(row, fp32) == pytest.approx([2.0, 2.0, 2.2])  # round by round
    assert bench.table_row(row, fp32)[-1].startswith("2.00× (2.00×–2.20×) fp32")
    pipe = dict(ROW, mode="pipe", pipe_words_per_s=50.0, raw_words_per_s=60.0, pipe_over_raw=50 / 60)
    piped = bench.median_of([pipe, dict(pipe, pipe_words_per_s=70.0), dict(pipe, pipe_words_per_s=40.0)])
    assert piped["pipe_words_per_s"] == 50.0 and bench.table_row(piped)[3] == "50 (40–70)"


@pytest.mark.parametrize(("policy", "expected"), [("passive", "PASSIVE"), ("active", "ACTIVE"), ("default", None)])
def test_the_machine_samples_run_in_their_own_process_under_the_runs_wait_policy(monkeypatch, policy, expected):
    # OpenMP reads its wait policy only when torch loads: the bench sets it in each measuring process's
    # environment, never in its own (importing it, as this test did, leaves the environment alone)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    args = argparse.Namespace(omp_wait_policy=policy, threads=1, quick=True)
    sample = bench.sample_limits(args, ["fp32"])
    assert sample["omp_wait_policy"] == expected
    assert sample["gemm"]["fp32"]["peak"] > 0 and sample["bandwidth"]["peak"] > 0
    assert "OMP_WAIT_POLICY" not in os.environ


def test_a_worker_measures_the_smoke_runs_tiny_model_with_its_own_characters_per_token(tmp_path):
    # configs/pretrain_tiny.cfg cuts words at 20 characters, not the original's 50: the worker's char ids follow
    # the model's config, as `--quick` runs it
    directory = bench.ensure_model("tiny", 0, tmp_path)
    assert bench.config_for("tiny").max_characters_per_token != 50
    args = argparse.Namespace(omp_wait_policy="passive", threads=1, quick=True, min_seconds=0.2)
    result = bench.run_worker(directory, 1, "exact", args)
    assert "error" not in result and result["words_per_s"] > 0
