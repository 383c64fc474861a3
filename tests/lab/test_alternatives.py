"""results/alternatives.md's lab code (issue 63): FiNER-ORD into .spacy with nested subsets, the floret text check,
the campaign's cells (order, fine-tuning rule, commands) and its stop file, and the report's gains and crossing
sizes, each on small inputs made here; and the committed campaign itself: whole, registered first, its page the
report's output."""

from __future__ import annotations

import csv
import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from lab.data import alternatives_data
from lab.experiments import alternatives_campaign, alternatives_vectors
from lab.reports import alternatives_report

ROOT = Path(__file__).resolve().parents[2]


def write_split(path: Path, docs: list[list[list[tuple[str, int]]]]) -> Path:
    with path.open("w", encoding="utf8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["gold_label", "gold_token", "doc_idx", "sent_idx"])
        for d, sents in enumerate(docs):
            for s, sent in enumerate(sents):
                for token, label in sent:
                    writer.writerow([label, token, d, s])
    return path


def test_finer_ord_rows_become_sentences_with_iob2_entities(tmp_path):
    import spacy

    path = write_split(
        tmp_path / "train.csv",
        [[[("Neville", 1), ("Otuki", 2), ("visits", 0), ("Kenya", 3)], [("KPMG", 5), ("grew", 0)]]],
    )
    docs = alternatives_data.read_split(path)
    assert [len(sents) for sents in docs] == [2]
    assert docs[0][0][1] == ("Otuki", None, "I-PER")
    counts = alternatives_data.write_docbin(docs, tmp_path / "train.spacy")
    assert counts == {"sentences": 2, "tokens": 6, "entities": 3, "articles": 1}
    from spacy.tokens import DocBin

    (doc,) = DocBin().from_disk(tmp_path / "train.spacy").get_docs(spacy.blank("en").vocab)
    assert [(e.text, e.label_) for e in doc.ents] == [("Neville Otuki", "PER"), ("Kenya", "LOC"), ("KPMG", "ORG")]
    bad = write_split(tmp_path / "bad.csv", [[[("x", 9)]]])
    with pytest.raises(SystemExit, match=r"bad.csv:2: gold_label '9'"):
        alternatives_data.read_split(bad)


def test_training_subsets_are_nested_fixed_and_in_article_order():
    docs = [[[(f"w{d}_{s}", None, "O")] for s in range(37)] for d in range(5)]
    fractions = [0.05, 0.1, 0.25, 0.5, 1.0]
    subsets = alternatives_data.nested_subsets(docs, fractions, seed=0)
    kept = {f: {sent[0][0] for sents in subsets[f] for sent in sents} for f in fractions}
    assert [len(kept[f]) for f in fractions] == [round(185 * f) for f in fractions]
    for small, large in zip(fractions, fractions[1:]):
        assert kept[small] < kept[large]
    assert alternatives_data.nested_subsets(docs, fractions, seed=0) == subsets  # fixed by the seed
    assert alternatives_data.nested_subsets(docs, [0.1], seed=1)[0.1] != subsets[0.1]
    for sents in subsets[0.25]:  # a kept sentence keeps its place in its article
        order = [int(sent[0][0].split("_")[1]) for sent in sents]
        assert order == sorted(order)


def test_install_copies_only_files_that_match_their_pins(tmp_path):
    source = tmp_path / "clone"
    for path in alternatives_data.FILES:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text("not the data\n")
    with pytest.raises(SystemExit, match=r"data/train/train.csv: sha256 [0-9a-f]{64}, expected 12d81f71"):
        alternatives_data.install(source, tmp_path / "dest")
    assert not (tmp_path / "dest" / "train.csv").exists()


def test_vectors_are_trained_only_on_the_bilms_own_text(tmp_path):
    from spacy_elmo.provenance import sha256

    text = tmp_path / "train.txt"
    text.write_text("a b c\n")
    bilm = tmp_path / "bilm"
    bilm.mkdir()
    (bilm / "run_inputs.json").write_text(json.dumps({"inputs": {"work/corpus/lm/train.txt": "0" * 64}}))
    with pytest.raises(SystemExit, match=r"train.txt: sha256 .* but .*bilm was pretrained on 000000000000"):
        alternatives_vectors.check_text(text, bilm)
    (bilm / "run_inputs.json").write_text(json.dumps({"inputs": {"work/corpus/lm/train.txt": sha256(text)}}))
    assert alternatives_vectors.check_text(text, bilm) == sha256(text)
    # the committed project biLM names the text it read
    assert alternatives_vectors.bilm_text_sha256(ROOT / "results" / "bilm").startswith("b6a1b41e")


def test_cells_run_seed_by_seed_with_the_fine_tuning_rule(tmp_path):
    import argparse

    args = argparse.Namespace(
        seeds=[0, 1, 2],
        fractions=["5", "10", "25", "50", "100"],
        arms=list(alternatives_campaign.ARMS),
        out=tmp_path / "out",
        corpus=tmp_path / "corpus",
        bilm=Path("results/bilm"),
        vectors=Path("results/static_vectors"),
        max_steps=4000,
        eval_frequency=400,
    )
    cells = alternatives_campaign.cells(args)
    assert len(cells) == 60
    assert [c["seed"] for c in cells] == sorted(c["seed"] for c in cells)  # whole seeds first
    assert [c["run"] for c in cells[:4]] == [
        "ner_none_5_s0",
        "ner_static_5_s0",
        "ner_elmo_5_s0",
        "ner_elmo_static_5_s0",
    ]
    assert math.isclose(alternatives_campaign.FINE_TUNE_BELOW_PCT, 31.6227766, rel_tol=1e-6)
    tuned = {(c["arm"], c["pct"]) for c in cells if c["fine_tuned"]}
    assert tuned == {(arm, pct) for arm in ("elmo", "elmo_static") for pct in ("5", "10", "25")}
    for cell in cells:
        command = cell["command"]
        assert ("--components.elmo.fine_tune_layers" in command) == cell["fine_tuned"]
        assert ("--paths.vectors" in command) == ("static" in cell["arm"])
        assert ("--paths.elmo" in command) == ("elmo" in cell["arm"])
        assert command[command.index("--training.max_steps") + 1] == "4000"
        assert command[command.index("--training.patience") + 1] == "2000"
        assert command[command.index("--paths.train") + 1].endswith(f"train_{cell['pct']}.spacy")
    # the same settings as the adopted 10% recipe of project.yml's seeds workflow
    import yaml

    adopted = yaml.safe_load((ROOT / "project.yml").read_text())["vars"]["seeds_ner_elmo_10_settings"]
    from lab.experiments.provenance_step import settings_as_options

    assert settings_as_options(adopted) == alternatives_campaign.FINE_TUNE


def test_the_stop_file_starts_no_training_and_progress_says_so(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ["dev", "test", *(f"train_{p}" for p in alternatives_campaign.FRACTIONS)]:
        (corpus / f"{name}.spacy").write_bytes(b"")
    (tmp_path / "vectors" / "vocab").mkdir(parents=True)
    (tmp_path / "vectors" / "vocab" / "vectors").write_bytes(b"0")
    stop = tmp_path / "STOP"
    stop.touch()
    code = alternatives_campaign.main(
        ["run", "--out", str(tmp_path / "out"), "--corpus", str(corpus), "--vectors", str(tmp_path / "vectors")]
        + ["--published", str(tmp_path / "published"), "--stop-file", str(stop), "--bilm", str(ROOT / "results/bilm")]
    )
    assert code == 0
    assert "0 done, 0 failed, 60 not started (stop file" in capsys.readouterr().out
    progress = json.loads((tmp_path / "out" / "progress.json").read_text())
    assert progress["counts"] == {"pending": 60} and progress["stop_file"] == str(stop)
    assert not any((tmp_path / "out" / "training").iterdir())  # no training started


def record(folder: Path, arm: str, pct: int, seed: int, test: float, **extra) -> None:
    run = f"ner_{arm}_{pct}_s{seed}"
    body = {"run": run, "arm": arm, "train_pct": pct, "seed": seed, "test": {"score": test}, "best_dev": {}, **extra}
    (folder / f"{run}.json").write_text(json.dumps(body))


def test_report_pairs_gains_by_seed_and_interpolates_the_crossing_in_log_size(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    base = {5: 40.0, 10: 50.0, 25: 60.0, 50: 65.0, 100: 70.0}
    for seed in (0, 1, 2):
        for pct, score in base.items():
            record(records, "none", pct, seed, score + seed)
            record(records, "static", pct, seed, score + 2 + seed)
            record(records, "elmo", pct, seed, score + 5 + seed + 0.5 * (seed == 2))
            record(records, "elmo_static", pct, seed, score + 6 + seed)
    result = alternatives_report.analyse(alternatives_report.read(records), None)
    cell = next(c for c in result["cells"] if c["pct"] == 10)
    gain = cell["gains"]["elmo-none"]
    assert gain["per_seed"] == {0: 5.0, 1: 5.0, 2: 5.5} and gain["n"] == 3
    half = 4.302653 * 0.288675 / math.sqrt(3)
    assert gain["interval"] == [round(5.1667 - half, 2), round(5.1667 + half, 2)]
    assert cell["gains"]["elmo_static-static"]["mean"] == 4.0
    reach = result["reach_none_full"]
    assert reach["target"] == 71.0  # the none arm's mean at 100%
    # ELMo's mean: 66.17 at 25%, 71.17 at 50% -> 71 at exp(log 25 + (71 - 66.17) / 5 (log 50 - log 25))
    expected = math.exp(math.log(25) + (71.0 - 66.1667) / 5.0 * (math.log(50) - math.log(25)))
    assert reach["arms"]["elmo"]["pct"] == pytest.approx(expected, abs=0.1)
    assert reach["arms"]["none"]["pct"] == 100
    assert alternatives_report.crossing({5: 80.0, 10: 85.0}, 70.0)["pct"] == 5
    assert alternatives_report.crossing({5: 80.0, 10: 85.0}, 70.0)["at_most"]  # 5% is an upper bound
    assert alternatives_report.crossing({5: 50.0, 10: 55.0}, 70.0)["pct"] is None
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- alternatives:start -->\nold\n<!-- alternatives:end -->\nafter\n")
    assert alternatives_report.main([str(records), "--page", str(page), "--json", str(tmp_path / "r.json")]) == 0
    text = page.read_text()
    assert text.startswith("before\n<!-- alternatives:start -->\n| train % |") and text.endswith("end -->\nafter\n")
    assert "| 10 | 51.00 ± 1.00 | 53.00 ± 1.00 | 56.17 ± 1.26 | 57.00 ± 1.00 | +5.17 [+4.45, +5.88]" in text
    assert "mean ± sd over the registered seeds s0, s1, s2, all run in every cell;" in text


def test_a_seed_whose_smallest_run_size_already_reaches_the_target_is_shown_as_an_upper_bound(tmp_path):
    # mid-campaign: seed 1 has only 50% and 100%, and its 50% beats the none arm's 100% score; the crossing is
    # at most 50% (a smaller size, not yet run, may reach it too), never "at 50%"
    records = tmp_path / "records"
    records.mkdir()
    for seed in (0, 1):
        for pct, score in {5: 40.0, 10: 50.0, 25: 60.0, 50: 65.0, 100: 70.0}.items():
            record(records, "none", pct, seed, score)
    for pct, score in {5: 60.0, 10: 68.0, 25: 72.0, 50: 75.0, 100: 78.0}.items():
        record(records, "elmo", pct, 0, score)
    for pct, score in {50: 75.0, 100: 78.0}.items():
        record(records, "elmo", pct, 1, score)
    result = alternatives_report.analyse(alternatives_report.read(records), None)
    elmo = result["reach_none_full"]["arms"]["elmo"]
    assert elmo["per_seed"] == {0: pytest.approx(math.exp(math.log(10) + 2 / 4 * math.log(25 / 10)), abs=0.1), 1: 50}
    assert elmo["per_seed_at_most"] == [1]
    row = next(line for line in alternatives_report.table(result).splitlines() if line.startswith("| ELMo |"))
    assert f"s0 {elmo['per_seed'][0]}%, s1 ≤ 50%" in row
    assert "over the seeds run so far (s0, s1 of the registered s0, s1, s2; a cell with fewer says n)" in (
        alternatives_report.table(result)
    )


def test_minutes_per_training_are_each_cells_median_and_range_with_busy_starts_named(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for seed, (minutes, load) in enumerate([(20.0, 2.0), (65.0, 4.7), (14.0, 1.1)]):
        machine = {"provenance": {"machine": {"load_average": [load, 2.0, 2.0]}}}
        record(records, "elmo", 5, seed, 50.0, minutes=minutes, fine_tuned=True, **machine)
        record(records, "elmo", 100, seed, 60.0, minutes=4.0 + seed, fine_tuned=False, **machine)
        record(records, "none", 100, seed, 55.0, minutes=3.0, fine_tuned=False)
    result = alternatives_report.analyse(alternatives_report.read(records), None)
    assert result["minutes"]["elmo"][5] == {
        "median": 20.0,
        "min": 14.0,
        "max": 65.0,
        "per_seed": {0: 20.0, 1: 65.0, 2: 14.0},
        "fine_tuned": True,
    }
    assert result["busy_runs"] == ["ner_elmo_100_s1", "ner_elmo_5_s1"]  # started at load 4.7, beside more than a pair
    lines = alternatives_report.table(result).splitlines()
    assert "| 5 | — | — | 20.0 (14.0–65.0) ft | — |" in lines
    assert "| 100 | 3.0 (3.0–3.0) | — | 5.0 (4.0–6.0) | — |" in lines
    assert any(line.endswith("(beside more than their pair): ner_elmo_100_s1, ner_elmo_5_s1.") for line in lines)


def test_the_words_per_second_beside_each_arm_name_their_run_cpu_and_threads(tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    for arm in ("none", "elmo"):
        record(records, arm, 100, 0, 60.0)
    cpu = {"vendor": "AuthenticAMD", "family": 26, "model": 2, "flags": []}
    arms = {arm: {"words_per_s": 1000 + i} for i, arm in enumerate(alternatives_report.ARMS)}
    speed = {"cpu": cpu, "threads": 2, "load_average_before": [0.15, 1.0, 1.5], "sentences": 402, "arms": arms}
    speed["provenance"] = {"started_utc": "2026-12-07T04:08:46Z", "git": {"commit": "67f41b0" + "0" * 33}}
    text = alternatives_report.table(alternatives_report.analyse(alternatives_report.read(records), speed))
    assert "| 1002 |" in next(line for line in text.splitlines() if line.startswith("| ELMo |"))
    assert (
        "\n\nWords/s: one run of lab/benchmarks/alternatives_speed.py (2026-12-07T04:08:46Z, commit 67f41b0) on "
        in text
    )
    assert "AuthenticAMD family 26 model 2, 2 threads, load 0.15 before; 402 dev sentences" in text


def test_the_speed_run_names_each_model_by_its_folder_under_runs_and_the_campaigns_digest(tiny_model_dir, tmp_path):
    import sys

    import spacy
    from spacy.tokens import DocBin

    from helpers import run
    from lab.experiments.looks_ledger import model_sha256

    runs = tmp_path / "training"
    for arm in alternatives_report.ARMS:
        nlp = spacy.blank("en")
        if arm.startswith("elmo"):
            nlp.add_pipe("elmo", config={"model": str(tiny_model_dir)})
        nlp.add_pipe("ner").add_label("ORG")
        nlp.initialize()
        (runs / f"ner_{arm}_100_s0").mkdir(parents=True)
        nlp.to_disk(runs / f"ner_{arm}_100_s0" / "model-best")
    sentencizer = spacy.blank("en")
    sentencizer.add_pipe("sentencizer")
    texts = ["Acme grew. Bob went to Paris.", "The sea is calm today."]
    DocBin(docs=list(sentencizer.pipe(texts))).to_disk(tmp_path / "dev.spacy")
    out = tmp_path / "speed.json"
    done = run(
        sys.executable, "-m", "lab.benchmarks.alternatives_speed", "--runs", runs, "--text", tmp_path / "dev.spacy",
        "--out", out, "--threads", "1", "--repeats", "1", cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    result = json.loads(out.read_text(encoding="utf8"))
    assert result["sentences"] == 3
    for arm in alternatives_report.ARMS:
        entry = result["arms"][arm]
        assert entry["model"] == f"ner_{arm}_100_s0/model-best"
        assert entry["model_sha256"] == model_sha256(runs / entry["model"])
        assert entry["words"] == 14 and entry["words_per_s"] > 0
    assert str(tmp_path) not in out.read_text(encoding="utf8")


def test_the_committed_speed_run_timed_the_very_models_the_run_records_scored():
    speed = json.loads((ROOT / "results" / "alternatives_speed.json").read_text(encoding="utf8"))
    for arm, entry in speed["arms"].items():
        run = Path(entry["model"]).parent.name
        record = json.loads((ROOT / "results" / "runs" / "alternatives" / f"{run}.json").read_text(encoding="utf8"))
        assert record["arm"] == arm and entry["model_sha256"] == record["test"]["model_sha256"], run


def test_the_committed_campaign_is_whole_registered_first_and_its_page_is_the_reports_output():
    """Issue 63's "done when", read from what is committed: every registered cell has its record, all trained and
    scored at one clean commit that the registration (the commit adding results/alternatives.md) precedes or is,
    one test look per run in the ledger with the record's score and model, and the page's table is what the report
    writes from those records and the speed file, unedited."""
    results = ROOT / "results"
    folder = results / "runs" / "alternatives"
    records = {path.stem: json.loads(path.read_text(encoding="utf8")) for path in folder.glob("*.json")}
    cells = {(r["arm"], str(r["train_pct"]), r["seed"]) for r in records.values()}
    arms, sizes, seeds = alternatives_campaign.ARMS, alternatives_campaign.FRACTIONS, alternatives_campaign.SEEDS
    assert cells == {(arm, pct, seed) for arm in arms for pct in sizes for seed in seeds}
    assert len(records) == 60
    commits = set()
    for name, record in records.items():
        for stage in (record["provenance"], record["test"]["provenance"]):
            assert stage["git"]["dirty"] is False, name
            commits.add(stage["git"]["commit"])
    assert len(commits) == 1
    (commit,) = commits
    git = ["git", "-C", str(ROOT)]
    added = subprocess.run([*git, "log", "--diff-filter=A", "--format=%H", "--", "results/alternatives.md"],
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    registration = added[-1]  # the first commit that added the page
    assert subprocess.run([*git, "merge-base", "--is-ancestor", registration, commit]).returncode == 0
    looks = json.loads((results / "alternatives_looks.json").read_text(encoding="utf8"))["looks"]
    assert sorted(look["look"] for look in looks) == list(range(1, len(records) + 1))
    by_run = {Path(look["run"]).name: look for look in looks}
    assert set(by_run) == set(records)
    for name, record in records.items():
        look = by_run[name]
        assert (look["score"], look["model_sha256"], look["commit"]) == (
            record["test"]["score"],
            record["test"]["model_sha256"],
            commit,
        ), name
    speed = json.loads((results / "alternatives_speed.json").read_text(encoding="utf8"))
    table = alternatives_report.table(alternatives_report.analyse(alternatives_report.read(folder), speed))
    page = (results / "alternatives.md").read_text(encoding="utf8")
    assert page.split("<!-- alternatives:start -->\n", 1)[1].split("<!-- alternatives:end -->", 1)[0] == table


def test_the_answers_typed_figures_are_the_tables():
    """results/alternatives.md's "Answer" is written by people around the generated table: each gain with its
    interval, each words/s and the none arm's 100% score it cites must be the table's, so that a regenerated table
    and a stale sentence cannot disagree unseen."""
    page = (ROOT / "results" / "alternatives.md").read_text(encoding="utf8").replace("−", "-")
    table = page.split("<!-- alternatives:start -->", 1)[1].split("<!-- alternatives:end -->", 1)[0]
    answer = " ".join(page.split("## Answer", 1)[1].split("\n## ", 1)[0].split())  # one line: figures wrap
    sign = r"[+-]\d+\.\d\d"
    gains = re.findall(rf"({sign}) \[({sign}), ({sign})\]", answer)
    assert len(gains) >= 7
    for mean, low, high in gains:
        assert f"{mean} [{low}, {high}]" in table, (mean, low, high)
    speeds = re.findall(r"(\d{1,2},\d{3}) (?:words/s|\()", answer)
    assert len(speeds) == 3
    for figure in speeds:
        assert f"| {figure.replace(',', '')} |" in table, figure
    target = re.search(r"full-data test F1 \((\d+\.\d\d)\)", answer).group(1)
    assert f"the none arm's 100% test F1: {target}." in table
