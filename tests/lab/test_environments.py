"""lab/benchmarks/environments.py: the legs' records (bench/results/environments.md). A leg's pytest summaries are
found in its output (test-compat runs pytest twice), the versions are read from a leg's own Python, and the table
names each record's versions, counts, times, commit and CPU."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lab.benchmarks import environments

OUTPUT = """\
.venv-compat/bin/pip install -q -c constraints-compat.txt transformers
........................................................................ [ 50%]
=================== 1200 passed, 3 skipped, 2 warnings in 612.40s (0:10:12) ===================
Successfully installed transformers-4.46.1
....                                                                     [100%]
============ 1 failed, 150 passed in 88.10s (0:01:28) ============
"""


def test_every_pytest_summary_of_a_leg_is_found():
    assert environments.summaries(OUTPUT) == [
        "1200 passed, 3 skipped, 2 warnings in 612.40s (0:10:12)",
        "1 failed, 150 passed in 88.10s (0:01:28)",
    ]
    assert environments.summaries("pip install -q torch\n") == []


def test_versions_come_from_the_legs_own_python():
    found = environments.versions(Path(sys.executable))
    assert found["python"] == platform.python_version() and found["torch"] == torch.__version__
    assert set(environments.PACKAGES) <= set(found)


def test_the_table_names_each_records_figures():
    record = {
        "leg": "test-newest",
        "versions": {"python": "3.13.0", "torch": "2.14.1", "transformers": "5.25.0", "spacy-transformers": None},
        "summaries": environments.summaries(OUTPUT),
        "wall_s": 700.0,
        "user_s": 1000.0,
        "sys_s": 60.5,
        "exit_status": 1,
        "commit": "0123456789abcdef",
        "uncommitted": ["README.md"],
        "machine": {"cpu": "AMD EPYC", "cores": 2},
        "cpu_kind": {"vendor": "AuthenticAMD", "family": 26, "model": 2},
        "started": "2026-12-06T10:00:00Z",
        "load_start": "0.10/0.20/0.30",
        "load_end": "2.00/1.00/0.50",
    }
    older = {**record, "leg": "test-compat", "started": "2026-12-05T10:00:00Z"}
    table = environments.render([older, record]).splitlines()
    rows = [line for line in table if line.startswith("| `make")]
    assert [row.split(" | ")[0] for row in rows] == ["| `make test-newest`", "| `make test-compat`"]
    row = rows[0]
    for part in ("3.13.0", "2.14.1", "5.25.0", "1 failed, 150 passed", "11m40.0s", "17m40.5s", "0123456"):
        assert part in row, part
    assert "uncommitted" in row and "AuthenticAMD family 26 model 2" in row and "| — |" in row


def test_without_legs_the_table_is_written_again_from_the_records(tmp_path, capsys):
    records = tmp_path / "environments.jsonl"
    record = {
        "leg": "test-compat",
        "versions": {"python": "3.10.13", "torch": "2.4.1"},
        "summaries": environments.summaries(OUTPUT),
        "wall_s": 700.0,
        "user_s": 1000.0,
        "sys_s": 60.5,
        "exit_status": 0,
        "commit": "0123456789abcdef",
        "uncommitted": [],
        "machine": {"cpu": "AMD EPYC", "cores": 2},
        "cpu_kind": {"vendor": "AuthenticAMD", "family": 26, "model": 2},
        "started": "2026-12-06T10:00:00Z",
        "load_start": "0.10/0.20/0.30",
        "load_end": "2.00/1.00/0.50",
    }
    records.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert environments.main(["--out", str(records)]) == 0
    assert "| `make test-compat` | 3.10.13 | 2.4.1 |" in (tmp_path / "environments.md").read_text(encoding="utf-8")
    with pytest.raises(SystemExit):
        environments.main(["test-oldest", "--out", str(records)])
    assert "unknown leg 'test-oldest': expected one of test, test-compat, test-newest" in capsys.readouterr().err


def test_later_legs_do_not_count_the_runs_own_records_as_uncommitted(tmp_path):
    # `environments test test-compat` appends the first leg's record before the second leg clones HEAD: that write
    # is this run's own and no change of what the second leg measures; a user's own uncommitted edit still counts
    repo = tmp_path / "repo"
    (repo / "bench").mkdir(parents=True)

    def leg(venv: str) -> str:  # each leg's Python in its clone, as `make` makes it, then a pytest summary
        python = f"{venv}/bin/python"
        return f"\t@mkdir -p {venv}/bin && ln -sf {sys.executable} {python} && echo '== 1 passed in 0.01s =='\n"

    (repo / "Makefile").write_text(f"test:\n{leg('.venv')}\ntest-compat:\n{leg('.venv-compat')}")
    (repo / "notes.txt").write_text("committed\n")
    out = repo / "bench" / "environments.jsonl"
    out.write_text("")  # committed, as bench/results/environments.jsonl is
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    (repo / "notes.txt").write_text("edited, not committed\n")
    assert environments.main(["test", "test-compat", "--repo", str(repo), "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["leg"] for r in records] == ["test", "test-compat"]
    assert [r["uncommitted"] for r in records] == [["notes.txt"], ["notes.txt"]]
    assert records[1]["summaries"] == ["1 passed in 0.01s"]
