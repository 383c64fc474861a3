"""`spacy-elmo embed MODEL INPUT OUTPUT.hdf5` (bilm-tf layout, streaming, torchrun shards), the stdin
mode of `embed`, and `spacy-elmo similar`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy
import pytest
import torch

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from helpers import on_a_terminal
from spacy_elmo import ElmoConfig, ElmoForBidirectionalLM, ElmoModel, ElmoTokenizer
from spacy_elmo.cli import main
from spacy_elmo.tools.similar import most_similar
from spacy_elmo.training.vocabulary import Vocabulary

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["the", "cat", "cats", "dog", "dogs", "sees", "a", "house", "houses", "river", ".", "Ångström", "日本"]
LINES = [
    "the cat sees a dog .",
    "",
    "dogs",
    "the   houses near\tthe river .",
    "café naïve",
    "Ångström 日本 the cat sees the dogs near the river with a very long sentence of many words .",
]


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory) -> Path:
    """An (untrained) biLM with LM head saved like `spacy-elmo pretrain` saves it."""
    out = tmp_path_factory.mktemp("embed_lm")
    vocab = Vocabulary(["<S>", "</S>", "<UNK>"] + WORDS)
    config = ElmoConfig(
        max_characters_per_token=20,
        char_embedding_dim=8,
        filters=[[1, 16], [2, 16], [3, 32]],
        n_highway=1,
        num_layers=2,
        lstm_dim=48,
        projection_dim=16,
        vocab_size=len(vocab),
    )
    torch.manual_seed(0)
    ElmoForBidirectionalLM(config).save_pretrained(out)
    ElmoTokenizer(max_characters_per_token=20).save_pretrained(out)
    vocab.save(out / "vocab.txt")
    return out


@pytest.fixture()
def input_file(tmp_path) -> Path:
    path = tmp_path / "input.txt"
    path.write_bytes("\n".join(LINES).encode("utf-8") + b"\n")
    return path


def expected_layers(model_dir: Path, line: str, exact: bool = False) -> numpy.ndarray:
    """The layers of one line run alone, in float32 (or float64 with `exact`: the definition)."""
    model = ElmoModel.from_pretrained(model_dir).eval()
    if exact:
        model = exact_copy(model)
    words = line.split()
    with torch.no_grad():
        out = model(**ElmoTokenizer(max_characters_per_token=20)([words]))
    return torch.stack(out.hidden_states)[:, 0].numpy()


def test_embed_writes_bilm_tf_layout(lm_dir, input_file, tmp_path, capsys):
    output = tmp_path / "layers.hdf5"
    assert main(["embed", str(lm_dir), str(input_file), str(output), "--batch-size", "2", "--no-progress"]) == 0
    assert "6 lines" in capsys.readouterr().err
    lines = input_file.read_text(encoding="utf-8").splitlines()
    with h5py.File(output, "r") as handle:
        assert sorted(handle.keys(), key=int) == [str(i) for i in range(len(LINES))]
        for i, line in enumerate(lines):
            data = handle[str(i)]
            assert data.dtype == numpy.float32 and data.shape == (3, len(line.split()), 32)
            if line.split():  # batches of 2 round otherwise than the line alone
                assert_float32_error(
                    expected_layers(lm_dir, line, exact=True),
                    expected_layers(lm_dir, line),
                    data[...],
                    terms=forward_terms(ElmoConfig.from_pretrained(lm_dir)),
                    what=f"line {i}",
                )
        assert handle["1"].shape == (3, 0, 32)  # the empty line keeps its index


@pytest.mark.slow
def test_embed_shards_by_rank_under_torchrun(lm_dir, input_file, tmp_path, monkeypatch):
    single, sharded = tmp_path / "single.hdf5", tmp_path / "sharded" / "layers.hdf5"
    assert main(["embed", str(lm_dir), str(input_file), str(single), "--no-progress"]) == 0
    env = dict(os.environ, OMP_NUM_THREADS="1")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "spacy_elmo",
            "embed",
            str(lm_dir),
            str(input_file),
            str(sharded),
            "--no-progress",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    parts = sorted(p.name for p in sharded.parent.iterdir())
    assert parts == ["layers.hdf5", "layers.rank0-of-2.hdf5", "layers.rank1-of-2.hdf5"]
    with h5py.File(sharded.parent / "layers.rank1-of-2.hdf5", "r") as handle:
        assert sorted(handle.keys(), key=int) == ["1", "3", "5"]
    lines = input_file.read_bytes().decode("utf-8", errors="replace").splitlines()
    terms = forward_terms(ElmoConfig.from_pretrained(lm_dir))
    monkeypatch.chdir(ROOT)  # the links resolve next to the file, not from the working directory
    with h5py.File(single, "r") as a, h5py.File(sharded, "r") as b:
        assert sorted(a.keys()) == sorted(b.keys())
        for name in a:  # each rank batches other lines: the same layers up to rounding
            assert a[name].shape == b[name].shape
            if lines[int(name)].split():
                exact = expected_layers(lm_dir, lines[int(name)], exact=True)
                assert_float32_error(exact, a[name][...], b[name][...], terms=terms, what=f"line {name}")


def test_embed_stdin_mode_still_works(lm_dir, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat sees a dog .\n")))
    assert main(["embed", str(lm_dir), "--dims", "2"]) == 0
    out = capsys.readouterr().out
    assert "layers: (3, 6, 32)" in out and "cat" in out
    assert main(["embed", str(lm_dir), str(lm_dir / "vocab.txt")]) == 2  # INPUT without OUTPUT
    assert "needs both INPUT and OUTPUT" in capsys.readouterr().err


def test_similar_ranks_vocabulary_words_by_cosine(lm_dir, capsys):
    assert main(["similar", str(lm_dir), "cat", "-n", "4"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.strip().splitlines()]
    assert len(rows) == 4
    scores, words = [float(s) for s, _ in rows], [w for _, w in rows]
    assert scores == sorted(scores, reverse=True) and all(-1.0 <= s <= 1.0 for s in scores)
    assert "cat" not in words and not set(words) & {"<S>", "</S>", "<UNK>"}
    model = ElmoModel.from_pretrained(lm_dir).eval()
    vocab = Vocabulary.load(lm_dir / "vocab.txt")
    everything = most_similar(model, "kitten", vocab, n=100)  # a word outside the vocabulary works too
    assert len(everything) == len(WORDS) and [s for _, s in everything] == sorted(
        (s for _, s in everything), reverse=True
    )


def test_similar_needs_a_vocabulary_for_models_without_one(lm_dir, tmp_path, capsys):
    bare = tmp_path / "bare"
    ElmoModel.from_pretrained(lm_dir).save_pretrained(bare)
    assert main(["similar", str(bare), "cat"]) == 2
    assert "--vocab" in capsys.readouterr().err
    words = tmp_path / "words.txt"
    words.write_text("dog\ncats\nriver\n")
    assert main(["similar", str(bare), "cat", "--vocab", str(words), "-n", "2"]) == 0
    rows = capsys.readouterr().out.strip().splitlines()
    assert len(rows) == 2 and {r.split("\t")[1] for r in rows} <= {"dog", "cats", "river"}


def test_similar_in_context_averages_each_words_layer_vectors(lm_dir, input_file, capsys):
    """--corpus: a word's vector is the mean of its layer vectors over the text, centred on the mean word."""
    from spacy_elmo.tools.similar import contextual_word_vectors, read_sentences

    model = ElmoModel.from_pretrained(lm_dir).eval()
    sentences = list(read_sentences(input_file))
    words, vectors = contextual_word_vectors(model, sentences, layer=2, min_count=2, batch_size=2)
    # by hand, in float32 and in float64 (the definition): every occurrence's top-layer vector,
    # averaged per word, centred on the mean word
    by_hand = {}
    for exact in (False, True):
        occurrences: dict = {}
        for line in LINES:
            if not line.split():
                continue
            for word, vector in zip(line.split(), expected_layers(lm_dir, line, exact)[2]):
                occurrences.setdefault(word, []).append(vector)
        frequent = {w: numpy.mean(v, axis=0) for w, v in occurrences.items() if len(v) >= 2}
        assert sorted(words) == sorted(frequent) and {"the", "cat", "river"} <= set(words)
        mean = numpy.mean([frequent[w] for w in words], axis=0)
        by_hand[exact] = {w: frequent[w] - mean for w in words}
    terms = sum(len(v) for v in occurrences.values())  # the centring sums every occurrence
    assert_float32_error(by_hand[True], by_hand[False], dict(zip(words, vectors.numpy())), terms=terms)
    assert main(["similar", str(lm_dir), "cat", "--corpus", str(input_file), "-n", "3"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.strip().splitlines()]
    assert len(rows) == 3 and "cat" not in {w for _, w in rows} and {w for _, w in rows} <= set(words)
    assert main(["similar", str(lm_dir), "kitten", "--corpus", str(input_file)]) == 2
    assert "does not occur" in capsys.readouterr().err
    assert main(["similar", str(lm_dir), "cat", "--corpus", str(input_file), "--layer", "7"]) == 2
    assert "--layer: expected an integer from 0 to 2" in capsys.readouterr().err


def test_contextual_vectors_cover_more_words_than_the_initial_table(lm_dir):
    """Past 1,024 distinct words the table grows; every word keeps its own average."""
    from spacy_elmo.tools.similar import contextual_word_vectors

    model = ElmoModel.from_pretrained(lm_dir).eval()
    words = [f"w{i}" for i in range(1500)]
    sentences = [words[i : i + 30] for i in range(0, 1500, 30)] * 2  # each word twice, same context
    found, vectors = contextual_word_vectors(model, sentences, layer=1, min_count=2, batch_size=16)
    assert found == words
    tokenizer = ElmoTokenizer(max_characters_per_token=20)
    with torch.no_grad():
        last = model(**tokenizer([sentences[-1]])).hidden_states[1][0]
        exact = exact_copy(model)(**tokenizer([sentences[-1]])).hidden_states[1][0]
    # differences between words cancel the centring; the last two words were seen twice in this context
    assert_float32_error(exact[-1] - exact[-2], last[-1] - last[-2], vectors[-1] - vectors[-2], terms=len(words))


# --- the documented commands as a user runs them: no silent overwrite, progress on a terminal only -------

SPACY_ELMO = Path(sys.executable).with_name("spacy-elmo")  # the console script


def spacy_elmo(*args, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [str(SPACY_ELMO), *map(str, args)], capture_output=True, text=True, timeout=300, env=env, **kwargs
    )


def test_embed_refuses_an_existing_output_before_any_work(lm_dir, input_file, tmp_path):
    notes = tmp_path / "notes.hdf5"
    notes.write_text("my notes\n")
    # a model that does not exist: the refusal comes first, so nothing was loaded or read
    done = spacy_elmo("embed", tmp_path / "no_such_model", input_file, notes)
    assert done.returncode == 2 and done.stderr == (
        f"error: OUTPUT {notes} exists; pass --overwrite to replace it, or choose another OUTPUT\n"
    )
    assert notes.read_text() == "my notes\n"
    other = tmp_path / "other.hdf5"  # HDF5, but someone else's
    with h5py.File(other, "w") as handle:
        handle["x"] = [1, 2, 3]
    done = spacy_elmo("embed", lm_dir, input_file, other, "--no-progress")
    assert done.returncode == 2 and f"error: OUTPUT {other} exists" in done.stderr
    with h5py.File(other, "r") as handle:
        assert list(handle.keys()) == ["x"]
    # --overwrite replaces it; embed's own output is kept as well unless --overwrite (one policy)
    done = spacy_elmo("embed", lm_dir, input_file, notes, "--overwrite", "--no-progress")
    assert done.returncode == 0, done.stderr
    written = notes.read_bytes()
    done = spacy_elmo("embed", lm_dir, input_file, notes, "--no-progress")
    assert done.returncode == 2 and "pass --overwrite" in done.stderr and notes.read_bytes() == written
    with h5py.File(notes, "r") as handle:
        assert handle.attrs["written_by"] == "spacy-elmo embed" and len(handle.keys()) == len(LINES)


def test_embed_shows_progress_on_a_terminal_only(lm_dir, input_file, tmp_path):
    out = tmp_path / "layers.hdf5"
    quiet = spacy_elmo("embed", lm_dir, input_file, out, "--no-progress")
    assert quiet.returncode == 0 and quiet.stderr == f"Wrote the layers of {len(LINES)} lines to {out}\n"
    piped = spacy_elmo("embed", lm_dir, input_file, out, "--overwrite")  # stderr is a pipe (a log, CI): no bar
    assert piped.returncode == 0 and piped.stderr == f"Wrote the layers of {len(LINES)} lines to {out}\n"
    status, _, shown = on_a_terminal("embed", lm_dir, input_file, out, "--overwrite")
    assert status == 0 and "line/s]" in shown and f"Wrote the layers of {len(LINES)} lines" in shown, shown
    quiet = spacy_elmo("similar", lm_dir, "cat", "--corpus", input_file, "-n", "2", "--no-progress")
    assert quiet.returncode == 0 and quiet.stderr == "" and len(quiet.stdout.splitlines()) == 2


def test_similar_corpus_shows_progress_on_a_terminal_only(lm_dir, input_file):
    args = ("similar", lm_dir, "cat", "--corpus", input_file, "-n", "2")
    status, out, shown = on_a_terminal(*args)
    assert status == 0 and len(out.splitlines()) == 2 and "sentence/s]" in shown, shown
    status, out, shown = on_a_terminal(*args, "--no-progress")
    assert status == 0 and len(out.splitlines()) == 2 and "sentence" not in shown, shown
    piped = spacy_elmo(*args)  # stderr is a pipe (a log, CI): no bar
    assert piped.returncode == 0 and piped.stderr == "" and len(piped.stdout.splitlines()) == 2
