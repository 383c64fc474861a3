"""The project's workflows start by checking what they need is installed (lab/experiments/check_requirements.py):
well under a second, and ONE line saying what to pip install when something is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import srsly

ROOT = Path(__file__).resolve().parents[2]


def _fake_install(tmp_path: Path) -> Path:
    """A site dir where `spacy-elmo` declares a [plot] requirement that is not installed."""
    info = tmp_path / "site" / "spacy_elmo-9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: spacy-elmo\nVersion: 9.9\n"
        "Requires-Dist: numpy>=1.0\n"
        'Requires-Dist: surely-not-installed-xyz>=1.5; extra == "plot"\n'
        'Requires-Dist: another-missing-xyz; extra == "other"\n'
    )
    return info.parent


def _run(*args, env=None, python=(sys.executable,)):
    return subprocess.run(
        [*python, "-m", "lab.experiments.check_requirements", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_workflows_start_with_the_check():
    project = srsly.read_yaml(ROOT / "project.yml")
    scripts = {c["name"]: c["script"] for c in project["commands"]}
    for workflow, extras in (("all", "--extras plot"), ("zh", None)):
        first = scripts[project["workflows"][workflow][0]]
        assert first[0].startswith("python -m lab.experiments.check_requirements"), (workflow, first)
        assert (extras in first[0]) if extras else "--extras" not in first[0]


def test_installed_environment_passes_fast():
    from lab.experiments import check_requirements

    start = time.perf_counter()
    missing, _ = check_requirements.problems(["plot"])
    assert time.perf_counter() - start < 0.5
    assert missing == []
    result = _run("--extras", "plot")
    assert result.returncode == 0 and result.stderr == ""


def test_a_missing_extra_requirement_is_one_line(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(_fake_install(tmp_path)))
    result = _run("--extras", "plot", env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "surely-not-installed-xyz>=1.5 (not installed; the spacy-elmo[plot] extra)" in lines[0]
    assert lines[0].endswith("pip install 'surely-not-installed-xyz>=1.5'")
    assert "another-missing-xyz" not in lines[0]  # another extra's requirement
    assert _run(env=env).returncode == 0  # without --extras plot it is not needed


def test_without_the_package_says_to_install_it():
    result = _run("--extras", "plot", python=(sys.executable, "-S"))  # -S: no site-packages
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: this workflow needs spacy-elmo (not installed): "
        "pip install 'spacy-elmo[plot]' (in a checkout: pip install -e '.[plot]')"
    ]


def test_the_workflow_stops_before_its_first_real_step(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "project.yml", project / "project.yml")
    shutil.copytree(ROOT / "lab", project / "lab")
    env = dict(
        os.environ,
        PYTHONPATH=str(_fake_install(tmp_path)),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    result = subprocess.run(
        [sys.executable, "-m", "weasel", "run", "all", str(project)],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=120,
    )
    assert result.returncode != 0
    assert "pip install 'surely-not-installed-xyz>=1.5'" in result.stderr
    assert "fetch_assets" not in result.stdout and not (project / "assets" / "conll2003").exists()
