"""Pretraining: the tiny config learns, checkpoints resume exactly, bad input and bad runs fail clearly.

Everything runs for real on small generated text: in-process `pretrain()` / `cli.main()` calls,
and real subprocesses where a process must die (kill -9).
"""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
import torch
from safetensors.torch import load_file

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from helpers import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoForBidirectionalLM, ElmoModel, load_legacy
from spacy_elmo.characters import TokenEncoder, Utf8Characters
from spacy_elmo.cli import main
from spacy_elmo.files import resolve_files
from spacy_elmo.text_input import read_block
from spacy_elmo.training.batches import Corpus, DataPosition
from spacy_elmo.training.checkpoints import Checkpoints
from spacy_elmo.training.pretrain import pretrain
from spacy_elmo.training.settings import PretrainError, learning_rate_at, load_settings, parse_overrides
from spacy_elmo.training.text import iter_sequences
from spacy_elmo.training.vocabulary import Vocabulary, unigram_perplexity

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("lm_corpus")
    return {
        "train": write_grammar_corpus(root / "train.txt", 3000, seed=1),
        "heldout": write_grammar_corpus(root / "heldout.txt", 200, seed=2),
    }


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> tuple[Path, dict]:
    """The tiny config, 300 steps, with held-out evaluation and the legacy export."""
    out = tmp_path_factory.mktemp("tiny_bilm")
    result = pretrain(
        TINY,
        out,
        {
            "paths.train": str(corpus["train"]),
            "paths.heldout": str(corpus["heldout"]),
            "export.legacy": True,
            "training.eval_every": 150,
        },
        progress=False,
    )
    return out, result


def params(directory: Path) -> dict[str, torch.Tensor]:
    return load_file(str(directory / "model.safetensors"))


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def test_tiny_config_learns_far_below_unigram_perplexity(trained, corpus):
    out, result = trained
    vocab = Vocabulary.build(iter_sequences([corpus["train"]]))
    unigram = unigram_perplexity(vocab, iter_sequences([corpus["heldout"]]))
    assert result["step"] == 300
    assert result["heldout_ppl"] < 0.5 * unigram, (result, unigram)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert steps[-1]["step"] == 300 and steps[-1]["loss"] < steps[0]["loss"]
    assert {"ppl", "forward_ppl", "backward_ppl", "words_per_s", "grad_norm", "epoch"} <= steps[0].keys()
    assert records[0]["event"] == "vocab" and records[0]["unigram_heldout_ppl"] == pytest.approx(unigram)
    # periodic evaluations at 150 and 300; the final result reuses step 300's instead of a second pass
    evals = [r for r in records if r.get("event") == "eval"]
    assert [r["step"] for r in evals] == [150, 300] and evals[0]["heldout_ppl"] > evals[1]["heldout_ppl"]
    assert evals[1]["heldout_ppl"] == result["heldout_ppl"]
    summary = json.loads((out / "pretrain_summary.json").read_text())
    assert summary["heldout_ppl"] == pytest.approx(result["heldout_ppl"]) and summary["words_per_s"] > 0


def test_output_loads_with_and_without_lm_head_and_as_legacy(trained):
    out, _ = trained
    lm = ElmoForBidirectionalLM.from_pretrained(out)
    elmo = ElmoModel.from_pretrained(out)
    vocab = Vocabulary.load(out / "vocab.txt")
    assert lm.config.vocab_size == len(vocab) and vocab.words[:3] == ["<S>", "</S>", "<UNK>"]
    for name, value in elmo.state_dict().items():
        assert torch.equal(value, lm.elmo.state_dict()[name]), name
    legacy = load_legacy(out / "legacy" / "options.json", out / "legacy" / "lm_weights.hdf5")
    with h5py.File(out / "legacy" / "lm_weights.hdf5") as handle:
        assert handle["softmax/W"].shape == (len(vocab), lm.config.projection_dim)
    from spacy_elmo import ElmoTokenizer

    batch = ElmoTokenizer.from_pretrained(out)([["the", "cat", "sees", "a", "dog", "."], ["a", "fox", "."]])
    with torch.no_grad():
        a, b = elmo(**batch).hidden_states, legacy(**batch).hidden_states
        exact = exact_copy(elmo)(**batch).hidden_states
        labels = torch.tensor(
            [vocab.encode(["the", "cat", "sees", "a", "dog", "."]), vocab.encode(["a", "fox", ".", "x", "x", "x"])]
        )
        loss = lm(**batch, labels=labels).loss
    # the legacy files hold the same weights in another layout: the same layers up to float rounding
    assert_float32_error(exact, a, b, terms=forward_terms(elmo.config))
    assert torch.isfinite(loss) and float(loss) < 3.0  # well below log(vocab) ≈ 3.6


def test_checkpoints_load_without_unpickling(trained):
    out, _ = trained
    ckpts = Checkpoints(out / "checkpoints")
    latest = ckpts.latest()
    assert latest.name == "step-00000300" and (out / "checkpoints" / "latest").read_text().strip() == latest.name
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step-00000200", "step-00000300"]
    optimizer = torch.load(latest / "optimizer.pt", weights_only=True)
    rng = torch.load(latest / "rng.pt", weights_only=True)
    assert optimizer["state"] and rng["cpu"].dtype == torch.uint8 and rng["cpu"].shape[0] == 1
    state = json.loads((latest / "state.json").read_text())
    assert state["step"] == 300 and all(isinstance(v, int) for v in state["position"].values())
    assert max_difference(load_file(str(latest / "model.safetensors")), params(out)) == 0.0


def test_resume_continues_exactly(corpus, tmp_path):
    """Dropout and a sampled softmax use the RNG, so this also checks RNG state and data position."""
    settings = {
        "paths.train": str(corpus["train"]),
        "model.dropout": 0.2,
        "training.softmax": "sampled",
        "training.n_negative_samples": 12,
        "training.checkpoint_every": 10,
        "training.log_every": 5,
        "data.block_lines": 700,  # several blocks per epoch: positions inside and across blocks
        "training.warmup_steps": 30,  # the checkpoint at step 20 is mid warm-up
    }
    whole = pretrain(TINY, tmp_path / "whole", settings | {"training.max_steps": 60}, progress=False)
    # interrupted: stops at 25 (final checkpoint 25), then as if killed after step 20's checkpoint
    part = tmp_path / "part"
    pretrain(TINY, part, settings | {"training.max_steps": 25}, progress=False)
    checkpoints = part / "checkpoints"
    assert sorted(p.name for p in checkpoints.glob("step-*")) == ["step-00000020", "step-00000025"]
    import shutil

    shutil.rmtree(checkpoints / "step-00000025")
    (checkpoints / "latest").write_text("step-00000020\n")
    # another thread count sums in another order: refused, in one line, before any work
    with pytest.raises(
        PretrainError,
        match=r"cannot resume .*step-00000020 exactly: it was trained with 1 torch threads "
        r"per process \(.*\), this run has 2 .*system.threads or OMP_NUM_THREADS",
    ):
        pretrain(TINY, part, settings | {"training.max_steps": 60, "system.threads": 2}, resume=True, progress=False)
    resumed = pretrain(TINY, part, settings | {"training.max_steps": 60}, resume=True, progress=False)
    assert resumed["step"] == whole["step"] == 60 and resumed["words"] == whole["words"]
    # the same float32 operations on the same bits (weights, optimizer state, RNG, data position),
    # in this process with its thread count both times: the same parameters, bit for bit
    assert max_difference(params(part), params(tmp_path / "whole")) == 0.0
    logged = [
        json.loads(line)["step"] for line in (part / "metrics.jsonl").read_text().splitlines() if '"loss"' in line
    ]
    assert logged == list(range(5, 61, 5))  # records past the checkpoint were replaced, not duplicated
    rates = [json.loads(line)["lr"] for line in (part / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert rates[:2] == pytest.approx([0.01 * 5 / 30, 0.01 * 10 / 30]) and rates[-1] == pytest.approx(0.01)


def test_bf16_precision_trains_under_autocast(corpus, tmp_path):
    """`training.precision = "bf16"` runs the forward pass under bf16 autocast: the run learns
    (finite loss, falling) and its parameters differ from the fp32 run's beyond float rounding."""
    settings = {"paths.train": str(corpus["train"]), "training.max_steps": 12, "training.log_every": 4}
    fp32 = pretrain(TINY, tmp_path / "fp32", settings, progress=False)
    bf16 = pretrain(TINY, tmp_path / "bf16", settings | {"training.precision": "bf16"}, progress=False)
    losses = [
        json.loads(line)["loss"]
        for line in (tmp_path / "bf16" / "metrics.jsonl").read_text().splitlines()
        if '"loss"' in line
    ]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    assert bf16["step"] == fp32["step"] == 12
    assert max_difference(params(tmp_path / "bf16"), params(tmp_path / "fp32")) > 1e-4


def test_bf16_without_native_bf16_is_one_warning_line_and_fp32(corpus, tmp_path, monkeypatch, caplog):
    """On a CPU without native bf16 products (forced here) `training.precision = "bf16"` warns once, in
    one line, and trains in fp32: the same weights as the fp32 run, bit for bit (emulated bf16 products
    would be slower than fp32 ones)."""
    from spacy_elmo.kernels import capabilities

    monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {"native_bf16"})
    monkeypatch.setattr(capabilities, "_warned_bf16", set())
    settings = {"paths.train": str(corpus["train"]), "training.max_steps": 4}
    pretrain(TINY, tmp_path / "fp32", settings, progress=False)
    with caplog.at_level("WARNING", logger="spacy_elmo"):
        pretrain(TINY, tmp_path / "bf16", settings | {"training.precision": "bf16"}, progress=False)
    warnings = [r.getMessage() for r in caplog.records if "bf16" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0] and "computing in fp32" in warnings[0], warnings
    assert max_difference(params(tmp_path / "bf16"), params(tmp_path / "fp32")) == 0


def test_learning_rate_schedule():
    training = {
        "learning_rate": 1.0,
        "warmup_steps": 0,
        "lr_schedule": "linear",
        "lr_decay_start": 0.5,
        "max_steps": 100,
    }
    rates = [learning_rate_at(training, step) for step in range(1, 101)]
    assert rates[:50] == [1.0] * 50  # constant until half way
    assert all(a > b for a, b in zip(rates[49:], rates[50:]))  # then strictly decreasing
    assert rates[-1] == pytest.approx(1 / 51) and rates[50] == pytest.approx(50 / 51)
    warm = training | {"warmup_steps": 10, "lr_schedule": "constant"}
    assert [learning_rate_at(warm, s) for s in (1, 5, 10, 11, 100)] == pytest.approx([0.1, 0.5, 1.0, 1.0, 1.0])
    for bad in (
        {"training.lr_schedule": "cosine"},
        {"training.lr_decay_start": 1.0},
        {"training.warmup_steps": -1},
        {"training.lr_schedule": "linear", "training.max_steps": 0, "training.max_epochs": 1},
    ):
        with pytest.raises(PretrainError, match=next(iter(bad)).split(".")[1]):
            load_settings(TINY, bad)


def test_corpus_position_resumes_the_same_batches(corpus):
    files = resolve_files(str(corpus["train"]))
    vocab = Vocabulary.build(iter_sequences(files))
    make = lambda: Corpus(
        files,
        vocab,
        encoder=TokenEncoder(Utf8Characters(20)),
        batch_tokens=300,
        max_tokens=40,
        block_lines=500,
        max_epochs=2,
    )
    everything = [(b.word_ids, p) for b, p in make().batches()]
    epochs = [p.epoch for _, p in everything]
    assert sorted(set(epochs)) == [0, 1] and epochs.count(0) == epochs.count(1)  # two epochs of equal size
    assert not all(torch.equal(a, b) for (a, _), (b, _) in zip(everything, everything[epochs.count(0) :]))  # reshuffled
    for cut in (7, 20, len(everything) // 2 + 3):
        position = DataPosition.from_dict(json.loads(json.dumps(everything[cut - 1][1].to_dict())))
        rest = [b.word_ids for b, _ in make().batches(position)]
        assert len(rest) == len(everything) - cut
        assert all(torch.equal(x, y) for x, (y, _) in zip(rest, everything[cut:]))


def test_vocabulary_order_min_count_and_max_size(tmp_path):
    sentences = [["b", "a", "b", "c"], ["b", "a", "d", "<S>"]]
    vocab = Vocabulary.build(sentences, min_count=2)
    assert vocab.words == ["<S>", "</S>", "<UNK>", "b", "a"]
    assert vocab.counts == [2, 2, 2, 3, 2] and vocab.encode(["a", "zzz"]) == [4, 2]
    assert Vocabulary.build(sentences, max_size=4).words == ["<S>", "</S>", "<UNK>", "b"]
    vocab.save(tmp_path / "vocab.txt")
    assert Vocabulary.load(tmp_path / "vocab.txt").words == vocab.words
    (tmp_path / "bilm_order.txt").write_text("</S>\n<S>\nthe\n,\n")  # bilm-tf files may order specials differently
    assert Vocabulary.load(tmp_path / "bilm_order.txt").words == ["<S>", "</S>", "<UNK>", "the", ","]


def test_bad_data_does_not_crash_training(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    good = " ".join(["the cat sees a dog ."] * 3)
    (shards / "a.txt").write_bytes(
        b"\n\n   \n\r\n"
        + good.encode()
        + b"\r\n"
        # unusual, but UTF-8 (not UTF-8: refused, test_first_hour)
        + "café naïve\u00a0nbsp \u200b zero-width .\n".encode()
        + ("word " * 5000).encode()
        + b"\n"  # a line of many words: split into max_tokens sequences
        + b"x" * 300_000
        + b" tail\n"  # a line over max_line_bytes without spaces: cut
        + ("y" * 5000).encode()
        + b" .\n"  # a word longer than max_characters_per_token
        + good.encode()  # no final newline
    )
    (shards / "b.txt").write_bytes(b"")  # an empty shard
    lines, offset = read_block(shards / "a.txt", 0, 100, max_line_bytes=100_000)
    assert offset == (shards / "a.txt").stat().st_size and all(line.strip() for line in lines)
    assert "café naïve\u00a0nbsp \u200b zero-width ." in lines and max(len(line.encode()) for line in lines) <= 100_000
    result = pretrain(
        TINY,
        tmp_path / "out",
        {
            "paths.train": str(shards / "*.txt"),
            "paths.heldout": str(shards / "a.txt"),
            "training.max_steps": 20,
            "data.max_line_bytes": 100_000,
        },
        progress=False,
    )
    assert result["step"] == 20 and result["heldout_ppl"] < float("inf")
    assert "café" in Vocabulary.load(tmp_path / "out" / "vocab.txt").words


def test_raw_text_is_tokenized_by_spacy(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("Hello, world! It's a test of the tokenizer.\nDr. Smith paid $5.50 (cash).\n" * 20)
    result = pretrain(
        TINY,
        tmp_path / "out",
        {
            "paths.train": str(raw),
            "data.format": "text",
            "data.lang": "en",
            "training.max_steps": 3,
        },
        progress=False,
    )
    words = Vocabulary.load(tmp_path / "out" / "vocab.txt").words
    assert result["step"] == 3 and {",", "!", "It", "'s", "$", "(", "cash"} <= set(words)


def test_nan_loss_stops_with_the_step_and_a_nonzero_exit(corpus, tmp_path, capsys):
    out = tmp_path / "nan"
    code = main(
        [
            "pretrain",
            str(TINY),
            "--output",
            str(out),
            "--no-progress",
            "--paths.train",
            str(corpus["train"]),
            "--training.learning_rate",
            "1e30",
            "--training.clip_norm",
            "0",
            "--training.checkpoint_every",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 3, err
    assert "diverged at step 2" in err and "nan" in err and "step-00000001" in err
    assert Checkpoints(out / "checkpoints").latest().name == "step-00000001"  # the bad state is not saved


def test_unusable_output_fails_before_training(corpus, tmp_path, capsys):
    base = ["pretrain", str(TINY), "--no-progress", "--paths.train", str(corpus["train"])]
    (tmp_path / "file").write_text("not a directory")
    assert main(base + ["--output", str(tmp_path / "file" / "out")]) == 2
    assert "cannot write there" in capsys.readouterr().err
    huge = tmp_path / "huge"
    assert main(base + ["--output", str(huge), "--model.lstm_dim", "400000", "--model.projection_dim", "200000"]) == 2
    assert "not enough free disk space" in capsys.readouterr().err
    assert not (huge / "checkpoints").exists()
    done = tmp_path / "done"
    assert main(base + ["--output", str(done), "--training.max_steps", "2"]) == 0
    assert main(base + ["--output", str(done), "--training.max_steps", "4"]) == 2
    assert "pass --resume" in capsys.readouterr().err


def test_config_overrides_and_validation():
    assert parse_overrides(["--training.max_steps", "5", "--paths.train=a b.txt", "--model.filters", "[[1, 4]]"]) == {
        "training.max_steps": 5,
        "paths.train": "a b.txt",
        "model.filters": [[1, 4]],
    }
    cfg = load_settings(TINY, {"training.max_steps": 7, "model.lstm_dim": 48})
    assert cfg["training"]["max_steps"] == 7 and cfg["model"]["lstm_dim"] == 48 and cfg["data"]["shuffle"] is True
    for bad in ({"training.max_stpes": 1}, {"data.batch_tokens": 10}, {"training.optimizer": "sgd"}):
        with pytest.raises(PretrainError):
            load_settings(TINY, bad)
    for name in ("small", "medium", "original", "project", "project_zh"):
        load_settings(ROOT / "configs" / f"pretrain_{name}.cfg")


def test_overrides_are_read_as_spacy_train_reads_them(monkeypatch, capsys):
    # spaCy's parser: a key without a value is a flag; SPACY_CONFIG_OVERRIDES (for `spacy train`) is ignored
    monkeypatch.setenv("SPACY_CONFIG_OVERRIDES", "--training.max_steps 99")
    assert parse_overrides(["--data.shuffle", "--training.max_steps", "-3"]) == {
        "data.shuffle": True,
        "training.max_steps": -3,
    }
    for bad in (["training.max_steps", "5"], ["--training.max_steps", "5", "6"], ["--max_steps", "5"]):
        with pytest.raises(PretrainError) as info:
            parse_overrides(bad)
        assert (
            str(info.value)
            == f"config overrides look like --section.key value or --section.key=value, found: {' '.join(bad)}"
        )
    assert capsys.readouterr().out == ""  # spaCy's own message is not printed as well


def test_finetune_continues_from_a_pretrained_model(trained, corpus, tmp_path, capsys):
    out, _ = trained
    domain = write_grammar_corpus(tmp_path / "domain.txt", 300, seed=5)
    tuned = tmp_path / "tuned"
    code = main(
        [
            "finetune",
            str(out),
            str(TINY),
            "--output",
            str(tuned),
            "--no-progress",
            "--paths.train",
            str(domain),
            "--paths.heldout",
            str(corpus["heldout"]),
            "--training.max_steps",
            "10",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert (tuned / "vocab.txt").read_text() == (out / "vocab.txt").read_text()
    before, after = params(out), params(tuned)
    assert 0.0 < max_difference(before, after) < 1.0
    summary = json.loads((tuned / "pretrain_summary.json").read_text())
    assert summary["step"] == 10 and summary["heldout_ppl"] < 10


@pytest.mark.slow
def test_kill_9_during_pretraining_loses_at_most_one_interval(corpus, tmp_path):
    out, every = tmp_path / "killed", 20
    command = [
        sys.executable,
        "-m",
        "spacy_elmo",
        "pretrain",
        str(TINY),
        "--output",
        str(out),
        "--no-progress",
        "--paths.train",
        str(corpus["train"]),
        "--training.max_steps",
        "100000",
        f"--training.checkpoint_every={every}",
        "--training.log_every=1",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (out / "checkpoints" / "latest").exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.05)
        time.sleep(random.uniform(0.0, 1.5))  # a random moment: mid-step, mid-checkpoint, mid-log line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    logged = [
        json.loads(line)["step"]
        for line in (out / "metrics.jsonl").read_text().splitlines()
        if line.endswith("}") and '"loss"' in line
    ]
    latest = Checkpoints(out / "checkpoints").latest()
    saved = json.loads((latest / "state.json").read_text())["step"]
    load_file(str(latest / "model.safetensors"))
    torch.load(latest / "optimizer.pt", weights_only=True)
    assert saved % every == 0 and saved >= max(logged) - every
    result = pretrain(
        TINY,
        out,
        {"paths.train": str(corpus["train"]), "training.max_steps": saved + 5, "training.checkpoint_every": every},
        resume=True,
        progress=False,
    )
    assert result["step"] == saved + 5
    starts = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"start"' in line]
    assert starts[-1]["resumed"] and starts[-1]["step"] == saved
    assert not list((out / "checkpoints").glob(".*tmp*"))


def test_settings_schema_follows_elmo_config_and_errors_name_setting_expected_and_found():
    import dataclasses

    from spacy_elmo import ElmoConfig
    from spacy_elmo.compat import base_config_fields
    from spacy_elmo.training.settings import MODEL_EXCLUDED, MODEL_KEYS

    inherited = base_config_fields()
    own = [f.name for f in dataclasses.fields(ElmoConfig) if f.name not in inherited]
    assert list(MODEL_KEYS) == [name for name in own if name not in MODEL_EXCLUDED]
    cases = {
        "training.optimizer": ("sgd", "training.optimizer: expected 'adagrad' or 'adam', found 'sgd'"),
        "data.shuffle": (1, "data.shuffle: expected a valid boolean, found 1"),
        "data.min_count": (0, "data.min_count: expected greater than or equal to 1, found 0"),
        "model.filters": ("x", "model.filters: expected a valid list, found 'x'"),
        "model.lstm_dim": (0, "[model] field 'lstm_dim': must be >= 1, got 0"),
        "model.activation": ("gelu", "model.activation: expected 'relu' or 'tanh', found 'gelu'"),
    }
    for key, (value, message) in cases.items():
        with pytest.raises(PretrainError) as info:
            load_settings(TINY, {key: value})
        assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
    with pytest.raises(PretrainError, match=r"training\.max_stpes: unknown setting \(expected one of max_steps, "):
        load_settings(None, text="[training]\nmax_stpes = 3\n")
    with pytest.raises(PretrainError, match=r"\[bogus\]: unknown section"):
        load_settings(None, text="[bogus]\nx = 1\n")
    # [model] keeps only what the config sets, so null (no clipping) is a value, not "unset"
    assert load_settings(TINY, {"model.cell_clip": None})["model"]["cell_clip"] is None
    assert "lstm_implementation" not in load_settings(TINY)["model"]


def test_a_character_lexicon_and_a_word_embedding_train_save_and_resume(corpus, tmp_path):
    """data.characters = "lexicon" builds the character lexicon from the text; model.word_embedding_dim
    adds a word embedding over the LM vocabulary; both travel with the tokenizer, through
    checkpoints (resume) and into the model directory, which the loader and spaCy read."""
    import spacy

    from spacy_elmo.formats.references import load_pretrained

    out = tmp_path / "lexicon_bilm"
    overrides = {
        "paths.train": str(corpus["train"]),
        "paths.heldout": str(corpus["heldout"]),
        "data.characters": "lexicon",
        "model.word_embedding_dim": 8,
        "training.max_steps": 40,
        "training.checkpoint_every": 20,
    }
    result = pretrain(TINY, out, {**overrides, "training.max_steps": 20}, progress=False)
    assert result["step"] == 20
    result = pretrain(TINY, out, overrides, resume=True, progress=False)
    assert result["step"] == 40 and result["heldout_ppl"] < 40  # the grammar has ~40 words: it learned
    model, tokenizer = load_pretrained(out)
    chars = tokenizer.char_vocab
    assert chars["<pad>"] == 1 and chars["<oov>"] == 6 and set("thecatdog") <= set(chars)
    assert len(chars) + 1 == model.config.char_vocab_size < 100  # the grammar's letters, not 256 bytes
    vocab = Vocabulary.load(out / "vocab.txt")
    assert tokenizer.word_vocab == {w: i for i, w in enumerate(vocab.words)}
    assert model.config.word_vocab_size == len(vocab) and model.config.word_embedding_dim == 8
    checkpoint = Checkpoints(out / "checkpoints", 2).latest()
    assert (checkpoint / "char_vocab.json").is_file() and (checkpoint / "word_vocab.json").is_file()
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"model": str(out)})
    doc = nlp("the cat sees a dog .")
    assert doc._.elmo.layers.shape == (3, 6, 64) and float(abs(doc.tensor).max()) > 0
