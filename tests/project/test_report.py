"""lab/report.py: the experiment's report (results/README.md) and the README's summary of it are generated from
results/, never typed."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = [sys.executable, "-m", "lab.report"]


@pytest.fixture(scope="module")
def report(script):
    return script("report")


@pytest.fixture(scope="module")
def readme_results(report):
    from lab import readme_results

    return readme_results


def _check(results: Path, readme: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*REPORT, "readme", "--check", "--results", str(results), "--readme", str(readme)],
        capture_output=True,
        text=True,
    )


def test_readme_results_section_is_what_the_report_writes_now(readme_results):
    """Byte for byte: results/README.md between the markers == render_section(results/), and README.md's summary
    and set-up sentence == what the same writer (`pages`) gives."""
    page = (ROOT / "results" / "README.md").read_text(encoding="utf8")
    section = readme_results.render_section(ROOT / "results", ROOT / "results" / "README.md")
    assert readme_results.splice(page, section) == page, (
        "results/README.md is stale: run `python scripts/report.py readme`"
    )
    for path, (current, new) in readme_results.pages(ROOT / "results", readme=ROOT / "README.md").items():
        assert new == current, f"{path} is stale: run `python scripts/report.py readme`"
    done = _check(ROOT / "results", ROOT / "README.md")
    assert done.returncode == 0, done.stderr
    # every published result now carries its provenance; one without it would be said to lack it
    assert "provenance not recorded" not in section
    assert "provenance not recorded" in readme_results.provenance_lines("similar_zh.md", None)[0]
    # neighbour lists go in exactly as similar_report.py wrote them
    assert (ROOT / "results" / "similar.md").read_text(encoding="utf8").rstrip("\n") in section


def test_check_fails_on_a_hand_edit_or_a_changed_result(report, tmp_path):
    results, readme = tmp_path / "results", tmp_path / "README.md"
    shutil.copytree(ROOT / "results", results)
    page = results / "README.md"
    page.write_text("intro\n\n<!-- results:start -->\n<!-- results:end -->\n\nafter\n", encoding="utf8")
    readme.write_text("top\n\n<!-- results-summary:start -->\n<!-- results-summary:end -->\n\nend\n", encoding="utf8")
    assert subprocess.run([*REPORT, "readme", "--results", str(results), "--readme", str(readme)]).returncode == 0
    text = page.read_text(encoding="utf8")
    assert text.startswith("intro\n\n<!-- results:start -->") and text.endswith("<!-- results:end -->\n\nafter\n")
    assert "![F1 by training fraction](f1_by_fraction.png)" in text  # links relative to the page
    summary = readme.read_text(encoding="utf8")
    assert summary.startswith("top\n\n<!-- results-summary:start -->") and summary.endswith(
        "<!-- results-summary:end -->\n\nend\n"
    )
    assert "[results/README.md](results/README.md)" in summary and "| ner (test F1) | 10% |" in summary
    assert _check(results, readme).returncode == 0
    for path, before in ((page, text), (readme, summary)):
        typed = re.sub(
            r"(\| (?:elmo|ner \(test F1\) \| 10%) \| )(\d+\.\d+)",
            lambda m: m.group(1) + f"{float(m.group(2)) + 2:.2f}",
            before,
            count=1,
        )
        assert typed != before
        path.write_text(typed, encoding="utf8")  # a typed number
        done = _check(results, readme)
        assert done.returncode == 1 and "differs" in done.stderr and str(path) in done.stderr
        path.write_text(before, encoding="utf8")
    metrics = json.loads((results / "metrics.json").read_text())
    metrics["ner"]["elmo"]["10"]["ents_f"] = 71.0  # a result changed, the report not regenerated
    (results / "metrics.json").write_text(json.dumps(metrics))
    assert _check(results, readme).returncode == 1
    seeds = json.loads((results / "seeds.json").read_text())
    seeds["summary"]["ner"]["10"]["gain"]["mean"] = 9.99  # a headline figure changed: both pages are stale
    (results / "seeds.json").write_text(json.dumps(seeds))
    written = report.main(["readme", "--results", str(results), "--readme", str(readme)])
    assert written == 0 and "+9.99" in readme.read_text(encoding="utf8") and "+9.99" in page.read_text(encoding="utf8")


def test_one_helper_splices_every_generated_region(script):
    """scripts/doc_regions.py is the one marker-splicing helper: the report, the bench writers and the precision
    table all go through it, and it keeps the text outside the markers as it was."""
    regions = script("doc_regions")
    text = "a <!-- x:start -->old<!-- x:end --> b"
    assert regions.splice(text, "x", "new") == "a <!-- x:start -->new<!-- x:end --> b"
    assert regions.region(regions.splice(text, "x", "\nnew\n"), "x") == "\nnew\n"
    assert regions.splice("no markers", "x", "new", missing_ok=True) == "no markers"
    with pytest.raises(SystemExit, match="page.md has no <!-- x:start -->"):
        regions.splice("no markers", "x", "new", where="page.md")
    writers = {"lab/readme_results.py", "lab/report.py", "lab/precision_error.py"}
    for name in writers:
        assert "import doc_regions" in (ROOT / name).read_text(encoding="utf8"), name
    # no other module splits text at a start marker itself
    others = [
        p.relative_to(ROOT).as_posix()
        for folder in ("lab", "spacy_elmo")
        for p in (ROOT / folder).rglob("*.py")
        if p.name != "doc_regions.py"
        and re.search(r"\.split\((?:START|[A-Z_]*_START|start)\b", p.read_text(encoding="utf8"))
    ]
    assert others == []


def _record(commit="a" * 40, dirty=(), start="2026-11-27T10:00:00Z", end="2026-11-27T10:30:00Z", seed=0):
    return {
        "git": {"commit": commit, "dirty": bool(dirty), "dirty_paths": list(dirty)},
        "seed": seed,
        "machine": {
            "cpu": "AMD EPYC",
            "cores": 2,
            "memory_gib": 23.5,
            "python": "3.11.7",
            "torch": "2.13.0",
            "spacy": "3.8.18",
            "transformers": "5.24.0",
            "gpu": None,
        },
        "started_utc": start,
        "ended_utc": end,
        "configs": [],
    }


def test_provenance_clean_dirty_and_step_times(readme_results, tmp_path):
    metrics = json.loads((ROOT / "results" / "metrics.json").read_text())
    metrics["provenance"] = {
        "report": _record(start="2026-11-27T11:00:00Z", end="2026-11-27T11:01:00Z"),
        "steps": {
            "work/bilm": _record(end="2026-11-27T10:37:48Z"),
            "training/elmo_10": _record(start="2026-11-27T10:38:00Z", end="2026-11-27T10:49:12Z"),
        },
        "configs": {"ner_elmo.cfg": "b" * 64},
    }
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    section = readme_results.render_section(tmp_path, tmp_path / "README.md")
    assert "provenance not recorded" not in section.split("#### Seeds")[0]
    assert f"commit `{'a' * 12}` (clean tree)" in section and "DIRTY" not in section
    assert "2026-11-27T10:00:00Z – 2026-11-27T11:01:00Z UTC" in section and "AMD EPYC, 2 cores" in section
    assert "| work/bilm | 37.8 |" in section and "| training/elmo_10 | 11.2 |" in section
    assert "`configs/ner_elmo.cfg` (sha256 bbbbbbbbbbbb)" in section
    metrics["provenance"]["steps"]["training/elmo_10"] = _record(dirty=["configs/ner_elmo.cfg"])
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    section = readme_results.render_section(tmp_path, tmp_path / "README.md")
    assert "DIRTY TREE" in section and "`configs/ner_elmo.cfg`" in section
    # the run records and test-look ledger that earlier steps of the workflow wrote are its outputs, not a dirty tree
    metrics["provenance"]["steps"]["training/elmo_10"] = _record(
        dirty=["results/runs/training_seeds/ner_elmo_10_s0.json", "results/test_looks.json"]
    )
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    section = readme_results.render_section(tmp_path, tmp_path / "README.md")
    assert "DIRTY" not in section and "uncommitted" not in section
    assert "(clean tree but for the run records and test-look ledger that the workflow writes)" in section
    metrics["provenance"]["steps"]["training/elmo_10"] = _record(dirty=["results/test_looks.json", "scripts/x.py"])
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    section = readme_results.render_section(tmp_path, tmp_path / "README.md")
    assert "DIRTY TREE" in section and "(dirty tree: `scripts/x.py`)" in section
    # steps run on two machines (a seeds run whose records span sessions): both are named
    metrics["provenance"]["steps"]["training/elmo_10"] = _record()
    metrics["provenance"]["steps"]["training/elmo_10"]["machine"]["cpu"] = "Intel Xeon"
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    section = readme_results.render_section(tmp_path, tmp_path / "README.md")
    assert "2 machines: AMD EPYC, 2 cores" in section and "; Intel Xeon, 2 cores" in section


def test_seeds_mean_std_and_paired_gains(readme_results, report, tmp_path):
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
    section = readme_results.render_section(out, tmp_path / "README.md")
    assert f"{statistics.fmean(gains):+.2f} ± {statistics.stdev(gains):.2f} (n=3)" in section
    assert "s1: 68.10 / 71.90 / +3.80" in section


def test_the_page_shows_the_cells_redone_with_the_project_biLM(readme_results, tmp_path):
    """While the ELMo runs are redone with results/bilm, the page lists the redone cells from their records
    (per-seed scores, paired gains, the goal), and says nothing once one biLM remains."""
    runs = tmp_path / "runs" / "training_seeds"
    runs.mkdir(parents=True)
    (tmp_path / "bilm").mkdir()
    (tmp_path / "bilm" / "published.json").write_text(json.dumps({"files": {"model.safetensors": "a" * 64}}))

    def record(system, seed, score, sha=None):
        body = {"task": "pos", "fraction": "10", "system": system, "seed": seed, "test": {"score": score}}
        (runs / f"pos_{system}_10_s{seed}.json").write_text(json.dumps({**body, "bilm_sha256": sha}))

    for seed, (base, elmo) in enumerate([(92.11, 93.35), (92.21, 93.35), (92.15, 93.18)]):
        record("baseline", seed, base)
        record("elmo", seed, elmo, "a" * 64)
    assert readme_results.redo_lines(tmp_path) == []  # one biLM: the headline is built from these records
    (runs / "ner_elmo_10_s0.json").write_text(
        json.dumps(
            {
                "task": "ner",
                "fraction": "10",
                "system": "elmo",
                "seed": 0,
                "test": {"score": 75.0},
                "bilm_sha256": "b" * 64,
            }
        )
    )
    lines = readme_results.redo_lines(tmp_path)
    assert lines[0].startswith("**Being redone:** 3 of the 4 ELMo runs")
    gains = [1.24, 1.14, 1.03]
    assert lines[2] == (
        "- pos 10% (test accuracy): s0: 92.11 / 93.35 / +1.24, s1: 92.21 / 93.35 / +1.14, s2: 92.15 / 93.18 / +1.03; "
        f"paired gain {statistics.fmean(gains):+.2f} ± {statistics.stdev(gains):.2f} (n=3), goal ≥ +1.00: met"
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


def test_a_cells_settings_beyond_its_config_are_read_from_its_runs_commands(readme_results):
    """The headline names what a cell was trained with beyond its config (the seeds run's fine-tuning at 10%),
    from the recorded commands, and says nothing when every cell used its config as published."""

    def run(name, *extra):
        return {
            "command": [
                "python",
                "-m",
                "spacy",
                "train",
                "configs/ner_elmo.cfg",
                "--output",
                f"work/training_seeds/{name}",
                "--paths.train",
                "t",
                "--system.seed",
                name[-1],
                "--gpu-id",
                "-1",
                "--paths.elmo",
                "work/bilm",
                *extra,
            ]
        }

    tuned = ("--training.frozen_components", "[]", "--components.elmo.fine_tune_layers", "1")
    steps = {f"training_seeds/ner_elmo_10_s{s}": run(f"ner_elmo_10_s{s}", *tuned) for s in range(3)}
    steps |= {f"training_seeds/ner_elmo_100_s{s}": run(f"ner_elmo_100_s{s}") for s in range(3)}
    steps["metrics_seeds/ner_elmo_10_s0"] = {"command": ["python", "-m", "spacy", "evaluate", "x"]}
    [line, blank] = readme_results.cell_settings_lines({"steps": steps})
    assert (
        line
        == (
            "Settings beyond a cell's config, from its runs' recorded `spacy train` commands: ner elmo 10%: "
            "`--training.frozen_components [] --components.elmo.fine_tune_layers 1` (the biLM's top layers fine-tuned "
            "with the task). Every other cell: its config as published, the biLM frozen."
        )
        and blank == ""
    )
    steps["training_seeds/ner_elmo_10_s2"] = run("ner_elmo_10_s2")  # one seed without: both shown, not hidden
    assert (
        "ner elmo 10%: none / `--training.frozen_components []"
        in readme_results.cell_settings_lines({"steps": steps})[0]
    )
    for s in range(3):
        steps[f"training_seeds/ner_elmo_10_s{s}"] = run(f"ner_elmo_10_s{s}")
    assert readme_results.cell_settings_lines({"steps": steps}) == []


def test_goals_and_wall_time_are_stated_from_the_records(readme_results):
    summary = {
        "ner": {"10": {"gain": {"mean": 6.2, "n": 3}}, "100": {"gain": {"mean": 1.16, "n": 3}}},
        "pos": {"10": {"gain": {"mean": 1.5, "n": 1}}},
    }
    line = readme_results.goal_lines(summary)[0]
    assert (
        "ner 10%: ≥ +6.00 — met (+6.20, mean of 3 seed(s))" in line and "ner 100%: ≥ +2.00 — **not met** (+1.16" in line
    )
    # POS at 10% has a goal too; one seed above it is not called met
    assert "pos 10%: ≥ +1.00 — not judged (+1.50 from 1 seed(s); the goal is a mean over 3)" in line
    summary["pos"]["10"]["gain"] = {"mean": 0.8, "n": 3}
    assert "pos 10%: ≥ +1.00 — **not met** (+0.80, mean of 3 seed(s))" in readme_results.goal_lines(summary)[0]
    assert "— not measured" in readme_results.goal_lines({})[0]
    record = lambda command, start, end: {
        "command": command,
        "started_utc": start,
        "ended_utc": end,
        "git": {"commit": "a" * 40},
    }
    steps = {
        "work/bilm": record(
            ["python", "-m", "spacy_elmo", "pretrain", "x.cfg"], "2026-11-26T11:33:00Z", "2026-11-26T12:08:00Z"
        ),
        "training_seeds/a": record(["python", "-m", "spacy", "train"], "2026-11-26T13:00:00Z", "2026-11-26T13:50:00Z"),
        "metrics_seeds/a": record(
            ["python", "-m", "spacy", "evaluate"], "2026-11-26T13:50:00Z", "2026-11-26T14:30:00Z"
        ),
    }
    text = readme_results.seeds_time_lines({"steps": steps})[0]
    assert (
        "ran 90.0 min (first start to last end of their records)" in text
        and "pretrained in 35.0 min" in text
        and "125.0 min together, within the 150-minute" in text
    )
    steps["metrics_seeds/a"]["ended_utc"] = "2026-11-26T15:00:00Z"
    assert "155.0 min together, **over** the 150-minute" in readme_results.seeds_time_lines({"steps": steps})[0]
    # a baseline reused from an earlier seeds run (it does not depend on the biLM) is named and added, not spanned
    steps["metrics_seeds/a"]["ended_utc"] = "2026-11-26T14:30:00Z"
    steps["training_seeds/b"] = record(
        ["python", "-m", "spacy", "train"], "2026-11-25T09:00:00Z", "2026-11-25T09:20:00Z"
    )
    text = readme_results.seeds_time_lines({"steps": steps})[0]
    assert "ran 90.0 min" in text and "they reused training_seeds/b, finished earlier" in text
    assert "(20.0 min while any of them ran, from 2026-11-25T09:00:00Z)" in text
    assert "145.0 min together, within the 150-minute" in text
    # reused steps that ran apart, with that run's other steps between them, add only their own time
    steps["metrics_seeds/b"] = record(
        ["python", "-m", "spacy", "evaluate"], "2026-11-25T10:00:00Z", "2026-11-25T10:05:00Z"
    )
    steps["training_seeds/c"] = record(
        ["python", "-m", "spacy", "train"], "2026-11-25T09:10:00Z", "2026-11-25T09:30:00Z"
    )
    text = readme_results.seeds_time_lines({"steps": steps})[0]
    assert "(35.0 min while any of them ran, from 2026-11-25T09:00:00Z)" in text  # 09:00–09:30 and 10:00–10:05
    assert "160.0 min together, **over** the 150-minute" in text
    # a cell retrained in a later sitting (a changed setting): the hours between sittings are not the run's
    del steps["metrics_seeds/b"], steps["training_seeds/c"]
    steps["training_seeds/d"] = record(
        ["python", "-m", "spacy", "train"], "2026-11-26T20:00:00Z", "2026-11-26T20:30:00Z"
    )
    text = readme_results.seeds_time_lines({"steps": steps})[0]
    assert (
        "ran 120.0 min (while any of their records ran: they ran in more than one sitting, 450.0 min from first start "
        "to last end)"
    ) in text and "175.0 min together, **over** the 150-minute" in text


def test_all_wall_time_and_a_seeds_run_on_an_earlier_bilm_are_stated_from_the_records(readme_results):
    """make main's hour is judged from the `all` run's own records (first start to the report's end), and the
    headline warns when its seeds were trained on another biLM than the last `all` run pretrained."""
    record = lambda command, start, end: {
        "command": command,
        "started_utc": start,
        "ended_utc": end,
        "git": {"commit": "b" * 40},
    }
    pretrain = lambda start, steps: record(
        ["python", "-m", "spacy_elmo", "pretrain", "x.cfg", "--training.max_steps", steps],  # noqa: E731
        start,
        "2026-11-27T08:05:00Z",
    )
    block = {
        "report": record(["scripts/report.py", "collect"], "2026-11-27T08:26:00Z", "2026-11-27T08:27:30Z"),
        "steps": {
            "work/bilm": pretrain("2026-11-27T07:30:00Z", "4400"),
            "training/elmo_10": record(
                ["python", "-m", "spacy", "train"], "2026-11-27T08:05:00Z", "2026-11-27T08:20:00Z"
            ),
        },
    }
    line = readme_results.all_time_lines(block)[0]
    assert (
        "57 min 30 s from the first recorded start to the report's end" in line
        and "within the 60-minute budget" in line
    )
    block["report"]["ended_utc"] = "2026-11-27T08:29:59Z"  # 59 min 59 s: within, and shown to the second
    assert (
        "59 min 59 s" in readme_results.all_time_lines(block)[0]
        and "within the 60-minute" in readme_results.all_time_lines(block)[0]
    )
    block["report"]["ended_utc"] = "2026-11-27T08:31:00Z"
    assert (
        "61 min 0 s" in readme_results.all_time_lines(block)[0]
        and "**over** the 60-minute" in readme_results.all_time_lines(block)[0]
    )
    assert readme_results.all_time_lines({}) == []
    # a step reused from an earlier run (the baselines after a new biLM) is named and added to the verdict, not spanned
    block["report"]["ended_utc"] = "2026-11-27T08:27:30Z"
    block["steps"]["training/baseline_10"] = record(
        ["python", "-m", "spacy", "train"], "2026-11-27T01:00:00Z", "2026-11-27T01:08:24Z"
    )
    line = readme_results.all_time_lines(block)[0]
    assert (
        "57 min 30 s from the first recorded start" in line
        and "It reused training/baseline_10, finished earlier" in line
    )
    assert "(8.4 min while any of them ran, from 2026-11-27T01:00:00Z)" in line
    assert "a run from scratch takes about 65 min 54 s, **over** the 60-minute" in line
    block["steps"]["training/baseline_10"]["ended_utc"] = "2026-11-27T01:02:00Z"
    assert "about 59 min 30 s, within the 60-minute" in readme_results.all_time_lines(block)[0]
    del block["steps"]["training/baseline_10"]
    seeds = {"steps": {"work/bilm": pretrain("2026-11-26T11:33:02Z", "3500")}}
    warning = readme_results.shared_bilm_lines(seeds, block)[0]
    assert (
        "earlier biLM" in warning
        and "2026-11-26T11:33:02Z" in warning
        and "3500 steps" in warning
        and "4400 steps" in warning
    )
    assert (
        readme_results.shared_bilm_lines({"steps": {"work/bilm": pretrain("2026-11-27T07:30:00Z", "4400")}}, block)
        == []
    )
    # the committed project biLM, pretrained after the last `all` run: a later biLM, and why
    later = readme_results.shared_bilm_lines({"steps": {"bilm": pretrain("2026-11-28T12:10:34Z", "4400")}}, block)[0]
    assert "a later biLM" in later and "earlier" not in later and "`results/bilm`" in later
    assert readme_results.shared_bilm_lines(seeds, {}) == []
    metrics = {"provenance": block}
    assert warning in readme_results.headline_section(
        json.loads((ROOT / "results" / "seeds.json").read_text()) | {"provenance": seeds}, metrics
    )


def test_headline_states_each_cells_seed_count_from_the_data(readme_results, tmp_path):
    """Never "every cell with 3 seeds" when a cell has fewer: the count comes from seeds.json."""
    seeds = json.loads((ROOT / "results" / "seeds.json").read_text())
    counts = {
        (task, pct): cell["baseline"]["n"] for task, by_pct in seeds["summary"].items() for pct, cell in by_pct.items()
    }
    section = readme_results.render_section(ROOT / "results", ROOT / "README.md")
    headline = next(line for line in section.splitlines() if line.startswith("### Headline"))
    if len(set(counts.values())) > 1:
        assert "every cell" not in headline
    for (task, pct), n in counts.items():
        if n != max(counts.values(), key=list(counts.values()).count):
            assert f"{task} {pct}% ({n} seed" in headline, headline
    cell = lambda n: {"baseline": {"n": n}, "elmo": {"n": n}}  # noqa: E731
    assert readme_results.seed_counts({"ner": {"10": cell(3), "100": cell(3)}}) == "every cell with 3 seeds"
    assert (
        readme_results.seed_counts({"ner": {"10": cell(3), "100": cell(3)}, "pos": {"10": cell(3), "100": cell(1)}})
        == "3 seeds per cell except pos 100% (1 seed)"
    )
    assert (
        readme_results.seed_counts({"ner": {"10": cell(2), "100": cell(1)}, "pos": {"10": cell(2)}})
        == "2 seeds per cell except ner 100% (1 seed)"
    )
    (tmp_path / "seeds.json").write_text(
        json.dumps({**seeds, "summary": {"ner": {"10": seeds["summary"]["ner"]["10"]}}})
    )
    assert "### Headline: every cell with 3 seeds," in readme_results.render_section(tmp_path, tmp_path / "README.md")


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


def test_make_main_states_its_own_time_and_the_readme_none(readme_results, tmp_path):
    """Issue 33: `make main` records its start before building .venv (Makefile → --make-started → metrics.json);
    the report gives the time from there to the report's end and the pretraining speed."""
    report = {
        "started_utc": "2026-11-27T08:26:00Z",
        "ended_utc": "2026-11-27T08:27:30Z",
        "machine": {"cpu": "AMD EPYC", "cores": 2},
    }
    metrics = {
        "make_main": {"started_utc": "2026-11-27T07:20:00Z"},
        "pretrain_summary": {"words_per_s": 4476.9},
        "provenance": {"report": report, "steps": {"work/bilm": report}},
    }
    line = readme_results.make_main_time_lines(metrics)[0]
    assert "from its start (2026-11-27T07:20:00Z, before building `.venv`) to the report's end: 67 min 30 s" in line
    assert "4,477 words/s" in line and "**over** the 60-minute budget" in line
    assert readme_results.make_main_time_lines({"provenance": metrics["provenance"]}) == []  # not started by make main
    # the README states no time: a time without its load average and commit goes (issue 40); results/README.md has it
    assert "make-main-time" not in (ROOT / "README.md").read_text(encoding="utf8")


def test_collect_records_make_mains_start(report, tmp_path, capsys):
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
        "`make main` itself, from its start (2026-11-27T07:20:00Z, before building `.venv`)" in capsys.readouterr().out
    )
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
