"""No committed record names a folder of the machine that wrote it (issue 42, item 5): a repository is its
commit, a folder its path relative to the repository's root, the interpreter "python", an installed package's
file its path in site-packages. `spacy_elmo.provenance.portable` writes new records so; this checks every
committed file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# an absolute path into a machine's own folders (not "results/tmp/", not "~/x")
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:work|tmp|home|root|opt)/")
# files that keep such paths on purpose: frozen outputs of old versions (their saved configs and cards are what
# those versions wrote) and tests that feed paths in; assets/ is fetched data
EXEMPT = ("assets/", "tests/")
# outside the records: a provenance-like field naming such a path, as JSON in a log or as "key: value"
FIELD = re.compile(
    r"""["']?\b(?:repository|cwd|command|source|bilm|model|log|output|inputs?|path|copy|traceback)\b["']?\s*[:=]\s*"""
    r"""\[?\s*["']?(?:/(?:work|tmp|home|root|opt)/)"""
)


def _committed() -> list[Path]:
    try:
        done = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs the project's git checkout")
    names = [name for name in done.stdout.decode().split("\0") if name]
    return [ROOT / name for name in names if not name.startswith(EXEMPT) and (ROOT / name).is_file()]


def _text(path: Path) -> str | None:
    raw = path.read_bytes()
    if b"\0" in raw[:8192]:
        return None
    try:
        return raw.decode("utf8")
    except UnicodeDecodeError:
        return None


def _strings(value, where: str = ""):
    """(where, string) for every key and string value of parsed JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield f"{where}.{key} (key)", key
            yield from _strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")
    elif isinstance(value, str):
        yield where, value


def machine_paths(path: Path, text: str) -> list[str]:
    """Where `text` (the file `path`) names a machine's folder: any string of a JSON record, any line of a
    file under results/ or bench/results/ (logs), a provenance-like field elsewhere."""
    name = path.relative_to(ROOT).as_posix() if path.is_absolute() else path.as_posix()
    found = []
    if name.endswith((".json", ".jsonl")):
        try:
            docs = (
                [json.loads(line) for line in text.splitlines() if line.strip()]
                if name.endswith(".jsonl")
                else [json.loads(text)]
            )
        except ValueError:
            docs = []
        for doc in docs:
            found += [f"{name}:{where}: {value[:80]}" for where, value in _strings(doc) if MACHINE_PATH.search(value)]
        if docs:
            return found
    everything = name.startswith(("results/", "bench/results/"))
    for number, line in enumerate(text.splitlines(), 1):
        if (MACHINE_PATH if everything else FIELD).search(line):
            found.append(f"{name}:{number}: {line.strip()[:80]}")
    return found


def test_no_committed_file_names_a_folder_of_the_machine_that_wrote_it():
    found = []
    for path in _committed():
        text = _text(path)
        if text is not None and MACHINE_PATH.search(text):
            found += machine_paths(path, text)
    assert not found, f"{len(found)} machine paths, e.g.\n" + "\n".join(found[:20])


def test_the_check_sees_a_machine_path_in_a_record_a_log_and_a_field():
    record = {"git": {"repository": "/work/main"}, "command": ["python", "x.py"], "cwd": "."}
    assert machine_paths(Path("results/a.json"), json.dumps(record)) == ["results/a.json:.git.repository: /work/main"]
    assert machine_paths(Path("results/a.json"), json.dumps({"cwd": ".", "out": "results/tmp/x"})) == []
    assert machine_paths(Path("bench/results/x/log.txt"), 'File "/opt/venv/lib/a.py", line 3')
    assert machine_paths(Path("bench/notes.md"), "Command: python x.py --output /tmp/x") == []  # an example
    assert machine_paths(Path("bench/notes.md"), '  "cwd": "/home/me/repo",')
