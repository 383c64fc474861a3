"""bench/train_throughput.py counts the FLOPs the training step executes (distinct words, the char
CNN's cut columns, padded LSTM positions, the softmax's real width), and `--baseline` measures two
checkouts step by step on the same batches."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from bench import flops, train_throughput
from helpers import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoConfig
from spacy_elmo.characters import batch_to_char_ids

ROOT = Path(__file__).resolve().parents[2]


def test_executed_flops_follow_the_batch():
    config = ElmoConfig(filters=[[1, 4], [3, 8]], char_embedding_dim=4, lstm_dim=24, projection_dim=8, n_highway=1)
    sentences = [["a", "cat", "a", "cat", "a"], ["abcdefghij", "a"]]  # 3 distinct words + <S>, </S>
    ids, mask = batch_to_char_ids(sentences, config.max_characters_per_token)
    stats = train_throughput.batch_stats(torch.from_numpy(ids), torch.from_numpy(mask), config, softmax_width=65)
    assert stats["distinct"] == 5 and stats["tokens"] == 7 + 2 * 2
    assert stats["rows"] == 2 and stats["positions"] == 5 + 2
    # one chunk of the 5 distinct words, padded to MIN_ROWS, cut after the longest word
    # ("abcdefghij": begin/end-of-word marks + 10 characters = 12 columns) + the widest filter (3)
    assert stats["cnn_chunks"] == [(16, 12 + 3)]
    assert stats["targets"] == 7 + 2
    executed = train_throughput.executed_flops(config, stats)
    cnn_per_word = 2 * (15 * 1 * 4 * 4 + 13 * 3 * 4 * 8)
    assert executed["char CNN"] == 16 * cnn_per_word == 16 * flops.char_cnn_flops(config, 15)
    assert executed["highway + projection"] == 16 * (2 * 2 * 12 * 12 + 2 * 12 * 8)  # 12 filters → 8
    assert executed["biLSTM"] == 2 * 7 * flops.lstm_flops_per_token(config)
    assert executed["softmax"] == 2 * 9 * 65 * 2 * 8
    # the nominal count runs the CNN over all 50 columns for every real position
    nominal = train_throughput.nominal_flops(config, stats)
    assert nominal == 11 * flops.forward_flops_per_token(config) + executed["softmax"]
    assert executed["char CNN"] < 11 * flops.char_cnn_flops(config)


def test_baseline_and_this_checkout_alternate_on_the_same_batches(tmp_path):
    train = write_grammar_corpus(tmp_path / "train.txt", 300, seed=4)
    out = tmp_path / "result.json"
    results = tmp_path / "RESULTS.md"
    code = train_throughput.main(
        [
            "--config",
            str(TINY),
            "--corpus",
            str(train),
            "--steps",
            "3",
            "--warmup",
            "1",
            "--layouts",
            "1x1",
            "--baseline",
            str(ROOT),
            "--json",
            str(out),
            "--append-results",
            str(results),
            "--data.batch_tokens",
            "128",
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert list(result["variants"]) == ["baseline", "this"]
    base, this = result["variants"]["baseline"], result["variants"]["this"]
    assert base["words_per_step"] == this["words_per_step"] > 0
    assert base["executed_training_gflop_per_step"] == this["executed_training_gflop_per_step"] > 0
    assert base["loss_first_last"] == this["loss_first_last"]  # the same code, batches and seeds
    ratio = result["ratios"]["this"]
    assert ratio["words_per_s_ratio"] > 0 and len(ratio["per_step_quartiles"]) == 3
    section = results.read_text()
    assert "**this vs baseline: words/s ratio" in section and f"`{ROOT}` at" in section
