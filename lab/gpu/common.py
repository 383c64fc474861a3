"""The GPU harness's shared pieces: its settings, the record ($OUT/gpu.json) and the stamp of the tree that ran,
the machine, and the timing helpers the parts use."""

import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from lab import ROOT

PREP = ROOT / ".gpu"  # what `python -m lab.gpu.pack` prepares and the device tool carries
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
            "sentences": "bench_worker.make_sentences(seed=1, zipf=False): 20-30 words, nearly all distinct",
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
            "corpus": "the project's pretraining text (lab.data.fetch_assets, lab.data.preprocess_conll --lm-text, "
            "lab.data.preprocess_lm_text: BBC News + CoNLL-2003 train, one sentence a line) carried in .gpu/corpus",
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


# --- the parts' processes: each in its own group, stopped whole ---


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
