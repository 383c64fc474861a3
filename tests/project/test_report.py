"""lab/reports/report.py (metrics.json, table.md, seeds.json, figures, publish): the tables and figures the results page
cites."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(script):
    return script("reports.report")


def test_only_the_gains_writer_splices_a_generated_region():
    """Scripts write table files that pages cite; lab/reports/gains.py alone puts its two tables between markers
    (tests/project/test_gains.py checks its splice), and no other module splits text at a start marker."""
    others = [
        p.relative_to(ROOT).as_posix()
        for folder in ("lab", "spacy_elmo")
        for p in (ROOT / folder).rglob("*.py")
        if p.name != "gains.py" and re.search(r"\.split\((?:START|[A-Z_]*_START|start)\b", p.read_text(encoding="utf8"))
    ]
    assert others == []


def test_seeds_mean_std_and_paired_gains(report, tmp_path):
    scores = {
        ("baseline", 0): 0.6924,
        ("baseline", 1): 0.6810,
        ("baseline", 2): 0.7002,
        ("elmo", 0): 0.7282,
        ("elmo", 1): 0.7190,
        ("elmo", 2): 0.7301,
    }
    metrics = tmp_path / "metrics_seeds"
    metrics.mkdir()
    for (system, seed), f in scores.items():
        (metrics / f"ner_{system}_10_s{seed}.json").write_text(json.dumps({"ents_f": f, "ents_p": f, "ents_r": f}))
    (metrics / "ner_elmo_10_s0.provenance.json").write_text("{}")  # not a score file
    out = tmp_path / "results"
    assert report.main(["seeds", "--metrics-dir", str(metrics), "--out", str(out)]) == 0
    cell = json.loads((out / "seeds.json").read_text())["summary"]["ner"]["10"]
    base = [round(scores["baseline", s] * 100, 2) for s in range(3)]
    gains = [round(round(scores["elmo", s] * 100, 2) - base[s], 2) for s in range(3)]
    assert cell["baseline"] == {
        "per_seed": {"0": 69.24, "1": 68.1, "2": 70.02},
        "mean": round(statistics.fmean(base), 2),
        "std": round(statistics.stdev(base), 2),
        "n": 3,
    }
    assert cell["gain"]["per_seed"] == {"0": gains[0], "1": gains[1], "2": gains[2]}
    assert cell["gain"]["mean"] == round(statistics.fmean(gains), 2) and cell["gain"]["std"] == round(
        statistics.stdev(gains), 2
    )


def test_seeds_refuses_elmo_runs_of_two_biLMs(report, tmp_path):
    """The headline compares cells, so every ELMo run it reads must come from one biLM: committed records that
    name two model.safetensors sha256 stop the report, naming the runs of each (issue 33)."""
    metrics, records, out = tmp_path / "metrics_seeds", tmp_path / "records", tmp_path / "results"
    metrics.mkdir(), records.mkdir()
    for system in ("baseline", "elmo"):
        for seed in range(2):
            (metrics / f"ner_{system}_10_s{seed}.json").write_text(json.dumps({"ents_f": 0.7}))
    record = {"test": {"score_name": "ents_f", "score": 70.0}}
    for seed, sha in ((0, "a" * 64), (1, "a" * 64)):
        (records / f"ner_elmo_10_s{seed}.json").write_text(json.dumps({**record, "bilm_sha256": sha}))
    args = ["seeds", "--metrics-dir", str(metrics), "--out", str(out), "--records", str(records)]
    assert report.main(args) == 0  # one biLM: reported
    (records / "ner_elmo_10_s1.json").write_text(json.dumps({**record, "bilm_sha256": "b" * 64}))
    with pytest.raises(SystemExit) as stop:
        report.main(args)
    assert "2 different biLMs" in str(stop.value) and "aaaaaaaaaaaa: ner_elmo_10_s0" in str(stop.value)
    assert "bbbbbbbbbbbb: ner_elmo_10_s1" in str(stop.value)


def _run(path: Path, f1: float, seed: int, provenance: bool = True) -> None:
    (path / "model-best").mkdir(parents=True)
    (path / "model-best" / "meta.json").write_text(json.dumps({"performance": {"ents_f": f1, "ents_p": f1}}))
    if provenance:
        (path / "provenance.json").write_text(
            json.dumps({"seed": seed, "started_utc": "2026-11-26T10:00:00Z", "ended_utc": "2026-11-26T10:10:00Z"})
        )


def _bilm(path: Path, step: int, ppl: float) -> None:
    path.mkdir(parents=True)
    (path / "pretrain_summary.json").write_text(
        json.dumps({"step": step, "heldout_ppl": ppl, "train_seconds": step * 0.6})
    )


def test_provenance_of_same_named_folders_in_two_checkouts_is_kept_for_both(report, tmp_path):
    """A before/after comparison reads work/bilm_zh of two checkouts: neither record may hide the other."""
    for checkout, start in (("before", "2026-11-27T01:02:20Z"), ("after", "2026-11-27T08:11:29Z")):
        folder = tmp_path / checkout / "work" / "bilm_zh"
        folder.mkdir(parents=True)
        (folder / "provenance.json").write_text(json.dumps({"started_utc": start}))
    found = report.find_provenance([tmp_path / "before" / "work" / "bilm_zh", tmp_path / "after" / "work" / "bilm_zh"])
    assert sorted(r["started_utc"] for r in found.values()) == ["2026-11-27T01:02:20Z", "2026-11-27T08:11:29Z"]
    assert "work/bilm_zh" in found  # the short label is still the first one's


def test_publish_keeps_the_config_an_earlier_result_points_to(report, tmp_path):
    results, run = tmp_path / "results", tmp_path / "run"
    (results / "configs").mkdir(parents=True)
    (run / "configs").mkdir(parents=True)
    (results / "configs" / "ner_elmo.cfg").write_text("[old]\n", encoding="utf-8")
    (run / "configs" / "ner_elmo.cfg").write_text("[new]\n", encoding="utf-8")
    (run / "configs" / "other.cfg").write_text("[other]\n", encoding="utf-8")
    new_digest, other_digest = (
        report._sha256(run / "configs" / "ner_elmo.cfg"),
        report._sha256(run / "configs" / "other.cfg"),
    )
    record = {"score": 1.0, "provenance": {"configs": {"ner_elmo.cfg": new_digest, "other.cfg": other_digest}}}
    (run / "recipes.json").write_text(json.dumps(record), encoding="utf-8")
    (run / "recipes.png").write_bytes(b"png")
    (run / "untouched.json").write_text('{"a":  1}', encoding="utf-8")
    renamed = report.publish_folder(run, results)
    kept = f"ner_elmo.{new_digest[:8]}.cfg"
    assert renamed == {"ner_elmo.cfg": kept}
    assert (results / "configs" / "ner_elmo.cfg").read_text() == "[old]\n"  # what the earlier result recorded
    assert (results / "configs" / kept).read_text() == "[new]\n"
    assert (results / "configs" / "other.cfg").read_text() == "[other]\n"
    published = json.loads((results / "recipes.json").read_text())
    assert published["provenance"]["configs"] == {kept: new_digest, "other.cfg": other_digest}
    assert published["score"] == 1.0 and (results / "recipes.png").read_bytes() == b"png"
    assert (results / "untouched.json").read_bytes() == (run / "untouched.json").read_bytes()  # copied byte for byte
    # publishing the same run again changes nothing: its config now has a file of its own
    assert report.publish_folder(run, results) == {"ner_elmo.cfg": kept}
    assert sorted(p.name for p in (results / "configs").iterdir()) == sorted(["ner_elmo.cfg", kept, "other.cfg"])


def test_collect_records_make_mains_start(report, tmp_path):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    (metrics_dir / "baseline_10.json").write_text(json.dumps({"ents_f": 0.5, "ents_p": 0.5, "ents_r": 0.5}))
    assert (
        report.main(
            [
                "collect",
                "--metrics-dir",
                str(metrics_dir),
                "--training-dir",
                str(tmp_path / "none"),
                "--out",
                str(tmp_path / "out"),
                "--make-started",
                "2026-11-27T07:20:00Z",
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["make_main"] == {
        "started_utc": "2026-11-27T07:20:00Z"
    }
    assert (
        report.main(
            [
                "collect",
                "--metrics-dir",
                str(metrics_dir),
                "--training-dir",
                str(tmp_path / "none"),
                "--out",
                str(tmp_path / "out2"),
                "--make-started",
                "",
            ]
        )
        == 0
    )
    assert "make_main" not in json.loads((tmp_path / "out2" / "metrics.json").read_text())


def test_configs_of_runs_from_earlier_sessions_come_from_their_recorded_commit(report, tmp_path):
    """A run reused from its committed record has no output folder here: the config it used is read from git at the
    commit its provenance records, and kept only when its sha256 is the recorded one."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    text = subprocess.run(
        ["git", "show", "HEAD:configs/ner_baseline.cfg"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    import hashlib

    digest = hashlib.sha256(text).hexdigest()

    def step(sha):
        entry = {"path": "configs/ner_baseline.cfg", "sha256": sha, "copy": str(tmp_path / "gone" / "ner_baseline.cfg")}
        return {"git": {"commit": head.strip(), "dirty": False}, "configs": [entry]}

    assert report.copy_configs({"training_seeds/ner_baseline_10_s0": step(digest)}, tmp_path / "a") == {
        "ner_baseline.cfg": digest
    }
    assert (tmp_path / "a" / "configs" / "ner_baseline.cfg").read_bytes() == text
    # the file at that commit is not the config the run recorded (it was uncommitted then): nothing is claimed
    assert report.copy_configs({"training_seeds/ner_baseline_10_s0": step("0" * 64)}, tmp_path / "b") == {}
    assert not (tmp_path / "b").exists()
