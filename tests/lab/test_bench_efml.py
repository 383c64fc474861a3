"""lab/efml_speed.py measures both architectures on the same batches and writes what it measured."""

from __future__ import annotations

import json


def test_efml_speed_benchmark_runs_and_records(tmp_path, monkeypatch):
    from lab import efml_speed

    out = tmp_path / "efml.json"
    argv = [
        "--size",
        "tiny",
        "--rounds",
        "2",
        "--batches",
        "2",
        "--batch",
        "4",
        "--threads",
        "1",
        "--json",
        str(out),
    ]
    assert efml_speed.main(argv) == 0
    record = json.loads(out.read_text())
    assert set(record["words_per_s"]) == {"legacy", "efml"} and all(v > 0 for v in record["words_per_s"].values())
    assert len(record["ratio_by_round"]) == 2 and 0 < record["word_part_share"] < 1
    assert record["provenance"]["git"]["commit"] and record["provenance"]["machine"]["cores"] >= 1
    models = efml_speed.build_models("tiny", [["the", "cat"]])
    assert models["efml"][0].config.word_embedding_dim > 0 and models["legacy"][0].config.word_embedding_dim == 0
