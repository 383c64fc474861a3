"""`python -m lab.gpu`: the GPU benchmark (issue 54) in one prepared command, and its record.

On the device machine (no network; the device tool carries `.gpu/`, which `python -m lab.gpu_pack` fills here):

    bash lab/gpu.sh                          # everything below, results under $OUT (gpu.json, logs, profiles)
    bash lab/gpu.sh --parts pipe,tests       # a rerun of some parts, into the same gpu.json
    bash lab/gpu.sh --device cpu --quick     # the same code paths on a CPU with tiny settings (a check of the harness)

Then here, on the files that came back:

    python -m lab.gpu record FOLDER          # FOLDER/gpu.json → bench/results/runs.jsonl (kind "gpu"),
                                             # bench/results/gpu_<gpu>_<commit>/ and bench/results/gpu.md

`run` takes the commit it measures from `.gpu/stamp.json` (`python -m lab.gpu_pack stamp`, here, just before the
call), never from git there: the device tool sends the working tree with the git metadata of the session's start.
It checks the tree it got against the stamp's file hashes and records what differs. It unpacks the carried
packages (`.gpu/site.tar.xz`), checks that its Python and torch are inside the range setup.cfg declares
(`declared_range`; outside it the run stops before any part), and runs each part in its own process with its own
time box, in this order (HEAD's tests first, then the inference rows, then the levers):

- `tests`: `pytest --spacy-gpu tests/spacy tests/hf/test_serialization.py` and the CUDA kernel and training-step
  tests, side by side, each log under $OUT;
- `gemm`: the GPU's bf16, tf32 and fp32 matrix-product rates and a device-to-device copy (the ceilings);
- `inference`: the raw `ElmoModel` (original and small sizes, random weights of the right shape) at batch 1, 32
  and 128 in fp32, bf16 (`set_precision("bf16")`, the project's bf16) and bf16 autocast, with the default kernel
  choice and `cuda_graphs`; bf16's error against fp32 on the same batch; levers: the other kernels, the token
  cache, batch 512; a torch.profiler table;
- `pretrain`: `python -m spacy_elmo pretrain configs/pretrain_original.cfg` on the carried corpus, fp32 and bf16 at
  one `batch_tokens` for the same steps (held-out perplexity after them), and bf16 at a larger `batch_tokens`:
  steady, train-loop and end-to-end words/s, peak GPU memory (nvidia-smi);
- `pipe`: `nlp.pipe` with the `elmo` component on the GPU (`spacy.require_gpu()`) against the raw model on the
  same sentences; levers: Docs made beforehand, the component's length bucketing over larger `batch_size`,
  larger `max_batch_tokens`, thinc's mixed precision;
- `step`: the pretraining step's levers in one run: the fused LSTM kernel, then `torch.compile` of the token
  encoder, each after steps with the default kernels; a profile of one step.

Every part writes its rows into $OUT/gpu.json as it goes, so a part stopped at its time box (or the whole call
stopped at its limit) leaves what finished. The fixed settings of each part are in the record (`settings`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREP = ROOT / ".gpu"  # what `python -m lab.gpu_pack` prepares and the device tool carries
RUNS = ROOT / "bench" / "results" / "runs.jsonl"
RESULTS = ROOT / "bench" / "results"
# in the order a run takes them: HEAD's tests, the ceilings and the inference rows, then the levers
PARTS = ["tests", "gemm", "inference", "pretrain", "pipe", "step"]
# seconds each part may take on the GPU (a part past its box is stopped; the record keeps what it finished)
BOXES = {"gemm": 30, "inference": 100, "pretrain": 130, "pipe": 70, "tests": 130, "step": 75}
DEADLINE = 390  # seconds for the whole run on the GPU: a later part gets what is left (the device call: 420)
# the files that come back from $OUT (at most 8): the record, the log, two test logs, two profiles
RECORD, LOG = "gpu.json", "log.txt"
TEST_LOGS = {"spacy_gpu": "tests_spacy_gpu.txt", "cuda": "tests_cuda.txt"}
PROFILES = {"inference": "profile_inference.txt", "pretrain": "profile_pretrain.txt"}
SCHEMA = 2  # the gpu records before this harness (bench/gpu.py, 2959825) had tables only


def settings(quick: bool, device: str) -> dict:
    """The fixed settings of every part, as the record states them (`quick`: tiny ones, for a CPU check)."""
    cuda = device == "cuda"
    return {
        "gemm": {"size": 256 if quick else 8192, "repeats": 3 if quick else 10, "copy_mib": 32 if quick else 2048},
        "inference": {
            "archs": ["tiny"] if quick else ["small", "original"],  # the lever arch last: its levers follow it
            "batches": [3] if quick else [1, 32, 128],
            "modes": {
                "fp32": "exact fp32 (set_precision('fp32'))",
                "bf16": "the project's bf16: set_precision('bf16'), bf16 products of cached bf16 weights",
                "bf16-autocast": "torch.autocast(bfloat16) around the fp32 model (as the H100 runs of 2026-11-27)",
            },
            "kernels": ["auto", "cuda_graphs"],
            "lever_arch": "tiny" if quick else "original",
            "lever_batch": 3 if quick else 128,
            "lever_kernels": ["packed", "eager"],
            "big_batch": 6 if quick else 512,
            "sentences": "lab.bench_worker.make_sentences(seed=1, zipf=False): 20-30 words, nearly all distinct",
            "distinct_batches": 2 if quick else 4,
            "min_seconds": 0.05 if quick else 0.5,
            "min_batches": 2 if quick else 5,
            "max_batches": 4 if quick else 400,
            "token_cache": "off (on in the lever rows that say so: Zipfian text, make_sentences(zipf=True))",
            "timing": "host char ids copied to the device, the forward, a synchronize after every batch; every "
            "distinct batch run once before timing (CUDA graphs captured then)",
            "weights_seed": 0,
        },
        "pretrain": {
            "config": "configs/pretrain_tiny.cfg" if quick else "configs/pretrain_original.cfg",
            "batch_tokens": 256 if quick else 10240,
            "steps": 6 if quick else 48,
            "lever_batch_tokens": 1024 if quick else 40960,
            "lever_steps": 2 if quick else 12,  # the same words as `steps` at `batch_tokens`
            "warmup_steps": 2 if quick else 8,
            "log_every": 2 if quick else 4,
            "overrides": {
                "data.min_count": 1,
                "training.softmax": "sampled",
                "training.n_negative_samples": 64 if quick else 8192,
                "training.eval_every": 0,
                "training.checkpoint_every": 1_000_000,
                "export.legacy": False,
                "system.device": device,
                "system.seed": 0,
            },
            "corpus": "the project's pretraining text (lab.fetch_assets, lab.preprocess_conll --lm-text, "
            "lab.preprocess_lm_text: BBC News + CoNLL-2003 train, one sentence a line) carried in .gpu/corpus",
            "memory": "peak of nvidia-smi's memory.used during the run, less its value before" if cuda else None,
        },
        "pipe": {
            "arch": "tiny" if quick else "original",
            "batch_size": 4 if quick else 128,
            "synthetic_batches": 2 if quick else 4,
            "corpus_sentences": 32 if quick else 2048,
            "bucket_batch_size": 16 if quick else 1024,
            "big_max_batch_tokens": 16384,
            "rounds": 1 if quick else 3,  # timed, each on new sentences, after a warm-up round
            "spacy_on_gpu": "spacy.require_gpu(); thinc's gpu allocator 'pytorch'" if cuda else "spaCy on the CPU",
            "raw": "the same sentences in batches of batch_size in their order: ElmoModel.from_pretrained of the "
            "pipeline's directory (token cache as loaded), host char ids, synchronize after every batch",
        },
        "tests": {
            "spacy_gpu": (
                ["tests/spacy/test_registration.py", "tests/spacy/test_deferred_step.py"]
                if quick
                else ["tests/spacy", "tests/hf/test_serialization.py"]
            ),
            "cuda": (
                ["tests/kernels/test_invariance.py", "tests/kernels/test_cuda_graphs.py"]
                if quick
                else [
                    "tests/kernels",
                    "tests/training/test_training_step.py",
                    "tests/training/test_sampled_softmax.py",
                ]
            ),
            "workers": 0 if quick else 5,  # per session; two sessions run side by side
            "threads": None if quick else 2,  # OMP_NUM_THREADS of each worker (16 cores on the H200 machine)
            "spacy_gpu_flag": cuda,
        },
        "step": {
            "config": "configs/pretrain_tiny.cfg" if quick else "configs/pretrain_original.cfg",
            "precision": "bf16",
            "batch_tokens": 256 if quick else 10240,
            "warmup": 2 if quick else 5,
            "steps": 2 if quick else 15,
            "compile_steps": 1 if quick else 5,
            "phases": "the default kernels ('auto'), lstm_implementation 'fused', then torch.compile "
            "(dynamic=True) of token_encoder.char_features and token_vectors: one run, in that order",
            "backend": "eager" if quick else "inductor",
        },
    }


# --- the record: $OUT/gpu.json, read and written whole by each part in turn ---------------------------------------


def load(out: Path) -> dict:
    path = out / RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def save(out: Path, record: dict) -> None:
    from spacy_elmo.files import write_text_atomic

    write_text_atomic(out / RECORD, json.dumps(record, indent=1, default=str) + "\n")


def update(out: Path, key: str, value) -> None:
    """Sets `record[key]` (a part's results so far) in $OUT/gpu.json."""
    record = load(out)
    record.setdefault("parts", {})[key] = value
    save(out, record)


def one_line(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip().splitlines()
    return text[0][:300] if text else type(err).__name__


# --- the tree that ran: its stamp (written here, before the call) and the check of it there --------------------


def blob_sha1(path: Path) -> str:
    """git's blob hash of a file's content (`git hash-object`), computed without git."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def check_tree(stamp: dict, root: Path = ROOT) -> dict:
    """The stamp's files, hashed again here: which differ and which are missing."""
    files = stamp.get("files", {})
    differ, missing = [], []
    for name, digest in files.items():
        path = root / name
        if not path.is_file():
            missing.append(name)
        elif blob_sha1(path) != digest:
            differ.append(name)
    return {
        "files": len(files),
        "differ": sorted(differ),
        "missing": sorted(missing),
        "same": not differ and not missing,
    }


# --- the machine --------------------------------------------------------------------------------------------------

SMI_FIELDS = [
    "name",
    "driver_version",
    "memory.total",
    "memory.used",
    "clocks.sm",
    "clocks.max.sm",
    "clocks.mem",
    "temperature.gpu",
    "power.draw",
    "pstate",
]


def nvidia_smi(fields=SMI_FIELDS) -> dict | None:
    """The first GPU's `nvidia-smi --query-gpu` fields, or None where there is no nvidia-smi."""
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    values = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")]
    return dict(zip(fields, values))


def machine_info(device: str) -> dict:
    import torch

    from spacy_elmo.provenance import machine

    info = machine()
    info.pop("hostname", None)
    info["device"] = device
    info["cuda"] = torch.version.cuda
    info["torch_full"] = torch.__version__
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = props.name
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        info["multiprocessors"] = props.multi_processor_count
        info["capability"] = f"{props.major}.{props.minor}"
        info["nvidia_smi"] = nvidia_smi()
        info["driver"] = (info["nvidia_smi"] or {}).get("driver_version")
        info["cudnn"] = torch.backends.cudnn.version()
        info["tf32"] = {
            "matmul": torch.backends.cuda.matmul.allow_tf32,
            "cudnn": torch.backends.cudnn.allow_tf32,
        }
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy", "pydantic", "numpy", "huggingface_hub", "triton"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            info.setdefault("versions", {})[name] = version(name)
    return info


# --- timing helpers -----------------------------------------------------------------------------------------------


def synchronizer(device):
    import torch

    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def median_seconds(fn, sync, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class Box:
    """A part's time box: `left()` seconds until it ends; rows not started in time are recorded as skipped."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def over(self) -> bool:
        return self.left() <= 0


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

    from lab import flops
    from lab.bench import ensure_model
    from lab.bench_worker import make_sentences, output_errors
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
            cache = spec["lever"] == "token cache on"  # on Zipfian text (lab.bench's cache row), batches repeating
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
            raise FileNotFoundError(f"{path.relative_to(prep.parent)} is missing: `python -m lab.gpu_pack corpus`")
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

    from lab.bench import config_for
    from lab.bench_worker import make_sentences
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


# --- the orchestrator: `python -m lab.gpu run` (what lab/gpu.sh runs) -------------------------------------------


def run_group(command: list[str], env: dict, timeout: float, **kwargs) -> int | None:
    """`command` in its own process group, the whole group killed at `timeout` (a part's pytest workers or
    pretraining run must not go on beside the next part); its exit status, or None when it was stopped."""
    proc = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True, **kwargs)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        return None


def stop_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)
    proc.wait()


def interpreter_tag() -> str:
    """This Python as the carried packages are built for: 'cp312 linux x86_64' on the device machine."""
    import platform

    return f"cp{sys.version_info.major}{sys.version_info.minor} {sys.platform} {platform.machine()}"


def unpack_site(archive: Path, dest: Path) -> dict:
    """The carried packages (`python -m lab.gpu_pack site`) unpacked into `dest` (on PYTHONPATH after the checkout)."""
    import tarfile

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(dest, filter="data")
    manifest = dest / "site.json"
    return json.loads(manifest.read_text(encoding="utf-8")) if manifest.is_file() else {}


def declared_range(setup_cfg: Path = ROOT / "setup.cfg") -> dict:
    """The Python and torch versions setup.cfg declares: `python_requires` and install_requires' torch."""
    import configparser

    from packaging.requirements import Requirement

    parser = configparser.ConfigParser()
    parser.read(setup_cfg, encoding="utf-8")
    options = parser["options"]
    lines = [line.strip() for line in options["install_requires"].splitlines()]
    torch_spec = next(
        str(Requirement(line).specifier) for line in lines if line and not line.startswith("#") and
        Requirement(line).name == "torch"
    )  # fmt: skip
    return {"python": options["python_requires"], "torch": torch_spec}


def versions_in_range(declared: dict, found: dict) -> dict:
    """{name: {found, declared, inside}} for the Python and torch `found` (their public versions, without a
    local tag such as +cu128, against the `declared` specifiers)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return {
        name: {
            "found": found[name],
            "declared": declared[name],
            "inside": SpecifierSet(declared[name]).contains(Version(found[name]).public, prereleases=True),
        }
        for name in ("python", "torch")
    }


def check_packages(args) -> int:
    """Imports what the parts need and prints, as one JSON line, the versions found and the requirements of
    spaCy, thinc, pydantic, confection and weasel that what is installed does not meet."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    found = {}
    for name in ("spacy", "thinc", "pydantic", "confection", "srsly", "blis", "cupy-cuda13x", "transformers", "torch"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    import confection  # noqa: F401
    import pydantic  # noqa: F401
    import spacy  # noqa: F401
    import thinc.api  # noqa: F401

    from spacy_elmo.spacy import component  # noqa: F401

    unmet = []
    for dist in ("spacy", "thinc", "pydantic", "confection", "weasel"):
        for line in metadata.requires(dist) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            try:
                have = metadata.version(requirement.name)
            except metadata.PackageNotFoundError:
                unmet.append(f"{dist} needs {requirement}: missing")
                continue
            if requirement.specifier and not requirement.specifier.contains(have, prereleases=True):
                unmet.append(f"{dist} needs {requirement}: {have}")
    print(json.dumps({"versions": found, "unmet": unmet}))
    return 0


def orchestrate(args) -> int:
    out, prep = Path(args.out), Path(args.prep)
    out.mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    deadline = args.deadline if args.deadline is not None else (None if args.quick else DEADLINE)
    parts = [p for p in (args.parts.split(",") if args.parts else PARTS) if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise SystemExit(f"lab.gpu: unknown part(s) {', '.join(unknown)} (expected some of {', '.join(PARTS)})")
    record = load(out) if args.parts else {}
    stamp_path = prep / "stamp.json"
    stamp = json.loads(stamp_path.read_text(encoding="utf-8")) if stamp_path.is_file() else {}
    from spacy_elmo.provenance import utc_now

    runs = record.setdefault("runs", [])
    runs.append({"started_utc": utc_now(), "parts": parts, "argv": sys.argv[1:]})
    record.update(
        schema=SCHEMA,
        kind="gpu",
        quick=args.quick,
        commit=stamp.get("commit"),
        dirty=stamp.get("dirty", []),
        left_behind=stamp.get("left_behind", []),
        stamped_utc=stamp.get("stamped_utc"),
        tree=check_tree(stamp) if stamp else {"same": None, "note": f"no {stamp_path.name}: commit unknown"},
    )
    tree = record["tree"]
    print(f"lab.gpu: commit {record['commit']} (stamped {record['stamped_utc']}); tree as stamped: {tree['same']}")
    if tree.get("differ") or tree.get("missing"):
        print(f"lab.gpu: the tree differs from the stamp: {tree['differ'][:5]}, missing {tree['missing'][:5]}")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    paths = [str(ROOT)]
    archive, sidecar = prep / "site.tar.xz", prep / "site.json"
    built_for = json.loads(sidecar.read_text(encoding="utf-8")).get("python") if sidecar.is_file() else None
    if archive.is_file() and built_for != interpreter_tag():
        record["site"] = {"archive": None, "note": f"site.tar.xz is for {built_for}, this is {interpreter_tag()}"}
    elif archive.is_file():
        site = Path(tempfile.gettempdir()) / "spacy_elmo_gpu_site"
        started = time.perf_counter()
        manifest = unpack_site(archive, site)
        paths.append(str(site))
        record["site"] = {"archive": "site.tar.xz", "seconds": round(time.perf_counter() - started, 1), **manifest}
    else:
        record["site"] = {"archive": None, "note": "no site.tar.xz: the environment's own packages"}
    env["PYTHONPATH"] = os.pathsep.join(paths + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    check = subprocess.run(
        [sys.executable, "-m", "lab.gpu", "check-packages"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if check.returncode == 0:
        record["site"]["check"] = json.loads(check.stdout.strip().splitlines()[-1])
    else:
        tail = [x for x in check.stderr.strip().splitlines() if x.strip()][-1:]
        record["site"]["check"] = {"error": tail[0] if tail else f"exit {check.returncode}"}
    print(f"lab.gpu: packages: {json.dumps(record['site'].get('check'))}", flush=True)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("lab.gpu: --device cuda, but torch sees no CUDA device (use --device cpu --quick for a check)")
    record["machine"] = machine_info(args.device)
    import platform

    record["range"] = versions_in_range(
        declared_range(), {"python": platform.python_version(), "torch": torch.__version__}
    )
    outside = [f"{n} {v['found']} (setup.cfg: {v['declared']})" for n, v in record["range"].items() if not v["inside"]]
    if outside:  # what users install could not be this: the run would measure something else
        save(out, record)
        raise SystemExit(f"lab.gpu: outside the range setup.cfg declares: {', '.join(outside)}; no part run")
    print(f"lab.gpu: inside the declared range: {json.dumps(record['range'])}", flush=True)
    for name, version in (record["site"]["check"].get("versions") or {}).items():
        if name in record["machine"]:  # this process does not have the carried packages on its path
            record["machine"][name] = version
    record["settings"] = settings(args.quick, args.device)
    record["settings"]["boxes"] = BOXES
    record["settings"]["deadline"] = deadline
    record.setdefault("parts", {})
    record.setdefault("status", {})
    save(out, record)
    for part in parts:
        box = BOXES[part] * (4 if args.quick else 1)  # a shared CPU is slow; the quick settings are small
        if deadline is not None:
            box = min(box, deadline - (time.monotonic() - begun))
        if box < 5:
            status = {"skipped": "the run's deadline"}
        else:
            started = time.perf_counter()
            command = [sys.executable, "-m", "lab.gpu", "part", part, "--out", str(out), "--prep", str(prep)]
            command += ["--device", args.device, "--box", f"{box:.0f}"] + (["--quick"] if args.quick else [])
            rc = run_group(command, env, timeout=box + 20)
            status = {"exit": rc} if rc is not None else {"exit": None, "timed_out": True}
            status.update(seconds=round(time.perf_counter() - started, 1), box=round(box))
        record = load(out)
        record["status"][part] = status
        save(out, record)
        print(f"lab.gpu: part {part}: {status}", flush=True)
    record = load(out)
    record["runs"][-1]["ended_utc"] = utc_now()
    record["finished_utc"] = utc_now()
    if args.device == "cuda":
        record["machine"]["nvidia_smi_end"] = nvidia_smi()
    save(out, record)
    print("\n" + summary(record), flush=True)
    extra = [p.name for p in out.iterdir()]
    if len(extra) > 8:
        print(f"lab.gpu: {len(extra)} files under OUT; the device tool returns 8: {sorted(extra)}")
    return 0


# --- tables: the record's figures, for the summary there and the table files here --------------------------------


def _num(value, digits: int = 0) -> str:
    if value is None:
        return ""
    return f"{value:,.{digits}f}"


def tables(record: dict) -> list[dict]:
    """The record's tables ({title, columns, rows}): ceilings, inference, nlp.pipe, pretraining, step, tests."""
    parts = record.get("parts", {})
    out = []
    gemm = parts.get("gemm") or {}
    if gemm:
        out.append(
            {
                "title": "Ceilings measured in this run",
                "columns": ["bf16 TFLOP/s", "tf32 TFLOP/s", "fp32 TFLOP/s", "copy GB/s (read + write)"],
                "rows": [
                    [_num(gemm.get(k), 1) for k in ("bf16_tflops", "tf32_tflops", "fp32_tflops", "copy_gb_per_s")]
                ],
            }
        )
    rows = []
    for r in (parts.get("inference") or {}).get("rows", []):
        note = r.get("error") or r.get("skipped") or ""
        error = f"{100 * r['relative_error']:.2f}% ({r['max_abs_error']:.1e})" if "relative_error" in r else ""
        rows.append(
            [
                r["arch"],
                str(r["batch"]),
                r["mode"],
                r["kernel"] + (f" → {r['kernel_used']}" if r.get("kernel_used") not in (None, r["kernel"]) else ""),
                _num(r.get("words_per_s")),
                _num(1000 * r["seconds_per_batch"], 2) if "seconds_per_batch" in r else "",
                f"{100 * r['fraction_of_bf16_peak']:.1f}%" if "fraction_of_bf16_peak" in r else "",
                error,
                r.get("lever") or "",
                note,
            ]
        )
    if rows:
        out.append(
            {
                "title": "Inference, raw ElmoModel (random weights; token cache off unless the lever says so)",
                "columns": [
                    "arch",
                    "batch",
                    "precision",
                    "kernel",
                    "words/s",
                    "ms/batch",
                    "of bf16 peak",
                    "error vs fp32 (max abs ÷ max |h|)",
                    "lever",
                    "notes",
                ],
                "rows": rows,
            }
        )
    rows = []
    for r in (parts.get("pipe") or {}).get("rows", []):
        if "words_per_s" not in r:
            rows.append([r["what"], "", "", "", r.get("error") or r.get("skipped") or ""])
            continue
        for key, rate in r["words_per_s"].items():
            ratio = (r.get("over_raw") or {}).get(key)
            rows.append([r["what"], key, _num(rate), f"{100 * ratio:.0f}%" if ratio else "", ""])
    if rows:
        out.append(
            {
                "title": "nlp.pipe against the raw model",
                "columns": ["sentences", "run", "words/s", "of raw", "notes"],
                "rows": rows,
            }
        )
    pretrain = parts.get("pretrain") or {}
    rows = []
    for r in pretrain.get("rows", []):
        rows.append(
            [
                r["precision"],
                _num(r["batch_tokens"]),
                str(r["steps"]),
                _num(r.get("vocab_size")),
                str(r.get("softmax") or ""),
                _num(r.get("words_per_s_steady")),
                _num(r.get("words_per_s_train")),
                _num(r.get("words_per_s_end_to_end")),
                _num(r.get("peak_gpu_memory_mib")),
                _num(r.get("heldout_ppl"), 1),
                r.get("lever") or r.get("error") or r.get("skipped") or "",
            ]
        )
    if rows:
        columns = [
            "precision",
            "batch_tokens",
            "steps",
            "vocabulary",
            "softmax",
            "steady words/s",
            "train-loop words/s",
        ]
        columns += ["end-to-end words/s", "peak GPU MiB", "held-out ppl", "lever / notes"]
        out.append(
            {
                "title": "Pretraining, `spacy-elmo pretrain` of the original-size config",
                "columns": columns,
                "rows": rows,
            }
        )
    compiled = parts.get("step") or {}
    rows = [
        [p["phase"], str(p["steps"]), _num(p["words_per_s"]), _num(p["seconds"], 1), _num(p["data_seconds"], 2)]
        for p in compiled.get("phases", [])
    ]
    if rows or compiled.get("error") or compiled.get("timed_out"):
        note = compiled.get("error") or ("stopped at its time box" if compiled.get("timed_out") else "")
        if note:
            rows.append(["(end)", "", "", "", note])
        out.append(
            {
                "title": "The pretraining step's levers (bf16), one run: the fused LSTM kernel, torch.compile",
                "columns": ["phase", "steps", "words/s", "seconds", "of which data"],
                "rows": rows,
            }
        )
    rows = [
        [
            name,
            str(t.get("summary") or ""),
            str(t.get("exit")),
            _num(t.get("seconds"), 0),
            ", ".join(t.get("failed", [])[:12]),
        ]
        for name, t in (parts.get("tests") or {}).items()
        if isinstance(t, dict) and "exit" in t
    ]
    if rows:
        out.append({"title": "Tests", "columns": ["session", "result", "exit", "seconds", "failed"], "rows": rows})
    return out


def targets(record: dict) -> dict:
    """The issue's targets, read off the record (None where a figure is missing)."""
    parts = record.get("parts", {})
    infer = [r for r in (parts.get("inference") or {}).get("rows", []) if "words_per_s" in r]
    arch, batch = record["settings"]["inference"]["lever_arch"], record["settings"]["inference"]["lever_batch"]

    def rate(mode, kernel):
        found = [
            r
            for r in infer
            if (r["arch"], r["batch"], r["mode"], r["kernel"], r["lever"]) == (arch, batch, mode, kernel, None)
        ]
        return found[0]["words_per_s"] if found else None

    pipe = {}
    for r in (parts.get("pipe") or {}).get("rows", []):
        if r.get("what", "").startswith("synthetic") and "over_raw" in r:
            pipe[r["what"]] = r["over_raw"]
    errors = {
        r["mode"]: r["relative_error"]
        for r in infer
        if (r["arch"], r["batch"], r["kernel"], r["lever"]) == (arch, batch, "auto", None) and "relative_error" in r
    }
    reference = None
    with contextlib.suppress(OSError, KeyError, ValueError):
        stated = json.loads((ROOT / "results" / "precision_error.json").read_text(encoding="utf-8"))
        reference = stated["fixtures"]["original size, random weights"]["bf16"]["max_rel_percent"] / 100
    pre = (parts.get("pretrain") or {}).get("rows", [])
    steady = [r["words_per_s_steady"] for r in pre if r.get("words_per_s_steady")]
    return {
        f"inference {arch} batch {batch} bf16, default kernel (words/s; target 500,000)": rate("bf16", "auto"),
        f"inference {arch} batch {batch} bf16 autocast, default kernel (words/s)": rate("bf16-autocast", "auto"),
        f"inference {arch} batch {batch} bf16 autocast, cuda_graphs (words/s)": rate("bf16-autocast", "cuda_graphs"),
        f"bf16 error against fp32, {arch} batch {batch}, default kernel (max abs ÷ max |h|)": errors or None,
        "the same on the CPU (results/precision_error.json, original size, random weights, bf16)": reference,
        "nlp.pipe over raw (target 90%)": pipe or None,
        "pretraining steady words/s, best run (target 280,000)": max(steady) if steady else None,
        "bf16 held-out perplexity over fp32's, less 1 (target within ±1%)": (parts.get("pretrain") or {}).get(
            "bf16_ppl_vs_fp32"
        ),
    }


def markdown(table: dict) -> str:
    lines = [f"**{table['title']}**", "", "| " + " | ".join(table["columns"]) + " |"]
    lines.append("| " + " | ".join("---" for _ in table["columns"]) + " |")
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table["rows"]]
    return "\n".join(lines)


def summary(record: dict) -> str:
    head = f"GPU benchmark: {record.get('machine', {}).get('gpu') or record.get('machine', {}).get('cpu')}, "
    head += f"commit {record.get('commit')}, status {json.dumps(record.get('status'))}"
    body = "\n\n".join(markdown(t) for t in tables(record))
    return head + "\n\n" + body + "\n\ntargets: " + json.dumps(targets(record), indent=1, default=str)


# --- here: the record into bench/results -------------------------------------------------------------------------

MACHINE_PATHS = re.compile(r"(?<![\w.~-])/(?:work|tmp|home|root|opt|usr|var)/[^\s'\",:;)\]]*")


def scrub(text: str) -> str:
    """A log as a committed record may hold it: a machine's folders by their last name (site-packages/x.py, TMP)."""

    def short(match: re.Match) -> str:
        path = match.group(0)
        for marker in ("site-packages/", "spacy_elmo_gpu_site/"):
            if marker in path:
                return "site-packages/" + path.split(marker, 1)[1]
        for folder in ("spacy_elmo/", "lab/", "tests/", "configs/"):
            if "/" + folder in path:
                return folder + path.split("/" + folder, 1)[1]
        return "TMP/" + Path(path).name if path.startswith("/tmp/") else Path(path).name

    return MACHINE_PATHS.sub(short, text)


def gpu_short_name(name: str) -> str:
    """'NVIDIA H200' → 'h200', 'NVIDIA H100 80GB HBM3' → 'h100'."""
    words = [w for w in re.split(r"[\s_-]+", name or "") if w and w.upper() not in ("NVIDIA", "TESLA", "GEFORCE")]
    return (words[0] if words else "gpu").lower()


def record_run(args) -> int:
    folder = Path(args.folder)
    source = folder / RECORD
    if not source.is_file():
        raise SystemExit(f"lab.gpu record: {source} not found (the $OUT files of `bash lab/gpu.sh`)")
    record = json.loads(source.read_text(encoding="utf-8"))
    missing = [k for k in ("schema", "commit", "machine", "settings", "parts", "status") if k not in record]
    if missing:
        raise SystemExit(f"lab.gpu record: {source}: not a record of `python -m lab.gpu run` (no {', '.join(missing)})")
    machine = record["machine"]
    gpu = machine.get("gpu") or "cpu"
    commit = (record.get("commit") or "unknown")[:7]
    name = f"gpu_{gpu_short_name(gpu)}_{commit}" + ("_quick" if record.get("quick") else "")
    into = Path(args.into) / name
    if into.exists():
        raise SystemExit(f"lab.gpu record: {into} exists; move it away first (a record is never overwritten)")
    into.mkdir(parents=True)
    for path in sorted(folder.iterdir()):
        if path.is_file() and not path.name.startswith("."):  # (not a write cut short: .gpu.json.tmp...)
            text = path.read_text(encoding="utf-8", errors="replace")
            (into / path.name).write_text(scrub(text), encoding="utf-8")
    started = (record.get("runs") or [{}])[0].get("started_utc") or ""  # 2026-12-04T16:10:03Z
    date = f"{started[:10]} {started[11:16]} UTC" if started else ""
    dirty = record.get("dirty") or []
    entry = {
        "title": f"GPU benchmark, {date} ({gpu})",
        "kind": "gpu",
        "schema": SCHEMA,
        "date": date,
        "commit": commit + ("-dirty" if dirty else ""),
        "dirty": dirty,
        "left_behind": record.get("left_behind", []),
        "tree": record.get("tree"),
        "machine": json.loads(scrub(json.dumps(machine))),
        "settings": record["settings"],
        "status": record["status"],
        "targets": targets(record),
        "tables": tables(record),
        "source": f"bench/results/{name}/{RECORD}",
    }
    runs = Path(args.runs)
    with runs.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
    table = write_table(runs)
    print(f"lab.gpu record: {into}; appended to {runs}; wrote {table}")
    return 0


def readable(value) -> str:
    """A target's figure as a reader takes it in: rates with thousands separators, ratios to 4 digits, dicts of
    them as `key: value` lists; None as "not measured"."""
    if value is None:
        return "not measured"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {readable(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def write_table(runs: Path = RUNS, out: Path | None = None) -> Path:
    """bench/results/gpu.md: every GPU run of this harness in `runs`, newest first, its tables and targets."""
    records = [json.loads(line) for line in runs.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = [r for r in records if r.get("kind") == "gpu" and r.get("schema") == SCHEMA]
    lines = [f"<!-- written by `python -m lab.gpu record` from {runs.name}: every run of lab/gpu.py, newest first -->"]
    for r in reversed(chosen):
        lines += ["", f"## {r['title']}", "", f"Commit {r['commit']}; record: {r['source']}.", ""]
        lines += [f"- {k}: {readable(v)}" for k, v in r.get("targets", {}).items()]
        for table in r.get("tables", []):
            lines += ["", markdown(table)]
    out = out or runs.with_name("gpu.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def device_args(p):
        p.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "gpu_out"), help="results folder ($OUT)")
        p.add_argument("--prep", default=str(PREP), help="the carried folder (site.tar.xz, corpus/, stamp.json)")
        p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
        p.add_argument("--quick", action="store_true", help="tiny settings: a check of the harness's code paths")

    run = sub.add_parser("run", help="every part (or --parts), on the device machine")
    device_args(run)
    run.add_argument("--parts", default="", help=f"comma-separated, of {','.join(PARTS)} (a rerun adds to gpu.json)")
    run.add_argument("--deadline", type=float, default=None, help=f"seconds for the whole run (GPU default {DEADLINE})")
    part = sub.add_parser("part", help="one part in this process (what `run` starts)")
    part.add_argument("part", choices=PARTS)
    part.add_argument("--box", type=float, required=True)
    device_args(part)
    rec = sub.add_parser("record", help="here: a returned $OUT folder into bench/results and runs.jsonl")
    rec.add_argument("folder")
    rec.add_argument("--runs", default=str(RUNS))
    rec.add_argument("--into", default=str(RESULTS))
    sub.add_parser("check-packages", help="(what `run` starts) the packages the parts import, and their versions")
    child = sub.add_parser("step-child", help="(what the step part starts) its steps, in this process")
    for name in ("--output", "--profile", "--settings", "--overrides"):
        child.add_argument(name, required=True)
    args = parser.parse_args(argv)
    commands = {
        "run": orchestrate,
        "part": run_part,
        "record": record_run,
        "check-packages": check_packages,
        "step-child": step_child,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
