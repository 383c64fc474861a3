"""A model directory saved under either transformers line loads under the other (issue 53): tests/fixtures/
saved_by_transformers holds the AllenNLP test biLM saved by `save_pretrained` under transformers 4.x and under 5.x
(its generate.py, record.json), with the layers each computed when it was saved. `make test` runs this under 5.x,
`make test-compat` under 4.53.2 and 4.46.1: each loads both folders, through `ElmoModel` and the Auto classes,
with the weights as saved and the layers of the float32 computation (tests/float32_error.py).

`compat.py` holds what differs between the lines; this checks its outcome for a user's files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoModel, ElmoTokenizer
from spacy_elmo.compat import TRANSFORMERS_VERSION

SAVED = Path(__file__).resolve().parents[1] / "fixtures" / "saved_by_transformers"
LINES = ["transformers4", "transformers5"]


def layers(model, tokenizer, sentence: str) -> torch.Tensor:
    with torch.no_grad():
        return torch.stack(model.eval()(**tokenizer(sentence)).hidden_states)[:, 0]


@pytest.mark.parametrize("line", LINES)
def test_a_directory_saved_under_each_line_loads_with_the_same_weights_and_layers(line, tiny_model):
    folder = SAVED / line
    record = json.loads((folder / "record.json").read_text(encoding="utf-8"))
    saved_by = json.loads((folder / "hf" / "config.json").read_text(encoding="utf-8"))["transformers_version"]
    assert saved_by == record["transformers"] and saved_by.split(".")[0] == line[-1]  # written by that line
    expected = numpy.load(folder / "expected.npz", allow_pickle=False)["hidden_states"]
    exact = layers(exact_copy(tiny_model), ElmoTokenizer(), record["sentence"])
    for model, tokenizer in (
        (ElmoModel.from_pretrained(folder / "hf"), ElmoTokenizer.from_pretrained(folder / "hf")),
        (AutoModel.from_pretrained(folder / "hf"), AutoTokenizer.from_pretrained(folder / "hf")),
    ):
        assert type(model) is ElmoModel and type(tokenizer) is ElmoTokenizer
        for (name, got), want in zip(model.state_dict().items(), tiny_model.state_dict().values()):
            assert torch.equal(got, want), name
        got = layers(model, tokenizer, record["sentence"])
        assert_float32_error(exact, expected, got, terms=forward_terms(tiny_model.config), what=f"{line} here")


def test_saving_here_writes_what_the_other_line_reads(tiny_model, tmp_path):
    """The directory this release writes has the files of its line's fixture and no config key that neither
    fixture has, so the test above, run under the other line, has read every file and key it writes."""
    tiny_model.save_pretrained(tmp_path / "hf")
    fixture = SAVED / f"transformers{TRANSFORMERS_VERSION.major}" / "hf"
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == sorted(p.name for p in fixture.iterdir())
    for name in ("config.json", "tokenizer_config.json"):
        written = json.loads((tmp_path / "hf" / name).read_text(encoding="utf-8"))
        known = set().union(*(json.loads((SAVED / line / "hf" / name).read_text(encoding="utf-8")) for line in LINES))
        assert set(written) <= known, (name, sorted(set(written) - known))
