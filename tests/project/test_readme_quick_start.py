"""A user's first hour (issue 20): the README opens with the quick start for spaCy and HF users."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


# --- 1. the README starts with the user's quick start -------------------------------------------


def test_readme_opens_with_a_quick_start_for_spacy_and_hf_users():
    text = (ROOT / "README.md").read_text()
    quick = text[text.index("## Quick start") : text.index("## Set-up: two commands")]
    assert text.index("## Quick start") < text.index("make main")  # the package first, then the project
    assert "pip install" in quick and "load_legacy(" in quick and "docs/models.md" in quick
    assert quick.index("python -m venv .venv") < quick.index("pip install")  # an environment of its own first
    assert "AllenNLP" in quick and "hub" in quick  # where real weights come from
    assert (
        'add_pipe("elmo"' in quick and "AutoModel.from_pretrained" in quick and 'pipeline("feature-extraction"' in quick
    )
    hf = quick[quick.index("In Hugging Face") :]
    assert hf.index("import spacy_elmo") < hf.index("from transformers import")  # and says why
