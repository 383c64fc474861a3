"""Release-ready (issue 34): `python -m build` makes a wheel and an sdist that `twine check` accepts, each with
the LICENSE text, and leaves the source tree as it found it; the
wheel holds the package and nothing of the lab (lab/, bench/, results/, tests/, the project steps'
wrapper lab/experiments/provenance_step.py, configs/experiments); and a fresh virtual environment holding only
that wheel and its dependencies (torch pinned by constraints.txt, as `make test` installs it) runs the
README's quick start and its `spacy-elmo init-config` command.

One test, about a minute on 2 cores with pip's cache warm (more the first time, or on a loaded machine): the build
(isolated, as a release is built), the environment (torch, then the wheel with its dependencies from
the package index), then the README's commands in it, in a folder holding only the test biLM."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from helpers import source_tree  # tests/ is on sys.path (rootdir conftest)

ROOT = Path(__file__).resolve().parents[2]


def lab_file(name: str) -> bool:
    """Whether an archive's file `name` is the lab's: under lab/, bench/, results/, tests/, assets/ or
    configs/experiments/ (at any depth), or the project steps' wrapper."""
    folders = {"lab", "bench", "results", "tests", "assets", "experiments"}
    return bool(folders & set(name.split("/")[:-1])) or "provenance_step" in name


def quick_start() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[text.index("## Quick start") : text.index("## Set-up: two commands")]


def quick_start_blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", quick_start(), re.S | re.M)


def quick_start_commands() -> list[list[str]]:
    """The quick start's shell commands (continued lines joined, comments dropped), except the virtual
    environment's creation and `pip install` (the test's own fresh venv and the wheel stand for them), and the
    `spacy-elmo init-config ...` its text gives."""
    commands = []
    for block in quick_start_blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[:2] != ["pip", "install"] and words[:3] != ["python", "-m", "venv"]:
                commands.append(words)
    init = re.findall(r"`(spacy-elmo init-config [^`]+)`", " ".join(quick_start().split()))
    assert len(init) == 1, init
    return commands + [shlex.split(init[0])]


def printed_comments(code: str) -> list[str]:
    """The comment after each `print(...)` line of `code`: what the README says it prints."""
    return [
        line.split("#", 1)[1].strip()
        for line in code.splitlines()
        if line.lstrip().startswith("print(") and "#" in line
    ]


def run(command, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_quick_start_is_what_this_test_runs():
    """The parsing above finds the README's commands and the prints it checks."""
    commands = quick_start_commands()
    assert "python -m venv .venv && . .venv/bin/activate" in quick_start()  # the step the test's own venv stands for
    assert commands[0][:2] == ["spacy-elmo", "convert"] and commands[-1][:2] == ["spacy-elmo", "init-config"]
    code = "\n".join(quick_start_blocks("python"))
    assert "load_legacy(" in code and 'add_pipe("elmo"' in code and "AutoModel.from_pretrained" in code
    assert len(printed_comments(code)) == 2


@pytest.mark.slow
def test_wheel_and_sdist_build_pass_twine_and_a_fresh_venv_runs_the_quick_start(allennlp_dir, tmp_path):
    src = source_tree(tmp_path / "src")
    sources = sorted(p.relative_to(src).as_posix() for p in src.rglob("*"))
    dist = tmp_path / "dist"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    run([sys.executable, "-m", "build", "--outdir", dist, src], env=env, timeout=600)
    # setup.py sends setuptools' build/ and *.egg-info to a temporary folder: the clone stays as it was
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*")) == sources, "the build wrote into the clone"
    (wheel,) = dist.glob("spacy_elmo-*.whl")
    (sdist,) = dist.glob("spacy_elmo-*.tar.gz")
    run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist], env=env, timeout=120)

    # the wheel: the package's modules, the console script's module and the shipped configs, nothing of the lab
    files = zipfile.ZipFile(wheel).namelist()
    top = {"spacy_elmo", "spacy_elmo_cli.py", wheel.name.split("-py3")[0] + ".dist-info"}  # the console script's module
    assert {name.split("/")[0] for name in files} == top
    assert [name for name in files if lab_file(name)] == [], "the wheel holds lab files"
    modules = {p.relative_to(src).as_posix() for p in (src / "spacy_elmo").rglob("*.py")} | {"spacy_elmo_cli.py"}
    assert modules == {name for name in files if name.endswith(".py")}, "the wheel lacks (or adds) modules"
    configs = {f"spacy_elmo/configs/{p.name}" for p in (src / "configs").glob("*.cfg")}
    assert configs and configs == {name for name in files if name.endswith(".cfg")}
    provenance = zipfile.ZipFile(wheel).read("spacy_elmo/provenance.py").decode()
    assert "def main" not in provenance and "wrapper_arguments" not in provenance  # the step wrapper is the lab's
    # the sdist: what the wheel is built from (the package, its configs, README and build files), no lab files
    members = [m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m]
    assert [m for m in members if lab_file(m) or m.startswith("docs/")] == [], "the sdist holds lab files"
    assert "spacy_elmo/provenance.py" in members and "README.md" in members
    # the licence: its full text in both archives, its SPDX expression in the metadata
    licence = (ROOT / "LICENSE").read_bytes()
    assert b"Apache License" in licence and b"Version 2.0, January 2004" in licence
    info = wheel.name.split("-py3")[0] + ".dist-info"
    assert zipfile.ZipFile(wheel).read(f"{info}/licenses/LICENSE") == licence
    (sdist_root,) = {m.split("/", 1)[0] for m in tarfile.open(sdist).getnames()}
    assert tarfile.open(sdist).extractfile(f"{sdist_root}/LICENSE").read() == licence
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode().splitlines()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata

    # a fresh environment holding only the wheel and its dependencies
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], env=env, timeout=300)
    bin_dir = venv / "bin"
    # --no-compile: no bytecode for all of torch (half the install's time); what the quick start imports compiles
    # as it runs
    pip = [bin_dir / "python", "-m", "pip", "install", "-q", "--no-compile", "-c", ROOT / "constraints.txt"]
    run([*pip, "torch"], env=env, timeout=600)  # the CPU wheel where the index serves it (Makefile, README)
    run([*pip, wheel], env=env, timeout=600)
    venv_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv), "HF_HUB_OFFLINE": "1"}

    # the README's quick start, in a folder holding only the test biLM where the README names it
    work = tmp_path / "work"
    shutil.copytree(allennlp_dir, work / "tests" / "fixtures" / "allennlp_elmo")
    located = run([bin_dir / "python", "-c", "import spacy_elmo; print(spacy_elmo.__file__)"], cwd=work, env=venv_env)
    assert Path(located.stdout.strip()).is_relative_to(venv), located.stdout  # the wheel's package, not the checkout
    for command in quick_start_commands():
        run(command, cwd=work, env=venv_env, timeout=600)
    code = "\n".join(quick_start_blocks("python"))
    (work / "quick_start.py").write_text(code, encoding="utf-8")
    printed = run([bin_dir / "python", "quick_start.py"], cwd=work, env=venv_env, timeout=600).stdout.splitlines()
    expected = printed_comments(code)
    assert len(printed) == len(expected) and all(said.startswith(line) for line, said in zip(printed, expected)), (
        printed,
        expected,
    )
    assert (work / "models" / "from_legacy" / "model.safetensors").is_file()
    # init-config wrote a config spaCy's own loader accepts, naming the converted biLM
    init = quick_start_commands()[-1]
    written = work / init[init.index("init-config") + 2]
    run(
        [
            bin_dir / "python",
            "-c",
            f"import spacy; c = spacy.util.load_config({str(written)!r}); "
            "assert c['paths']['elmo'] == 'models/fixture_elmo', c['paths']",
        ],
        cwd=work,
        env=venv_env,
    )
