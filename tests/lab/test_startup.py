"""lab/benchmarks/startup.py times the first commands a user runs and writes a record of what it measured and where."""

from __future__ import annotations

import json

import pytest

from lab.benchmarks import startup


@pytest.mark.slow
def test_startup_benchmark_runs_and_records(tmp_path):
    """One run of each command (no warm-up): the record's fields, not the times (a shared machine's)."""
    out = tmp_path / "startup.json"
    assert startup.main(["--runs", "1", "--warmups", "0", "--json", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    names = set(startup.commands())
    assert names >= {
        "spacy-elmo --version",
        "import torch, spacy",
        "import spacy_elmo",
        "import torch, spacy, spacy_elmo",
    }
    assert set(record["median_s"]) == names and all(record["median_s"][name] > 0 for name in names)
    assert all(len(record["by_run_s"][name]) == 1 for name in names) and record["runs"] == 1
    gap = record["median_s"]["import torch, spacy, spacy_elmo"] - record["median_s"]["import torch, spacy"]
    assert record["spacy_elmo_over_torch_spacy_s"] == pytest.approx(gap)
    assert {"torch", "spacy"} <= set(record["import_time_s"])  # where the import time goes, by package
    assert len(record["loadavg_before"]) == 3 and len(record["loadavg_after"]) == 3
    provenance = record["provenance"]
    assert provenance["git"]["commit"] and provenance["machine"]["cpu"] and provenance["machine"]["cores"] >= 1
    assert provenance["started_utc"] <= provenance["ended_utc"]
    written = (tmp_path / "startup.md").read_text(encoding="utf-8")  # the table docs/performance.md cites
    assert written == startup.table(record)
    assert f"| `import torch, spacy` | {record['median_s']['import torch, spacy']:.2f} |" in written
