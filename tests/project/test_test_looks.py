"""Issue 33: the ledger of test looks (results/test_looks.json), one look per recipe, and the runs' committed
records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _has_history() -> bool:
    done = subprocess.run(["git", "cat-file", "-e", "497f05a^{commit}"], cwd=ROOT, capture_output=True)
    return done.returncode == 0


def _trained_run(tmp_path: Path, name: str = "ner_elmo_10_s0", settings: tuple[str, ...] = ()) -> Path:
    """A run folder as lab/experiments/train_ner.py leaves it: model-best (a blank pipeline) and a provenance record."""
    import spacy

    from spacy_elmo.provenance import Provenance

    run = tmp_path / "training" / name
    run.mkdir(parents=True)
    spacy.blank("en").to_disk(run / "model-best")
    command = [
        sys.executable,
        "-m",
        "spacy",
        "train",
        "c.cfg",
        "--output",
        str(run),
        "--paths.train",
        "t.spacy",
        "--system.seed",
        "0",
        *settings,
        "--paths.elmo",
        "bilm",
    ]
    inputs = {"c.cfg": "c" * 64, "t.spacy": "d" * 64, "bilm/model.safetensors": "e" * 64}
    Provenance(command=command, seed=0).write(run / "provenance.json", exit_code=0, inputs=inputs)
    return run


def _retrain(run: Path, changed: bool) -> None:
    """The run trained again: a newer model-best, with other weights or (changed=False) the same ones."""
    meta = run / "model-best" / "meta.json"
    if changed:
        (run / "model-best" / "weights.bin").write_bytes(os.urandom(8))
    stamp = max(p.stat().st_mtime for p in (run.parent.parent / "metrics").glob("*.json")) + 5
    os.utime(meta, (stamp, stamp))


def test_every_look_says_which_paths_were_uncommitted():
    """`dirty_paths` beside `dirty` in every entry: a list wherever the tree's state is known ([] when clean),
    None only where no file says; the looks with a committed run record have that record's scoring paths."""
    # each folder of run records and the ledger its looks went into
    for folder, name in (("training_seeds", "test_looks.json"), ("confirmation", "confirmation_looks.json")):
        ledger = json.loads((ROOT / "results" / name).read_text(encoding="utf8"))
        for entry in ledger["looks"]:
            assert "dirty_paths" in entry, (name, entry["look"])
            if entry["dirty"] is None:
                assert entry["dirty_paths"] is None, (name, entry["look"])
            else:
                assert entry["dirty"] == bool(entry["dirty_paths"]), (name, entry["look"])
        for path in (ROOT / "results" / "runs" / folder).glob("*.json"):
            test = json.loads(path.read_text(encoding="utf8")).get("test") or {}
            if test.get("look"):
                entry = ledger["looks"][test["look"] - 1]
                assert entry["dirty_paths"] == test["provenance"]["git"]["dirty_paths"], path.name


def test_evaluate_runs_allows_one_look_per_recipe_unless_told_why(tmp_path, script, capsys):
    import spacy
    from spacy.tokens import Doc, DocBin

    evaluate_runs = script("experiments.evaluate_runs")
    test = tmp_path / "test.spacy"
    DocBin(docs=[Doc(spacy.blank("en").vocab, words=["a", "b"])]).to_disk(test)
    run = _trained_run(tmp_path)
    ledger, out = tmp_path / "results" / "test_looks.json", tmp_path / "metrics"
    argv = [str(tmp_path / "training"), str(test), str(out), "--ledger", str(ledger)]
    assert evaluate_runs.main(argv) == 0
    looks = json.loads(ledger.read_text())["looks"]
    assert len(looks) == 1
    first = looks[0]
    assert (first["task"], first["fraction"], first["system"], first["seed"]) == ("ner", "10", "elmo", 0)
    assert first["recipe"]["bilm_sha256"] == "e" * 64 and first["recipe"]["config_sha256"] == "c" * 64
    assert (
        first["reason"] == "first look at this recipe"
        and first["source"] == "lab/experiments/evaluate_runs.py"
        and first["utc"]
    )
    assert isinstance(first["dirty_paths"], list) and first["dirty"] == bool(first["dirty_paths"])
    assert (
        evaluate_runs.main(argv) == 0 and len(json.loads(ledger.read_text())["looks"]) == 1
    )  # scored already: no look
    # trained again with the same recipe, another model: refused in one line, nothing scored or moved
    _retrain(run, changed=True)
    capsys.readouterr()
    assert evaluate_runs.main(argv) == 1
    said = [line for line in capsys.readouterr().out.splitlines() if "refused" in line]
    assert len(said) == 1 and "ner 10% elmo seed 0" in said[0] and "--again REASON" in said[0]
    assert len(json.loads(ledger.read_text())["looks"]) == 1 and not (tmp_path / "metrics.replaced").exists()
    # told why: scored, the reason kept
    assert evaluate_runs.main([*argv, "--again", "a rerun on a bigger machine"]) == 0
    looks = json.loads(ledger.read_text())["looks"]
    assert len(looks) == 2 and looks[1]["reason"].endswith("a rerun on a bigger machine") and looks[1]["look"] == 2
    # the same model again (bit-identical): no new information, allowed and said so
    _retrain(run, changed=False)
    assert evaluate_runs.main(argv) == 0
    assert "the same model as look 2" in json.loads(ledger.read_text())["looks"][2]["reason"]
    # another recipe for the same cell and seed: its first look
    shutil.rmtree(tmp_path / "training")
    _trained_run(tmp_path, settings=("--components.elmo.fine_tune_layers", "1"))
    assert evaluate_runs.main(argv) == 0
    assert json.loads(ledger.read_text())["looks"][3]["reason"] == "first look at this recipe"


def test_evaluate_runs_leaves_a_run_still_training_unscored(tmp_path, script, capsys):
    """A run whose training has not ended (spaCy has written a model-best, lab/experiments/train_ner.py no
    provenance.json yet) gets no test look: its model-best is an early checkpoint, not the run's result."""
    import spacy
    from spacy.tokens import Doc, DocBin

    evaluate_runs = script("experiments.evaluate_runs")
    test = tmp_path / "test.spacy"
    DocBin(docs=[Doc(spacy.blank("en").vocab, words=["a", "b"])]).to_disk(test)
    _trained_run(tmp_path, "ner_elmo_10_s0")
    (_trained_run(tmp_path, "ner_elmo_10_s1") / "provenance.json").unlink()
    ledger, out = tmp_path / "looks.json", tmp_path / "metrics"
    assert evaluate_runs.main([str(tmp_path / "training"), str(test), str(out), "--ledger", str(ledger)]) == 0
    assert [look["seed"] for look in json.loads(ledger.read_text())["looks"]] == [0]
    assert not (out / "ner_elmo_10_s1.json").exists()
    assert "[ner_elmo_10_s1] not scored: still training" in capsys.readouterr().out


FAKE_TRAIN = textwrap.dedent('''
    """Stands in for `spacy train` (python FAKE -m spacy train CONFIG --output DIR ...): counts its runs, writes a
    model and a console log like spaCy's."""
    import json, sys
    from pathlib import Path
    out = Path(sys.argv[sys.argv.index("--output") + 1])
    with open(Path(__file__).with_suffix(".count"), "a") as f:
        f.write("run\\n")
    for folder in ("model-last", "model-best"):
        (out / folder).mkdir(parents=True, exist_ok=True)
        (out / folder / "meta.json").write_text(json.dumps({"performance": {"tag_acc": 0.9212}}))
    print("E    #       LOSS TOK2VEC  LOSS TAGGER  TAG_ACC  POS_ACC  SCORE")
    print("---  ------  ------------  -----------  -------  -------  ------")
    print("  0       0          0.00        79.18    19.09     0.00    0.19")
    print("  2     400        193.58      2439.80    92.12     0.00    0.92")
''')


def test_train_ner_leaves_a_record_and_reuses_it_only_when_every_hash_matches(tmp_path, script, monkeypatch):
    train_ner = script("experiments.train_ner")
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAIN)
    config, train = tmp_path / "tagger.cfg", tmp_path / "train_10.spacy"
    config.write_text("[x]\n")
    train.write_bytes(b"data")
    out, records = tmp_path / "training_seeds", tmp_path / "results" / "runs" / "training_seeds"
    out.mkdir()
    name = "pos_baseline_10_s1"
    command = [
        sys.executable,
        str(fake),
        "-m",
        "spacy",
        "train",
        str(config),
        "--output",
        str(out / name),
        "--paths.train",
        str(train),
        "--system.seed",
        "1",
    ]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    runs = lambda: (
        len(fake.with_suffix(".count").read_text().splitlines()) if fake.with_suffix(".count").is_file() else 0
    )  # noqa: E731

    assert train_ner.run_one(name, command, 1, out, env, records) and runs() == 1
    record = json.loads((records / f"{name}.json").read_text())
    assert (record["task"], record["fraction"], record["system"], record["seed"]) == ("pos", "10", "baseline", 1)
    assert record["best_dev"] == {"tag_acc": 92.12} and record["dev_curve"] == [[0, 19.09], [400, 92.12]]
    # a record names files as they read on any machine: here, outside the repository, by name
    assert record["config_sha256"] and record["data_sha256"] == {train.name: record["inputs"][train.name]}
    assert (
        record["threads"] == {"OMP_NUM_THREADS": "1"}
        and record["test"] is None
        and record["provenance"]["exit_code"] == 0
    )
    # another session: the work folder is gone. Without a test score the record can't stand for the run: trained again
    shutil.rmtree(out)
    out.mkdir()
    assert train_ner.run_one(name, command, 1, out, env, records) and runs() == 2
    # scored on test (evaluate_runs.py adds it): reused, not trained
    record = json.loads((records / f"{name}.json").read_text())
    record["test"] = {"score_name": "tag_acc", "score": 92.2}
    (records / f"{name}.json").write_text(json.dumps(record))
    shutil.rmtree(out)
    out.mkdir()
    assert train_ner.run_one(name, command, 1, out, env, records) and runs() == 2
    # any hash or setting that differs trains again: the data, the config, the threads, the command
    for change in ("data", "config", "threads", "command"):
        shutil.rmtree(out)
        out.mkdir()
        (records / f"{name}.json").write_text(json.dumps(record))
        args, environment = list(command), dict(env)
        if change == "data":
            train.write_bytes(b"other data")
        elif change == "config":
            config.write_text("[y]\n")
        elif change == "threads":
            environment["OMP_NUM_THREADS"] = "2"
        else:
            args += ["--training.max_steps", "10"]
        before = runs()
        assert train_ner.run_one(name, args, 1, out, environment, records) and runs() == before + 1, change
        assert json.loads((records / f"{name}.json").read_text())["test"] is None, change
        train.write_bytes(b"data")
        config.write_text("[x]\n")


def test_evaluate_runs_adds_the_test_score_to_the_record_and_the_seeds_report_reads_it(tmp_path, script):
    import spacy
    from spacy.tokens import Doc, DocBin

    evaluate_runs, report = script("experiments.evaluate_runs"), script("reports.report")
    test = tmp_path / "test.spacy"
    DocBin(docs=[Doc(spacy.blank("en").vocab, words=["a", "b"])]).to_disk(test)
    run = _trained_run(tmp_path, "pos_baseline_10_s0")
    records = tmp_path / "runs"
    records.mkdir()
    (records / "pos_baseline_10_s0.json").write_text(json.dumps({"run": run.name, "test": None}))
    out = tmp_path / "metrics"
    assert (
        evaluate_runs.main(
            [
                str(tmp_path / "training"),
                str(test),
                str(out),
                "--ledger",
                str(tmp_path / "l.json"),
                "--records",
                str(records),
            ]
        )
        == 0
    )
    record = json.loads((records / "pos_baseline_10_s0.json").read_text())
    assert (
        record["test"]["look"] == 1
        and record["test"]["score_name"] == "tag_acc"
        and record["test"]["provenance"]["exit_code"] == 0
    )
    # a later session: seed 0's score file is gone, seed 1 was scored there; the report reads seed 0 from its record
    record["test"]["score"] = 92.11
    (records / "pos_baseline_10_s0.json").write_text(json.dumps(record))
    later = tmp_path / "metrics_later"
    later.mkdir()
    (later / "pos_baseline_10_s1.json").write_text(json.dumps({"tag_acc": 0.9221}))
    assert (
        report.main(["seeds", "--metrics-dir", str(later), "--out", str(tmp_path / "res"), "--records", str(records)])
        == 0
    )
    seeds = json.loads((tmp_path / "res" / "seeds.json").read_text())
    assert seeds["summary"]["pos"]["10"]["baseline"]["per_seed"] == {"0": 92.11, "1": 92.21}
    assert "metrics_seeds/pos_baseline_10_s0" in seeds["provenance"]["steps"]


# the commit that committed the 24 records rebuilt from the published seeds run
# (scripts/reconstruct_run_records.py, in git history at 2959825);
# its ELMo runs read a biLM that is lost, and were redone with the committed project biLM (issue 33)
RECORDS_REBUILT_AT = "c9e8131"


@pytest.mark.parametrize("commit", [RECORDS_REBUILT_AT, None], ids=["published-run", "committed-now"])
def test_the_seeds_report_from_the_records_alone_is_the_published_one(script, tmp_path, commit):
    """A later session with no score files (its work folder gone): the seeds report read from the committed records
    gives the seeds.json summary published with them, for the records rebuilt from the first published run and
    for the records and seeds.json in results/ now."""
    report = script("reports.report")
    (tmp_path / "metrics").mkdir()
    records = tmp_path / "records"
    records.mkdir()
    folder = "results/runs/training_seeds"
    if commit is None:
        for path in sorted((ROOT / folder).glob("*.json")):
            (records / path.name).write_text(path.read_text())
        published = json.loads((ROOT / "results" / "seeds.json").read_text())
    else:
        names = subprocess.run(
            ["git", "ls-tree", "--name-only", f"{commit}:{folder}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for name in names:
            (records / Path(name).name).write_text(_git_show(f"{commit}:{folder}/{Path(name).name}"))
        published = json.loads(_git_show(f"{commit}:results/seeds.json"))
    # the seeds runs' 24 (beside them now: the second biLM's runs, left to lab/reports/gains.py)
    assert len([path for path in records.glob("*.json") if "_bilm2_" not in path.name]) == 24
    assert (
        report.main(
            [
                "seeds",
                "--metrics-dir",
                str(tmp_path / "metrics"),
                "--out",
                str(tmp_path / "out"),
                "--records",
                str(records),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "out" / "seeds.json").read_text())["summary"] == published["summary"]


def _git_show(spec: str) -> str:
    return subprocess.run(["git", "show", spec], cwd=ROOT, capture_output=True, text=True, check=True).stdout
