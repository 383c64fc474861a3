"""A model reference parsed once into a typed value (formats/references.py): which kind each text
is, what `check()` finds without reading weights or asking the network (and whether it found
nothing there, `ModelAbsentError`, or something broken), and that each kind loads itself."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from spacy_elmo.formats.legacy import LegacyFormatError
from spacy_elmo.formats.references import (
    EfmlFolder,
    HfFolder,
    HubId,
    LegacyPair,
    ModelAbsentError,
    ModelNotFoundError,
    UrlReference,
    load_pretrained,
    parse_reference,
)
from spacy_elmo.hf.model_directory import ElmoLoadError

URL = "https://example.org/models/elmo.zip"


@pytest.fixture
def legacy_copy(allennlp_dir, tmp_path) -> Path:
    """options.json + lm_weights.hdf5 in a folder of their own."""
    folder = tmp_path / "legacy"
    folder.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(allennlp_dir / name, folder / name)
    return folder


def test_each_kind_of_text_parses_into_its_kind(tiny_model_dir, allennlp_dir, fixtures_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "owner").mkdir()
    shutil.copytree(tiny_model_dir, tmp_path / "owner" / "name")
    (tmp_path / "only_options").mkdir()
    shutil.copy(allennlp_dir / "options.json", tmp_path / "only_options")
    expected = {
        URL: UrlReference(URL),
        f"{URL.replace('.zip', '.json')},{URL.replace('.zip', '.hdf5')}": UrlReference(
            f"{URL.replace('.zip', '.json')},{URL.replace('.zip', '.hdf5')}"
        ),
        "a/options.json, a/weights.hdf5": LegacyPair(Path("a/options.json"), Path("a/weights.hdf5")),
        # a folder of legacy files: lm_weights.hdf5 among its other .hdf5 files
        str(allennlp_dir): LegacyPair(allennlp_dir / "options.json", allennlp_dir / "lm_weights.hdf5"),
        "only_options": LegacyPair(Path("only_options/options.json"), None),
        str(fixtures_dir / "efml_tiny"): EfmlFolder(fixtures_dir / "efml_tiny"),
        str(tiny_model_dir): HfFolder(str(tiny_model_dir)),
        "hf": HfFolder("hf"),  # a local path that does not exist (no slash: no hub id)
        "./a/b": HfFolder("./a/b"),
        "/gone/elmo": HfFolder("/gone/elmo"),
        "a/b/c": HfFolder("a/b/c"),
        "owner/name": HfFolder("owner/name"),  # exists here: the folder, not the hub id
        "someone/elmo": HubId("someone/elmo"),  # no such folder: a hub id
    }
    for text, kind in expected.items():
        assert parse_reference(text) == kind, text
    assert parse_reference(Path("hf")) == HfFolder("hf")
    parsed = parse_reference("someone/elmo")
    assert parse_reference(parsed) is parsed  # a parsed reference is taken as it is
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.repo_id = "other/elmo"  # type: ignore[misc]


def test_check_passes_on_models_without_reading_weights(tiny_model_dir, legacy_copy, fixtures_dir, tmp_path):
    for reference in (str(tiny_model_dir), str(legacy_copy), str(fixtures_dir / "efml_tiny"), URL):
        parse_reference(reference).check()
    # the header is read, the tensors are not: NaN weights in a whole file pass, and only load finds them
    poisoned = tmp_path / "poisoned"
    shutil.copytree(tiny_model_dir, poisoned)
    tensors = load_file(poisoned / "model.safetensors")
    tensors["encoder.layers.0.bias"].fill_(float("nan"))
    save_file(tensors, poisoned / "model.safetensors", metadata={"format": "pt"})
    parse_reference(poisoned).check()
    with pytest.raises(ElmoLoadError, match=r"model\.safetensors: weights contain NaN/inf values"):
        parse_reference(poisoned).load()
    # a file that is no safetensors is seen from its first bytes, before any weight
    garbled = tmp_path / "garbled"
    shutil.copytree(tiny_model_dir, garbled)
    (garbled / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(ElmoLoadError) as info:
        parse_reference(garbled).check()
    assert str(info.value).startswith(f"{garbled / 'model.safetensors'}: not a readable safetensors file: ")


@pytest.mark.parametrize("text", ["hf", "./missing", "/no/such/elmo", "a/b/c", "~/elmo", "gone.json,gone.hdf5"])
def test_a_reference_to_nothing_is_absent(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelAbsentError) as info:
        parse_reference(text).check()
    assert str(info.value).startswith("no such "), str(info.value)


def _truncated_hdf5(folder: Path) -> str:
    weights = folder / "lm_weights.hdf5"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    return "not a readable HDF5 file (truncated or corrupt?)"


def _options_not_json(folder: Path) -> str:
    (folder / "options.json").write_text('{"lstm": {"dim": 16,')
    return "not valid JSON"


def _options_only(folder: Path) -> str:
    (folder / "lm_weights.hdf5").unlink()
    return "has options.json but no .hdf5 weights file"


@pytest.mark.parametrize("damage", [_truncated_hdf5, _options_not_json, _options_only])
def test_broken_legacy_files_fail_check_in_one_line_naming_the_file(legacy_copy, damage):
    what = damage(legacy_copy)
    with pytest.raises(LegacyFormatError) as info:
        parse_reference(legacy_copy).check()
    message = str(info.value)
    assert what in message and str(legacy_copy) in message and "\n" not in message, message


def test_half_a_legacy_pair_is_broken_not_absent(legacy_copy):
    pair = f"{legacy_copy / 'options.json'},{legacy_copy / 'gone.hdf5'}"
    with pytest.raises(ModelNotFoundError) as info:
        parse_reference(pair).check()
    assert not isinstance(info.value, ModelAbsentError)
    assert str(info.value) == f"no such file: {legacy_copy / 'gone.hdf5'} (the legacy weights file)"


def test_a_folder_that_is_no_model_is_broken_not_absent(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelNotFoundError) as info:
        parse_reference(tmp_path).check()
    assert not isinstance(info.value, ModelAbsentError)
    assert str(info.value) == f"{tmp_path / 'config.json'}: not an ELMo model (model_type 'bert', expected 'elmo')"


def test_each_kind_loads_itself(tiny_model_dir, legacy_copy, fixtures_dir):
    for reference in (str(tiny_model_dir), str(legacy_copy), str(fixtures_dir / "efml_tiny")):
        model, tokenizer = parse_reference(reference).load()
        again, _ = load_pretrained(reference)
        assert type(model).__name__ == "ElmoModel" and not model.training
        assert model.config.to_dict() == again.config.to_dict()
        tokenizer.check_model(model.config)


def test_each_kind_answers_what_the_tools_ask(tiny_model_dir, legacy_copy, fixtures_dir, tmp_path):
    """What `convert` writes on a model card and where `similar` looks for vocab.txt come from the
    parsed reference, not from the text again."""
    pair = f"{legacy_copy / 'options.json'}, {legacy_copy / 'lm_weights.hdf5'}"
    url_pair = "https://example.org/o.json , https://example.org/w.hdf5#sha256=" + "0" * 64
    cases = {
        str(tiny_model_dir): (f"`{tiny_model_dir.name}`", [tiny_model_dir / "vocab.txt"]),
        pair: ("`options.json` + `lm_weights.hdf5`", [legacy_copy / "vocab.txt"]),
        str(legacy_copy): ("`options.json` + `lm_weights.hdf5`", [legacy_copy / "vocab.txt"]),
        str(fixtures_dir / "efml_tiny"): (
            "the ELMoForManyLangs directory `efml_tiny`",
            [fixtures_dir / "efml_tiny" / "vocab.txt"],
        ),
    }
    for text, (description, files) in cases.items():
        reference = parse_reference(text)
        assert reference.describe() == description and reference.vocabulary_files() == files, text
    url = parse_reference(url_pair)
    assert isinstance(url, UrlReference) and url.describe() == url_pair
    assert url.parts == ("https://example.org/o.json", "https://example.org/w.hdf5#sha256=" + "0" * 64)  # split once
    assert UrlReference(url_pair) == url and UrlReference(url_pair).parts == url.parts


def test_a_tokenizer_that_does_not_fit_is_one_line(tiny_model_dir, tmp_path):
    """`fit_tokenizer` is the one check that a biLM's tokenizer fits it, made by every `load`."""
    from spacy_elmo import ElmoTokenizer
    from spacy_elmo.formats.references import fit_tokenizer

    folder = tmp_path / "misfit"
    shutil.copytree(tiny_model_dir, folder)
    ElmoTokenizer(max_characters_per_token=20).save_pretrained(folder)
    with pytest.raises(ModelNotFoundError) as info:
        parse_reference(folder).load()
    assert str(info.value).startswith(f"{folder}: ") and "max_characters_per_token 20" in str(info.value)
    model, tokenizer = parse_reference(tiny_model_dir).load()
    assert fit_tokenizer(model, tokenizer) is tokenizer
    with pytest.raises(ValueError, match="max_characters_per_token 20"):
        fit_tokenizer(model, ElmoTokenizer(max_characters_per_token=20))
