"""Every published gain interval recomputed from the committed run records, independently of lab/reports/gains.py.

The recomputation here shares no code with lab/reports/gains.py: it pairs records by file name, takes the mean and sd
from `statistics` and t(0.975, n − 1) from Student's t density integrated numerically (Simpson's rule) and inverted
by bisection, not from gains.py's table of quantiles."""

from __future__ import annotations

import json
import math
import re
import shutil
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "results" / "runs"
FOLDERS = ("training_seeds", "confirmation")  # the record folders the published table is written from
README = ROOT / "README.md"  # its Results: the confirmation's cells alone (`<!-- confirmation:start -->`)
PAGES = (
    ROOT / "results" / "README.md",
    ROOT / "results" / "gains.md",
    ROOT / "results" / "confirmation.md",
)
INTERVAL = re.compile(r"\[([+-]?\d+\.\d+), ([+-]?\d+\.\d+)\]")
GAINS_HEADER = "| data | task | train % | biLM |"
SUMMARY_HEADER = "| confirmation: data and task | train % |"
SUMMARY_TASKS = {"WNUT-17 NER (F1)": "ner", "UD English-LinES POS (accuracy)": "pos"}


def _t975(df: int) -> float:
    """t(0.975, df): the t density integrated from 0 (Simpson, 4,000 panels) and inverted by bisection."""
    const = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def density(x: float) -> float:
        return const * (1 + x * x / df) ** (-(df + 1) / 2)

    def cdf(t: float, panels: int = 4000) -> float:
        h = t / panels
        inner = sum((4 if i % 2 else 2) * density(i * h) for i in range(1, panels))
        return 0.5 + (density(0.0) + inner + density(t)) * h / 3

    low, high = 0.0, 50.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < 0.975 else (low, mid)
    return (low + high) / 2


def recompute(runs: Path) -> dict[tuple, dict]:
    """{(folder, task, pct, biLM tag or None): {per_seed, mean, sd, interval}} from the records' file names and test
    scores: ELMo `{task}_elmo[_{tag}]_{pct}_s{seed}` − baseline `{task}_baseline_{pct}_s{seed}` of the same folder."""
    cells: dict[tuple, dict] = {}
    shifts: dict[tuple, dict] = {}
    for folder in FOLDERS:
        scores = {}
        for path in sorted((runs / folder).glob("*.json")) if (runs / folder).is_dir() else []:
            score = (json.loads(path.read_text(encoding="utf8")).get("test") or {}).get("score")
            if isinstance(score, (int, float)):
                scores[path.stem] = score
        for name, score in scores.items():
            match = re.fullmatch(r"([a-z]+)_elmo(?:_([a-z0-9]+))?_(\d+)_s(\d+)", name)
            if not match:
                continue
            task, tag, pct, seed = match.groups()
            base = scores.get(f"{task}_baseline_{pct}_s{seed}")
            if base is not None:
                cells.setdefault((folder, task, pct, tag), {})[seed] = round(score - base, 2)
            first = scores.get(f"{task}_elmo_{pct}_s{seed}")
            if tag is not None and first is not None:  # the shift from the first biLM, same seed
                shifts.setdefault((folder, task, pct, tag), {})[seed] = round(score - first, 2)
    out = {key: _spread(per_seed) for key, per_seed in cells.items()}
    for key, per_seed in shifts.items():
        out[key]["shift"] = _spread(per_seed)
    return out


def _spread(per_seed: dict) -> dict:
    values = list(per_seed.values())
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    half = _t975(len(values) - 1) * sd / math.sqrt(len(values))
    return {
        "per_seed": dict(sorted(per_seed.items(), key=lambda kv: int(kv[0]))),
        "mean": round(mean, 2),
        "sd": round(sd, 2),
        "interval": [round(mean - half, 2), round(mean + half, 2)],
    }


def _cell_of(cells: list[str]) -> tuple:
    data, task, pct, bilm = cells[:4]
    folder = "training_seeds" if data == "CoNLL-2003" else "confirmation" if data.startswith("confirmation") else data
    tag = None if bilm.startswith("first") else bilm.split()[0]
    return folder, {"NER (F1)": "ner", "POS (accuracy)": "pos"}[task], pct, tag


def _fmt(value: float) -> str:
    return f"{value:+.2f}"


def mismatches(runs: Path, gains_json: Path, pages: tuple[Path, ...]) -> list[str]:
    """Every published gain (gains.json, the gains tables of the pages) that differs from the recomputation, and
    every interval printed on a page outside a gains table row."""
    expected = recompute(runs)
    wrong = []
    published = json.loads(gains_json.read_text(encoding="utf8"))["rows"]
    seen = set()
    for row in published:
        key = (row["records"], row["task"], row["fraction"], None if row["bilm"] == "first" else row["bilm"])
        seen.add(key)
        if row["status"] != "run":
            if key in expected:
                wrong.append(f"gains.json {key}: 'not run', but the records pair")
            continue
        got = {name: row[name] for name in ("per_seed", "mean", "sd", "interval")}
        if row.get("shift"):
            got["shift"] = {name: row["shift"][name] for name in ("per_seed", "mean", "sd", "interval")}
        if got != expected.get(key):
            wrong.append(f"gains.json {key}: {got} != {expected.get(key)}")
    wrong += [f"gains.json: no row for {key}" for key in expected if key not in seen]
    for page in pages:
        lines = page.read_text(encoding="utf8").splitlines()
        in_table = False
        for number, line in enumerate(lines, 1):
            if line.startswith(GAINS_HEADER):
                in_table = True
                continue
            in_table = in_table and line.startswith("|")
            if not in_table or line.startswith("|---"):
                if INTERVAL.search(line):
                    wrong.append(f"{page.name}:{number}: an interval outside the gains table: {line}")
                continue
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            key = _cell_of(cells)
            want = expected.get(key)
            if want is None:
                if cells[4] != "not run" or INTERVAL.search(line):
                    wrong.append(f"{page.name}:{number}: {key} has no pairs in the records: {line}")
                continue
            per_seed = ", ".join(f"s{seed} {_fmt(gain)}" for seed, gain in want["per_seed"].items())
            shown = [cells[4], cells[5], cells[6], cells[7]]
            right = [
                str(len(want["per_seed"])),
                per_seed,
                f"{_fmt(want['mean'])} ± {want['sd']:.2f}",
                f"[{_fmt(want['interval'][0])}, {_fmt(want['interval'][1])}]",
            ]
            if shown != right:
                wrong.append(f"{page.name}:{number}: {key}: {shown} != {right}")
            shift = want.get("shift")
            right_shift = ""
            if shift:
                low, high = shift["interval"]
                right_shift = f"{_fmt(shift['mean'])} ± {shift['sd']:.2f}, [{_fmt(low)}, {_fmt(high)}]"
            if cells[8] != right_shift:
                wrong.append(f"{page.name}:{number}: {key} shift: {cells[8]!r} != {right_shift!r}")
    return wrong


def summary_mismatches(runs: Path, page: Path) -> list[str]:
    """Every row of the page's confirmation summary that differs from the recomputation, every confirmation cell
    (first biLM) it leaves out, and every interval on the page outside the summary."""
    expected = {key: want for key, want in recompute(runs).items() if key[0] == "confirmation" and key[3] is None}
    wrong, seen, in_table = [], set(), False
    for number, line in enumerate(page.read_text(encoding="utf8").splitlines(), 1):
        if line.startswith(SUMMARY_HEADER):
            in_table = True
            continue
        in_table = in_table and line.startswith("|")
        if not in_table or line.startswith("|---"):
            if INTERVAL.search(line):
                wrong.append(f"{page.name}:{number}: an interval outside the summary: {line}")
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        key = ("confirmation", SUMMARY_TASKS[cells[0]], cells[1], None)
        seen.add(key)
        want = expected.get(key)
        right = ["not run", "", "", ""]
        if want is not None:
            right = [
                str(len(want["per_seed"])),
                ", ".join(f"s{seed} {_fmt(gain)}" for seed, gain in want["per_seed"].items()),
                f"{_fmt(want['mean'])} ± {want['sd']:.2f}",
                f"[{_fmt(want['interval'][0])}, {_fmt(want['interval'][1])}]",
            ]
        if cells[2:6] != right:
            wrong.append(f"{page.name}:{number}: {key}: {cells[2:6]} != {right}")
    wrong += [f"{page.name}: no summary row for {key}" for key in expected if key not in seen]
    return wrong


def test_the_readme_summarizes_the_confirmation_as_recomputed_from_the_records():
    """README's Results is the pre-registered confirmation alone: each cell's per-seed gains, mean and interval as
    the records give them; the whole table (CoNLL-2003 too) is results/README.md's, not the README's."""
    text = README.read_text(encoding="utf8")
    assert SUMMARY_HEADER in text and GAINS_HEADER not in text
    assert summary_mismatches(RUNS, README) == []


def test_a_changed_confirmation_score_is_caught_in_the_readme(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    path = runs / "confirmation" / "pos_elmo_10_s3.json"
    record = json.loads(path.read_text(encoding="utf8"))
    record["test"]["score"] += 0.5
    path.write_text(json.dumps(record), encoding="utf8")
    wrong = summary_mismatches(runs, README)
    assert len(wrong) == 1 and "'pos', '10'" in wrong[0], wrong


def test_every_published_interval_is_recomputed_from_the_records():
    pages_with_table = [page for page in PAGES if GAINS_HEADER in page.read_text(encoding="utf8")]
    assert set(pages_with_table) == set(PAGES)  # the results pages and gains.md all show the table
    assert mismatches(RUNS, ROOT / "results" / "gains.json", PAGES) == []
    # the CoNLL cells are there, each with its seeds
    expected = recompute(RUNS)
    assert {key[1:3] for key in expected if key[0] == "training_seeds" and key[3] is None} == {
        ("ner", "10"),
        ("ner", "100"),
        ("pos", "10"),
        ("pos", "100"),
    }


def test_a_changed_score_is_caught(tmp_path):
    """One record's test score moved by 0.5: the published gains no longer recompute, nor the second biLM's shift
    from that (first-biLM) run."""
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    path = runs / "training_seeds" / "ner_elmo_10_s1.json"
    record = json.loads(path.read_text(encoding="utf8"))
    record["test"]["score"] += 0.5
    path.write_text(json.dumps(record), encoding="utf8")
    wrong = mismatches(runs, ROOT / "results" / "gains.json", PAGES)
    first = [line for line in wrong if "'ner', '10', None" in line]
    shift = [line for line in wrong if "'ner', '10', 'bilm2'" in line]
    assert len(first) == len(shift) == 1 + len(PAGES) and len(wrong) == len(first) + len(shift), wrong


def test_t_quantiles_agree_with_the_scripts_table(script):
    gains = script("reports.gains")
    for df in (1, 2, 4, 9):
        assert abs(_t975(df) - gains.T975[df]) < 5e-6, df


def test_the_published_files_are_what_gains_writes_now(script):
    gains = script("reports.gains")
    args = [str(RUNS / folder) for folder in FOLDERS]
    args += ["--out", str(ROOT / "results" / "gains.json"), "--table", str(ROOT / "results" / "gains.md")]
    args += ["--looks", str(ROOT / "results" / "test_looks.json")]
    args += ["--looks-table", str(ROOT / "results" / "test_looks.md")]
    args += ["--pages", str(README), *(str(page) for page in PAGES if page.name != "gains.md"), "--check"]
    assert gains.main(args) == 0, "run the `gains` command of project.yml"


def _record(folder: Path, run: str, score: float | None, train: str = "t" * 64, bilm: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = {"run": run, "data_sha256": {"work/corpus/train_10.spacy": train}, "bilm_sha256": bilm}
    if score is not None:
        body["test"] = {"score": score}
    (folder / f"{run}.json").write_text(json.dumps(body))


def test_pairing_by_task_fraction_seed_and_data(script, tmp_path):
    """Baseline and ELMo pair by task, fraction, seed and training data; a second biLM's runs in a folder of their
    own pair with the baselines of the same data and show their shift from the first biLM; a folder absent, or a
    cell with no pair, reads "not run"; an unscored record is left out."""
    gains = script("reports.gains")
    seeds, second, confirm = tmp_path / "training_seeds", tmp_path / "bilm2", tmp_path / "confirmation"
    for seed, (base, elmo, elmo2) in enumerate([(70.0, 75.0, 74.0), (71.0, 77.0, 78.0), (69.0, 73.0, 73.5)]):
        _record(seeds, f"ner_baseline_10_s{seed}", base)
        _record(seeds, f"ner_elmo_10_s{seed}", elmo, bilm="a" * 64)
        _record(second, f"ner_elmo_bilm2_10_s{seed}", elmo2, bilm="b" * 64)
    _record(seeds, "ner_elmo_10_s3", 80.0, bilm="a" * 64)  # no baseline at seed 3: not paired
    _record(seeds, "pos_baseline_10_s0", 92.0)
    _record(seeds, "pos_elmo_10_s0", None, bilm="a" * 64)  # not scored yet
    _record(confirm, "ner_baseline_10_s0", 30.0, train="c" * 64)
    _record(confirm, "ner_elmo_10_s0", 32.5, train="c" * 64, bilm="a" * 64)
    _record(confirm, "ner_elmo_10_s1", 33.0, train="c" * 64, bilm="a" * 64)  # its baseline is CoNLL's data: unpaired
    rows = gains.rows([seeds, confirm, second], gains.read_records([seeds, confirm, second]))
    by_key = {(r["records"], r["task"], r["fraction"], r["bilm"]): r for r in rows}
    first = by_key["training_seeds", "ner", "10", "first"]
    assert first["per_seed"] == {"0": 5.0, "1": 6.0, "2": 4.0} and first["mean"] == 5.0 and first["sd"] == 1.0
    half = gains.T975[2] * 1.0 / math.sqrt(3)
    assert first["interval"] == [round(5.0 - half, 2), round(5.0 + half, 2)] and first["bilm_sha256"] == ["a" * 64]
    other = by_key["training_seeds", "ner", "10", "bilm2"]
    assert other["per_seed"] == {"0": 4.0, "1": 7.0, "2": 4.5} and other["bilm_sha256"] == ["b" * 64]
    assert other["shift"]["per_seed"] == {"0": -1.0, "1": 1.0, "2": 0.5}
    assert by_key["training_seeds", "pos", "10", "first"]["status"] == "not run"
    assert by_key["training_seeds", "pos", "10", "bilm2"]["status"] == "not run"
    assert ("training_seeds", "ner", "100", "bilm2") not in by_key  # a second biLM at 10% only
    one = by_key["confirmation", "ner", "10", "first"]
    assert one["per_seed"] == {"0": 2.5} and one["sd"] is None and one["interval"] is None
    assert all(key[3] == "first" for key in by_key if key[0] == "confirmation")
    table = gains.gains_table(rows)
    assert "| CoNLL-2003 | POS (accuracy) | 10 | bilm2 | not run | | | | not run |" in table
    assert "| n = 1 |" in table and "+0.17 ± 1.04" in table  # the shift: mean of -1, 1, 0.5
    # with no confirmation records at all, its four cells read "not run"
    rows = gains.rows([seeds, tmp_path / "none" / "confirmation"], gains.read_records([seeds]))
    assert [r["status"] for r in rows if r["records"] == "confirmation"] == ["not run"] * 4


def test_pages_get_the_tables_between_their_markers(script, tmp_path):
    gains = script("reports.gains")
    page = tmp_path / "page.md"
    page.write_text("lead\n<!-- gains:start -->\nold\n<!-- gains:end -->\nafter\n")
    assert gains.splice(page.read_text(), "gains", "| t |\n") == (
        "lead\n<!-- gains:start -->\n| t |\n<!-- gains:end -->\nafter\n"
    )
    assert gains.splice("no markers", "gains", "| t |\n") == "no markers"


def test_the_looks_table_gives_each_round_of_a_cell_its_paired_gain(script):
    """The disclosure's sequence of NER 10% gains (issue 42): each round's ELMo looks paired with the baseline's
    looks at the same seeds, recomputed here from the ledger, as the looks table shows them."""
    ledger = json.loads((ROOT / "results" / "test_looks.json").read_text(encoding="utf8"))["looks"]
    score = {entry["look"]: entry["score"] for entry in ledger}
    rounds = {  # ELMo looks: their baselines' looks (the same seeds, in order)
        (29, 30, 31): (26, 27, 28),
        (53, 54, 55): (50, 51, 52),
        (75, 76, 77): (50, 51, 52),
        (84, 85, 86): (50, 51, 52),
        (96, 97, 98): (50, 51, 52),
    }
    means = [
        round(statistics.fmean(round(score[e] - score[b], 2) for e, b in zip(elmo, base)), 2)
        for elmo, base in rounds.items()
    ]
    assert means == [4.23, 4.74, 5.91, 6.78, 6.13]
    table = (ROOT / "results" / "test_looks.md").read_text(encoding="utf8")
    for elmo, mean in zip(rounds, means):
        row = next(line for line in table.splitlines() if line.startswith(f"| ner 10% | {elmo[0]}–{elmo[-1]} |"))
        assert row.endswith(f"| {mean:+.2f} |"), row
    assert gains_rows_cover_the_ledger(script, ledger)


def gains_rows_cover_the_ledger(script, ledger: list[dict]) -> bool:
    """Every look of the ledger is in exactly one row of the looks table."""
    rows = script("reports.gains").looks_rows(ledger)
    listed = sorted(entry["look"] for row in rows for entry in row["looks"])
    return listed == sorted(entry["look"] for entry in ledger)
