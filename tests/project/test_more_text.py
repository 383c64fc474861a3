"""scripts/preprocess_more_text.py on real files: the project's text kept first and whole, the addresses
from the chosen year on tokenized like the BBC text, the held-out text unchanged and never trained on."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import preprocess_more_text
finally:
    sys.path.pop(0)


@pytest.fixture
def run(capsys):
    """Runs the script's main in this process; returncode, stdout and stderr as a subprocess would give them."""

    def call(*args: str) -> SimpleNamespace:
        try:
            code = preprocess_more_text.main(list(args))
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
            if not isinstance(exit.code, int):
                print(exit.code, file=sys.stderr)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return call


def test_more_text_appends_the_chosen_addresses_and_keeps_the_held_out_text(tmp_path, run):
    lm, sotu, out = tmp_path / "lm", tmp_path / "sotu", tmp_path / "lm_more"
    lm.mkdir()
    sotu.mkdir()
    (lm / "train.txt").write_text(
        "BBC sentence one .\nEU rejects German call to boycott British lamb .", encoding="utf8"
    )
    (lm / "heldout.txt").write_text("Held-out sentence .\n", encoding="utf8")
    (sotu / "1899-McKinley-1.txt").write_text("Too old to be kept.\n", encoding="utf8")
    (sotu / "1901-Roosevelt-1.txt").write_text(
        "To the Senate and House of Representatives: The Congress assembles this year.\n\n"
        "Held-out sentence.\nA well-known post-war plan cost $6-7 million.\n",
        encoding="utf8",
    )
    result = run("--sotu-dir", str(sotu), "--from-year", "1900", "--lm-dir", str(lm), "--output-dir", str(out))
    assert result.returncode == 0, result.stderr
    lines = (out / "train.txt").read_text(encoding="utf8").splitlines()
    # the project's text whole and in order (its missing final newline does not merge two sentences),
    # the new sentences spread through it, not appended: pretraining would end every epoch on them
    base = ["BBC sentence one .", "EU rejects German call to boycott British lamb ."]
    assert [line for line in lines if line in base] == base
    added = [line for line in lines if line not in base]
    assert len(lines) == 4 and lines[0] == base[0] and lines[1] == added[0] and lines[2] == base[1]
    assert "Too old to be kept ." not in lines  # before --from-year
    assert "Held-out sentence ." not in added  # equal to a held-out sentence: dropped
    # one sentence per line, tokens split by the BBC text's tokenizer (hyphenated words stay whole)
    assert "To the Senate and House of Representatives : The Congress assembles this year ." in added
    assert any("well-known post-war" in line and line.endswith("million .") for line in added), added
    assert (out / "heldout.txt").read_bytes() == (lm / "heldout.txt").read_bytes()
    assert "1 equal to a held-out sentence dropped" in result.stdout

    limited = run(
        "--sotu-dir",
        str(sotu),
        "--from-year",
        "1900",
        "--lm-dir",
        str(lm),
        "--output-dir",
        str(tmp_path / "l"),
        "--limit-sents",
        "1",
    )
    assert limited.returncode == 0 and len((tmp_path / "l" / "train.txt").read_text().splitlines()) == 3


def test_more_text_names_what_is_missing(tmp_path, run):
    (tmp_path / "lm").mkdir()
    result = run(
        "--sotu-dir", str(tmp_path / "sotu"), "--lm-dir", str(tmp_path / "lm"), "--output-dir", str(tmp_path / "o")
    )
    assert result.returncode == 2 and "lm/train.txt: missing (run the project's preprocess step first)" in result.stderr
    for name in ("train.txt", "heldout.txt"):
        (tmp_path / "lm" / name).write_text("a .\n")
    (tmp_path / "sotu").mkdir()
    result = run(
        "--sotu-dir", str(tmp_path / "sotu"), "--lm-dir", str(tmp_path / "lm"), "--output-dir", str(tmp_path / "o")
    )
    assert result.returncode == 2 and "no addresses from 1900 on" in result.stderr
    (tmp_path / "sotu" / "notes.txt").write_text("x\n")
    result = run(
        "--sotu-dir", str(tmp_path / "sotu"), "--lm-dir", str(tmp_path / "lm"), "--output-dir", str(tmp_path / "o")
    )
    assert result.returncode != 0 and "notes.txt: expected a file name starting with the year" in result.stderr
    assert not (tmp_path / "o").exists()  # nothing half-written
