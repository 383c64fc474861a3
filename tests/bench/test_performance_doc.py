"""docs/performance.md's results tables are generated from bench/RESULTS.md, never typed: each target judged
on the newest run that records a clean commit of this checkout's code, met or not met from the numbers."""

from __future__ import annotations

from bench import performance_doc

HEADER = (
    "| arch | batch | mode | words/s | GFLOP/s | roofline (nominal) | roofline (executed) | bandwidth bound | "
    "peak RSS infer / load (MiB) | notes |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n"
)


def _inference(when: str, code_line: str, rows: str, source: bool = False, threads: int = 2) -> str:
    return (
        f"## Inference benchmark, 2026-12-01 {when} UTC (a label)\n\n"
        f"Machine: AMD EPYC, 2 cores, 23.5 GiB; torch 2.13.0+cpu, {threads} threads, fp32, OMP_WAIT_POLICY=PASSIVE; "
        "CUDA: none. Load average at start 1.00/1.00/1.00, at end 2.00/2.00/2.00.\n\n"
        + ("spacy_elmo measured from `/tmp/old` (`--source`).\n\n" if source else "")
        + code_line
        + "\n\nMeasured in this run: fp32 GEMM 200.0 / 210.0 GFLOP/s (before/after; roofline = 210.0), "
        "read bandwidth 40.0 / 41.0 GB/s (bound uses 41.0).\n\n" + HEADER + rows + "\n"
    )


def _row(batch: int, rss: int, executed: str = "70%", mode: str = "exact") -> str:
    return (
        f"| original | {batch} | {mode} | 700 | 150.0 | 75% | {executed} | {'50%' if batch == 1 else ''} | "
        f"{rss} / 1300 |  |\n"
    )


def _runs(tmp_path, text: str):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\n" + text, encoding="utf-8")
    return performance_doc.read_runs(path)


def _target_row(block: str, name: str) -> str:
    return next(line for line in block.splitlines() if line.startswith(f"| {name}"))


def test_performance_doc_is_what_the_script_writes():
    assert performance_doc.main(["--check"]) == 0
    text = performance_doc.DOC.read_text(encoding="utf-8")
    assert performance_doc.rewrite(text, performance_doc.render(performance_doc.read_runs())) == text


def test_the_newest_clean_run_of_this_code_judges_each_target(tmp_path):
    rss = "original, batch 32: peak RSS during inference"
    runs = _runs(
        tmp_path,
        (
            _inference("01:00", "Code: 1111111.", _row(32, 1123) + _row(1, 1100))  # older: RSS met
            + _inference(
                "02:00",
                "Code: 2222222; baseline rows (`--baseline /b`): 0000000, each job run for both codes in turn.",
                _row(32, 1235) + _row(32, 1000, mode="exact (baseline)"),
            )  # newest of this code: RSS over 1.2 GiB
            + _inference("03:00", "Code: 3333333-dirty.", _row(32, 900))  # uncommitted changes: never counts
            + _inference("04:00", "Code: 4444444.", _row(32, 900), source=True)  # another directory's code
            + _inference("05:00", "Code: 5555555.", _row(32, 900), threads=1)  # not the targets' thread count
            + _inference("06:00", "", _row(32, 900))  # commit not recorded
        ),
    )
    block = performance_doc.render(runs)
    line = _target_row(block, rss)
    assert "2026-12-01 02:00 UTC, commit 2222222" in line and "1,235 MiB" in line and line.endswith("| **not met** |")
    # batch 1 was measured only by the older clean run: that one judges it
    assert "2026-12-01 01:00 UTC, commit 1111111" in _target_row(block, "original, batch 1: bandwidth bound")
    # a target no clean run of this code measured gets no figure, and names the newest run that did
    assert "| small, batch 32" not in block
    assert "- small, batch 32: compute roofline (executed FLOPs): the newest run that measured it is none" in block
    # the verdict follows the numbers, against every goal the target has had
    runs = _runs(tmp_path, _inference("01:00", "Code: 1111111.", _row(32, 1228, executed="62%")))
    block = performance_doc.render(runs)
    assert _target_row(block, rss).endswith("| met |")
    assert _target_row(block, "original, batch 32: compute roofline").endswith("| **not met** (≥ 65%), met (≥ 60%) |")


def test_training_rows_come_from_the_newest_clean_run_per_config(tmp_path):
    section = lambda when, commit, fused: (  # noqa: E731
        f"## Training throughput, 2026-12-01 {when} UTC (pretrain_tiny.cfg, 2x256)\n\n"
        f"Machine: AMD EPYC, 2 cores; torch 2.13.0+cpu, 1 threads, fp32, OMP_WAIT_POLICY=PASSIVE. {commit} Load "
        "average "
        "at start 1.00/1.00/1.00, at end 1.00/1.00/1.00.\n\nRoofline: words/s × 3 × forward FLOPs per word (1.00 MFLOP "
        "incl. softmax) ÷ fp32 GEMM rate measured in this run (100.0 GFLOP/s; before/after 90.0 / 100.0).\n\n"
        "| lstm_implementation | s/step | words/s | GFLOP/s (effective) | training roofline | vs eager |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: |\n| eager | 1.000 | 1000 | 3.0 | 30% | 1.00× |\n"
        f"| fused | 0.500 | {fused} | 6.0 | 60% | {fused / 1000:.2f}× |\n\n"
    )
    runs = _runs(
        tmp_path,
        section("01:00", "Commit aaaaaaa.", 1500)
        + section("02:00", "Commit bbbbbbb (with uncommitted changes).", 9000),
    )
    block = performance_doc.render(runs)
    assert (
        "| pretrain_tiny.cfg, 2x256 | 2026-12-01 01:00 UTC, commit aaaaaaa | 1 | fused | 1,500 | 60% | 1.50× |" in block
    )
    assert "9,000" not in block
