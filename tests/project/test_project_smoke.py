"""`spacy project run smoke`: every step of the end-to-end workflow on a tiny slice, for real."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_elmo.provenance import portable

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_project_smoke_workflow(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("project.yml", "configs", "lab"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    if (ROOT / "assets" / "conll2003" / "train.txt").is_file():
        # reuse fetched data (the `assets` step then only verifies checksums); CI fetches for real
        shutil.copytree(ROOT / "assets", project / "assets", ignore=shutil.ignore_patterns("corpus"))
    else:  # the confirmation's data is committed: the project has it without fetching
        shutil.copytree(ROOT / "assets" / "confirmation", project / "assets" / "confirmation")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "project", "run", "smoke", str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    assert result.returncode == 0, (result.stdout[-4000:], result.stderr[-4000:])
    work = project / "work_smoke"
    results = work / "results"
    metrics = json.loads((results / "metrics.json").read_text())
    assert set(metrics["ner"]) == {"baseline", "elmo"}
    for system in ("baseline", "elmo"):
        assert set(metrics["ner"][system]) == {"10", "100"}
        assert all(0.0 <= m["ents_f"] <= 100.0 for m in metrics["ner"][system].values())
    # each ELMo pipeline learned a softmax over the 3 biLM layers for its NER listener, and training moved it
    for pipeline in ("elmo_10", "elmo_100"):
        weights = metrics["layer_weights"][pipeline]["ner"]
        assert len(weights) == 3 and abs(sum(weights) - 1.0) < 1e-3
        assert max(abs(w - 1 / 3) for w in weights) > 2e-3, (pipeline, weights)
    assert "| elmo |" in (results / "table.md").read_text()
    # dev F1 curves parsed from the train_ner.py logs: one per run, with eval steps in order
    assert set(metrics["dev_f1_by_step"]) == {"baseline_10", "baseline_100", "elmo_10", "elmo_100"}
    for run, points in metrics["dev_f1_by_step"].items():
        assert [step for step, _ in points] == sorted(step for step, _ in points) and len(points) >= 2
        # the trained model beats the untrained one (step 0) on dev
        assert points[0][0] == 0 and max(f1 for _, f1 in points[1:]) > points[0][1] + 1.0, (run, points)
    for system in ("baseline", "elmo"):  # and finds entities in test (tagging everything O scores 0)
        assert metrics["ner"][system]["100"]["ents_f"] > 1.0, metrics["ner"]
    for png in ("f1_by_fraction.png", "layer_weights.png", "dev_curves.png", "probe.png"):
        assert (results / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "nearest words" in (results / "similar.md").read_text().lower()
    zh = (results / "similar_zh.md").read_text()
    assert "| 北京 |" in zh and "in context" in zh
    assert "heldout_ppl" in metrics["pretrain_summary"]

    # provenance: every step that wrote a result or a training output recorded one
    steps = metrics["provenance"]["steps"]
    assert {
        "work_smoke/bilm",
        "training/baseline_10",
        "training/elmo_100",
        "metrics/baseline_10",
        "metrics/elmo_100",
        "results/similar",
    } <= set(steps), sorted(steps)
    for label, record in steps.items():
        assert len(record["git"]["commit"]) == 40 and record["machine"]["cores"] >= 1, label
        assert record["started_utc"] <= record["ended_utc"], label
    assert steps["training/elmo_10"]["seed"] == 0 and steps["training/elmo_10"]["exit_code"] == 0
    assert (results / "configs" / "ner_elmo.cfg").read_text() == (project / "configs" / "ner_elmo.cfg").read_text()
    assert set(metrics["provenance"]["configs"]) >= {"ner_baseline.cfg", "ner_elmo.cfg", "pretrain_tiny.cfg"}

    # probes: one entry per biLM layer + the mix, for POS and entity types
    probe = json.loads((results / "probe.json").read_text())
    for task in ("pos", "ner-type"):
        assert [e["layer"] for e in probe["tasks"][task]["layers"]] == [0, 1, 2]
        assert 0 <= probe["tasks"][task]["mix"]["accuracy"] <= 100

    # seeds: the report's mean ± std and paired gains are those of the per-seed score files
    per_seed = {}
    for path in (work / "metrics_seeds").glob("*_s*.json"):
        if path.name.endswith(".provenance.json"):
            continue
        task, *system, pct, seed = path.stem.split("_")
        system = "_".join(system)
        key = "ents_f" if task == "ner" else "tag_acc"
        per_seed[task, system, pct, seed] = round(json.loads(path.read_text())[key] * 100, 2)
    # smoke: seeds 0 and 1 at 10% only (`--vars.seeds_fractions 10`), every cell with both seeds
    expected = {(t, s, "10", seed) for t in ("ner", "pos") for s in ("baseline", "elmo") for seed in ("s0", "s1")}
    assert set(per_seed) == expected
    published = work / "published"
    seeds = json.loads((published / "seeds.json").read_text())
    # the `gains` command after publish: each cell's paired gains from the run records (issue 42)
    gains = {
        (row["records"], row["task"], row["fraction"], row["bilm"]): row
        for row in json.loads((published / "gains.json").read_text())["rows"]
    }
    table = (published / "gains.md").read_text()
    for task, pct in (("ner", "10"), ("pos", "10")):
        base = [per_seed[task, "baseline", pct, s] for s in ("s0", "s1")]
        elmo = [per_seed[task, "elmo", pct, s] for s in ("s0", "s1")]
        paired = [round(e - b, 2) for b, e in zip(base, elmo)]
        cell = seeds["summary"][task][pct]
        assert cell["baseline"]["mean"] == round(statistics.fmean(base), 2)
        assert cell["baseline"]["std"] == round(statistics.stdev(base), 2)
        assert cell["gain"]["per_seed"] == {"0": paired[0], "1": paired[1]}
        row = gains["training_seeds", task, pct, "first"]
        assert row["per_seed"] == {"0": paired[0], "1": paired[1]} and row["n"] == 2
        assert row["mean"] == round(statistics.fmean(paired), 2) and row["sd"] == round(statistics.stdev(paired), 2)
        assert f"s0 {paired[0]:+.2f}, s1 {paired[1]:+.2f} | {row['mean']:+.2f} ± {row['sd']:.2f} |" in table
    # neither the second biLM's cells nor the confirmation's were trained here: listed, not run
    assert all(
        row["status"] == "not run"
        for row in gains.values()
        if row["records"] == "confirmation" or row["bilm"] == "bilm2"
    )
    assert "| ner 10% |" in (published / "test_looks.md").read_text()
    # issue 33: every test scoring is in the ledger (the `all` run's 4, the seeds run's 8), each a first look; every
    # finished training left its record, which holds its test score
    # the confirmation's data as project.yml converts it: WNUT-17 NER and the CoNLL-U POS data
    assert (work / "confirmation" / "ner" / "corpus" / "train_10.spacy").is_file()
    assert (work / "confirmation" / "pos" / "corpus" / "test.spacy").is_file()
    looks = json.loads((published / "test_looks.json").read_text())["looks"]
    assert sorted(look["run"] for look in looks) == sorted(
        [f"training/{s}_{p}" for s in ("baseline", "elmo") for p in ("10", "100")]
        + [f"training_seeds/{t}_{s}_{p}_{seed}" for t, s, p, seed in expected]
    )
    assert all(look["reason"] == "first look at this recipe" and look["model_sha256"] for look in looks)
    for task, system, pct, seed in expected:
        record = json.loads((published / "runs" / "training_seeds" / f"{task}_{system}_{pct}_{seed}.json").read_text())
        assert (
            record["test"]["score"] == per_seed[task, system, pct, seed] and record["dev_curve"] and record["best_dev"]
        )


def test_train_ner_reports_a_failed_run(tmp_path, capsys, script):
    """lab/experiments/train_ner.py: a run that fails shows the end of its log and makes the script exit 1."""
    train_ner = script("experiments.train_ner")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train_10.spacy", "dev.spacy"):
        (corpus / name).write_bytes(b"")
    config = tmp_path / "broken.cfg"
    text = (ROOT / "configs" / "ner_baseline.cfg").read_text()
    assert 'factory = "ner"' in text
    config.write_text(text.replace('factory = "ner"', 'factory = "no_such_factory"'))
    code = train_ner.main(
        [str(config), "--name", "x", "--fractions", "10", "--corpus", str(corpus), "--out", str(tmp_path / "out")]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "[x_10] FAILED" in out and "no_such_factory" in out
    assert (tmp_path / "out" / "x_10.log").is_file()
    # even a failed run says what ran: its config (copied, hashed), seed and exit status
    prov = json.loads((tmp_path / "out" / "x_10" / "provenance.json").read_text())
    assert prov["exit_code"] == 1 and prov["seed"] == 0 and prov["configs"][0]["path"] == portable(str(config))
    assert "no_such_factory" in (tmp_path / "out" / "x_10" / "configs" / "broken.cfg").read_text()


def test_zh_preprocess_strips_tags_and_joins_split_person_names(script):
    """People's Daily tags names as surname + given name ("江/nr 泽民/nr"): joined into one word."""
    preprocess_zh = script("data.preprocess_zh")
    line = (
        "19980101-01-001-002/m  主席/n  江/nr  泽民/nr  和/c  [中央/n  人民/n]nt  "
        "克林顿/nr  欧阳/nr  修/nr  、/w  李/nr  鹏/nr"
    )
    assert preprocess_zh.parse_line(line) == ["主席", "江泽民", "和", "中央", "人民", "克林顿", "欧阳修", "、", "李鹏"]
    assert preprocess_zh.parse_line(line, join_compounds=True)[3] == "中央人民"
    assert preprocess_zh.parse_line("江/nr  泽民/nr", join_names=False) == ["江", "泽民"]


def test_evaluate_runs_scores_once_and_keeps_the_score_of_a_replaced_model(tmp_path, script):
    """lab/experiments/evaluate_runs.py: a model is scored on test once; when its run is trained again (a newer
    model-best), the earlier score and its provenance move to {out}.replaced/ instead of being overwritten."""
    import spacy
    from spacy.tokens import Doc, DocBin

    from spacy_elmo.provenance import Provenance

    evaluate_runs = script("experiments.evaluate_runs")
    nlp = spacy.blank("en")
    test = tmp_path / "test.spacy"
    DocBin(docs=[Doc(nlp.vocab, words=["a", "b"])]).to_disk(test)
    run = tmp_path / "training" / "ner_elmo_10_s0"
    run.mkdir(parents=True)
    nlp.to_disk(run / "model-best")
    Provenance(command=["spacy", "train"]).write(run / "provenance.json", exit_code=0)  # as train_ner ends a run
    out = tmp_path / "metrics"
    assert evaluate_runs.main([str(tmp_path / "training"), str(test), str(out)]) == 0
    first = (out / "ner_elmo_10_s0.json").read_text()
    assert evaluate_runs.main([str(tmp_path / "training"), str(test), str(out)]) == 0  # scored once
    assert not (tmp_path / "metrics.replaced").exists()
    meta = run / "model-best" / "meta.json"
    os.utime(meta, ((out / "ner_elmo_10_s0.json").stat().st_mtime + 5,) * 2)  # trained again
    assert evaluate_runs.main([str(tmp_path / "training"), str(test), str(out)]) == 0
    kept = sorted(p.name for p in (tmp_path / "metrics.replaced").iterdir())
    assert len(kept) == 2 and kept[0].startswith("ner_elmo_10_s0-") and kept[1].endswith(".provenance.json"), kept
    assert (tmp_path / "metrics.replaced" / kept[0]).read_text() == first
    assert (out / "ner_elmo_10_s0.json").is_file() and (out / "ner_elmo_10_s0.provenance.json").is_file()


def test_train_ner_counts_a_run_on_other_threads_as_another_run(tmp_path, script):
    """A finished training is reused only with the same command, inputs and thread settings: `--jobs 2` runs each
    training on one thread (OMP_NUM_THREADS=1), whose sums differ from two threads' and so does the model. The
    run's record holds the settings it trained with (the child's environment, not the script's)."""
    from spacy_elmo.provenance import Provenance, threads

    train_ner = script("experiments.train_ner")
    folder = tmp_path / "b_10"
    (folder / "model-last").mkdir(parents=True)
    command, inputs = ["python", "-m", "spacy", "train", "c.cfg"], {"c.cfg": "abc"}
    one_thread = {"PATH": "/bin", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    Provenance(command=command, env=one_thread).write(folder / "provenance.json", exit_code=0, inputs=inputs)
    assert json.loads((folder / "provenance.json").read_text())["machine"]["threads"] == threads(one_thread) != {}
    assert train_ner.finished_before(folder, command, inputs, threads(one_thread))
    assert not train_ner.finished_before(folder, command, inputs, threads({"PATH": "/bin"}))  # torch's default
    assert not train_ner.finished_before(folder, command, inputs, threads({"OMP_NUM_THREADS": "2"}))


def test_train_ner_gives_fraction_settings_to_that_fractions_runs_only(tmp_path, capsys, monkeypatch, script):
    """`--fraction-settings 10 SETTINGS` (the seeds run's fine-tuning at 10%): the runs on train_10 get the
    settings last, after `--` and --settings; the runs on train_100 do not; an unknown fraction is refused."""
    train_ner = script("experiments.train_ner")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("train_10.spacy", "train_100.spacy", "dev.spacy"):
        (corpus / name).write_bytes(b"")
    seen = {}
    monkeypatch.setattr(train_ner, "run_all", lambda commands, out, jobs, records=None: seen.update(commands) or 0)
    assert (
        train_ner.main(
            [
                str(ROOT / "configs" / "ner_elmo.cfg"),
                "--name",
                "e",
                "--fractions",
                "10",
                "100",
                "--seeds",
                "0",
                "--corpus",
                str(corpus),
                "--out",
                str(tmp_path / "out"),
                "--settings",
                "training.dropout=0.2",
                "--fraction-settings",
                "10",
                "training.frozen_components=[] components.elmo.fine_tune_layers=1",
                "--",
                "--paths.elmo",
                "bilm",
            ]
        )
        == 0
    )
    with pytest.raises(SystemExit):
        train_ner.main(
            [
                str(ROOT / "configs" / "ner_elmo.cfg"),
                "--name",
                "e",
                "--fractions",
                "100",
                "--corpus",
                str(corpus),
                "--out",
                str(tmp_path / "out"),
                "--fraction-settings",
                "10",
                "training.dropout=0.2",
            ]
        )
    assert "--fraction-settings 10: not one of --fractions (100)" in capsys.readouterr().err
    ten, hundred = seen["e_10_s0"][0], seen["e_100_s0"][0]
    assert ten[-8:] == [
        "--paths.elmo",
        "bilm",
        "--training.dropout",
        "0.2",
        "--training.frozen_components",
        "[]",
        "--components.elmo.fine_tune_layers",
        "1",
    ]
    assert (
        hundred[-4:] == ["--paths.elmo", "bilm", "--training.dropout", "0.2"]
        and "--components.elmo.fine_tune_layers" not in hundred
    )


def test_every_command_reruns_when_a_config_it_reads_changes():
    """weasel reruns a finished command only when its deps change: a config a command's script reads
    must be one of them, or editing it (a new learning rate, say) silently keeps the old outputs.
    Orchestrating lines (`weasel run` of a workflow) are left to the commands they run."""
    import re

    from weasel.util import load_project_config

    project = load_project_config(ROOT)
    config_paths = re.compile(r"(?<![\w/.-])configs/[\w./-]+\.cfg")
    checked = 0
    for command in project["commands"]:
        read = {
            path
            for line in command.get("script", [])
            if not line.startswith("python -m weasel run")
            for path in config_paths.findall(line)
        }
        missing = sorted(read - set(command.get("deps", [])))
        assert not missing, f"{command['name']}: reads {missing} but does not list it under deps"
        checked += bool(read)
    assert checked >= 10  # the pretraining and training commands all read one


class _Parsed(Exception):
    """Raised in place of a lab command's work, once its parser has accepted the command's arguments."""


# per finished (or unattended) workflow: its fewest commands and the lab modules among them
NOT_SMOKED = {
    "bilm2": (
        7,
        {
            "experiments.train_ner",
            "experiments.evaluate_runs",
            "experiments.pretrain_resumable",
            "experiments.publish_bilm",
            "reports.gains",
        },
    ),
    "confirmation": (9, {"experiments.train_ner", "experiments.evaluate_runs", "data.preprocess_conll"}),
    "alternatives": (4, {"data.alternatives_data", "experiments.alternatives_campaign", "reports.alternatives_report"}),
}


@pytest.mark.parametrize("workflow", sorted(NOT_SMOKED))
def test_the_finished_workflows_commands_parse(workflow, tmp_path, monkeypatch, script):
    """The smoke run leaves out the finished `bilm2` and `confirmation` workflows (the same lab commands as
    `seeds`, on other paths; `make test` has ~10 minutes) and `alternatives` (hours, unattended). Each of their
    commands as weasel resolves them (`--dry`) must still be accepted by its lab module's own parser, so that
    they can be rerun; the work itself stops at the parser."""
    import argparse
    import shlex

    for name in ("project.yml", "configs", "lab"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    done = subprocess.run(
        [sys.executable, "-m", "weasel", "run", workflow, ".", "--dry"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    marker = "Running command: "
    commands = [line.split(marker, 1)[1] for line in done.stdout.splitlines() if marker in line]
    fewest, expected = NOT_SMOKED[workflow]
    assert len(commands) >= fewest, done.stdout[-2000:]

    def parse_only(parser, args=None, namespace=None):
        namespace, unknown = parser.parse_known_args(args, namespace)  # exits 2 on a missing or bad argument
        assert not unknown, (parser.prog, unknown)
        raise _Parsed(namespace)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_only)
    checked = set()
    for command in commands:
        words = shlex.split(command)
        module = words[words.index("-m") + 1]
        if not module.startswith("lab."):
            continue
        monkeypatch.setattr(sys, "argv", [module, *words[words.index("-m") + 2 :]])  # as `python -m` gives them
        with pytest.raises(_Parsed):
            script(module.removeprefix("lab.")).main()
        checked.add(module)
    assert {f"lab.{name}" for name in expected} <= checked, checked
