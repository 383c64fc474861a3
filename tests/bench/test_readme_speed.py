"""The GPU speed figures of docs/performance.md (the summary that was README.md's) and docs/pretraining.md are
generated from the recorded GPU result, never typed, and each target is judged on what a user runs."""

from __future__ import annotations

import copy
import json

from bench import readme_speed


def _newest():
    path, report = readme_speed.newest_result()
    return path, copy.deepcopy(report)


def _line(block: str, start: str) -> str:
    return next(line for line in block.splitlines() if line.startswith(start))


def test_readme_and_pretraining_doc_are_what_the_script_writes():
    for doc, (current, new) in readme_speed.updated().items():
        assert new == current, f"{doc} is stale: run `python -m bench.readme_speed`"
    assert readme_speed.main(["--check"]) == 0


def test_a_changed_result_changes_the_section():
    path, report = _newest()
    block = readme_speed.render(path, report)
    report["inference"]["modes"]["eager_bf16"]["words_per_s"] = 12_345.0
    changed = readme_speed.render(path, report)
    assert "**12,345 words/s**" in changed and "Target 100,000 words/s: **not met**" in changed and changed != block


def test_the_pretraining_target_is_judged_on_the_whole_run_of_the_command_only():
    path, report = _newest()
    for run in report["training"]:  # however fast the synthetic step benchmark is ...
        for entry in run["modes"].values():
            entry["words_per_s"] = 1e9
    bf16 = next(run for run in report["pretrain_cli"] if run["precision"] == "bf16")
    bf16["words_per_s_whole_run"], bf16["words_per_s_median_window"] = 49_999.0, 80_000.0  # ... and the warm windows
    block = readme_speed.render(path, report)
    pretraining = _line(block, "- **pretraining**")
    assert "**49,999 words/s over the whole run**" in pretraining and pretraining.endswith(": **not met**.")
    step = _line(block, "- the training step alone")
    assert "1,000,000,000 words/s" in step and "judges no target" in step and "met" not in step
    bf16["words_per_s_whole_run"] = 50_000.0
    assert _line(readme_speed.render(path, report), "- **pretraining**").endswith(": **met**.")
    # without a measured `spacy-elmo pretrain` the target is not judged at all, whatever the step benchmark says
    report["pretrain_cli"] = [{"precision": "bf16", "error": "RuntimeError: CUDA out of memory"}]
    pretraining = _line(readme_speed.render(path, report), "- **pretraining**")
    assert "**not judged**" in pretraining and "**met**" not in pretraining
    del report["pretrain_cli"]
    assert "**not judged**" in _line(readme_speed.render(path, report), "- **pretraining**")


def test_figures_come_from_the_result_file():
    path, report = _newest()
    train = max(report["training"], key=lambda run: run["rows"])
    train["negatives"], train["vocab"] = 4096, 100_000
    block = readme_speed.render(path, report)
    assert "4,096 negatives over 100,000 words" in block and "793,471" not in block
    assert "GTX" not in block and "bilm-tf" not in block  # no unsourced comparison
    assert (
        f"](../{path.relative_to(path.parents[3]).as_posix()})" in block
    )  # the result file, linked from docs/performance.md


def test_bf16_speedup_is_the_ratio_of_the_recorded_runs():
    path, report = _newest()
    cli = {run["precision"]: run for run in report["pretrain_cli"]}
    cli["bf16"]["words_per_s_whole_run"], cli["fp32"]["words_per_s_whole_run"] = 30_000.0, 20_000.0
    cli["bf16"]["words_per_s_median_window"], cli["fp32"]["words_per_s_median_window"] = 42_000.0, 20_000.0
    text = readme_speed.render_bf16(path, report)
    assert "1.50–2.10× the words/s" in text and "1.50× fp32's words/s over the whole run (30,000 vs 20,000)" in text
    assert "](../bench/results/" in text  # linked from docs/
    report["pretrain_cli"] = [cli["bf16"]]
    assert "not measured end to end" in readme_speed.render_bf16(path, report)


def test_the_measured_tree_state_is_stated():
    path, report = _newest()
    report.pop("git", None)
    assert "tree state not recorded" in readme_speed.render(path, report)
    report["git"] = {"commit": "a" * 40, "dirty": False, "dirty_paths": []}
    assert ", clean tree," in readme_speed.render(path, report)
    report["git"] = {"commit": "a" * 40, "dirty": True, "dirty_paths": ["bench/gpu.py"]}
    assert "dirty tree: `bench/gpu.py`" in readme_speed.render(path, report)


def test_a_run_that_stopped_part_way_is_not_the_source(tmp_path):
    _, report = _newest()
    complete = dict(report, started="2026-01-01T00:00:00")
    partial = {key: value for key, value in report.items() if key not in ("pretrain_cli", "pipe")}
    partial["started"] = "2026-12-31T00:00:00"
    for name, record in (("gpu_old", complete), ("gpu_new_partial", partial)):
        (tmp_path / "bench" / "results" / name).mkdir(parents=True)
        (tmp_path / "bench" / "results" / name / "gpu.json").write_text(json.dumps(record), encoding="utf-8")
    path, chosen = readme_speed.newest_result(tmp_path)
    assert path.parent.name == "gpu_old" and chosen["started"] == "2026-01-01T00:00:00"
