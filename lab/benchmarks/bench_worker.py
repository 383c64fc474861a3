"""One benchmark measurement in its own process (so peak RSS belongs to it): prints one JSON line.

python -m lab.benchmarks.bench_worker --model-dir DIR --batch 32 --mode exact|cache|int8|bf16|pipe|pipe-bf16|pipe-int8
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time

import torch

from lab.benchmarks import flops as flops_mod
from lab.benchmarks import machine

MODES = ["exact", "cache", "int8", "bf16", "pipe", "pipe-bf16", "pipe-int8"]

LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
WORD_LENGTHS = [1, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 7, 7, 8, 9, 10, 12]  # ~5 letters mean


def _rss_peak_kib() -> int | None:
    try:
        with open("/proc/self/status", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_rss_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def make_vocabulary(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words, seen = [], set()
    while len(words) < size:
        word = "".join(rng.choice(LETTERS) for _ in range(rng.choice(WORD_LENGTHS)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def make_sentences(count: int, seed: int, zipf: bool) -> list[list[str]]:
    """~25-token sentences (20–30): nearly all-distinct words, or Zipf-distributed over 20k words."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(20_000 if zipf else 400_000, seed)
    if zipf:
        weights = [1.0 / (rank + 1) ** 1.1 for rank in range(len(vocabulary))]
        return [rng.choices(vocabulary, weights, k=rng.randint(20, 30)) for _ in range(count)]
    return [rng.sample(vocabulary, rng.randint(20, 30)) for _ in range(count)]


def _ids(sentences, max_chars: int):
    from spacy_elmo.characters import batch_to_char_ids

    ids, mask = batch_to_char_ids(sentences, max_chars)
    return torch.from_numpy(ids), torch.from_numpy(mask)


def output_errors(reference, approx) -> dict:
    """The largest and mean absolute differences of `approx`'s layers from `reference`'s (model outputs), and the
    largest relative to the reference's largest |value|."""
    worst = mean = scale = 0.0
    for ref, got in zip(reference.hidden_states, approx.hidden_states):
        diff = (ref.float() - got.float()).abs()
        worst = max(worst, float(diff.max()))
        mean = max(mean, float(diff.mean()))
        scale = max(scale, float(ref.abs().max()))
    return {
        "max_abs_error": worst,
        "mean_abs_error": mean,
        "max_abs_value": scale,
        "relative_error": worst / max(scale, 1e-30),
    }


def _time_batches(run, batches, min_seconds: float) -> list[float]:
    """Seconds per batch; the first batch is a warm-up; keeps cycling until min_seconds passed."""
    run(batches[0])
    times, total, index = [], 0.0, 1
    while len(times) < 2 or total < min_seconds:
        batch = batches[index % len(batches)] if len(batches) > 1 else batches[0]
        start = time.perf_counter()
        run(batch)
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        total += elapsed
        index += 1
        if len(times) >= 50:
            break
    return times


def _set_precision(model, precision: str) -> bool:
    """The model's inference precision (`ElmoModel.set_precision`); False for a package measured by
    --source / --baseline from before it existed (then int8 is `quantize_int8` and bf16 CPU autocast)."""
    if hasattr(model, "set_precision"):
        model.set_precision(precision)
        return True
    if precision == "int8":
        from spacy_elmo.hf.quantization import quantize_int8

        quantize_int8(model)
    return False


def _count_char_cnn(model) -> dict:
    """Counts the char-CNN work the model actually executes (rows × used columns), by wrapping its
    encoder's `char_features` on this instance: the counters live here, not in the library."""
    stats = {"words_encoded": 0, "char_cnn_flops": 0.0}
    encoder = model.token_encoder
    inner = encoder.char_features
    per_column = 2.0 * encoder.char_embedding.embedding_dim
    filters = [(conv.kernel_size[0], conv.out_channels) for conv in encoder.convolutions]

    def counted(char_ids):
        rows, columns = char_ids.shape
        stats["words_encoded"] += rows
        stats["char_cnn_flops"] += rows * sum(
            per_column * max(columns - width + 1, 0) * width * num for width, num in filters
        )
        return inner(char_ids)

    encoder.char_features = counted
    return stats


def bound_products(model) -> dict:
    """The precision each of the model's products was bound to (`ElmoModel.set_precision`), read off its modules:
    the LSTM's weights for one row and for several, the highway and projection linears, the char CNN's product
    (fp32 where a module has no bound product: a package measured by --baseline from before the decider)."""
    lstm = {}
    layer = model.encoder.layers[0]
    if hasattr(layer, "weight_products"):
        lstm = {n: {"one_row": p.one_row.dtype, "rows": p.rows.dtype} for n, p in layer.weight_products().items()}
    linears = [
        (m.in_features, m.out_features, getattr(getattr(m, "product", None), "dtype", "fp32"))
        for m in model.token_encoder.modules()
        if isinstance(m, torch.nn.Linear)
    ]
    char_cnn = getattr(getattr(model.token_encoder, "products", None), "dtype", "fp32")
    return {"lstm": lstm, "linears": linears, "char_cnn": char_cnn}


def limits_of_the_row(config, products: dict, lengths: list[list[int]], words: float, threads: int, batch: int) -> dict:
    """The row's own denominators, measured in this process right after its timing (so under the same load):
    the time of its matrix products alone at their exact shapes in their bound precisions (the biLSTM's and the
    highway and projection layers' on the batch's distinct words; the char CNN's FLOPs go to the run's GEMM
    peak of their precision) and what they compute (`shapes_flops_per_batch`, without the char CNN's), and at
    batch 1 the read rate of its per-step weights, touched as the model
    touches them (`machine.step_read_rate`, `READ_SAMPLES` samples), and of a buffer larger than the caches
    (the weights a sentence reads once)."""
    out = {
        "lstm_product_seconds": statistics.mean(
            machine.lstm_product_seconds(config, rows, threads, products=products["lstm"]) for rows in lengths[:2]
        ),
        "linear_product_seconds": machine.linear_product_seconds(
            [(round(words), k, n, p) for k, n, p in products["linears"]]
        ),
        # what those products compute, so that their rate at these shapes can be a ceiling of the row's
        "shapes_flops_per_batch": statistics.mean(sum(rows) for rows in lengths[:2])
        * flops_mod.lstm_flops_per_token(config)
        + sum(2.0 * round(words) * k * n for k, n, _ in products["linears"]),
    }
    if batch == 1:
        streamed = flops_mod.streamed_weights(config, products)
        steps = round(statistics.mean(n for rows in lengths for n in rows))
        samples = [machine.step_read_rate(streamed["per_step"], steps, threads) for _ in range(READ_SAMPLES)]
        out.update(
            bytes_per_step=streamed["bytes_per_step"],
            bytes_per_batch=streamed["bytes_per_batch"],
            step_read_rates=[s["peak"] for s in samples],
            step_read_kernels=[s["per_kernel"] for s in samples],
            batch_read_rates=[machine.read_bandwidth(512, 3)["peak"] for _ in range(READ_SAMPLES)],
        )
    return out


READ_SAMPLES = 5


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--mode", default="exact", choices=MODES)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--min-seconds", type=float, default=4.0)
    parser.add_argument("--batches", type=int, default=4, help="distinct batches of sentences")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from spacy_elmo import load_legacy

    model = load_legacy(f"{args.model_dir}/options.json", f"{args.model_dir}/lm_weights.hdf5")
    load_peak = _rss_peak_kib()
    config = model.config
    zipf = args.mode == "cache" or args.mode.startswith("pipe")
    sentences = make_sentences(args.batch * args.batches, args.seed, zipf)
    batches = [sentences[i : i + args.batch] for i in range(0, len(sentences), args.batch)]
    encoded = [_ids(batch, config.max_characters_per_token) for batch in batches]
    result = {"batch": args.batch, "mode": args.mode, "threads": args.threads}
    # the raw model of a pipe row keeps the token cache, as the pipeline's component does
    if args.mode != "cache" and not args.mode.startswith("pipe") and hasattr(model, "disable_token_cache"):
        model.disable_token_cache()

    reference = None
    if args.mode in ("int8", "bf16"):
        with torch.inference_mode():
            reference = model(*encoded[0])
        if hasattr(model, "disable_token_cache"):
            model.disable_token_cache()
    autocast = args.mode == "bf16"
    if args.mode in ("int8", "bf16"):
        autocast = not _set_precision(model, args.mode) and args.mode == "bf16"

    def run_model(batch):
        ids, mask = batch
        with torch.inference_mode():
            if autocast:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    return model(ids, mask)
            return model(ids, mask)

    if reference is not None:
        result.update(output_errors(reference, run_model(encoded[0])))

    _reset_rss_peak()
    stats = _count_char_cnn(model)
    if args.mode.startswith("pipe"):
        result.update(_pipe(args, model, batches))
    else:
        times = _time_batches(run_model, encoded, args.min_seconds)
        runs = len(times) + 1  # + warm-up
        per_batch_words = [int(mask.sum()) for _, mask in encoded]
        words = statistics.mean(per_batch_words)
        positions = words + 2 * args.batch
        seconds = statistics.median(times)
        if stats["words_encoded"]:
            executed = stats["char_cnn_flops"] / stats["words_encoded"]
            unique = stats["words_encoded"] / (positions * runs)
        else:  # no char_features calls seen: the full char CNN on every position
            executed, unique = flops_mod.char_cnn_flops(config), 1.0
        result.update(
            words_per_s=words / seconds,
            positions_per_s=positions / seconds,
            seconds_per_batch=seconds,
            timed_batches=len(times),
            executed_char_cnn_flops_per_word=executed,
            unique_words_per_position=unique,
        )
    result["rss_peak_inference_mib"] = _rss_peak_kib() / 1024  # before the product bound's own weights
    if args.mode in ("exact", "bf16", "int8"):  # the row's own denominators (the products alone, the read rates)
        lengths = [[int(n) + 2 for n in mask.sum(dim=1)] for _, mask in encoded]  # + <S>, </S>
        products = bound_products(model)
        words_per_batch = stats["words_encoded"] / runs
        result["bound_products"] = products
        result.update(limits_of_the_row(config, products, lengths, words_per_batch, args.threads, args.batch))
        result["char_cnn_flops_per_batch"] = words_per_batch * executed
        result["encoder_flops_per_batch"] = words_per_batch * (
            executed + flops_mod.token_encoder_flops(config) - flops_mod.char_cnn_flops(config)
        )
        if args.batch == 1:  # what a sentence computes once: the LSTM's input products, the linears, the char CNN
            tokens = statistics.mean(sum(rows) for rows in lengths)
            result["batch_flops_per_batch"] = (
                tokens * flops_mod.lstm_input_flops_per_token(config)
                + sum(2.0 * words_per_batch * k * n for k, n, _ in products["linears"])
                + result["char_cnn_flops_per_batch"]
            )
    result["rss_peak_load_mib"] = load_peak / 1024
    result["flops_per_position"] = flops_mod.forward_flops_per_token(config)
    if args.mode == "cache" and getattr(model, "token_cache", None) is not None:
        cache = model.token_cache
        result["cache_hit_rate"] = cache.hits / max(cache.hits + cache.misses, 1)
    print(json.dumps(result))
    return 0


def _pipe(args, model, batches) -> dict:
    """nlp.pipe with the `elmo` component vs the raw model on the same texts and batch size, both in
    the mode's precision (`pipe-bf16`: bf16) and with the token cache (the component's default)."""
    precision = args.mode.partition("-")[2] or "fp32"
    if precision != "fp32" and not _set_precision(model, precision):
        return {"pipe_error": f"this spacy_elmo has no set_precision for {precision}"}
    try:
        import spacy

        from spacy_elmo.spacy import component  # noqa: F401  (registers the factory)
    except Exception as err:  # noqa: BLE001 - reported, not raised
        return {"pipe_error": f"spacy_elmo.spacy.component not available ({type(err).__name__}: {err})"}
    texts = [" ".join(sentence) for batch in batches for sentence in batch]
    try:
        nlp = spacy.blank("en")
        config = {"model": args.model_dir} if precision == "fp32" else {"model": args.model_dir, "precision": precision}
        nlp.add_pipe("elmo", config=config)
        list(nlp.pipe(texts[: args.batch], batch_size=args.batch))  # warm-up
    except Exception as err:  # noqa: BLE001
        return {"pipe_error": f"could not build/run the elmo pipeline ({type(err).__name__}: {err})"}
    words = sum(len(t.split()) for t in texts)
    # raw model: the same sentences, as batches of the same size (char ids prepared per batch)
    from spacy_elmo.characters import batch_to_char_ids

    def raw():
        for batch in batches:
            ids, mask = batch_to_char_ids(batch, model.config.max_characters_per_token)
            with torch.inference_mode():
                model(torch.from_numpy(ids), torch.from_numpy(mask))

    raw()  # warm-up: the token cache and the derived weights, as the pipeline's warm-up did
    raw_times, pipe_times = [], []
    for _ in range(3):  # interleaved, so load changes hit both alike
        start = time.perf_counter()
        raw()
        raw_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        for _doc in nlp.pipe(texts, batch_size=args.batch):
            pass
        pipe_times.append(time.perf_counter() - start)
    raw_rate = words / statistics.median(raw_times)
    pipe_rate = words / statistics.median(pipe_times)
    return {
        "precision": precision,
        "raw_words_per_s": raw_rate,
        "pipe_words_per_s": pipe_rate,
        "pipe_over_raw": pipe_rate / raw_rate,
    }


if __name__ == "__main__":
    sys.exit(main())
