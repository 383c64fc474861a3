"""`spacy project run smoke`: every step of the end-to-end workflow on a tiny slice, for real."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_project_smoke_workflow(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("project.yml", "configs", "scripts"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    if (ROOT / "assets" / "conll2003" / "train.txt").is_file():
        # reuse fetched data (the `assets` step then only verifies checksums); CI fetches for real
        shutil.copytree(ROOT / "assets", project / "assets", ignore=shutil.ignore_patterns("corpus"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "smoke", str(project)],
        cwd=project, env=env, capture_output=True, text=True, timeout=1500,
    )
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
    work = project / "work_smoke"
    results = work / "results"
    metrics = json.loads((results / "metrics.json").read_text())
    assert set(metrics["ner"]) == {"baseline", "elmo"}
    for system in ("baseline", "elmo"):
        assert set(metrics["ner"][system]) == {"10", "100"}
        assert all(0.0 <= m["ents_f"] <= 100.0 for m in metrics["ner"][system].values())
    # each ELMo pipeline learned a softmax over the 3 biLM layers for its NER listener
    for pipeline in ("elmo_10", "elmo_100"):
        weights = metrics["layer_weights"][pipeline]["ner"]
        assert len(weights) == 3 and abs(sum(weights) - 1.0) < 1e-3
    assert "| elmo |" in (results / "table.md").read_text()
    # dev F1 curves parsed from the train_ner.py logs: one per run, with eval steps in order
    assert set(metrics["dev_f1_by_step"]) == {"baseline_10", "baseline_100", "elmo_10", "elmo_100"}
    for points in metrics["dev_f1_by_step"].values():
        assert [step for step, _ in points] == sorted(step for step, _ in points) and len(points) >= 2
    for png in ("f1_by_fraction.png", "layer_weights.png", "dev_curves.png"):
        assert (results / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "nearest words" in (results / "similar.md").read_text().lower()
    zh = (results / "similar_zh.md").read_text()
    assert "| 北京 |" in zh and "in context" in zh
    assert "heldout_ppl" in metrics["pretrain_summary"]


def test_train_ner_reports_a_failed_run(tmp_path, capsys):
    """scripts/train_ner.py: a run that fails shows the end of its log and makes the script exit 1."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import train_ner
    finally:
        sys.path.pop(0)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train_10.spacy", "dev.spacy"):
        (corpus / name).write_bytes(b"")
    config = tmp_path / "broken.cfg"
    text = (ROOT / "configs" / "ner_baseline.cfg").read_text()
    assert 'factory = "ner"' in text
    config.write_text(text.replace('factory = "ner"', 'factory = "no_such_factory"'))
    code = train_ner.main([str(config), "--name", "x", "--fractions", "10", "--corpus", str(corpus), "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 1
    assert "[x_10] FAILED" in out and "no_such_factory" in out
    assert (tmp_path / "out" / "x_10.log").is_file()
    # even a failed run says what ran: its config (copied, hashed), seed and exit status
    prov = json.loads((tmp_path / "out" / "x_10" / "provenance.json").read_text())
    assert prov["exit_code"] == 1 and prov["seed"] == 0 and prov["configs"][0]["path"] == str(config)
    assert "no_such_factory" in (tmp_path / "out" / "x_10" / "configs" / "broken.cfg").read_text()


def test_zh_preprocess_strips_tags_and_joins_split_person_names():
    """People's Daily tags names as surname + given name ("江/nr 泽民/nr"): joined into one word."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import preprocess_zh
    finally:
        sys.path.pop(0)
    line = "19980101-01-001-002/m  主席/n  江/nr  泽民/nr  和/c  [中央/n  人民/n]nt  克林顿/nr  欧阳/nr  修/nr  、/w  李/nr  鹏/nr"
    assert preprocess_zh.parse_line(line) == ["主席", "江泽民", "和", "中央", "人民", "克林顿", "欧阳修", "、", "李鹏"]
    assert preprocess_zh.parse_line(line, join_compounds=True)[3] == "中央人民"
    assert preprocess_zh.parse_line("江/nr  泽民/nr", join_names=False) == ["江", "泽民"]
