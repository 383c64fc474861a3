"""lab/benchmarks/time_make_test.py: times a command in a fresh clone of HEAD and writes what the README cites."""

from __future__ import annotations

import subprocess
from pathlib import Path

from lab.benchmarks import time_make_test

MAKEFILE = """test:
\ttest ! -e assets && test ! -e ../shared
\t@echo "1.50s call     tests/test_a.py::test_slow"
\t@echo "0.20s setup    tests/test_a.py::test_fast"
\t@echo "2 passed, 1 warning in 1.72s"
\t@test $(STATUS) -eq 0 || echo "FAILED tests/test_a.py::test_b - assert 1 == 2"
\t@for i in $$(seq 30); do echo "pip noise $$i" >&2; done
\texit $(STATUS)
"""


def _repo(tmp_path: Path, status: int) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "Makefile").write_text(MAKEFILE.replace("$(STATUS)", str(status)))
    git = lambda *args: subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,  # noqa: E731
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    git("init", "-q")
    git("add", "Makefile")
    git("commit", "-qm", "x")
    (repo / "assets").mkdir()  # ignored beside the checkout: a fresh clone has none
    (repo / "uncommitted.txt").write_text("not measured")
    return repo, git("rev-parse", "HEAD")


def test_times_make_test_in_a_fresh_clone_and_records_it(tmp_path):
    repo, commit = _repo(tmp_path, 0)
    out = tmp_path / "make_test.txt"
    (tmp_path / "make_test_failed_output.txt").write_text("an earlier run's failure")  # stale: removed by a pass
    assert time_make_test.main(["--repo", str(repo), "--out", str(out)]) == 0
    text = out.read_text()
    assert f"commit: {commit}\nuncommitted changes (not measured): " in text and "assets/: absent\n" in text
    assert "exit status: 0" in text and "pytest's last line: 2 passed, 1 warning in 1.72s\n" in text
    assert "    1.50s call tests/test_a.py::test_slow\n    0.20s setup tests/test_a.py::test_fast\n" in text
    assert "failed tests" not in text and not (tmp_path / "make_test_failed_output.txt").exists()
    assert " cores, " in text and "started (UTC): 20" in text and "wall time (s): " in text


def test_a_failing_suite_is_recorded_with_its_status(tmp_path, capsys):
    repo, _ = _repo(tmp_path, 3)
    out = tmp_path / "make_test.txt"
    assert time_make_test.main(["--repo", str(repo), "--out", str(out)]) == 2  # make's status for a failed recipe
    assert "exit status: 2" in out.read_text()
    err = capsys.readouterr().err
    assert "FAILED tests/test_a.py::test_b - assert 1 == 2" in err  # named even when pip's output ends the log
    assert "failed tests:\n    FAILED tests/test_a.py::test_b - assert 1 == 2\n" in out.read_text()
    assert "2 passed, 1 warning" in (tmp_path / "make_test_failed_output.txt").read_text()  # the whole output kept
