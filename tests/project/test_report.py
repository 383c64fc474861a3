"""scripts/report.py (metrics.json, table.md, seeds.json, figures, publish), scripts/variants.py and
scripts/compare_bilms.py: the tables and figures the results page cites."""

from __future__ import annotations

import json
import re
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(script):
    return script("report")


@pytest.fixture(scope="module")
def variants(report, script):
    return script("variants")


def test_one_helper_splices_every_generated_region(script):
    """scripts/doc_regions.py is the one marker-splicing helper: the bench writers go through it, and it keeps
    the text outside the markers as it was. scripts/gains.py splices its two tables itself: it imports no other
    script (tests/project/test_gains.py checks its splice)."""
    regions = script("doc_regions")
    text = "a <!-- x:start -->old<!-- x:end --> b"
    assert regions.splice(text, "x", "new") == "a <!-- x:start -->new<!-- x:end --> b"
    assert regions.region(regions.splice(text, "x", "\nnew\n"), "x") == "\nnew\n"
    assert regions.splice("no markers", "x", "new", missing_ok=True) == "no markers"
    with pytest.raises(SystemExit, match="page.md has no <!-- x:start -->"):
        regions.splice("no markers", "x", "new", where="page.md")
    writers = {
        "bench/performance_doc.py",
        "bench/readme_speed.py",
    }
    for name in writers:
        assert "import doc_regions" in (ROOT / name).read_text(encoding="utf8"), name
    # no other module splits text at a start marker itself
    others = [
        p.relative_to(ROOT).as_posix()
        for folder in ("scripts", "bench", "spacy_elmo")
        for p in (ROOT / folder).rglob("*.py")
        if p.name not in ("doc_regions.py", "gains.py")
        and re.search(r"\.split\((?:START|[A-Z_]*_START|start)\b", p.read_text(encoding="utf8"))
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


def test_variants_pair_dev_gains_by_seed(variants, tmp_path, capsys):
    runs = tmp_path / "training"
    for seed, f1 in ((0, 0.7506), (1, 0.7410), (2, 0.7600)):
        _run(runs / f"base_10_s{seed}", f1, seed)
    for seed, f1 in ((0, 0.7843), (1, 0.7790), (2, 0.7700)):
        _run(runs / f"elmo_10_s{seed}", f1, seed)
    for seed, f1 in ((0, 0.7200), (1, 0.7300)):
        _run(runs / f"elmo1_10_s{seed}", f1, seed)
    _run(runs / "elmo1_10_s1x", 0.99, 1)  # not a seed folder of that prefix: ignored
    _bilm(tmp_path / "bilm", 3500, 128.93)
    _bilm(tmp_path / "bilm1", 1, 20931.0)
    out = tmp_path / "results"
    assert (
        variants.main(
            [
                "--baseline",
                str(runs / "base_10"),
                "--variant",
                str(tmp_path / "bilm"),
                str(runs / "elmo_10"),
                "--variant",
                str(tmp_path / "bilm1"),
                str(runs / "elmo1_10"),
                "untrained ({steps} step)",
                "--out",
                str(out / "variants.json"),
                "--plot",
                str(out / "ppl_vs_gain.png"),
            ]
        )
        == 0
    )
    result = json.loads((out / "variants.json").read_text())
    best, untrained = result["variants"]  # ordered by perplexity
    assert (
        best["name"] == "3,500 steps" and untrained["name"] == "untrained (1 step)"
    )  # named by steps unless given; {steps} in a given name is the biLM's own count
    assert best["gain"]["per_seed"] == {"0": 3.37, "1": 3.8, "2": 1.0}
    assert best["gain"]["mean"] == round(statistics.fmean([3.37, 3.8, 1.0]), 2) and best["gain"]["n"] == 3
    assert (
        untrained["gain"]["per_seed"] == {"0": -3.06, "1": -1.1} and untrained["gain"]["n"] == 2
    )  # paired on shared seeds
    assert set(result["provenance"]["steps"]) == {
        f"training/{name}_10_s{s}" for name, seeds in (("base", "012"), ("elmo", "012"), ("elmo1", "01")) for s in seeds
    }
    assert (out / "ppl_vs_gain.png").read_bytes()[:4] == b"\x89PNG"
    # the leader against the runner-up, paired on the seeds both have: 78.43 - 72.00, 77.90 - 73.00
    lead = result["leader_vs_runner_up"]
    assert lead["per_seed"] == {"0": 6.43, "1": 4.9} and lead["ahead_on"] == 2 and lead["n"] == 2
    # a run that did not finish is named, not skipped
    shutil.rmtree(runs / "elmo1_10_s1" / "model-best")
    with pytest.raises(SystemExit, match="elmo1_10_s1/model-best/meta.json: missing"):
        variants.main(
            [
                "--baseline",
                str(runs / "base_10"),
                "--variant",
                str(tmp_path / "bilm1"),
                str(runs / "elmo1_10"),
                "--out",
                str(out / "v.json"),
            ]
        )
    with pytest.raises(SystemExit) as error:
        variants.main(
            ["--baseline", str(runs / "base_10"), "--variant", str(tmp_path / "bilm"), "--out", str(out / "v.json")]
        )
    assert error.value.code == 2 and "expected BILM PREFIX [NAME], found 1 values" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="pretrain_summary.json: missing"):
        variants.main(
            [
                "--baseline",
                str(runs / "base_10"),
                "--variant",
                str(runs),
                str(runs / "elmo_10"),
                "--out",
                str(out / "v.json"),
            ]
        )


def test_an_ner_side_variant_is_paired_with_the_first_variant_on_the_same_bilm(variants, tmp_path):
    """A variant trained with the first variant's biLM (fine-tuning, another NER config) is compared with
    that first one, seed by seed: what the NER-side change buys with the biLM held fixed."""
    runs = tmp_path / "training"
    for seed, f1 in ((0, 0.70), (1, 0.71), (2, 0.72)):
        _run(runs / f"base_10_s{seed}", f1, seed)
    for seed, f1 in ((0, 0.75), (1, 0.74), (2, 0.76)):
        _run(runs / f"elmo_10_s{seed}", f1, seed)
    for seed, f1 in ((0, 0.7620), (1, 0.7390)):
        _run(runs / f"tuned_10_s{seed}", f1, seed)
    for seed, f1 in ((0, 0.80), (1, 0.81)):
        _run(runs / f"other_10_s{seed}", f1, seed)
    _bilm(tmp_path / "bilm", 4400, 108.0)
    _bilm(tmp_path / "bilm_b", 5200, 100.0)
    out = tmp_path / "results"
    assert (
        variants.main(
            [
                "--baseline",
                str(runs / "base_10"),
                "--variant",
                str(tmp_path / "bilm"),
                str(runs / "elmo_10"),
                "project",
                "--variant",
                str(tmp_path / "bilm_b"),
                str(runs / "other_10"),
                "other biLM",
                "--variant",
                str(tmp_path / "bilm"),
                str(runs / "tuned_10"),
                "NER: tuned",
                "--out",
                str(out / "variants.json"),
            ]
        )
        == 0
    )
    result = json.loads((out / "variants.json").read_text())
    # only the variant on the first one's biLM, paired on the seeds both have: 76.20 - 75.00, 73.90 - 74.00
    [same] = result["same_bilm_as_first"]
    assert same["variant"] == "NER: tuned" and same["reference"] == "project"
    assert same["per_seed"] == {"0": 1.2, "1": -0.1} and same["ahead_on"] == 1 and same["n"] == 2


def test_tagger_side_variants_are_scored_by_tag_accuracy(variants, tmp_path):
    """`pos-recipes-report`: POS variants read tag_acc."""
    runs = tmp_path / "training"
    for name, accs in (("base", (0.9212, 0.9210)), ("elmo", (0.9309, 0.9290)), ("drop", (0.9330, 0.9280))):
        for seed, acc in enumerate(accs):
            _run(runs / f"{name}_10_s{seed}", 0.0, seed)
            meta = runs / f"{name}_10_s{seed}" / "model-best" / "meta.json"
            meta.write_text(json.dumps({"performance": {"tag_acc": acc, "ents_f": 0.0}}))
    _bilm(tmp_path / "bilm", 4400, 108.0)
    out = tmp_path / "results"
    assert (
        variants.main(
            [
                "--baseline",
                str(runs / "base_10"),
                "--variant",
                str(tmp_path / "bilm"),
                str(runs / "elmo_10"),
                "project",
                "--variant",
                str(tmp_path / "bilm"),
                str(runs / "drop_10"),
                "POS: drop",
                "--task",
                "pos",
                "--score",
                "tag_acc",
                "--out",
                str(out / "pos_recipes.json"),
            ]
        )
        == 0
    )
    result = json.loads((out / "pos_recipes.json").read_text())
    assert result["score_label"] == "accuracy" and result["baseline"]["per_seed"] == {"0": 92.12, "1": 92.1}
    [same] = result["same_bilm_as_first"]
    assert same["per_seed"] == {"0": 0.21, "1": -0.1}  # 93.30 - 93.09, 92.80 - 92.90


def test_variants_pair_more_seeds_with_a_second_baseline_prefix(variants, tmp_path, capsys):
    """Seeds trained later (`recipe-baseline`) live under another prefix; the gains pair over both."""
    seeds_run, recipes = tmp_path / "training_seeds", tmp_path / "recipes"
    for seed, f1 in ((0, 0.70), (1, 0.71)):
        _run(seeds_run / f"base_10_s{seed}", f1, seed)
    _run(recipes / "base_10_s3", 0.69, 3)
    for seed, f1 in ((0, 0.75), (1, 0.74), (3, 0.76)):
        _run(recipes / f"elmo_10_s{seed}", f1, seed)
    _bilm(tmp_path / "bilm", 4400, 117.0)
    out = tmp_path / "v.json"
    args = ["--variant", str(tmp_path / "bilm"), str(recipes / "elmo_10"), "--out", str(out)]
    assert variants.main(["--baseline", str(seeds_run / "base_10"), str(recipes / "base_10"), *args]) == 0
    result = json.loads(out.read_text())
    assert result["baseline"]["per_seed"] == {"0": 70.0, "1": 71.0, "3": 69.0}
    assert result["baseline"]["runs"] == [str(seeds_run / "base_10"), str(recipes / "base_10")]
    assert result["variants"][0]["gain"]["per_seed"] == {"0": 5.0, "1": 3.0, "3": 7.0}
    assert result["leader_vs_runner_up"] is None  # one variant: nothing to compare
    assert "recipes/base_10_s3" in " ".join(result["provenance"]["steps"])
    # with the first prefix alone, seed 3 has no pair and is left out of the gain
    assert variants.main(["--baseline", str(seeds_run / "base_10"), *args]) == 0
    assert json.loads(out.read_text())["variants"][0]["gain"]["per_seed"] == {"0": 5.0, "1": 3.0}
    # a later prefix with no runs yet is named and adds nothing; the first one must hold runs
    assert variants.main(["--baseline", str(seeds_run / "base_10"), str(tmp_path / "none_10"), *args]) == 0
    assert "none_10_s*: no baseline runs yet, none added" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="none_10_s\\*: no training runs found"):
        variants.main(["--baseline", str(tmp_path / "none_10"), str(seeds_run / "base_10"), *args])
    # the same seed under two prefixes is an error, not a silent choice
    _run(recipes / "base_10_s1", 0.50, 1)
    with pytest.raises(
        SystemExit, match="baseline seed 1: found under both .*training_seeds/base_10_s1 and .*recipes/base_10_s1"
    ):
        variants.main(["--baseline", str(seeds_run / "base_10"), str(recipes / "base_10"), *args])


def test_bilm_comparison_is_read_from_the_runs(tmp_path, monkeypatch):
    """compare_bilms.py reads each run's summary and config (nothing typed) and refuses runs whose
    vocabularies differ."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import compare_bilms

    def run(name: str, ppl: float, lexicon: int, vocab: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "pretrain_summary.json").write_text(
            json.dumps({"heldout_ppl": ppl, "step": 30, "train_seconds": 90, "parameters": 1234})
        )
        (folder / "config.json").write_text(json.dumps({"char_vocab_size": lexicon}))
        (folder / "vocab.txt").write_text(vocab)
        return folder

    utf8, lexicon = (
        run("utf8", 210.456, 0, "<S>\n</S>\n<UNK>\n北京\n"),
        run("lexicon", 198.2, 3500, "<S>\n</S>\n<UNK>\n北京\n"),
    )
    out = tmp_path / "results" / "zh_lexicon.json"
    assert (
        compare_bilms.main(
            [
                "--bilm",
                "UTF-8 bytes",
                str(utf8),
                "--bilm",
                "character lexicon",
                str(lexicon),
                "--title",
                "Chinese biLM",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    recorded = json.loads(out.read_text())
    assert [b["heldout_ppl"] for b in recorded["bilms"]] == [210.46, 198.2]
    assert [b["characters"] for b in recorded["bilms"]] == ["UTF-8 bytes", "lexicon of 3,500 ids"]
    other = run("other", 150.0, 0, "<S>\n</S>\n<UNK>\n上海\n")
    with pytest.raises(SystemExit, match="different vocabularies"):
        compare_bilms.main(["--bilm", "a", str(utf8), "--bilm", "b", str(other), "--title", "t", "--out", str(out)])


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
