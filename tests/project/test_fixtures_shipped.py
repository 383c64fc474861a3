"""The reference models ship in tests/fixtures, unchanged from upstream (their README tables list
every file's size and git blob id), so `make test` on a fresh clone needs nothing beside it."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "tests" / "fixtures"
ROW = re.compile(r"^\| `([^`]+)` \| (\d+) \| `([0-9a-f]{40})` \|$", re.M)


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.mark.parametrize("folder", ["allennlp_elmo", "bilm_tf"])
def test_shipped_fixtures_match_their_upstream_blob_ids(folder):
    rows = ROW.findall((SHIPPED / folder / "README.md").read_text())
    assert len(rows) >= 9, f"{folder}/README.md: expected its file table"
    for name, size, blob in rows:
        data = (SHIPPED / folder / name).read_bytes()
        assert len(data) == int(size), f"{folder}/{name}: {len(data)} bytes, README says {size}"
        assert _git_blob_id(data) == blob, f"{folder}/{name}: content differs from upstream blob {blob}"


def test_fixtures_are_tracked_and_used_by_default(fixtures_dir):
    notice = (SHIPPED / "NOTICE").read_text()
    assert "Apache License, Version 2.0" in notice and "allennlp" in notice and "bilm-tf" in notice
    tracked = subprocess.run(["git", "ls-files", "tests/fixtures"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode == 0 and tracked.stdout:  # inside a git checkout (not an sdist)
        files = set(tracked.stdout.split())
        for needed in (
            "allennlp_elmo/lm_weights.hdf5",
            "allennlp_elmo/options.json",
            "bilm_tf/model/lm_weights.hdf5",
            "NOTICE",
        ):
            assert f"tests/fixtures/{needed}" in files, f"tests/fixtures/{needed} is not committed"
    import os

    if not os.environ.get("SPACY_ELMO_FIXTURES"):
        assert fixtures_dir == SHIPPED
