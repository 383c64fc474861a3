"""Where `from_pretrained` finds a model (spacy_elmo/hf/sources.py), as docs/hf.md promises: a name
shaped like a folder that is not there fails at once naming it; a hub id that is not cached fails in
one line naming both readings (no such folder; not in the cache), without retries, when
HF_HUB_OFFLINE is set or the hub cannot be reached; a damaged copy in the Hugging Face cache is one
line naming the file and how to fetch it again, in every face that takes a hub id."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from spacy_elmo import ElmoModel
from spacy_elmo.formats.references import ModelAbsentError

DEAD_HUB = "http://127.0.0.1:9"  # nothing listens there: a connection is refused at once
REVISION = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize("name", ["./missing", "/no/such/elmo", "~/elmo", "build/runs/elmo", "missing", "a/b/c"])
def test_a_folder_shaped_name_of_nothing_fails_at_once_naming_it(name):
    start = time.perf_counter()
    with pytest.raises(ModelAbsentError) as info:
        ElmoModel.from_pretrained(name)
    assert time.perf_counter() - start < 1.0
    assert str(info.value) == f"no such directory: {name}"


def _hub_cache(root: Path, tiny_model_dir: Path) -> Path:
    """A Hugging Face hub cache holding test-org/tiny-elmo whole and test-org/damaged-elmo with its
    model.safetensors cut in half (as a download cut short, or a full disk, leaves it)."""
    for name in ("tiny-elmo", "damaged-elmo"):
        repo = root / f"models--test-org--{name}"
        shutil.copytree(tiny_model_dir, repo / "snapshots" / REVISION)
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(REVISION)
    weights = root / "models--test-org--damaged-elmo" / "snapshots" / REVISION / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    return root


# each face, in a fresh process (huggingface_hub reads HF_HUB_OFFLINE and the cache's place when imported)
_FACES = textwrap.dedent("""
    import json, sys, time
    import spacy
    from spacy_elmo import ElmoModel
    from spacy_elmo.cli import main
    from spacy_elmo.formats.references import load_model

    def first_doc(name):
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": name})
        return nlp("The cat .")

    faces = {
        "from_pretrained": lambda name: ElmoModel.from_pretrained(name),
        "load_model": lambda name: load_model(name),
        "add_pipe + first Doc": first_doc,
        "spacy-elmo convert": lambda name: main(["convert", name, name.replace("/", "_"), "--no-progress"]),
    }
    results = {}
    for name in ("models/fixure_elmo", "test-org/tiny-elmo", "test-org/damaged-elmo"):
        for face, run in faces.items():
            start = time.perf_counter()
            try:
                status = run(name)
                result = ["returned", str(status)]
            except Exception as err:
                result = [type(err).__name__, str(err)]
            results[f"{face}: {name}"] = result + [time.perf_counter() - start]
    print(json.dumps(results))
""")


@pytest.mark.parametrize("hub", ["offline", "unreachable"])
def test_hub_ids_fail_fast_in_one_line_and_a_damaged_cached_copy_is_named(hub, tiny_model_dir, tmp_path):
    cache = _hub_cache(tmp_path / "hub", tiny_model_dir)
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    env.update({"HF_HUB_OFFLINE": "1"} if hub == "offline" else {"HF_ENDPOINT": DEAD_HUB})
    done = subprocess.run(
        [sys.executable, "-c", _FACES], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Retrying in" not in done.stderr  # huggingface_hub's retries alone wait 1+2+4+8+8 s
    results = json.loads(done.stdout.strip().splitlines()[-1])
    why = "HF_HUB_OFFLINE is set" if hub == "offline" else "the hub cannot be reached ("
    typo = "no such directory: models/fixure_elmo; as a Hugging Face hub id it is not in the local cache, and "
    damaged = cache / "models--test-org--damaged-elmo"
    for face, (kind, message, seconds) in results.items():
        name = face.split(": ")[1]
        if face.startswith("spacy-elmo convert"):  # the CLI prints the line (captured above) and exits 2
            assert (kind, message) == ("returned", "0" if name == "test-org/tiny-elmo" else "2"), face
            continue
        if name == "test-org/tiny-elmo":  # cached and whole: no hub needed
            assert kind == "returned", (face, message)
            continue
        assert "\n" not in message and seconds < 5.0, (face, message, seconds)
        if name == "models/fixure_elmo":
            assert why in message and typo in message, (face, message)
        else:
            assert (
                f"{damaged / 'snapshots' / REVISION / 'model.safetensors'}: not a readable safetensors file" in message
            )
            assert f"delete {damaged} (or load with force_download=True) to download it again" in message, message
        if face.startswith("add_pipe"):
            assert kind == "ElmoSettingError" and message.startswith("elmo `model` (paths.elmo): "), (face, message)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and typo in errors[0] and str(damaged) in errors[1], done.stderr[-3000:]
    assert not (tmp_path / "converted").exists() or (tmp_path / "converted" / "model.safetensors").is_file()


def test_proxies_for_a_hub_id_are_refused_in_one_line_before_any_request():
    """huggingface_hub's downloads take the environment's HTTPS_PROXY: an argument that would be ignored is refused."""
    with pytest.raises(ValueError, match=r"^proxies= is not supported for a hub id: set HTTPS_PROXY"):
        ElmoModel.from_pretrained("test-org/tiny-elmo", proxies={"https": "http://127.0.0.1:9"})
