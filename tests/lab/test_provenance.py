"""spacy_elmo.provenance: the record every result carries (commit, dirty paths, configs, machine, times);
lab/experiments/provenance_step.py: the project's wrapper writing one around a command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spacy_elmo.provenance import Provenance, git_state, sha256

STEP = ["-m", "lab.experiments.provenance_step"]


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_record_names_commit_dirty_paths_configs_and_machine(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    config = repo / "a.cfg"
    config.write_text("[training]\nseed = 1\n")
    _git(repo, "add", "a.cfg")
    _git(repo, "commit", "-q", "-m", "one")
    clean = git_state(repo)
    assert clean["dirty"] is False and clean["dirty_paths"] == [] and len(clean["commit"]) == 40

    config.write_text("[training]\nseed = 2\n")
    (repo / "new.txt").write_text("x")
    prov = Provenance(command=["train", "a.cfg"], seed=7, configs=[config], where=repo)
    config.write_text("[training]\nseed = 3\n")  # edited while the work runs: the record keeps the start's text
    record = prov.write(tmp_path / "out" / "provenance.json")
    assert record["git"]["commit"] == clean["commit"]
    assert record["git"]["dirty"] is True and record["git"]["dirty_paths"] == ["a.cfg", "new.txt"]
    assert record["seed"] == 7 and record["command"] == ["train", "a.cfg"]
    copy = tmp_path / "out" / "configs" / "a.cfg"
    assert copy.read_text() == "[training]\nseed = 2\n"
    assert record["configs"] == [{"path": "a.cfg", "sha256": sha256(copy), "copy": "configs/a.cfg"}]
    machine = record["machine"]
    assert machine["cores"] >= 1 and machine["cpu"] and machine["python"].count(".") == 2
    assert machine["spacy"] and machine["transformers"] and machine["torch"]
    kind = machine["cpu_kind"]  # the generation, which the name ("AMD EPYC") does not tell
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if "cpu family" in cpuinfo:
        assert f"cpu family\t: {kind['family']}\n" in cpuinfo and f"model\t\t: {kind['model']}\n" in cpuinfo
        assert kind["vendor"] and set(kind["flags"]) <= set(cpuinfo.split("flags\t\t:")[1].split("\n")[0].split())
    load = machine["load_average"]  # a time on shared cores is read beside the load it ran under
    assert len(load) == 3 and all(isinstance(x, float) and x >= 0 for x in load)
    assert record["started_utc"] <= record["ended_utc"] and record["ended_utc"].endswith("Z")
    assert json.loads((tmp_path / "out" / "provenance.json").read_text()) == record


def test_wrapper_runs_the_command_and_keeps_its_exit_status(tmp_path):
    out = tmp_path / "p.json"
    code = subprocess.run(
        [
            sys.executable,
            *STEP,
            "--out",
            str(out),
            "--seed",
            "3",
            "--",
            sys.executable,
            "-c",
            "import sys; sys.exit(4)",
        ],
        cwd=tmp_path,
    ).returncode
    assert code == 4
    record = json.loads(out.read_text())
    assert record["exit_code"] == 4 and record["seed"] == 3 and record["command"][-1] == "import sys; sys.exit(4)"


def test_project_settings_reach_the_command_with_their_dashes(tmp_path):
    """A project variable cannot carry `--a.b value` (spaCy's `project run` strips the dashes), so the wrappers take
    `--settings 'a.b=value ...'` and add the dashes back; checked through weasel itself."""
    (tmp_path / "project.yml").write_text(
        'vars:\n  settings: ""\ncommands:\n  - name: show\n    script:\n'
        "      - \"python -m lab.experiments.provenance_step --out record.json --settings '${vars.settings}' -- "
        "python -c 'import sys; print(sys.argv[1:])'\"\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = lambda *extra: subprocess.run(
        [sys.executable, "-m", "weasel", "run", "show", ".", *extra],  # noqa: E731
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    done = run(
        "--vars.settings", "training.precision=bf16 components.elmo.fine_tune_layers=1 training.frozen_components=[]"
    )
    assert done.returncode == 0, done.stderr
    assert (
        "['--training.precision', 'bf16', '--components.elmo.fine_tune_layers', '1', '--training.frozen_components', "
        "'[]']" in done.stdout
    )
    assert "[]\n" in run("--force").stdout  # no settings: the command as written
    bad = run("--vars.settings", "training.precision bf16", "--force")
    assert bad.returncode != 0 and "'training.precision' is not section.key=value" in bad.stderr + bad.stdout


def test_input_hashes_hash_each_file_a_glob_or_list_names_as_pretraining_expands_it(tmp_path, monkeypatch):
    from spacy_elmo.files import resolve_files
    from spacy_elmo.provenance import input_hashes

    monkeypatch.chdir(tmp_path)
    Path("corpus/sub").mkdir(parents=True)
    for name in ("corpus/b.txt", "corpus/a.txt", "corpus/sub/c.txt", "corpus/notes.md"):
        Path(name).write_text(name)
    Path("out").mkdir()
    Path("out/d.txt").write_text("written by the run")
    command = [
        "pretrain",
        "--paths.train",
        "corpus/**/*.txt",
        "--paths.heldout=corpus/a.txt,corpus/notes.md",
        "--paths.vocab",
        "missing/*.txt",
        "--extra",
        "out/*.txt",
    ]
    found = input_hashes(command, exclude=["out"])
    named = [str(p) for p in resolve_files("corpus/**/*.txt") + resolve_files("corpus/a.txt,corpus/notes.md")]
    assert (
        list(found)
        == list(dict.fromkeys(named))
        == ["corpus/a.txt", "corpus/b.txt", "corpus/sub/c.txt", "corpus/notes.md"]
    )
    assert found["corpus/sub/c.txt"] == sha256("corpus/sub/c.txt")
    Path("corpus/sub/c.txt").write_text("changed")
    assert input_hashes(command, exclude=["out"])["corpus/sub/c.txt"] != found["corpus/sub/c.txt"]
    # a data directory (not a model directory): the files pretraining reads from it, each hashed
    by_dir = input_hashes(["pretrain", "--paths.train", "corpus"])
    assert list(by_dir) == ["corpus/a.txt", "corpus/b.txt", "corpus/notes.md"]
    Path("corpus/b.txt").write_text("changed")
    assert input_hashes(["pretrain", "--paths.train", "corpus"])["corpus/b.txt"] != by_dir["corpus/b.txt"]
    # `python -m corpus ...` names a module: a folder of that name in the working directory is not an input
    assert input_hashes(["python", "-m", "corpus", "pretrain"]) == {}


def test_a_record_names_no_folder_of_the_machine_that_wrote_it(tmp_path, monkeypatch):
    """A committed record is read on other machines: paths in the tree are relative to its root, this
    Python is "python", and a path outside the tree keeps only its name."""
    import subprocess
    import sys

    from spacy_elmo.provenance import Provenance

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "configs").mkdir()
    config = tmp_path / "configs" / "x.cfg"
    config.write_text("[a]\n")
    monkeypatch.chdir(tmp_path)
    outside = tmp_path.parent / "elsewhere" / "data.txt"
    record = Provenance(command=[sys.executable, "-m", "spacy", str(config), str(outside)], configs=[config]).record(
        config_dir=tmp_path / "out" / "configs"
    )
    assert record["command"] == ["python", "-m", "spacy", "configs/x.cfg", "data.txt"]
    assert record["cwd"] == "."
    assert record["configs"][0]["path"] == "configs/x.cfg"
    assert record["configs"][0]["copy"] == "configs/x.cfg"
    assert "repository" not in record["git"]
    assert str(tmp_path) not in json.dumps(record)
