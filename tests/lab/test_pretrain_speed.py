"""lab/benchmarks/pretrain_speed.py: alternates the pretraining command of two trees, records each run's steady
speed and lists finished pretrainings' held-out perplexity."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import write_grammar_corpus  # tests/ is on sys.path
from lab.benchmarks import pretrain_speed


@pytest.mark.slow
def test_pretrain_speed_alternates_the_trees_and_writes_its_tables(tmp_path):
    text = tmp_path / "train.txt"
    write_grammar_corpus(text, 400, seed=0)
    model = tmp_path / "model"  # a finished pretraining, as the --models table reads it
    model.mkdir()
    (model / "pretrain_summary.json").write_text(json.dumps({"step": 60, "heldout_ppl": 12.345}))
    (model / "provenance.json").write_text(json.dumps({"seed": 1, "git": {"commit": "a" * 40}}))
    shutil.copy(pretrain_speed.ROOT / "configs" / "pretrain_tiny.cfg", model / "pretrain.cfg")
    out = tmp_path / "speed.json"
    args = ["--baseline-tree", str(pretrain_speed.ROOT), "--text", str(text), "--config", "configs/pretrain_tiny.cfg"]
    args += ["--variants", "fp32", "--steps", "60", "--rounds", "1", "--models", str(model), "--out", str(out)]
    assert pretrain_speed.main(args) == 0
    record = json.loads(out.read_text())
    baseline, fp32 = record["rows"]
    assert baseline["run"].startswith("baseline ") and fp32["run"] == "fp32"
    assert all(len(row["runs"]) == 1 and row["median"] > 0 for row in record["rows"])
    assert fp32["vs_baseline"] == pytest.approx(fp32["median"] / baseline["median"], abs=1e-3)
    assert record["models"] == [
        {"model": record["models"][0]["model"], "precision": "fp32", "seed": 1, "step": 60, "heldout_ppl": 12.35,
         "commit": "a" * 40}
    ]  # fmt: skip
    assert not any(part.startswith("/") for part in record["command"].split())  # no folder of this machine
    assert record["machine"]["cpu"] and record["git"]["commit"] and record["config"] == "configs/pretrain_tiny.cfg"
    table = out.with_suffix(".md").read_text()
    assert f"| fp32 | {fp32['runs'][0]['words_per_s']:,.0f} | {fp32['median']:,.0f} |" in table
    assert "| fp32 | 1 | 60 | 12.35 | aaaaaaa |" in table
