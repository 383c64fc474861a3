"""Shared test fixtures: the reference ELMo models in tests/fixtures (AllenNLP and bilm-tf, Apache-2.0;
see tests/fixtures/NOTICE) and a converted HF copy. `$SPACY_ELMO_FIXTURES` points elsewhere."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("SPACY_ELMO_FIXTURES") or ROOT / "tests" / "fixtures")


def pytest_addoption(parser):
    parser.addoption(
        "--spacy-gpu",
        action="store_true",
        help="run spaCy (thinc's ops) and the biLMs it loads on the first CUDA device: spacy.require_gpu() "
        "before the tests (the CUDA check runs the spaCy tests so)",
    )


def pytest_configure(config):
    # tests that draw a random case (tests/training/test_pretrain_faults.py's crash step) draw it from this seed, set
    # once here, in the process that starts pytest-xdist's workers, so that every worker collects the
    # same tests; set it yourself to repeat a run's draw
    os.environ.setdefault("SPACY_ELMO_TEST_SEED", str(time.time_ns()))
    # the lab's modules run as `python -m lab.NAME` in subprocesses started from any folder (a project copy's own
    # lab/, its working folder, still comes first)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if config.getoption("--spacy-gpu"):
        import spacy

        try:
            spacy.require_gpu()
        except ValueError as error:  # thinc: no CUDA device or no cupy
            raise pytest.UsageError(f"--spacy-gpu: {error}") from None
    if not (FIXTURES / "allennlp_elmo" / "lm_weights.hdf5").is_file():
        raise pytest.UsageError(
            f"reference fixtures not found at {FIXTURES}: they ship in tests/fixtures; "
            "unset SPACY_ELMO_FIXTURES or point it at a folder holding allennlp_elmo/ and bilm_tf/"
        )


def pytest_collection_modifyitems(session, config, items):
    """The tests marked `slow` go first, the lab's (tests/project/: the project smoke test, most of the
    suite's time) first of all, so that with `-n` workers (pytest-xdist, as `make test` runs) it starts at
    once and the other tests run beside it, instead of it starting late and running alone. (`make test-fast`
    leaves the `slow` tests out.)"""
    # stable: file order otherwise
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, item.path.parent.name != "project"))


@pytest.fixture(scope="session")
def script():
    """`script("FOLDER.NAME")`: the lab's module lab/FOLDER/NAME.py."""
    return lambda name: importlib.import_module(f"lab.{name}")


@pytest.fixture(scope="session")
def ctrl_c_after_checkpoint():
    """`ctrl_c_after_checkpoint(command, output, env, wait=0.0)`: runs `command` as a terminal's foreground job,
    waits until OUTPUT/checkpoints/latest exists (and `wait` seconds more), then presses Ctrl-C: SIGINT to
    the whole process group (torchrun and its workers). Returns the finished Popen and its (stdout, stderr)."""

    def interrupt(command, output: Path, env: dict, wait: float = 0.0):
        # its own process group, as a terminal's foreground job. A foreground job takes SIGINT even when this
        # suite runs where it is ignored (a background `make test &` of a non-interactive shell, or nohup),
        # which the child would inherit, so it is reset to the default there
        child = subprocess.Popen(
            [str(c) for c in command],
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            deadline = time.monotonic() + 300
            while (
                not (output / "checkpoints" / "latest").is_file()
                and child.poll() is None
                and time.monotonic() < deadline
            ):
                time.sleep(0.2)
            assert child.poll() is None, child.communicate()[1][-3000:]
            time.sleep(wait)
            os.killpg(child.pid, signal.SIGINT)
            return child, child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)

    return interrupt


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def allennlp_dir() -> Path:
    return FIXTURES / "allennlp_elmo"


@pytest.fixture(scope="session")
def bilm_tf_dir() -> Path:
    return FIXTURES / "bilm_tf" / "model"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, allennlp_dir) -> Path:
    """The AllenNLP fixture biLM converted to an HF directory (config, safetensors, tokenizer)."""
    from spacy_elmo import ElmoTokenizer, load_legacy

    out = tmp_path_factory.mktemp("tiny_elmo")
    model = load_legacy(allennlp_dir / "options.json", allennlp_dir / "lm_weights.hdf5")
    model.save_pretrained(out)
    ElmoTokenizer().save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    """A small BERT (2 layers, width 32) with a word-piece vocabulary of the test corpora's words, made here and
    saved as a Hugging Face directory (model and fast tokenizer): the `transformer` of the trf configs, as no hub
    is reachable."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny_bert")
    words = "yesterday alice bob paris acme went to see the sea . cat sat on mat , said dr smith in london !"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(set(words.split())), *"abcdefghijklmnopqrstuvwxyz"]
    (out / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True).save_pretrained(out)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(dict.fromkeys(vocab)),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(out)
    return out


def floret_table(path: Path, rows: int = 64, dim: int = 8) -> Path:
    """A tiny floret table as floret's `save_floret_vectors` writes one: a header of rows, dim, minn, maxn,
    hash count, hash seed, BOW and EOW, then one `index v_1 ... v_dim` line per hashed row."""
    import numpy

    rng = numpy.random.default_rng(0)
    lines = [f"{rows} {dim} 3 4 2 2166136261 < >"]
    lines += [f"{i} " + " ".join(f"{v:.5f}" for v in rng.normal(0, 0.1, dim)) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


@pytest.fixture(scope="session")
def tiny_vectors_dir(tmp_path_factory) -> Path:
    """A spaCy vectors pipeline of a tiny floret table, made by `spacy init vectors --mode floret` as a user makes
    one: the `paths.vectors` of the static-vector configs."""
    import sys

    from helpers import run

    folder = tmp_path_factory.mktemp("floret")
    table = floret_table(folder / "tiny.floret")
    made = run(sys.executable, "-m", "spacy", "init", "vectors", "en", table, folder / "vectors", "--mode", "floret")
    assert made.returncode == 0, (made.stdout + made.stderr)[-3000:]
    return folder / "vectors"


@pytest.fixture(scope="session")
def tiny_model(allennlp_dir):
    from spacy_elmo import load_legacy

    return load_legacy(allennlp_dir / "options.json", allennlp_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op thread: the tiny biLM gains nothing from two, and a busy shared CPU makes
    OpenMP's spinning threads very slow."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
