"""results/precision_error.md (the table docs/performance.md cites) is written from results/precision_error.json,
which lab/benchmarks/precision_error.py measures on the fixture biLMs through `ElmoModel.set_precision` (issue 33: no
typed figures; issue 42: from a clean tree)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "precision_error.json"


def test_the_table_is_what_the_results_file_renders(script, tmp_path):
    precision = script("benchmarks.precision_error")
    assert precision.main(["table", "--check"]) == 0
    copy = tmp_path / RESULTS.name
    shutil.copy(RESULTS, copy)
    table = RESULTS.with_suffix(".md").read_text(encoding="utf8")
    copy.with_suffix(".md").write_text(table.replace("| int8 |", "| int8  |", 1), encoding="utf8")
    assert precision.main(["table", "--check", "--results", str(copy)]) == 1  # a hand edit
    result = json.loads(RESULTS.read_text())
    assert f"{result['fixtures']['AllenNLP']['int8']['max_abs']:.1e}" in table
    git = result["provenance"]["git"]
    assert git["dirty"] is False and git["dirty_paths"] == [], "measured with uncommitted code"


def test_the_recorded_errors_are_what_the_fixture_biLMs_give(script, one_torch_thread):
    """Measured again here, the errors agree with the recorded ones (each precision where this CPU has
    its products), and are small and non-zero."""
    from spacy_elmo.kernels import capabilities

    precision = script("benchmarks.precision_error")
    recorded = json.loads(RESULTS.read_text())["fixtures"]["bilm-tf"]
    now = precision.measure_fixture("bilm-tf")
    assert ("bf16" in now) == capabilities.native_bf16_available()
    assert ("int8" in now) == capabilities.int8_available()
    if not now.keys() & recorded.keys():
        pytest.skip("no precision measured both here and in the record")
    for option in now.keys() & recorded.keys():
        assert 0 < now[option]["max_rel_percent"] < 2
        assert 0.5 < now[option]["max_abs"] / recorded[option]["max_abs"] < 2, (option, now[option], recorded[option])
