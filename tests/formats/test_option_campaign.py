"""The option-and-file campaign: every option and every file a command takes, at the values that
must be refused and at the edges that must pass, beside the fault campaign's broken model files
(tests/formats/test_fault_campaign.py).

- **range**: every numeric option of `tools.options.OPTIONS` (its declared range), at the edges of
  its range (they run), one past them, and a non-number (`nan` and `inf` too for a real number);
  the model's bound of `similar --layer` (its L) included; and in the library face, the function
  the command calls, one past the range, before it looks at the model.
- **path**: every file a command reads (missing, a directory, a path through a file, unreadable:
  the OS's "Permission denied") and every output it writes (a folder where a file goes or a file
  where a folder goes, a path through a file, an earlier output, a folder it cannot write in:
  the OS's reason again), and a model folder or file that cannot be read; an earlier output is
  replaced with `--overwrite`.
- **contradiction**: options that do not go together (`embed --dims` with files, `similar
  --layer` without `--corpus`, `pretrain --resume --overwrite`, ...), and `--plot` without matplotlib.
- **files**: files that contradict each other, through every face that reads them (`add_pipe`,
  `ElmoModel.from_pretrained`, `AutoModel`, the CLI; `load_legacy`): an options.json against its
  hdf5 (layer and highway counts, a shape, an integer dataset, a dataset it does not describe) and
  a config.json against its safetensors (counts, a tensor it does not describe, a bool tensor, an
  invalid size); the optional tensors (an LM head, scalar mixes) and float16 weights load.

Each refused case: exit 2 and one line `error: ...` (the library: one line of a `ValueError` or
`OSError`), naming the option, the path or the field; no traceback; nothing written, an earlier
output unchanged; no temporary name and no object's repr in the message. Permission bits do not
stop root, so unreadable files are write-only sysctls (/proc/sys applies its modes to root too), an
unreadable folder one /proc will not list, and an unwritable folder /sys (or, for another user,
files and folders made so with chmod). The counts by kind are in docs/guarantees.md, checked here."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy
import pytest
import spacy
import torch
from safetensors.torch import load_file, save_file

from helpers import ROOT, TINY, make_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoModel, load_legacy
from spacy_elmo.cli import main
from spacy_elmo.tools.options import OPTIONS, option_table

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")
CORPUS = "the cat sat on the mat .\nthe dog sat on the mat .\nthe cat ran .\n"
L = 2  # the fixture biLM's LSTM layers: similar --layer's bound


# --- what the OS refuses, whoever runs the tests ---------------------------------------------------------


def _refusal(attempt: Callable[[], object]) -> str | None:
    """The OS's reason when `attempt` fails with an OSError, None when it works."""
    try:
        attempt()
    except OSError as err:
        return err.strerror
    return None


def _write_only_sysctl() -> Path | None:
    """A file nobody may read: a write-only sysctl (/proc/sys checks its modes for root too)."""
    for folder, _, files in os.walk("/proc/sys"):
        for name in sorted(files):
            path = Path(folder) / name
            try:
                if path.stat().st_mode & 0o444 == 0 and _refusal(lambda p=path: open(p, "rb").close()):
                    return path
            except OSError:
                continue
    return None


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """{kind: (a path the OS refuses, the OS's reasons)} for "unreadable file", "unlistable folder" and
    "unwritable folder" (making a file or a folder there: the reasons may differ), found so that they
    hold for the user the tests run as."""
    found: dict[str, tuple[Path, tuple[str, ...]]] = {}
    spare = tmp_path_factory.mktemp("refused")
    if os.geteuid() != 0:  # permission bits stop everyone but root
        (spare / "unreadable").write_text("x\n")
        (spare / "unlistable").mkdir()
        (spare / "unwritable").mkdir()
        os.chmod(spare / "unreadable", 0o200)
        os.chmod(spare / "unlistable", 0o300)
        os.chmod(spare / "unwritable", 0o500)
        candidates = {
            "unreadable file": spare / "unreadable",
            "unlistable folder": spare / "unlistable",
            "unwritable folder": spare / "unwritable",
        }
    else:
        candidates = {
            "unreadable file": _write_only_sysctl(),
            "unlistable folder": Path("/proc/1/map_files"),
            "unwritable folder": Path("/sys"),
        }
    tests = {
        "unreadable file": [lambda p: open(p, "rb").close()],
        "unlistable folder": [os.listdir],
        "unwritable folder": [
            lambda p: open(Path(p) / f"probe{os.getpid()}", "wb").close(),
            lambda p: os.mkdir(Path(p) / f"probe{os.getpid()}"),
        ],
    }
    for kind, path in candidates.items():
        if path is None:
            continue
        reasons = tuple(_refusal(lambda t=t: t(path)) for t in tests[kind])  # noqa: B023
        if all(reasons):
            found[kind] = (path, reasons)
    return found


def _need(refused, kind) -> tuple[Path, tuple[str, ...]]:
    if kind not in refused:
        pytest.skip(f"this machine has no {kind} for the user {os.geteuid()} runs as")
    return refused[kind]


# --- the inputs and the intact models -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tiny_model_dir, allennlp_dir, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "text.txt").write_text(CORPUS)
    (folder / "vocab.txt").write_text("cat\ndog\nmat\n")
    (folder / "a_file").write_text("a file where a folder is expected\n")
    make_corpus(folder / "tags.spacy", n=4)
    legacy = folder / "legacy"
    legacy.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(allennlp_dir / name, legacy / name)
    return {
        "model": tiny_model_dir,
        "legacy": legacy,
        "text": folder / "text.txt",
        "vocab": folder / "vocab.txt",
        "docs": folder / "tags.spacy",
        "config": TINY,
        "a_file": folder / "a_file",
    }


def cli(args: list) -> int:
    """`spacy-elmo ARGS` in process: its exit status (argparse's refusals exit, as on the command line)."""
    try:
        return main([str(a) for a in args])
    except SystemExit as stop:
        return int(stop.code or 0)


def everything(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder under `folder`, hidden ones (temporaries) included."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): (
            os.readlink(p).encode() if p.is_symlink() else p.read_bytes() if p.is_file() else None
        )
        for p in sorted(folder.rglob("*"))
    }


def inodes(folder: Path) -> dict[str, tuple[int, int]]:
    """Each file's inode and time: a file written again (renamed over) has another."""
    return {
        str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def assert_one_clear_line(message: str, names: list[str]) -> None:
    """One line naming each of `names`, with no temporary name, object repr or traceback."""
    assert "\n" not in message.strip(), message
    for name in names:
        assert name in message, (name, message)
    assert not re.search(r"\.tmp\d+", message), message  # a temporary's name
    assert not re.search(r"\b[A-Z]\w+\((\w+=|')", message), message  # an object's repr, e.g. HfFolder(text=...)
    assert "Traceback" not in message and "Errno" not in message, message


# --- the cases --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """`spacy-elmo ARGS` (`args(inputs, out)`, `out` a fresh folder) that must pass (`ok`) or be
    refused, its one line naming each of `names(inputs, out)`. `earlier`: outputs made first (by an
    intact run) that a refusal leaves as they were. `stdin`: standard input. `needs`: what the OS must
    refuse here (`refused`), whose path `args` gets as `inputs["refused"]` and whose reason the line
    must give."""

    kind: str
    name: str
    args: Callable[[dict, Path], list]
    ok: bool = False
    names: Callable[[dict, Path], list[str]] = lambda inputs, out: []
    earlier: tuple[str, ...] = ()
    stdin: str | None = None
    needs: str | None = None
    tags: tuple[str, ...] = field(default=())

    @property
    def id(self) -> str:
        return f"{self.kind}: {self.name}"


def _base(command: str, option: str) -> Callable[[dict, Path], list]:
    """A command line that runs, to which `option VALUE` is added."""
    if command == "embed" and option == "--dims":
        return lambda i, out: ["embed", i["model"]]
    if command == "embed":
        return lambda i, out: ["embed", i["model"], i["text"], out / "layers.hdf5", "--no-progress"]
    if command == "similar" and option == "-n":
        return lambda i, out: ["similar", i["model"], "the", "--vocab", i["vocab"]]
    if command == "similar":
        return lambda i, out: ["similar", i["model"], "the", "--corpus", i["text"], "--no-progress"]
    iterations = [] if option == "--max-iter" else ["--max-iter", "2"]
    return lambda i, out: [
        *("probe", i["model"], i["docs"], i["docs"], *iterations, "--output", out / "probe.json", "--no-progress")
    ]


def _range_cases() -> list[Case]:
    cases = []
    for command, options in OPTIONS.items():
        for option, allowed in options.items():
            base = _base(command, option)
            high = L if allowed.high_from else allowed.high
            values: list[tuple[str, bool]] = [(str(allowed.low), True), (str(allowed.low - 1), False), ("x", False)]
            if high is not None:
                values += [(str(high), True), (str(high + 1), False)]
            if allowed.kind is float:
                values += [("nan", False), ("inf", False)]
            for value, ok in values:
                cases.append(
                    Case(
                        "range",
                        f"{command} {option} {value}",
                        lambda i, out, b=base, o=option, v=value: [*b(i, out), o, v],
                        ok=ok,
                        names=lambda i, out, o=option: [o],
                        stdin="the cat sat .\n" if command == "embed" else None,
                    )
                )
    return cases


# the library's face of each option: the function the command calls, given a value one past its range
# and a model that is not there (the range is checked first)
LIBRARY = {
    ("embed", "--dims"): ("dims", lambda v, i, out: _tools("embed").print_embeddings(out / "none", dims=v)),
    ("embed", "--batch-size"): (
        "batch_size",
        lambda v, i, out: _tools("embed").dump_embeddings(out / "none", i["text"], out / "l.hdf5", batch_size=v),
    ),
    **{
        ("similar", option): (
            option,
            lambda v, i, out, k=key: _tools("similar").nearest_words(out / "none", "the", corpus=i["text"], **{k: v}),
        )
        for option, key in (
            ("-n", "n"),
            ("--layer", "layer"),
            ("--min-count", "min_count"),
            ("--max-sentences", "max_sentences"),
        )
    },
    **{
        ("probe", option): (
            key,
            lambda v, i, out, k=key: _tools("probe").probe_tasks(out / "none", i["docs"], i["docs"], ["pos"], **{k: v}),
        )
        for option, key in (
            ("--max-sentences", "max_sentences"),
            ("--seed", "seed"),
            ("--l2", "l2"),
            ("--max-iter", "max_iter"),
        )
    },
}


def _tools(name: str):
    import importlib

    return importlib.import_module(f"spacy_elmo.tools.{name}")


def _path_cases() -> list[Case]:
    cases = []
    # the files a command reads: (command line with the path in place, what names it)
    readers = {
        "embed INPUT": (lambda i, out, p: ["embed", i["model"], p, out / "layers.hdf5"], "INPUT"),
        "similar --vocab": (lambda i, out, p: ["similar", i["model"], "the", "--vocab", p], "--vocab"),
        "similar --corpus": (lambda i, out, p: ["similar", i["model"], "the", "--corpus", p], "--corpus"),
        "probe TRAIN": (lambda i, out, p: ["probe", i["model"], p, i["docs"], "--output", out / "p.json"], "TRAIN"),
        "probe DEV": (lambda i, out, p: ["probe", i["model"], i["docs"], p, "--output", out / "p.json"], "DEV"),
        "pretrain CONFIG": (
            lambda i, out, p: ["pretrain", p, "--output", out / "run", "--paths.train", i["text"]],
            "CONFIG",
        ),
    }
    bad_inputs = {
        "missing": (lambda i, out: out.parent / "no_such_file.txt", "no such file", None),
        "a directory": (lambda i, out: out.parent, "is a directory", None),
        "a path through a file": (lambda i, out: i["a_file"] / "x.txt", "Not a directory", None),
        "unreadable": (lambda i, out: i["refused"], None, "unreadable file"),
    }
    for reader, (line, option) in readers.items():
        for fault, (where, says, needs) in bad_inputs.items():
            cases.append(
                Case(
                    "path",
                    f"{reader}: {fault}",
                    lambda i, out, line=line, where=where: line(i, out, where(i, out)),
                    names=lambda i, out, o=option, where=where, says=says: (
                        [o, str(where(i, out))] + ([says] if says else [])
                    ),
                    needs=needs,
                )
            )
    cases.append(
        Case(
            "path",
            "probe TRAIN: not a DocBin",
            lambda i, out: ["probe", i["model"], i["text"], i["docs"], "--output", out / "p.json"],
            names=lambda i, out: [str(i["text"]), "not a spaCy DocBin"],
        )
    )
    # the outputs a command writes: (command line writing to `target`, its name, what kind, how it is named)
    writers = {
        "embed OUTPUT": (
            lambda i, out, t, *o: ["embed", i["model"], i["text"], t, "--no-progress", *o],
            "layers.hdf5",
            "file",
            "OUTPUT",
        ),
        "init-config OUTPUT": (lambda i, out, t, *o: ["init-config", "ner_elmo", t, *o], "ner.cfg", "file", "OUTPUT"),
        "probe --output": (
            lambda i, out, t, *o: [
                "probe",
                i["model"],
                i["docs"],
                i["docs"],
                "--max-iter",
                "2",
                "--output",
                t,
                "--no-progress",
                *o,
            ],
            "probe.json",
            "file",
            "--output",
        ),
        "probe --plot": (
            lambda i, out, t, *o: [
                "probe",
                i["model"],
                i["docs"],
                i["docs"],
                "--max-iter",
                "2",
                "--plot",
                t,
                "--no-progress",
                *o,
            ],
            "probe.png",
            "file",
            "--plot",
        ),
        "convert OUTPUT": (
            lambda i, out, t, *o: ["convert", i["legacy"], t, "--no-progress", *o],
            "elmo",
            "folder",
            "OUTPUT",
        ),
        "pretrain --output": (
            lambda i, out, t, *o: [
                *("pretrain", i["config"], "--output", t, "--paths.train", i["text"], "--training.max_steps", "1"),
                *("--no-progress", *o),
            ],
            "run",
            "folder",
            "--output",
        ),
    }
    for writer, (line, name, kind, option) in writers.items():
        wrong = "a_file" if kind == "folder" else "a_dir"
        faults = {
            f"a {'file' if kind == 'folder' else 'directory'} there": (
                lambda i, out, w=wrong: i["a_file"] if w == "a_file" else out.parent,
                "is a file, expected a folder" if kind == "folder" else "is a directory, expected a file",
                None,
                (),
            ),
            "a path through a file": (lambda i, out, n=name: i["a_file"] / n, "is a file, not a folder", None, ()),
            "an earlier output": (lambda i, out, n=name: out / n, "--overwrite", None, (name,)),
            "an unwritable folder": (
                lambda i, out, n=name: i["refused"] / f"{os.getpid()}_{n}",
                None,
                "unwritable folder",
                (),
            ),
        }
        for fault, (target, says, needs, earlier) in faults.items():
            cases.append(
                Case(
                    "path",
                    f"{writer}: {fault}",
                    lambda i, out, line=line, target=target: line(i, out, target(i, out)),
                    names=lambda i, out, o=option, target=target, says=says: (
                        [o, str(target(i, out))] + ([says] if says else [])
                    ),
                    earlier=earlier,
                    needs=needs,
                )
            )
        cases.append(
            Case(
                "path",
                f"{writer}: an earlier output with --overwrite",
                lambda i, out, line=line, n=name: line(i, out, out / n, "--overwrite"),
                ok=True,
                earlier=(name,),
                tags=("replaced",),
            )
        )
    # a model that cannot be read: a folder /proc will not list, a file of it nobody may read
    cases.append(
        Case(
            "path",
            "embed MODEL: an unlistable folder",
            lambda i, out: ["embed", i["refused"]],
            names=lambda i, out: [str(i["refused"]), "cannot read this folder"],
            stdin="the cat .\n",
            needs="unlistable folder",
        )
    )
    for folder, file in (
        ("model", "config.json"),
        ("model", "model.safetensors"),
        ("legacy", "options.json"),
        ("legacy", "lm_weights.hdf5"),
    ):
        cases.append(
            Case(
                "path",
                f"embed MODEL: an unreadable {file}",
                lambda i, out, folder=folder, file=file: ["embed", _with_unreadable(i, out, folder, file)],
                names=lambda i, out, file=file: [str(out / "model" / file)],
                stdin="the cat .\n",
                needs="unreadable file",
                tags=("model copy",),
            )
        )
    return cases


def _with_unreadable(inputs: dict, out: Path, folder: str, file: str) -> Path:
    """A copy of the `folder` model in `out/model` whose `file` is a link to a file nobody may read."""
    copy = out / "model"
    shutil.copytree(inputs[folder], copy)
    (copy / file).unlink()
    (copy / file).symlink_to(inputs["refused"])
    return copy


def _contradiction_cases() -> list[Case]:
    def case(name, args, names, **kwargs):
        return Case("contradiction", name, args, names=lambda i, out, n=names: n, **kwargs)

    text = "the cat .\n"
    probe = lambda i, out: ["probe", i["model"], i["docs"], i["docs"], "--max-iter", "2"]  # noqa: E731
    return [
        case("embed INPUT without OUTPUT", lambda i, out: ["embed", i["model"], i["text"]], ["INPUT and OUTPUT"]),
        case(
            "embed --dims with files",
            lambda i, out: ["embed", i["model"], i["text"], out / "l.hdf5", "--dims", "3"],
            ["--dims"],
        ),
        case(
            "embed --batch-size without files",
            lambda i, out: ["embed", i["model"], "--batch-size", "4"],
            ["--batch-size"],
            stdin=text,
        ),
        case(
            "embed --overwrite without files",
            lambda i, out: ["embed", i["model"], "--overwrite"],
            ["--overwrite"],
            stdin=text,
        ),
        case(
            "embed --lang with tokenized lines",
            lambda i, out: ["embed", i["model"], "--lang", "de"],
            ["--lang", "--format text"],
            stdin=text,
        ),
        case(
            "embed --lang not a language",
            lambda i, out: ["embed", i["model"], "--format", "text", "--lang", "zz"],
            ["'zz'"],
            stdin=text,
        ),
        case(
            "similar --layer without --corpus",
            lambda i, out: ["similar", i["model"], "the", "--layer", "1"],
            ["--layer", "--corpus"],
        ),
        case(
            "similar --min-count without --corpus",
            lambda i, out: ["similar", i["model"], "the", "--min-count", "1"],
            ["--min-count"],
        ),
        case(
            "similar --max-sentences without --corpus",
            lambda i, out: ["similar", i["model"], "the", "--max-sentences", "1"],
            ["--max-sentences"],
        ),
        case(
            "similar --vocab with --corpus",
            lambda i, out: ["similar", i["model"], "the", "--vocab", i["vocab"], "--corpus", i["text"]],
            ["--vocab", "--corpus"],
        ),
        case("similar without a vocabulary", lambda i, out: ["similar", i["model"], "the"], ["vocab.txt", "--vocab"]),
        case(
            "probe --output and --plot one file",
            lambda i, out: [*probe(i, out), "--output", out / "p.json", "--plot", out / "p.json"],
            ["--output", "--plot"],
        ),
        case("probe --plot in no format", lambda i, out: [*probe(i, out), "--plot", out / "p.xyz"], ["--plot", ".xyz"]),
        case(
            "probe --plot without matplotlib",
            lambda i, out: [*probe(i, out), "--plot", out / "p.png"],
            ["--plot", "matplotlib", "pip install"],
            tags=("no matplotlib",),
        ),
        case(
            "convert four paths",
            lambda i, out: ["convert", i["legacy"], i["legacy"], i["legacy"], out / "elmo"],
            ["(SOURCE | OPTIONS.json WEIGHTS.hdf5) OUTPUT"],
        ),
        case(
            "convert --lang not a language",
            lambda i, out: ["convert", i["legacy"], out / "elmo", "--lang", "zz"],
            ["--lang", "'zz'"],
        ),
        case(
            "init-config --lang not a language",
            lambda i, out: ["init-config", "ner_elmo", out / "n.cfg", "--lang", "zz"],
            ["--lang", "'zz'"],
        ),
        case(
            "pretrain --resume --overwrite",
            lambda i, out: [
                "pretrain",
                i["config"],
                "--output",
                out / "run",
                "--paths.train",
                i["text"],
                "--resume",
                "--overwrite",
            ],
            ["--resume", "--overwrite"],
        ),
        case(
            "finetune a model into itself",
            lambda i, out: ["finetune", out / "run", i["config"], "--output", out / "run", "--paths.train", i["text"]],
            ["paths.init_from", "output directory"],
            earlier=("run",),
        ),
    ]


@dataclass(frozen=True)
class FileCase:
    """A copy of an intact model (`kind` "hf" or "legacy") with `damage` done; `ok`: it loads in every
    face; else each face refuses it in one line naming each of `names` (relative to the copy)."""

    kind: str
    name: str
    damage: Callable[[Path], None]
    names: tuple[str, ...] = ()
    ok: bool = False

    @property
    def id(self) -> str:
        return f"files: {self.kind} {self.name}"


def _options(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        options = json.loads((folder / "options.json").read_text())
        edit(options)
        (folder / "options.json").write_text(json.dumps(options))

    return damage


def _hdf5(edit: Callable[[h5py.File], None]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        with h5py.File(folder / "lm_weights.hdf5", "r+") as handle:
            edit(handle)

    return damage


def _as_int(handle: h5py.File) -> None:
    data = handle["char_embed"][...]
    del handle["char_embed"]
    handle["char_embed"] = (data * 100).astype("int32")


def _config(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))

    return damage


def _tensors(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        tensors = load_file(folder / "model.safetensors")
        edit(tensors)
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})

    return damage


def _set(**values) -> Callable[[dict], None]:
    return lambda tensors: tensors.update({k: v() for k, v in values.items()})


FILE_CASES = [
    FileCase(
        "legacy",
        "options.json n_layers 1, 2 layers in the hdf5",
        _options(lambda o: o["lstm"].update(n_layers=1)),
        ("lm_weights.hdf5", "options.json", "lstm.n_layers"),
    ),
    FileCase(
        "legacy",
        "options.json n_highway 1, 2 in the hdf5",
        _options(lambda o: o["char_cnn"].update(n_highway=1)),
        ("lm_weights.hdf5", "options.json", "char_cnn.n_highway"),
    ),
    FileCase(
        "legacy",
        "options.json embedding dim 5, 4 in the hdf5",
        _options(lambda o: o["char_cnn"]["embedding"].update(dim=5)),
        ("lm_weights.hdf5", "char_embed", "char_cnn.embedding.dim"),
    ),
    FileCase(
        "legacy",
        "options.json n_layers 0",
        _options(lambda o: o["lstm"].update(n_layers=0)),
        ("options.json", "lstm.n_layers"),
    ),
    FileCase("legacy", "an integer dataset", _hdf5(_as_int), ("lm_weights.hdf5", "char_embed", "int32")),
    FileCase(
        "legacy",
        "a dataset options.json does not describe",
        _hdf5(lambda h: h.create_dataset("extra/W", data=numpy.ones(3, "float32"))),
        ("lm_weights.hdf5", "extra/W", "options.json"),
    ),
    FileCase(
        "legacy",
        "the training softmax (optional)",
        _hdf5(lambda h: h.create_dataset("softmax/W", data=numpy.ones((5, 16), "float32"))),
        ok=True,
    ),
    FileCase(
        "hf",
        "config.json num_layers 1, 2 layers in the weights",
        _config(lambda c: c.update(num_layers=1)),
        ("model.safetensors", "config.json", "num_layers"),
    ),
    FileCase(
        "hf",
        "config.json n_highway 1, 2 in the weights",
        _config(lambda c: c.update(n_highway=1)),
        ("model.safetensors", "config.json", "n_highway"),
    ),
    FileCase(
        "hf", "config.json num_layers 0", _config(lambda c: c.update(num_layers=0)), ("config.json", "num_layers")
    ),
    FileCase(
        "hf",
        "a tensor config.json does not describe",
        _tensors(_set(**{"extra.weight": lambda: torch.ones(3)})),
        ("model.safetensors", "extra.weight", "config.json"),
    ),
    FileCase(
        "hf",
        "a bool tensor",
        _tensors(lambda t: t.update({"encoder.layers.0.bias": t["encoder.layers.0.bias"] > 0})),
        ("model.safetensors", "encoder.layers.0.bias", "BOOL"),
    ),
    FileCase(
        "hf",
        "an LM head (optional)",
        _tensors(_set(**{"lm_head.weight": lambda: torch.zeros(5, 16), "lm_head.bias": lambda: torch.zeros(5)})),
        ok=True,
    ),
    FileCase(
        "hf",
        "scalar mixes config.json does not ask for (optional)",
        _tensors(
            _set(
                **{
                    "scalar_mixes.0.scalar_parameters": lambda: torch.zeros(3),
                    "scalar_mixes.0.gamma": lambda: torch.ones(1),
                }
            )
        ),
        ok=True,
    ),
    FileCase(
        "hf", "float16 weights (converted)", _tensors(lambda t: t.update({k: v.half() for k, v in t.items()})), ok=True
    ),
]
FILE_FACES = {
    "hf": ("add_pipe", "ElmoModel.from_pretrained", "AutoModel", "cli"),
    "legacy": ("add_pipe", "load_legacy", "cli"),
}

CASES = _range_cases() + _path_cases() + _contradiction_cases()


# --- the runs -------------------------------------------------------------------------------------------------


@pytest.fixture
def no_matplotlib(monkeypatch):
    """As where matplotlib is not installed: importing it fails."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def _earlier(case: Case, inputs: dict, out: Path) -> None:
    """The outputs an intact run of the command makes first (an earlier output to keep or replace)."""
    for name in case.earlier:
        if name == "run":  # an earlier pretraining run (and the model finetune would read)
            status = cli(
                ["pretrain", inputs["config"], "--output", out / "run", "--paths.train", inputs["text"]]
                + ["--training.max_steps", "1", "--no-progress"]
            )
        elif name == "elmo":
            status = cli(["convert", inputs["legacy"], out / "elmo", "--no-progress"])
        elif name.endswith(".hdf5"):
            status = cli(["embed", inputs["model"], inputs["text"], out / name, "--no-progress"])
        else:  # an earlier file of the user's at the output's name
            (out / name).write_text("an earlier output\n")
            status = 0
        assert status == 0, name


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_command_lines(case, inputs, refused, tmp_path, monkeypatch, capsys, request):
    out = tmp_path / "out"
    out.mkdir()
    given = dict(inputs)
    reasons: tuple[str, ...] = ()
    if case.needs:
        given["refused"], reasons = _need(refused, case.needs)
    if "no matplotlib" in case.tags:
        request.getfixturevalue("no_matplotlib")
    _earlier(case, given, out)
    capsys.readouterr()
    args = case.args(given, out)  # (may make a copy of a model in `out`)
    before, numbers = everything(out), inodes(out)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((case.stdin or "").encode())))
    status = cli(args)
    captured = capsys.readouterr()
    if case.ok:
        assert status == 0, captured.err
        if "replaced" in case.tags:  # the earlier output, renamed over
            after = inodes(out)
            assert any(after.get(name) != number for name, number in numbers.items()), (numbers, after)
            assert not [p for p in everything(out) if ".tmp" in p]
        return
    assert status == 2, (captured.err, captured.out)
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert_one_clear_line(lines[0], case.names(given, out))
    assert not reasons or any(reason in lines[0] for reason in reasons), (reasons, lines[0])
    assert captured.out == ""
    assert everything(out) == before, "written or changed"


@pytest.mark.parametrize("command, option", sorted(LIBRARY), ids=[f"library: {c} {o}" for c, o in sorted(LIBRARY)])
def test_the_library_checks_each_option_first(command, option, inputs, tmp_path):
    name, call = LIBRARY[(command, option)]
    allowed = OPTIONS[command][option]
    with pytest.raises(ValueError) as info:
        call(allowed.low - 1, inputs, tmp_path)
    assert_one_clear_line(str(info.value), [name, str(allowed.low - 1)])
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def intact_files(inputs, tmp_path_factory) -> dict[str, Path]:
    """The intact folder of each kind, the HF one with its model card."""
    root = tmp_path_factory.mktemp("intact")
    shutil.copytree(inputs["legacy"], root / "legacy")
    assert cli(["convert", inputs["legacy"], root / "hf", "--no-progress"]) == 0
    return {"hf": root / "hf", "legacy": root / "legacy"}


def _first_doc(folder: Path):
    """`add_pipe` (its cheap check) and the first Doc (the weights read)."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(folder)})
    return nlp("the cat sat .")


FACES = {
    "add_pipe": _first_doc,
    "ElmoModel.from_pretrained": ElmoModel.from_pretrained,
    "AutoModel": lambda folder: __import__("transformers").AutoModel.from_pretrained(folder),
    "load_legacy": lambda folder: load_legacy(folder / "options.json", folder / "lm_weights.hdf5"),
}


@pytest.mark.parametrize(
    "case, face",
    [(c, f) for c in FILE_CASES for f in FILE_FACES[c.kind]],
    ids=[f"{c.id} ({f})" for c in FILE_CASES for f in FILE_FACES[c.kind]],
)
def test_files_against_each_other(case, face, intact_files, tmp_path, monkeypatch, capsys):
    folder = tmp_path / case.kind
    shutil.copytree(intact_files[case.kind], folder)
    case.damage(folder)
    # a file named by its path, or by its folder and its name ("FOLDER: invalid config.json")
    names = [str(folder) if (folder / n).exists() else n for n in case.names] + list(case.names)
    if face == "cli":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat sat .\n")))
        status = cli(["embed", folder])
        captured = capsys.readouterr()
        if case.ok:
            assert status == 0, captured.err
            return
        assert status == 2 and captured.out == "", captured.err
        (line,) = captured.err.splitlines()
        assert line.startswith("error: ")
        assert_one_clear_line(line, names)
        return
    if case.ok:
        FACES[face](folder)
        return
    with pytest.raises((ValueError, OSError)) as info:
        FACES[face](folder)
    assert_one_clear_line(str(info.value), names)


# --- as the user runs it: the console script -------------------------------------------------------------------


def test_a_closed_output_pipe_ends_quietly(inputs):
    """`spacy-elmo embed MODEL | head -1`: the reader goes away; embed stops with exit 0 and says nothing."""
    text = "".join(f"the cat sat on the mat number {i} .\n" for i in range(400))
    done = subprocess.run(
        f"'{SPACY_ELMO}' embed '{inputs['model']}' | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        input=text,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0 and done.stderr == "" and done.stdout.startswith("sentence: "), done.stderr[-2000:]


@pytest.mark.parametrize(
    "args",
    [
        ["embed", "MODEL", "TEXT", "OUT/layers.hdf5", "--batch-size", "0"],
        ["probe", "MODEL", "DOCS", "DOCS", "--l2", "-1"],
        ["similar", "MODEL", "the", "-n", "-2", "--vocab", "VOCAB"],
    ],
    ids=lambda args: " ".join(args[:1] + args[4:]),
)
def test_the_console_script_exits_2_with_one_line(args, inputs, tmp_path):
    names = {"MODEL": inputs["model"], "TEXT": inputs["text"], "DOCS": inputs["docs"], "VOCAB": inputs["vocab"]}
    line = [str(names.get(a, a)).replace("OUT", str(tmp_path / "out")) for a in args]
    done = subprocess.run([str(SPACY_ELMO), *line], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    (message,) = done.stderr.splitlines()
    assert message.startswith("error: argument ") and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


# --- the count docs/guarantees.md gives ---------------------------------------------------------------------------


def test_the_campaign_covers_every_option_and_its_count_is_documented():
    from spacy_elmo.cli import build_parser

    # every numeric option of every command is in OPTIONS, and so in the campaign
    numeric = set()
    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if action.type in (int, float) or type(action.type).__name__ == "Range":
                numeric.add((name, action.option_strings[0]))
    assert numeric == {(c, o) for c, options in OPTIONS.items() for o in options}, numeric
    assert set(LIBRARY) == {(c, o) for c, options in OPTIONS.items() for o in options}
    kinds: dict[str, int] = {}
    for case in CASES:
        kinds[case.kind] = kinds.get(case.kind, 0) + 1
    kinds["range"] += len(LIBRARY)
    kinds["files"] = sum(len(FILE_FACES[c.kind]) for c in FILE_CASES)
    kinds["console"] = 3 + 1  # the console script's three cases and the closed pipe
    total = sum(kinds.values())
    sentence = (
        f"{total} cases: {kinds['range']} of option ranges, {kinds['path']} of paths, "
        f"{kinds['contradiction']} of contradictions, {kinds['files']} of files against each other, "
        f"{kinds['console']} as the console script"
    )
    documented = (ROOT / "docs" / "guarantees.md").read_text()
    assert sentence in " ".join(documented.split()), sentence
    assert option_table() in documented  # the table of ranges, as OPTIONS declares them
    print(json.dumps(kinds))
