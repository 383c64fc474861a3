"""Inference words/s of an ELMoForManyLangs-style model against the same-size legacy model, in one run.

    python -m lab.efml_speed [--size released] [--batch 32] [--rounds 6] [--threads 2]
        [--json bench/results/efml_speed.json]

"released" is EFML's released architecture (`cnn_50_100_512_4096_sample.json`: the 2048-filter char
CNN on 50-dim character embeddings, 2 highway layers, a 100-dim word embedding, 2 LSTM layers of
4096 cells projected to 512) against AllenNLP's "original" (the same CNN filters on 16-dim character
embeddings, no word embedding): the architectures a user brings. Both carry seeded random weights
(speed does not depend on their values); the EFML model gets a 150,000-word lexicon (EFML's
training default `--max_vocab_size`) and a character lexicon of the text's characters.

Both models run the same batches of the same Zipfian text (lab/bench_worker.py's generator), with
their default inference path (packed kernel, token cache on), tokenization included, one batch of
each in turn and the order swapped every round, so both see the same machine state. Reported: each
model's words/s (median over rounds), their ratio, and the share of the EFML model's time spent in
its word part (the embedding lookup and its block of the projection), timed on the same tokens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

FILTERS_2048 = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
SIZES = {
    # name: (shared ElmoConfig fields, legacy char_embedding_dim, EFML char_embedding_dim, EFML words)
    "released": (dict(filters=FILTERS_2048, n_highway=2, lstm_dim=4096, projection_dim=512), 16, 50, 150_000),
    "tiny": (dict(filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, lstm_dim=64, projection_dim=16), 8, 12, 5_000),
}


def build_models(size: str, sentences: list[list[str]], seed: int = 0):
    """{name: (model, tokenizer)} for the legacy and the EFML architecture of `size`."""
    from spacy_elmo import ElmoConfig, ElmoModel, ElmoTokenizer
    from spacy_elmo.characters import LEXICON_SPECIALS

    shared, legacy_dim, efml_dim, n_words = SIZES[size]
    chars = sorted({c for sentence in sentences for word in sentence for c in word})
    char_vocab = {**LEXICON_SPECIALS, **{c: 7 + i for i, c in enumerate(chars)}}
    words = sorted({w for sentence in sentences for w in sentence})[: n_words - 3]
    word_vocab = {"<bos>": 0, "<eos>": 1, "<oov>": 2, **{w: 3 + i for i, w in enumerate(words)}}
    word_vocab.update({f"<unused{i}>": i for i in range(len(word_vocab), n_words)})  # the lexicon's full size
    configs = {
        "legacy": (ElmoConfig(char_embedding_dim=legacy_dim, **shared), ElmoTokenizer()),
        "efml": (
            ElmoConfig(
                char_embedding_dim=efml_dim,
                char_vocab_size=len(char_vocab) + 1,
                word_vocab_size=n_words,
                word_embedding_dim=100 if size == "released" else 8,
                forget_bias=0.0,
                **shared,
            ),
            ElmoTokenizer(char_vocab=char_vocab, word_vocab=word_vocab),
        ),
    }
    models = {}
    for name, (config, tokenizer) in configs.items():
        torch.manual_seed(seed)
        models[name] = (ElmoModel(config).eval(), tokenizer)
    return models


def measure(models: dict, batches: list[list[list[str]]], rounds: int) -> dict:
    """Words/s per model and round: every batch of each model in turn, order swapped each round."""
    names = list(models)
    seconds = {name: [] for name in names}
    words = sum(len(s) for batch in batches for s in batch)
    with torch.no_grad():
        for name in names:  # warm-up: prepacked weights, allocator, token cache
            model, tokenizer = models[name]
            model(**tokenizer(batches[0]))
        for r in range(rounds):
            order = names if r % 2 == 0 else names[::-1]
            totals = dict.fromkeys(names, 0.0)
            for batch in batches:
                for name in order:
                    model, tokenizer = models[name]
                    start = time.perf_counter()
                    model(**tokenizer(batch))
                    totals[name] += time.perf_counter() - start
            for name in names:
                seconds[name].append(totals[name])
    return {name: [words / s for s in seconds[name]] for name in names}


def word_part_share(models: dict, batches: list[list[list[str]]]) -> float:
    """Time of the EFML model's word part (lookup + its projection block) over its whole forward,
    on the same batches (medians of 3)."""
    model, tokenizer = models["efml"]
    encoder = model.token_encoder
    encoded = [tokenizer(batch) for batch in batches]

    def timed(fn) -> float:
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            for inputs in encoded:
                fn(inputs)
            runs.append(time.perf_counter() - start)
        return statistics.median(runs)

    with torch.no_grad():
        word = timed(
            lambda inputs: encoder.word_projection(
                encoder.word_embedding(inputs["input_word_ids"][inputs["attention_mask"]])
            )
        )
        whole = timed(lambda inputs: model(**inputs))
    return word / whole


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="released", choices=sorted(SIZES))
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch")
    parser.add_argument("--batches", type=int, default=8, help="batches per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the result (with provenance) to this file")
    args = parser.parse_args(argv)
    from lab.bench_worker import make_sentences
    from spacy_elmo.provenance import Provenance

    torch.set_num_threads(args.threads)
    prov = Provenance(command=sys.argv, seed=args.seed)
    sentences = make_sentences(args.batch * args.batches, args.seed, zipf=True)
    batches = [sentences[i : i + args.batch] for i in range(0, len(sentences), args.batch)]
    models = build_models(args.size, sentences, args.seed)
    rates = measure(models, batches, args.rounds)
    share = word_part_share(models, batches)
    ratios = [e / legacy for e, legacy in zip(rates["efml"], rates["legacy"])]
    result = {
        "size": args.size,
        "batch": args.batch,
        "batches": args.batches,
        "rounds": args.rounds,
        "threads": args.threads,
        "words_per_s": {name: statistics.median(values) for name, values in rates.items()},
        "words_per_s_by_round": rates,
        "efml_over_legacy": statistics.median(ratios),
        "ratio_by_round": ratios,
        "word_part_share": share,
        "within_10_percent": statistics.median(ratios) >= 0.9,
        "provenance": prov.record(),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "provenance"}, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
