"""The fault campaign: broken copies of the fixture models, run through every face that takes them.

From the three formats the fixtures hold (the AllenNLP legacy pair, the ELMoForManyLangs folder
`efml_tiny`, and the HF directory converted from the legacy pair) `CASES` makes broken inputs: each
file cut at several offsets (0 bytes: an empty file), a safetensors header with a byte changed, a
tensor of the wrong dtype or shape, each file missing, a directory where each file should be. Every
case goes through every face that accepts its format: `add_pipe` + the first Doc, `spacy.load` of a
pipeline whose biLM files are broken so (HF files), `ElmoModel.from_pretrained` and `AutoModel`
(HF folders), and the commands that take a model (`embed` from standard input and into a file,
`convert`, `similar`, `probe`, `finetune`), in process as `main([...])`; a few cases also run as the console
script in a subprocess, and `spacy train` takes three (marked slow).

Each case fails with one line naming the file (its path; or its folder's path and its name, where the
file is told by what it contradicts) and what is wrong; the CLI exits 2 with `error: ` and that line,
without a traceback, and leaves no output. It fails at `add_pipe` wherever a cheap check sees the
fault (JSON files, file lengths and headers: safetensors' header and HDF5's superblock and dataset
shapes; no weights read), else when the weights are read (an ELMoForManyLangs lexicon or pickled
state dict). Files that are no part of the model (an HF folder's README.md, its optional tokenizer
settings) may be damaged without harm: the model loads and computes what the intact one does."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy
import pytest
import spacy
import torch
from safetensors.torch import load_file, save_file

from helpers import ROOT, TINY, make_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoModel
from spacy_elmo.cli import main
from spacy_elmo.spacy.component import ElmoSettingError

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")  # the console script, as a user runs it
SENTENCE = "the cat sat on the mat ."

# the files of each format, and the part of the model each holds
FILES = {
    "hf": {"config.json": "config", "model.safetensors": "weights", "tokenizer_config.json": "tokenizer"},
    "legacy": {"options.json": "config", "lm_weights.hdf5": "weights"},
    "efml": {
        "config.json": "config",
        "tiny.json": "config",
        "char.dic": "lexicon",
        "word.dic": "lexicon",
        "token_embedder.pkl": "weights",
        "encoder.pkl": "weights",
    },
}


# --- the damage done to one file ------------------------------------------------------------------------


def _header_length(data: bytes) -> int:
    return int.from_bytes(data[:8], "little")


# where a file is cut: a name and the offset it gives for the file's bytes
CUTS: dict[str, Callable[[bytes], int]] = {
    "empty": lambda data: 0,
    "8 bytes": lambda data: 8,
    "half": lambda data: len(data) // 2,
    "last character": lambda data: len(data.rstrip()) - 1,  # (a trailing newline is no loss)
}
SAFETENSORS_CUTS: dict[str, Callable[[bytes], int]] = {
    "inside the header": lambda data: 8 + _header_length(data) // 2,
    "after the header": lambda data: 8 + _header_length(data),
}


def _cut(offset: Callable[[bytes], int]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: offset(data)])

    return damage


def _missing(path: Path) -> None:
    path.unlink()


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("a file in a folder where a file should be\n")


def _header_edit(old: bytes, new: bytes, *, at_length: bool = False) -> Callable[[Path], None]:
    """Replaces the first `old` in a safetensors file's JSON header by `new` (as long: the file keeps
    its length), or with `at_length` the first byte of the header's length."""

    def damage(path: Path) -> None:
        data = bytearray(path.read_bytes())
        if at_length:
            data[0] ^= 0x01
        else:
            n = _header_length(data)
            start = data.index(old, 8, 8 + n)
            data[start : start + len(old)] = new
        path.write_bytes(bytes(data))

    return damage


def _tensor_edit(edit: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[Path], None]:
    """A whole, valid safetensors file whose `encoder.layers.0.bias` is `edit`ed."""

    def damage(path: Path) -> None:
        tensors = load_file(path)
        tensors["encoder.layers.0.bias"] = edit(tensors["encoder.layers.0.bias"])
        save_file(tensors, path, metadata={"format": "pt"})

    return damage


def _hdf5_dataset_reshaped(path: Path) -> None:
    """A whole HDF5 file whose character embedding has one column too many."""
    with h5py.File(path, "r+") as handle:
        data = handle["char_embed"][...]
        del handle["char_embed"]
        handle["char_embed"] = numpy.concatenate([data, data[:, :1]], axis=1)


@dataclass(frozen=True)
class Case:
    """One broken copy: `damage` done to `file` of a copy of the `kind` fixture. `found`: when it fails,
    "add_pipe" (a cheap check sees it) or "load" (reading the weights finds it), or "never" (the
    file is no part of what the model computes)."""

    kind: str
    file: str
    fault: str
    damage: Callable[[Path], None]
    found: str

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.file}-{self.fault}".replace(" ", "_")

    @property
    def role(self) -> str:
        return FILES[self.kind].get(self.file, "card")


def _cases() -> list[Case]:
    cases = []
    for kind, files in FILES.items():
        for name, role in files.items():
            cuts = dict(CUTS)
            if name.endswith(".safetensors"):
                cuts.update(SAFETENSORS_CUTS)
            if name.endswith((".json", ".dic")):
                del cuts["8 bytes"]  # (as "half": a cut inside the text)
            # EFML lexicons and pickles are read with the weights; everything else has a cheap check
            late = kind == "efml" and role in ("lexicon", "weights")
            for fault, offset in cuts.items():
                cases.append(Case(kind, name, f"cut {fault}", _cut(offset), "load" if late else "add_pipe"))
            # without tokenizer settings an HF folder gets the UTF-8 tokenizer: the fixture's own
            found = "never" if (kind, name) == ("hf", "tokenizer_config.json") else "add_pipe"
            cases.append(Case(kind, name, "missing", _missing, found))
            cases.append(Case(kind, name, "a directory", _directory, "add_pipe"))
    weights = ("hf", "model.safetensors")
    cases += [
        Case(*weights, "header length changed", _header_edit(b"", b"", at_length=True), "add_pipe"),
        Case(*weights, "header brace changed", _header_edit(b"{", b"["), "add_pipe"),
        Case(*weights, "tensor name changed", _header_edit(b'layers.0.bias"', b'layers.0.bia5"'), "add_pipe"),
        Case(*weights, "dtype changed", _header_edit(b'"F32"', b'"I32"'), "add_pipe"),
        Case(*weights, "shape digit changed", _header_edit(b'"shape":[2,256]', b'"shape":[2,257]'), "add_pipe"),
        Case(*weights, "offset digit changed", _header_edit(b'"data_offsets":[0,', b'"data_offsets":[1,'), "add_pipe"),
        Case(*weights, "int32 tensor", _tensor_edit(lambda t: t.to(torch.int32)), "add_pipe"),
        Case(*weights, "wrong shape", _tensor_edit(lambda t: t[:, :-1].contiguous()), "add_pipe"),
        Case("legacy", "lm_weights.hdf5", "wrong shape", _hdf5_dataset_reshaped, "add_pipe"),
        # the model card: no part of the model
        Case("hf", "README.md", "cut half", _cut(CUTS["half"]), "never"),
        Case("hf", "README.md", "missing", _missing, "never"),
    ]  # fmt: skip
    return cases


CASES = _cases()
HF_BILM_CASES = [case for case in CASES if case.kind == "hf" and case.file != "README.md"]


# --- the fixture models and their broken copies -----------------------------------------------------------


@pytest.fixture(scope="module")
def intact(tiny_model_dir, allennlp_dir, fixtures_dir, tmp_path_factory) -> dict[str, Path]:
    """The intact model folder of each kind (the HF one with its model card)."""
    root = tmp_path_factory.mktemp("intact")
    legacy = root / "legacy"
    legacy.mkdir()
    for name in FILES["legacy"]:
        shutil.copy(allennlp_dir / name, legacy / name)
    efml = root / "efml"
    efml.mkdir()
    for name in FILES["efml"]:
        shutil.copy(fixtures_dir / "efml_tiny" / name, efml / name)
    hf = root / "hf"
    assert main(["convert", str(legacy), str(hf), "--no-progress"]) == 0  # config, weights, tokenizer, README.md
    return {"hf": hf, "legacy": legacy, "efml": efml}


@pytest.fixture(scope="module")
def expected_tensors(intact) -> dict[str, numpy.ndarray]:
    """What the intact models put in `doc.tensor` for SENTENCE (cases found "never" must match it)."""
    out = {}
    for kind, folder in intact.items():
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(folder)})
        out[kind] = nlp(SENTENCE).tensor.copy()
    return out


def broken_copy(case: Case, intact: dict[str, Path], where: Path) -> Path:
    """A copy of the intact `case.kind` model in `where`, with the case's damage done."""
    folder = where / case.kind
    shutil.copytree(intact[case.kind], folder)
    case.damage(folder / case.file)
    return folder


def assert_names_the_file(message: str, path: Path) -> None:
    """One line that names `path`: its own path, or its folder's and its name (a file told by what
    contradicts it, e.g. an EFML lexicon by the shape of a tensor)."""
    assert "\n" not in message.strip(), message
    assert str(path) in message or (str(path.parent) in message and path.name in message), (str(path), message)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# --- the spaCy face: add_pipe, the first Doc, spacy.load --------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_add_pipe_and_the_first_doc(case, intact, expected_tensors, tmp_path):
    folder = broken_copy(case, intact, tmp_path)
    nlp = spacy.blank("en")
    if case.found == "never":
        nlp.add_pipe("elmo", config={"model": str(folder)})
        assert numpy.array_equal(nlp(SENTENCE).tensor, expected_tensors[case.kind])
        return
    with pytest.raises(ElmoSettingError) as info:
        nlp.add_pipe("elmo", config={"model": str(folder)})
        assert case.found == "load", f"{case.id}: add_pipe passed; its check should see it"
        nlp(SENTENCE)
    assert nlp.pipe_names == ([] if case.found == "add_pipe" else ["elmo"])
    assert str(info.value).startswith("elmo `model` (paths.elmo): ")
    assert_names_the_file(str(info.value), folder / case.file)


@pytest.fixture(scope="module")
def saved_pipeline(intact, tmp_path_factory) -> Path:
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(intact["hf"])})
    nlp(SENTENCE)
    folder = tmp_path_factory.mktemp("pipeline") / "nlp"
    nlp.to_disk(folder)
    return folder


@pytest.mark.parametrize("case", HF_BILM_CASES, ids=lambda case: case.id)
def test_spacy_load_of_a_pipeline_holding_it(case, saved_pipeline, expected_tensors, tmp_path):
    pipeline = tmp_path / "nlp"
    shutil.copytree(saved_pipeline, pipeline)
    broken = pipeline / "elmo" / "bilm" / case.file
    case.damage(broken)
    if case.found == "never":
        assert numpy.array_equal(spacy.load(pipeline)(SENTENCE).tensor, expected_tensors["hf"])
        return
    with pytest.raises((ValueError, OSError)) as info:
        spacy.load(pipeline)
    assert_names_the_file(str(info.value), broken)


# --- the HF face: ElmoModel.from_pretrained and AutoModel ---------------------------------------------------


@pytest.mark.parametrize("loader", ["ElmoModel", "AutoModel"])
@pytest.mark.parametrize("case", [c for c in CASES if c.kind == "hf"], ids=lambda case: case.id)
def test_from_pretrained(case, loader, intact, tmp_path):
    from transformers import AutoModel

    folder = broken_copy(case, intact, tmp_path)
    load = ElmoModel.from_pretrained if loader == "ElmoModel" else AutoModel.from_pretrained
    if case.role not in ("config", "weights"):  # the model does not read the tokenizer or the card
        assert isinstance(load(folder), ElmoModel)
        return
    with pytest.raises((ValueError, OSError)) as info:
        load(folder)
    assert_names_the_file(str(info.value), folder / case.file)


# --- the commands that take a model, in process ----------------------------------------------------------


@pytest.fixture(scope="module")
def command_inputs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "sentences.txt").write_text(f"{SENTENCE}\nthe dog ran .\n")
    (folder / "vocab.txt").write_text("cat\ndog\nmat\n")
    make_corpus(folder / "tags.spacy", n=4)
    return {"text": folder / "sentences.txt", "vocab": folder / "vocab.txt", "docs": folder / "tags.spacy"}


COMMANDS = {
    "embed (stdin)": lambda model, inputs, out: ["embed", model],
    "embed": lambda model, inputs, out: ["embed", model, inputs["text"], out / "layers.hdf5", "--no-progress"],
    "convert": lambda model, inputs, out: ["convert", model, out / "elmo", "--no-progress"],
    "similar": lambda model, inputs, out: ["similar", model, "cat", "-n", "2", "--vocab", inputs["vocab"]],
    "probe": lambda model, inputs, out: [
        *("probe", model, inputs["docs"], inputs["docs"], "--max-iter", "2", "--output", out / "probe.json"),
    ],
    "finetune": lambda model, inputs, out: [
        *("finetune", model, TINY, "--output", out / "run", "--paths.train", inputs["text"]),
        *("--training.max_steps", "1", "--no-progress"),
    ],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_commands(case, command, intact, command_inputs, tmp_path, monkeypatch, capsys):
    folder = broken_copy(case, intact, tmp_path)
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{SENTENCE}\n".encode())))
    status = main([str(arg) for arg in COMMANDS[command](str(folder), command_inputs, out)])
    captured = capsys.readouterr()
    if case.found == "never":
        assert status == 0, captured.err
        return
    assert status == 2, captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert_names_the_file(lines[0], folder / case.file)
    assert captured.out == "" and files_under(out) == [], files_under(out)


# --- a few cases as the console script: exit 2, one line, no traceback --------------------------------------

SUBPROCESS_CASES = ["hf-model.safetensors-cut_half", "legacy-lm_weights.hdf5-cut_half", "efml-encoder.pkl-cut_half"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in SUBPROCESS_CASES], ids=lambda case: case.id)
def test_the_console_script_exits_2_with_one_line(case, intact, command_inputs, tmp_path):
    folder = broken_copy(case, intact, tmp_path)
    out = tmp_path / "out"
    args = COMMANDS["embed"](str(folder), command_inputs, out)
    done = subprocess.run(
        [str(SPACY_ELMO), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ")
    assert_names_the_file(line, folder / case.file)
    assert files_under(out) == []


# --- spacy train: one line, no traceback, before training ----------------------------------------------------

TRAIN_CASES = ["hf-model.safetensors-cut_half", "legacy-lm_weights.hdf5-wrong_shape", "efml-encoder.pkl-cut_half"]


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in CASES if c.id in TRAIN_CASES], ids=lambda case: case.id)
def test_spacy_train(case, intact, tmp_path):
    folder = broken_copy(case, intact, tmp_path)
    corpus = make_corpus(tmp_path / "train.spacy")
    output = tmp_path / "trained"
    done = subprocess.run(
        [sys.executable, "-m", "spacy", "train", str(ROOT / "configs" / "ner_elmo.cfg"), "--output", str(output)]
        + ["--paths.train", str(corpus), "--paths.dev", str(corpus), "--paths.elmo", str(folder)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )
    shown = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # wasabi's colours, where it uses them
    assert done.returncode == 1, shown
    assert "Traceback" not in shown and "Training pipeline" not in shown, shown
    # the one message, which spaCy wraps at 80 columns (at spaces: a path stays whole)
    after = " ".join(shown.split("Initializing pipeline", 1)[1].strip("= \n").split())
    assert after.startswith("✘ elmo `model` (paths.elmo): ") and after.count("✘") == 1, shown
    assert_names_the_file(after, folder / case.file)
    assert files_under(output) == []  # (spaCy makes the folder before it builds the pipeline)


def test_the_campaign_covers_every_file_and_fault():
    """The count the issue's closing note gives: cases × faces."""
    faces = {
        "add_pipe + first Doc": len(CASES),
        "spacy.load": len(HF_BILM_CASES),
        "from_pretrained, AutoModel": 2 * sum(c.kind == "hf" for c in CASES),
        "commands in process": len(COMMANDS) * len(CASES),
        "console script": len(SUBPROCESS_CASES),
        "spacy train": len(TRAIN_CASES),
    }
    for kind, files in FILES.items():
        for name in files:
            assert {"cut empty", "cut half", "missing", "a directory"} <= {
                c.fault for c in CASES if (c.kind, c.file) == (kind, name)
            }
    total = sum(faces.values())
    assert len(CASES) >= 70 and total >= 590, faces
    # the count docs/guarantees.md gives
    assert f"{len(CASES)} cases, {total} runs" in (ROOT / "docs" / "guarantees.md").read_text(), faces
    print(json.dumps({"cases": len(CASES), "runs": faces, "total": total}))
