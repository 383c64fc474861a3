"""From a trained pipeline to a fresh machine, as docs/spacy.md ("From a trained pipeline to another machine")
tells it: `spacy package` writes the requirement `spacy-elmo>=X.Y.Z,<X.Y+1.0`, which no package index serves yet,
so the docs build this package's wheel (`pip wheel . --no-deps -w wheels`) beside the pipeline's and install
with `pip install --find-links wheels`. This test runs the docs' commands: `spacy train` (a tiny NER pipeline
on the test biLM), then, in a fresh virtual environment (`python -m venv`, no system site-packages: nothing of
this environment, such as the test requirements' `build`, leaks in), torch first (the CPU wheel constraints.txt
pins, as `make test` installs it), the install the docs give (`pip install ".[package]"` in a copy of the
checkout) and the docs' first block; then, with spacy-elmo uninstalled there as on another machine, the docs'
second block, whose pipeline finds the trained entities, with the same vectors as the trained pipeline loaded here.

About 100 s of CPU with pip's cache warm (the wheels and the training take seconds; most of it is the fresh
environment: torch, spaCy, transformers and their dependencies from the package index, and the first
`spacy.load` there, which compiles the bytecode pip was told not to write)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from packaging.specifiers import SpecifierSet

from helpers import make_corpus, source_tree  # tests/ is on sys.path (rootdir conftest)

ROOT = Path(__file__).resolve().parents[2]
SECTION = "### From a trained pipeline to another machine"
TEXT = "Yesterday Alice went to see the sea ."


def documented_blocks() -> list[list[str]]:
    """The lines of each bash block of the docs' section: [where the pipeline was trained, the fresh machine]."""
    text = (ROOT / "docs" / "spacy.md").read_text(encoding="utf-8")
    section = re.split(r"\n#+ ", text[text.index(SECTION) + len(SECTION) :])[0]  # up to the next heading
    blocks = re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)
    return [[line for line in block.replace("\\\n", " ").splitlines() if line.strip()] for block in blocks]


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_docs_name_the_commands_this_test_runs():
    packaging_block, install_block = documented_blocks()
    assert packaging_block[0] == "pip wheel . --no-deps -w wheels"
    assert packaging_block[2].startswith("python -m spacy package training/ner_elmo/model-best packages --name")
    assert install_block[0] == "pip install --find-links wheels en_ner_elmo"
    assert install_block[1].startswith("python -c") and "spacy.load('en_ner_elmo')" in install_block[1]


def documented_install() -> list[str]:
    """The install the docs give for the machine where the pipeline is packaged (the package and its extra)."""
    text = (ROOT / "docs" / "spacy.md").read_text(encoding="utf-8")
    section = re.split(r"\n#+ ", text[text.index(SECTION) + len(SECTION) :])[0]
    (command,) = re.findall(r"`(pip install [^`]*\[package\][^`]*)`", section)
    return shlex.split(command)


@pytest.mark.slow
def test_a_packaged_pipeline_installs_and_runs_in_a_fresh_venv(tiny_model_dir, tmp_path):
    packaging_block, install_block = documented_blocks()
    # a pipeline trained by `spacy train` in a copy of the checkout (as a clone has it)
    src = source_tree(tmp_path / "src")
    host = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME")}
    host.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{host['PATH']}", OMP_NUM_THREADS="1")
    corpus = make_corpus(tmp_path / "train.spacy")
    data = ["--paths.train", corpus, "--paths.dev", corpus, "--paths.elmo", tiny_model_dir]
    steps = ["--training.max_steps", "40", "--training.eval_frequency", "20"]  # enough to find the corpus's names
    run(
        [
            sys.executable,
            "-m",
            "spacy",
            "train",
            "configs/ner_elmo.cfg",
            "--output",
            "training/ner_elmo",
            *data,
            *steps,
        ],
        cwd=src,
        env=host,
        timeout=600,
    )
    # where it is packaged: a new virtual environment (from the base interpreter, without this one's packages),
    # torch first, then the package as the docs install it, then the docs' packaging block
    venv = tmp_path / "venv"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    run([sys.executable, "-m", "venv", venv], env=clean, timeout=300)
    bin_dir = venv / "bin"
    fresh = {
        **clean,
        "PATH": f"{bin_dir}{os.pathsep}{clean['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "HF_HUB_OFFLINE": "1",  # the pipeline carries its biLM: nothing to download
        "OMP_NUM_THREADS": "1",
        # --no-compile: no bytecode for all of torch (half the install's time); what runs compiles as it runs
        "PIP_NO_COMPILE": "1",
    }
    run(
        [bin_dir / "python", "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", "torch"],
        env=fresh,
        timeout=600,
    )
    run(documented_install(), cwd=src, env=fresh, timeout=600)
    for line in packaging_block:
        run(shlex.split(line), cwd=src, env=fresh, timeout=600)
    wheels = src / "wheels"
    (elmo_wheel,) = wheels.glob("spacy_elmo-*.whl")
    assert {p.name for p in wheels.iterdir()} == {elmo_wheel.name, "en_ner_elmo-1.0.0-py3-none-any.whl"}

    # the requirement spaCy wrote names spacy-elmo with a range the built wheel's version satisfies
    meta = json.loads((src / "packages" / "en_ner_elmo-1.0.0" / "meta.json").read_text(encoding="utf-8"))
    (requirement,) = [r for r in meta["requirements"] if r.startswith("spacy-elmo")]
    built_version = elmo_wheel.name.split("-")[1]
    assert SpecifierSet(requirement[len("spacy-elmo") :]).contains(built_version), (requirement, built_version)

    # the other machine: spacy-elmo gone from the environment (torch, spaCy and the rest stay, as the package
    # index would serve them), wheels/ the only folder copied over, then the docs' second block
    run([bin_dir / "python", "-m", "pip", "uninstall", "-q", "-y", "spacy-elmo"], env=fresh, timeout=300)
    machine = tmp_path / "machine"
    shutil.copytree(wheels, machine / "wheels")
    install, show = install_block
    run(shlex.split(install), cwd=machine, env=fresh, timeout=600)
    shown = run(shlex.split(show), cwd=machine, env=fresh, timeout=600).stdout.strip()

    trained = spacy.load(src / "training" / "ner_elmo" / "model-best")
    expected = trained(TEXT)
    assert expected.ents, "the trained pipeline finds the corpus's names"
    assert shown == str(expected.ents), (shown, expected.ents)
    check = (
        "import json, spacy, spacy_elmo, torch\n"
        "torch.set_num_threads(1)\n"
        f"doc = spacy.load('en_ner_elmo')({TEXT!r})\n"
        "print(json.dumps({'package': spacy_elmo.__file__, 'tensor': doc.tensor.tolist(),\n"
        "                  'ents': [(e.text, e.label_) for e in doc.ents]}))\n"
    )
    result = json.loads(run([bin_dir / "python", "-c", check], cwd=machine, env=fresh, timeout=600).stdout)
    assert Path(result["package"]).is_relative_to(venv), result["package"]  # the wheel's package, not the checkout
    assert result["ents"] == [[e.text, e.label_] for e in expected.ents]
    numpy.testing.assert_allclose(numpy.asarray(result["tensor"]), expected.tensor, rtol=0, atol=1e-5)
