"""The GPU harness's parts, each run in its own process with its own time box (`python -m lab.gpu part NAME`):
tests, gemm, inference, pretrain, pipe and step (lab/gpu/__main__.py says what each measures)."""

import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from lab import ROOT
from lab.gpu.common import (
    PROFILES,
    TEST_LOGS,
    Box,
    load,
    median_seconds,
    nvidia_smi,
    one_line,
    save,
    settings,
    stop_group,
    synchronizer,
    update,
)

# --- the parts ----------------------------------------------------------------------------------------------------


def part_gemm(ctx) -> None:
    """bf16, tf32 and fp32 square products and a device-to-device copy: the ceilings of this run."""
    import torch

    s, device = ctx.settings["gemm"], ctx.device
    sync, n, result = synchronizer(device), s["size"], {}
    for name, dtype, tf32 in (
        ("bf16", torch.bfloat16, False),
        ("tf32", torch.float32, True),
        ("fp32", torch.float32, False),
    ):
        if device.type == "cpu" and name == "tf32":
            continue
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))  # random: zeros run faster
            seconds = median_seconds(lambda: a @ b, sync, s["repeats"])  # noqa: B023 - timed in this iteration
            result[f"{name}_tflops"] = 2 * n**3 / seconds / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    count = s["copy_mib"] * 2**20 // 4
    x, y = torch.randn(count, device=device), torch.empty(count, device=device)
    seconds = median_seconds(lambda: y.copy_(x), sync, s["repeats"])
    result["copy_gb_per_s"] = 2 * count * 4 / seconds / 1e9  # bytes read and written
    result["size"] = n
    update(ctx.out, "gemm", result)
    print(f"gemm: {json.dumps({k: round(v, 1) for k, v in result.items()})}", flush=True)


def _inference_plan(s: dict) -> list[dict]:
    """The rows of the inference part, in order: per arch and batch, fp32 with the default kernel first
    (the reference of the errors), then the other modes and kernels; after the lever arch's rows, its levers
    and its profile (so that each model is built once)."""
    plan = []
    for arch in s["archs"]:
        for batch in s["batches"]:
            for mode in s["modes"]:
                for kernel in s["kernels"]:
                    plan.append({"arch": arch, "batch": batch, "mode": mode, "kernel": kernel, "lever": None})
        if arch != s["lever_arch"]:
            continue
        batch, big = s["lever_batch"], s["big_batch"]
        for mode in s["modes"]:
            for kernel in s["lever_kernels"]:
                plan.append({"arch": arch, "batch": batch, "mode": mode, "kernel": kernel, "lever": "kernel"})
        for mode in ("fp32", "bf16"):
            plan.append({"arch": arch, "batch": batch, "mode": mode, "kernel": "auto", "lever": "token cache on"})
        for mode in ("bf16", "bf16-autocast"):
            for kernel in s["kernels"]:
                plan.append({"arch": arch, "batch": big, "mode": mode, "kernel": kernel, "lever": f"batch {big}"})
        plan.append({"arch": arch, "profile": True})
    return plan


def part_inference(ctx) -> None:
    import torch

    from lab.benchmarks import flops
    from lab.benchmarks.bench import ensure_model
    from lab.benchmarks.bench_worker import make_sentences, output_errors
    from spacy_elmo import load_legacy
    from spacy_elmo.characters import batch_to_char_ids

    s, device, box = ctx.settings["inference"], ctx.device, ctx.box
    sync = synchronizer(device)
    peak = (ctx.record.get("parts", {}).get("gemm") or {}).get("bf16_tflops")
    rows: list[dict] = []
    models: dict[str, object] = {}
    batches: dict[tuple, list] = {}
    references: dict[tuple, object] = {}

    # the seeded weights written to files and loaded from them, as users load a model: a precision switch
    # reads back the fp32 weights bf16 released (docs/hf.md, "Memory")
    saved = tempfile.TemporaryDirectory(prefix="spacy_elmo_gpu_models_")

    def model_for(arch):
        if arch not in models:
            models.clear()  # one model on the device at a time
            folder = ensure_model(arch, s["weights_seed"], Path(saved.name))
            model = load_legacy(folder / "options.json", folder / "lm_weights.hdf5").to(device).eval()
            model.disable_token_cache()
            models[arch] = model
        return models[arch]

    def batches_for(batch, max_chars, zipf=False):
        key = (batch, max_chars, zipf)
        if key not in batches:
            sentences = make_sentences(batch * s["distinct_batches"], seed=1, zipf=zipf)
            batches[key] = [
                tuple(torch.from_numpy(a) for a in batch_to_char_ids(sentences[i : i + batch], max_chars))
                for i in range(0, len(sentences), batch)
            ]
        return batches[key]

    def forward(model, pair, autocast):
        ids, mask = pair
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            return model(ids.to(device), mask.to(device))

    def resolved(model, autocast):
        probe = torch.zeros(1, 1, model.config.projection_dim, device=device)
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            return model.encoder.implementation(probe)

    for spec in _inference_plan(s):
        if spec.get("profile"):
            profile_inference(ctx, model_for(spec["arch"]), batches_for, forward)
            continue
        row = dict(spec)
        if box.over():
            rows.append(dict(row, skipped="time box"))
            continue
        try:
            model = model_for(spec["arch"])
            config = model.config
            cache = spec["lever"] == "token cache on"  # Zipfian text (bench's cache row), batches repeating
            pairs = batches_for(spec["batch"], config.max_characters_per_token, zipf=cache)
            autocast = spec["mode"] == "bf16-autocast"
            model.set_precision("bf16" if spec["mode"] == "bf16" else "fp32")
            model.config.lstm_implementation = spec["kernel"]
            if cache:
                model.enable_token_cache()
            row["kernel_used"] = resolved(model, autocast)
            out = forward(model, pairs[0], autocast)
            key = (spec["arch"], spec["batch"])
            if spec["mode"] == "fp32" and spec["kernel"] == "auto" and spec["lever"] is None:
                references[key] = out
            elif key in references and not cache:
                row.update(output_errors(references[key], out))
            del out
            for pair in pairs:  # every shape once before timing (CUDA graphs are captured here)
                forward(model, pair, autocast)
            sync()
            words = [int(mask.sum()) for _, mask in pairs]
            times, counted, index = [], 0, 0
            while (sum(times) < s["min_seconds"] or len(times) < s["min_batches"]) and len(times) < s["max_batches"]:
                pair = pairs[index % len(pairs)]
                start = time.perf_counter()
                forward(model, pair, autocast)
                sync()
                times.append(time.perf_counter() - start)
                counted += words[index % len(pairs)]
                index += 1
            seconds = sum(times)
            positions = counted + 2 * spec["batch"] * len(times)  # <S> and </S> are computed too
            row.update(
                words_per_s=counted / seconds,
                seconds_per_batch=statistics.median(times),
                fastest_batch_s=min(times),
                slowest_batch_s=max(times),
                timed_batches=len(times),
                words_per_batch=counted / len(times),
                gflops=positions / seconds * flops.forward_flops_per_token(config) / 1e9,
            )
            if peak:
                row["fraction_of_bf16_peak"] = row["gflops"] / (peak * 1e3)
            if cache and model.token_cache is not None:
                hits, misses = model.token_cache.hits, model.token_cache.misses
                row["cache_hit_rate"] = hits / max(hits + misses, 1)
        except Exception as err:  # noqa: BLE001 - recorded in its row; the other rows go on
            row["error"] = one_line(err)
        finally:
            for model in models.values():
                model.config.lstm_implementation = "auto"
                model.disable_token_cache()
        rows.append(row)
        update(ctx.out, "inference", {"rows": rows})
        print(f"inference: {_row_line(row)}", flush=True)
    models.clear()
    saved.cleanup()


def _row_line(row: dict) -> str:
    keys = ("arch", "batch", "mode", "kernel", "kernel_used", "lever")
    head = " ".join(f"{row[k]}" for k in keys if row.get(k) is not None)
    if "error" in row or "skipped" in row:
        return f"{head}: {row.get('error') or row.get('skipped')}"
    tail = f" (rel err {row['relative_error']:.1e})" if "relative_error" in row else ""
    return f"{head}: {row['words_per_s']:,.0f} words/s, {1000 * row['seconds_per_batch']:.2f} ms/batch{tail}"


def profile_inference(ctx, model, batches_for, forward) -> None:
    """torch.profiler tables of one batch of the lever arch and batch: bf16 with the default kernel and bf16
    autocast with cuda_graphs (the fastest of the H100 runs)."""
    from torch.profiler import ProfilerActivity, profile

    s, device = ctx.settings["inference"], ctx.device
    if ctx.box.left() < 5:
        return
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "device_time_total" if device.type == "cuda" else "cpu_time_total"
    sections = []
    for mode, kernel in (("bf16", "auto"), ("bf16-autocast", "cuda_graphs" if device.type == "cuda" else "auto")):
        try:
            pair = batches_for(s["lever_batch"], model.config.max_characters_per_token)[0]
            model.set_precision("bf16" if mode == "bf16" else "fp32")
            model.config.lstm_implementation = kernel
            autocast = mode == "bf16-autocast"
            forward(model, pair, autocast)
            synchronizer(device)()
            with profile(activities=activities) as prof:
                forward(model, pair, autocast)
                synchronizer(device)()
            table = prof.key_averages().table(sort_by=sort, row_limit=30, max_name_column_width=60)
            sections.append(f"== {s['lever_arch']}, batch {s['lever_batch']}, {mode}, kernel {kernel}\n{table}")
        except Exception as err:  # noqa: BLE001
            sections.append(f"== {mode}, kernel {kernel}: {one_line(err)}")
        finally:
            model.config.lstm_implementation = "auto"
    (ctx.out / PROFILES["inference"]).write_text("\n\n".join(sections) + "\n", encoding="utf-8")


class MemoryWatch:
    """The peak of nvidia-smi's memory.used (MiB) while it runs, polled from a thread (None without nvidia-smi)."""

    def __init__(self, interval: float = 0.25):
        self.interval, self.peak, self.baseline = interval, None, None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _used(self) -> float | None:
        found = nvidia_smi(["memory.used"])
        try:
            return float(found["memory.used"]) if found else None
        except ValueError:
            return None

    def __enter__(self):
        self.baseline = self._used()
        if self.baseline is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            used = self._used()
            if used is not None:
                self.peak = used if self.peak is None else max(self.peak, used)
            self._stop.wait(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def used_mib(self) -> float | None:
        if self.peak is None or self.baseline is None:
            return None
        return self.peak - self.baseline


def corpus_files(prep: Path) -> tuple[Path, Path]:
    train, heldout = prep / "corpus" / "train.txt", prep / "corpus" / "heldout.txt"
    for path in (train, heldout):
        if not path.is_file():
            raise FileNotFoundError(f"{path.relative_to(prep.parent)} is missing: `python -m lab.gpu.pack corpus`")
    return train, heldout


def steady_rate(records: list[dict], warmup: int) -> float | None:
    """words/s from the log record at step `warmup` to the last one (words and train_seconds are totals)."""
    logs = [r for r in records if "words_per_s" in r]
    first = next((r for r in logs if r["step"] >= warmup), None)
    if first is None or logs[-1] is first:
        return None
    return (logs[-1]["words"] - first["words"]) / (logs[-1]["train_seconds"] - first["train_seconds"])


def part_pretrain(ctx) -> None:
    """`spacy-elmo pretrain` of the original-size config, as a user runs it, once per setting."""
    s, box = ctx.settings["pretrain"], ctx.box
    train, heldout = corpus_files(ctx.prep)
    runs = [
        ("fp32", s["batch_tokens"], s["steps"], None),
        ("bf16", s["batch_tokens"], s["steps"], None),
        ("bf16", s["lever_batch_tokens"], s["lever_steps"], "larger batch_tokens"),
    ]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, (precision, batch_tokens, steps, lever) in enumerate(runs):
            row = {"precision": precision, "batch_tokens": batch_tokens, "steps": steps, "lever": lever}
            if box.left() < 10:
                rows.append(dict(row, skipped="time box"))
                update(ctx.out, "pretrain", {"rows": rows})
                continue
            output = Path(tmp) / f"run{index}"
            overrides = dict(s["overrides"])
            overrides.update(
                {
                    "paths.train": str(train),
                    "paths.heldout": str(heldout),
                    "data.batch_tokens": batch_tokens,
                    "training.max_steps": steps,
                    "training.log_every": s["log_every"],
                    "training.precision": precision,
                }
            )
            command = [sys.executable, "-m", "spacy_elmo", "pretrain", s["config"], "--output", str(output)]
            command += ["--no-progress"] + [x for k, v in overrides.items() for x in (f"--{k}", _cli_value(v))]
            log = Path(tmp) / f"run{index}.log"
            started = time.perf_counter()
            try:
                with MemoryWatch() as memory, open(log, "w", encoding="utf-8") as handle:
                    done = subprocess.run(
                        command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, timeout=max(box.left(), 1)
                    )
                wall = time.perf_counter() - started
                if done.returncode != 0:
                    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
                    raise RuntimeError(f"exit {done.returncode}: {' | '.join(tail)}")
                summary = json.loads((output / "pretrain_summary.json").read_text(encoding="utf-8"))
                records = [json.loads(x) for x in (output / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
                row.update(
                    vocab_size=summary.get("vocab_size"),
                    softmax=summary.get("softmax"),
                    parameters=summary.get("parameters"),
                    words=summary.get("words"),
                    heldout_ppl=summary.get("heldout_ppl"),
                    words_per_s_steady=steady_rate(records, s["warmup_steps"]),
                    words_per_s_train=summary.get("words_per_s"),
                    words_per_s_end_to_end=summary.get("words", 0) / wall,
                    wall_seconds=wall,
                    train_seconds=summary.get("train_seconds"),
                    peak_gpu_memory_mib=memory.used_mib(),
                    device=summary.get("device"),
                )
            except subprocess.TimeoutExpired:
                row["error"] = f"stopped at the part's time box after {time.perf_counter() - started:.0f} s"
            except Exception as err:  # noqa: BLE001
                row["error"] = one_line(err)
            print(log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.is_file() else "", flush=True)
            rows.append(row)
            result = {"rows": rows, "command": " ".join(_portable(c, tmp, ctx.prep) for c in command)}
            fp32 = next((r for r in rows if r["precision"] == "fp32" and r.get("heldout_ppl")), None)
            bf16 = next((r for r in rows if r["precision"] == "bf16" and r.get("heldout_ppl") and not r["lever"]), None)
            if fp32 and bf16:
                result["bf16_ppl_vs_fp32"] = bf16["heldout_ppl"] / fp32["heldout_ppl"] - 1
            update(ctx.out, "pretrain", result)
            print(f"pretrain: {json.dumps({k: v for k, v in row.items() if v is not None}, default=str)}", flush=True)


def _cli_value(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _portable(arg: str, tmp: str, prep: Path) -> str:
    """A command's argument as a record keeps it: paths relative to the checkout, the temporary folder as TMP, a
    carried folder outside the checkout as PREP."""
    if arg == sys.executable:
        return "python"
    arg = arg.replace(tmp, "TMP").replace(str(ROOT) + os.sep, "")
    return arg.replace(str(prep), "PREP")


def part_pipe(ctx) -> None:
    """nlp.pipe with the `elmo` component on the GPU against the raw model on the same sentences."""
    import spacy
    import torch
    from spacy.tokens import Doc

    from lab.benchmarks.bench import config_for
    from lab.benchmarks.bench_worker import make_sentences
    from spacy_elmo import ElmoModel, ElmoTokenizer
    from spacy_elmo.characters import batch_to_char_ids
    from spacy_elmo.spacy import component  # noqa: F401  (registers the factory where entry points are absent)

    s, device, box = ctx.settings["pipe"], ctx.device, ctx.box
    result: dict = {"rows": []}
    if device.type == "cuda":
        from thinc.api import set_gpu_allocator

        spacy.require_gpu()
        set_gpu_allocator("pytorch")
        result["spacy_on_gpu"] = True
    sync = synchronizer(device)
    update(ctx.out, "pipe", result)

    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        model = ElmoModel(config_for(s["arch"]))
        model.save_pretrained(tmp)
        ElmoTokenizer(max_characters_per_token=model.config.max_characters_per_token).save_pretrained(tmp)
        del model
        size, rounds = s["batch_size"], s["rounds"] + 1  # round 0 warms up
        # new sentences in every round: the token caches (on, as loaded) see new text as a served pipeline does
        count = size * s["synthetic_batches"]
        synthetic = make_sentences(count * rounds, seed=3, zipf=False)
        synthetic_rounds = [synthetic[i * count : (i + 1) * count] for i in range(rounds)]
        train, _ = corpus_files(ctx.prep)
        with open(train, encoding="utf-8") as handle:
            lines = [line.split() for _, line in zip(range(s["corpus_sentences"] * rounds), handle)]
        count = s["corpus_sentences"]
        corpus_rounds = [[x for x in lines[i * count : (i + 1) * count] if x] for i in range(rounds)]

        def pipeline(precision, **model_settings):
            nlp = spacy.blank("en")
            block = {"@architectures": "spacy-elmo.ElmoBiLM.v1", "name": tmp, **model_settings}
            nlp.add_pipe("elmo", config={"model": block, "precision": precision})
            return nlp

        def raw_runner(precision, rounds_of_sentences, batch):
            raw = ElmoModel.from_pretrained(tmp, precision=precision).to(device).eval()

            def run(round_index):
                sentences = rounds_of_sentences[round_index]
                for i in range(0, len(sentences), batch):
                    ids, mask = batch_to_char_ids(sentences[i : i + batch], raw.config.max_characters_per_token)
                    with torch.inference_mode():
                        raw(torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device))
                    sync()

            return run

        def pipe_runner(nlp, rounds_of_inputs, batch_size):
            def run(round_index):
                for _ in nlp.pipe(rounds_of_inputs[round_index], batch_size=batch_size):
                    pass

            return run

        def measure(name, rounds_of_sentences, variants: dict, extra: dict):
            """Each variant (a function of the round) over the same sentences in each round, the variants in turn
            within a round; round 0 warms up (model loading, graphs, allocator). words/s: the median round's."""
            rates: dict[str, list[float]] = {k: [] for k in variants}
            for index in range(len(rounds_of_sentences)):
                words = sum(len(x) for x in rounds_of_sentences[index])
                for key, fn in variants.items():
                    start = time.perf_counter()
                    fn(index)
                    sync()
                    if index:
                        rates[key].append(words / (time.perf_counter() - start))
            medians = {key: statistics.median(v) for key, v in rates.items()}
            words = sum(len(x) for x in rounds_of_sentences[1:])
            row = {"what": name, "words": words, **extra, "words_per_s": medians}
            if "raw" in medians:
                row["over_raw"] = {k: v / medians["raw"] for k, v in medians.items() if k != "raw"}
            return row

        plans = [
            ("synthetic, fp32", "fp32", synthetic_rounds, {}, [("texts", size), ("docs", size)]),
            ("synthetic, bf16", "bf16", synthetic_rounds, {}, [("texts", size), ("docs", size)]),
            ("corpus, bf16", "bf16", corpus_rounds, {}, [("docs", size), ("docs", s["bucket_batch_size"])]),
            (
                "corpus, bf16, max_batch_tokens",
                "bf16",
                corpus_rounds,
                {"max_batch_tokens": s["big_max_batch_tokens"]},
                [("docs", s["bucket_batch_size"])],
            ),
            (
                "synthetic, mixed_precision (thinc autocast, fp16; raw fp32)",
                "fp32",
                synthetic_rounds,
                {"mixed_precision": True},
                [("docs", size)],
            ),
        ]
        for name, precision, rounds_of_sentences, model_settings, pipes in plans:
            if box.left() < 8:
                result["rows"].append({"what": name, "skipped": "time box"})
                update(ctx.out, "pipe", result)
                continue
            try:
                nlp = pipeline(precision, **model_settings)
                texts = [[" ".join(x) for x in sentences] for sentences in rounds_of_sentences]
                variants = {"raw": raw_runner(precision, rounds_of_sentences, size)}
                for kind, batch_size in pipes:
                    inputs = (
                        texts
                        if kind == "texts"
                        else [[Doc(nlp.vocab, words=x) for x in r] for r in rounds_of_sentences]
                    )
                    variants[f"pipe {kind}, batch_size {batch_size}"] = pipe_runner(nlp, inputs, batch_size)
                extra = {"precision": precision, **model_settings, "raw_batch": size}
                row = measure(name, rounds_of_sentences, variants, extra)
                if device.type == "cuda":
                    doc = next(iter(nlp.pipe(texts[0][:1])))
                    row["tensor_type"] = type(doc.tensor).__module__.split(".")[0]
                del nlp
            except Exception as err:  # noqa: BLE001
                row = {"what": name, "error": one_line(err)}
            result["rows"].append(row)
            update(ctx.out, "pipe", result)
            print(f"pipe: {json.dumps(row, default=str)}", flush=True)


def part_tests(ctx) -> None:
    """The spaCy tests with spaCy on the GPU and the CUDA tests, side by side, each with its log under $OUT."""
    s = ctx.settings["tests"]
    sessions = {
        "spacy_gpu": (["--spacy-gpu"] if s["spacy_gpu_flag"] else []) + s["spacy_gpu"],
        "cuda": s["cuda"],
    }
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "-n", str(s["workers"])]
    running = {}
    for name, args in sessions.items():
        handle = open(ctx.out / TEST_LOGS[name], "w", encoding="utf-8")  # noqa: SIM115 - closed below
        env = dict(os.environ, **({"OMP_NUM_THREADS": str(s["threads"])} if s["threads"] else {}))
        proc = subprocess.Popen(
            [*base, *args], cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        running[name] = (proc, handle)
    started, result = time.perf_counter(), {}
    for name, (proc, handle) in running.items():
        try:
            rc = proc.wait(timeout=max(ctx.box.left() - 3, 1))
        except subprocess.TimeoutExpired:
            stop_group(proc)  # pytest and its xdist workers
            rc = None
        handle.close()
        text = (ctx.out / TEST_LOGS[name]).read_text(encoding="utf-8", errors="replace")
        summary = [line for line in text.splitlines() if re.search(r"\b(passed|failed|error|no tests ran)\b", line)]
        result[name] = {
            "command": " ".join(["python", *base[1:], *sessions[name]]),
            "exit": rc,
            "timed_out": rc is None,
            "seconds": round(time.perf_counter() - started, 1),
            "summary": summary[-1].strip("= ") if summary else None,
            "failed": [line.split(" - ")[0] for line in text.splitlines() if line.startswith(("FAILED ", "ERROR "))],
            "log": TEST_LOGS[name],
        }
        print(f"tests {name}: {result[name]['summary'] or 'no summary'} (exit {rc})", flush=True)
        update(ctx.out, "tests", result)


def step_child(args) -> int:
    """The step part's own process: steps of one pretraining run with the default kernels, a profile of one, then
    with the fused LSTM kernel, then with the token encoder compiled; one JSON line per phase."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from spacy_elmo.training.run import build_run
    from spacy_elmo.training.settings import read_settings
    from spacy_elmo.training.steps import train_steps

    s, overrides = json.loads(args.settings), json.loads(args.overrides)
    run = build_run(read_settings(s["config"], overrides), args.output)
    cuda = run.dist.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    steps = train_steps(run)

    def phase(name: str, n: int) -> None:
        words = data = 0.0
        each = []
        for _ in range(n):
            start = time.perf_counter()
            info = next(steps)
            sync()
            each.append(time.perf_counter() - start)
            words += info.words
            data += info.data_seconds
        line = {"phase": name, "steps": n, "words": words, "seconds": sum(each), "words_per_s": words / sum(each)}
        line.update(data_seconds=data, step_seconds=[round(x, 4) for x in each])
        print(json.dumps(line), flush=True)

    phase("default warm-up", s["warmup"])
    phase("default", s["steps"])
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        next(steps)
        sync()
    sort = "device_time_total" if cuda else "cpu_time_total"
    table = prof.key_averages().table(sort_by=sort, row_limit=40, max_name_column_width=60)
    Path(args.profile).write_text(f"== one pretraining step ({s['precision']})\n{table}\n", encoding="utf-8")
    run.model.config.lstm_implementation = "fused"  # the training kernel under bf16 autocast too (auto: eager)
    phase("fused warm-up", s["compile_steps"])
    phase("fused", s["steps"])
    run.model.config.lstm_implementation = "auto"
    encoder = run.model.elmo.token_encoder
    encoder.char_features = torch.compile(encoder.char_features, dynamic=True, backend=s["backend"])
    encoder.token_vectors = torch.compile(encoder.token_vectors, dynamic=True, backend=s["backend"])
    phase("compiling", s["compile_steps"])
    phase("compiled", s["steps"])
    return 0


def part_step(ctx) -> None:
    """Levers of the pretraining step in one run: the fused LSTM kernel and torch.compile of the token encoder,
    each after steps with the default kernels (its own process, stopped at the box: compiling can take minutes);
    a profile of one step."""
    s = ctx.settings["step"]
    train, _ = corpus_files(ctx.prep)
    overrides = dict(ctx.settings["pretrain"]["overrides"])
    overrides.update(
        {
            "paths.train": str(train),
            "data.batch_tokens": s["batch_tokens"],
            "training.precision": s["precision"],
            "training.max_steps": 1_000_000,
        }
    )
    result: dict = {"phases": []}
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "lab.gpu", "step-child", "--output", f"{tmp}/run"]
        command += ["--profile", str(ctx.out / PROFILES["pretrain"]), "--settings", json.dumps(s)]
        command += ["--overrides", json.dumps(overrides)]
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor")  # a cold cache: compile time counts
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=max(ctx.box.left() - 2, 1))
            result["exit"] = proc.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)  # the child and inductor's compile workers
            out, err = proc.communicate()
            result["timed_out"] = True
        for line in out.splitlines():
            if line.startswith("{"):
                result["phases"].append(json.loads(line))
        if proc.returncode:
            tail = [x for x in err.strip().splitlines() if x.strip()][-1:]
            result["error"] = tail[0][:300] if tail else f"exit {proc.returncode}"
    rates = {p["phase"]: p["words_per_s"] for p in result["phases"]}
    for lever in ("fused", "compiled"):
        if "default" in rates and lever in rates:
            result[f"{lever}_over_default"] = rates[lever] / rates["default"]
    update(ctx.out, "step", result)
    print(f"step: {json.dumps({k: v for k, v in result.items() if k != 'phases'})} {rates}", flush=True)


PART_FUNCTIONS = {
    "gemm": part_gemm,
    "inference": part_inference,
    "pretrain": part_pretrain,
    "pipe": part_pipe,
    "tests": part_tests,
    "step": part_step,
}


class Context:
    def __init__(self, args, box_seconds: float):
        import torch

        self.out, self.prep, self.quick = Path(args.out), Path(args.prep), args.quick
        self.device = torch.device(args.device)
        self.settings = settings(args.quick, args.device)
        self.box = Box(box_seconds)
        self.record = load(self.out)


def run_part(args) -> int:
    ctx = Context(args, args.box)
    try:
        PART_FUNCTIONS[args.part](ctx)
    except Exception as err:  # noqa: BLE001 - the part's error goes into the record, in one line
        record = load(ctx.out)
        record.setdefault("parts", {}).setdefault(args.part, {})["error"] = one_line(err)
        save(ctx.out, record)
        print(f"{args.part}: {one_line(err)}", flush=True)
        return 1
    return 0
