"""GPU benchmarks in a few minutes: inference, training and `nlp.pipe` of the original architecture.

    python -m bench.gpu --json gpu.json [--quick]

Measured in one process on the first CUDA device, each against baselines of the same run:
* the GPU's bf16 and fp32 matrix-product rates (square 8192 products; the roofline);
* inference, batch 128 of ~25-word sentences, nearly all-distinct words (token cache off), for
  every LSTM kernel that runs there (packed, cuda_graphs, eager) in fp32 and in bf16 autocast:
  words/s, positions/s, the fraction of the bf16 roofline, and bf16's error against fp32;
* pretraining steps of `ElmoForBidirectionalLM` with the bilm-tf recipe (sampled softmax with 8192
  negatives over a 793,471-word vocabulary, Adagrad, gradient clipping at 10): words/s in fp32 and
  bf16 autocast for each training LSTM kernel, at bilm-tf's 128 × 20 words per step and at 512 × 20;
* `nlp.pipe` with the `elmo` component on the GPU against the raw model on the same sentences.
Everything is written to the JSON file with the device name, versions and the time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import flops  # noqa: E402
from bench.run import config_for  # noqa: E402
from bench.worker import make_sentences  # noqa: E402

DEVICE = "cuda"  # `--device cpu` runs the same code on the CPU (a check of the script itself)
PROFILE_DIR: Path | None = None  # `--profile DIR`: torch.profiler tables of one batch / step


def _sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _sync_time(fn, repeats: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    _sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - start)
    return times


def gemm_rates(n: int = 8192) -> dict:
    out = {}
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32), ("tf32", "tf32")):
        allow = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        real = torch.float32 if dtype == "tf32" else dtype
        a = torch.randn(n, n, device=DEVICE, dtype=real)
        b = torch.randn(n, n, device=DEVICE, dtype=real)
        seconds = statistics.median(_sync_time(lambda: a @ b, 10, 3))  # noqa: B023 - timed within this iteration
        torch.backends.cuda.matmul.allow_tf32 = allow
        out[f"{name}_tflops"] = 2 * n**3 / seconds / 1e12
    return out


def _batch(sentences, device):
    from spacy_elmo.characters import batch_to_char_ids

    ids, mask = batch_to_char_ids(sentences)
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def inference(model, batch_size: int, batches: int, repeats: int, rates: dict) -> dict:
    sentences = make_sentences(batch_size * batches, seed=1, zipf=False)
    host = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]
    from spacy_elmo.characters import batch_to_char_ids

    encoded = [tuple(torch.from_numpy(a) for a in batch_to_char_ids(b)) for b in host]
    words = sum(len(s) for s in sentences) / batches
    positions = words + 2 * batch_size
    per_position = flops.forward_flops_per_token(model.config)
    model.disable_token_cache()
    results, reference = {}, None
    for precision in ("fp32", "bf16"):
        for implementation in ("packed", "cuda_graphs", "eager") if DEVICE == "cuda" else ("packed", "eager"):
            model.config.lstm_implementation = implementation
            name = f"{implementation}_{precision}"

            def run_all():
                outs = []
                for ids, mask in encoded:  # host → device copies are part of the work
                    with (
                        torch.inference_mode(),
                        torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=precision == "bf16"),  # noqa: B023 - run within this iteration
                    ):
                        outs.append(
                            model(ids.to(DEVICE, non_blocking=True), mask.to(DEVICE, non_blocking=True)).hidden_states
                        )
                return outs

            try:
                outs = run_all()
                seconds = statistics.median(_sync_time(run_all, repeats)) / batches
            except Exception as err:  # noqa: BLE001 - recorded, the other measurements go on
                results[name] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-2000:]}
                continue
            entry = {
                "words_per_s": words / seconds,
                "positions_per_s": positions / seconds,
                "seconds_per_batch": seconds,
                "fraction_of_bf16_roofline": positions / seconds * per_position / (rates["bf16_tflops"] * 1e12),
            }
            if reference is None:
                reference = outs  # packed fp32
            else:
                worst = max(
                    float((r.float() - o.float()).abs().max())
                    for rs, os_ in zip(reference, outs)
                    for r, o in zip(rs, os_)
                )
                scale = max(float(r.abs().max()) for rs in reference for r in rs)
                entry.update(max_abs_error_vs_packed_fp32=worst, relative_error_vs_packed_fp32=worst / scale)
            results[name] = entry
    # where a bf16 batch's time goes: the token encoder (char CNN, highway, projection) vs the biLSTM
    ids, mask = (t.to(DEVICE) for t in encoded[0])
    breakdown = {}
    with torch.inference_mode(), torch.autocast(DEVICE, dtype=torch.bfloat16):
        from spacy_elmo.hf.modeling_elmo import add_sentence_boundaries

        char_ids, full_mask, _ = add_sentence_boundaries(ids, mask.bool())
        real = char_ids[full_mask]
        breakdown["token_encoder_s"] = statistics.median(_sync_time(lambda: model.embed_tokens(real), repeats))
        tokens = torch.randn(*full_mask.shape, model.config.projection_dim, device=DEVICE)
        for implementation in ("packed", "cuda_graphs", "eager") if DEVICE == "cuda" else ("packed", "eager"):
            model.config.lstm_implementation = implementation
            breakdown[f"bilstm_{implementation}_s"] = statistics.median(
                _sync_time(lambda: model.encoder(tokens, full_mask), repeats)
            )
        breakdown["whole_model_s"] = statistics.median(_sync_time(lambda: model(ids, mask), repeats))
        if PROFILE_DIR is not None:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
            for implementation in ("cuda_graphs", "eager") if DEVICE == "cuda" else ("eager",):
                model.config.lstm_implementation = implementation
                model(ids, mask)
                with profile(activities=activities) as prof:
                    model(ids, mask)
                    _sync()
                sort = "cuda_time_total" if DEVICE == "cuda" else "cpu_time_total"
                (PROFILE_DIR / f"profile_inference_{implementation}_bf16.txt").write_text(
                    prof.key_averages().table(sort_by=sort, row_limit=30), encoding="utf-8"
                )
    model.config.lstm_implementation = "auto"
    return {
        "batch": batch_size,
        "words_per_batch": words,
        "flops_per_position": per_position,
        "modes": results,
        "breakdown_bf16": breakdown,
    }


def training(config, implementations, vocab: int, rows: int, steps: int, repeats: int) -> dict:
    from spacy_elmo import ElmoForBidirectionalLM
    from spacy_elmo.training.sampled_softmax import SampledSoftmax

    torch.manual_seed(0)
    config.vocab_size, config.dropout = vocab, 0.1
    model = ElmoForBidirectionalLM(config).to(DEVICE).train()
    config.vocab_size = 0
    softmax = SampledSoftmax(model.lm_head, 8192)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    sentences = make_sentences(rows, seed=2, zipf=True)
    sentences = [(s * 2)[:steps] for s in sentences]  # bilm-tf: fixed windows of `steps` words
    ids, mask = _batch(sentences, DEVICE)
    labels = torch.randint(3, vocab, mask.shape, device=DEVICE)
    words = int(mask.sum())
    results = {}
    for precision in ("fp32", "bf16"):
        for implementation in implementations:
            model.config.lstm_implementation = implementation

            def step():
                with torch.autocast(DEVICE, dtype=torch.bfloat16, enabled=precision == "bf16"):  # noqa: B023 - run within this iteration
                    out = model(input_ids=ids, attention_mask=mask, labels=labels, softmax_fn=softmax)
                out.loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                return out.loss

            name = f"{implementation}_{precision}"
            try:
                seconds = statistics.median(_sync_time(step, repeats, warmup=3))
                if PROFILE_DIR is not None and precision == "bf16" and rows >= 512:
                    from torch.profiler import ProfilerActivity, profile

                    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if DEVICE == "cuda" else [])
                    with profile(activities=activities) as prof:
                        step()
                        _sync()
                    sort = "cuda_time_total" if DEVICE == "cuda" else "cpu_time_total"
                    (PROFILE_DIR / f"profile_training_{implementation}_bf16_{rows}.txt").write_text(
                        prof.key_averages().table(sort_by=sort, row_limit=30), encoding="utf-8"
                    )
            except Exception as err:  # noqa: BLE001
                results[name] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-2000:]}
                continue
            results[name] = {"words_per_s": words / seconds, "seconds_per_step": seconds}
    model.config.lstm_implementation = "auto"
    return {"rows": rows, "steps": steps, "words_per_step": words, "vocab": vocab, "negatives": 8192, "modes": results}


def pretrain_cli(workdir: Path, precision: str, steps: int, batch_tokens: int, quick: bool) -> dict:
    """`spacy-elmo pretrain configs/pretrain_original.cfg` end to end (data loading, char ids, the
    step, logging) on generated Zipfian text over a 400,000-word vocabulary; words/s of the logged
    windows after the first."""
    import random

    from bench.worker import make_vocabulary
    from spacy_elmo.training.pretrain import pretrain

    train = workdir / "train.txt"
    if not train.exists():
        rng = random.Random(4)
        vocabulary = make_vocabulary(20_000 if quick else 400_000, 4)
        weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(vocabulary))]
        words = rng.choices(vocabulary, weights, k=(20_000 if quick else 1_500_000))
        lines, i = [], 0
        while i < len(words):
            n = rng.randint(10, 40)
            lines.append(" ".join(words[i : i + n]))
            i += n
        train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = workdir / f"run-{precision}"
    config = ROOT / "configs" / ("pretrain_tiny.cfg" if quick else "pretrain_original.cfg")
    try:
        pretrain(
            config,
            out,
            {
                "paths.train": str(train),
                "data.min_count": 1,
                "data.batch_tokens": batch_tokens,
                "training.max_steps": steps,
                "training.log_every": 5,
                "training.checkpoint_every": 100_000,
                "training.softmax": "sampled",
                "training.n_negative_samples": 8192 if not quick else 512,
                "training.precision": precision,
                "system.device": DEVICE,
                "export.legacy": False,
            },
            progress=False,
        )
    except Exception as err:  # noqa: BLE001
        return {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-3000:]}
    summary = json.loads((out / "pretrain_summary.json").read_text(encoding="utf-8"))
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [r["words_per_s"] for r in records if "words_per_s" in r][1:]
    return {
        "precision": precision,
        "steps": steps,
        "batch_tokens": batch_tokens,
        "vocab": summary.get("vocab_size"),
        "softmax": summary.get("softmax"),
        "words_per_s_median_window": statistics.median(rates) if rates else None,
        "words_per_s_whole_run": summary.get("words_per_s"),
    }


def pipe(model_dir: Path, batch_size: int, batches: int) -> dict:
    try:
        import spacy
        from thinc.api import set_gpu_allocator

        if DEVICE == "cuda":
            spacy.require_gpu()
            set_gpu_allocator("pytorch")
        nlp = spacy.blank("en")
        nlp.add_pipe("elmo", config={"model": str(model_dir)})
        sentences = make_sentences(batch_size * batches, seed=3, zipf=False)
        texts = [" ".join(s) for s in sentences]
        list(nlp.pipe(texts[:batch_size], batch_size=batch_size))
        from spacy_elmo import ElmoModel

        raw_model = ElmoModel.from_pretrained(str(model_dir)).to(DEVICE).eval()
        raw_model.disable_token_cache()
        host = [sentences[i : i + batch_size] for i in range(0, len(sentences), batch_size)]

        def raw():
            for b in host:
                with torch.inference_mode():
                    layers = raw_model(*_batch(b, DEVICE)).hidden_states
                    torch.stack(layers).cpu()

        def piped():
            for _ in nlp.pipe(texts, batch_size=batch_size):
                pass

        raw_times, pipe_times = [], []
        for _ in range(3):
            raw_times += _sync_time(raw, 1, 0 if raw_times else 1)
            pipe_times += _sync_time(piped, 1, 0)
        words = sum(len(s) for s in sentences)
        raw_rate, pipe_rate = words / statistics.median(raw_times), words / statistics.median(pipe_times)
        return {"raw_words_per_s": raw_rate, "pipe_words_per_s": pipe_rate, "pipe_over_raw": pipe_rate / raw_rate}
    except Exception as err:  # noqa: BLE001
        return {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-3000:]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--quick", action="store_true", help="tiny architecture, few repeats (a smoke run)")
    parser.add_argument("--commit", default=os.environ.get("SPACY_ELMO_COMMIT", "unknown"))
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--profile", default=None, help="folder for torch.profiler tables")
    parser.add_argument("--only", default="", help="comma-separated parts to run (inference,training,pipe)")
    args = parser.parse_args(argv)
    global DEVICE, PROFILE_DIR
    DEVICE = args.device
    PROFILE_DIR = Path(args.profile) if args.profile else None
    if PROFILE_DIR is not None:
        PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    parts = set(filter(None, args.only.split(","))) or {"inference", "training", "pretrain", "pipe"}
    if DEVICE == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench.gpu needs a CUDA device")
    from spacy_elmo import ElmoModel, ElmoTokenizer
    from spacy_elmo.provenance import git_state

    git = git_state(ROOT)
    started = datetime.datetime.now(datetime.timezone.utc)
    arch = "tiny" if args.quick else "original"
    report = {
        "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "commit": args.commit if args.commit != "unknown" else (git["commit"] or "unknown"),
        "git": git,  # commit and dirty paths where the checkout is a git tree (bench.readme_speed shows them)
        "architecture": arch,
        "started": started.isoformat(timespec="seconds"),
    }

    def save():
        report["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
        print(json.dumps(report, indent=2)[-6000:], flush=True)

    report["gemm"] = rates = gemm_rates(8192 if DEVICE == "cuda" else 512)
    save()
    torch.manual_seed(0)
    config = config_for(arch)
    model = ElmoModel(config).to(DEVICE).eval()
    repeats = 2 if args.quick else 5
    if "inference" in parts:
        report["inference"] = inference(model, 128, 4, repeats, rates)
        save()
    from spacy_elmo.hf.lstm_implementations import LSTM_IMPLEMENTATIONS

    trainers = [name for name in LSTM_IMPLEMENTATIONS if name in ("eager", "fused")]
    if "training" in parts:
        report["training"] = [
            training(config, trainers, 793_471 if not args.quick else 20_000, rows, 20, repeats)
            for rows in ((128,) if args.quick else (128, 512))
        ]
        save()
    if "pretrain" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            report["pretrain_cli"] = [
                pretrain_cli(
                    Path(tmp), precision, 40 if not args.quick else 6, 10240 if not args.quick else 1024, args.quick
                )
                for precision in ("bf16", "fp32")
            ]
        save()
    if "pipe" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            ElmoTokenizer().save_pretrained(tmp)
            report["pipe"] = pipe(Path(tmp), 128, 4)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
