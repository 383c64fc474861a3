"""What this machine can do, measured in the benchmark's own run, independently of the model: the matrix-product
rate of each precision (fp32, bf16, int8: `gemm_rates`), the rate at which it reads a buffer laid out as the
model's per-step weights and touched as the model touches them at batch 1 (`step_read_rate`), the read rate of a
buffer far larger than the caches (`read_bandwidth`), and the time of the model's matrix products alone at their
exact shapes, each in its bound precision (`lstm_product_seconds`, `linear_product_seconds`). The CPU's caches
(`cache_sizes`) go into the record beside them.

`python -m lab.benchmarks.machine [--quick] [--precisions fp32,bf16] [--threads N]` prints one `measure` sample as
JSON: the benchmark takes its samples in such a process, so that they run under the OpenMP settings of its rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch


def _median_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cache_sizes() -> list[dict]:
    """The caches of CPU 0 (level, type, bytes, the CPUs sharing it), from sysfs; [] where it has none."""
    caches = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            size = (index / "size").read_text().strip()
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
            caches.append(
                {
                    "level": int((index / "level").read_text()),
                    "type": (index / "type").read_text().strip(),
                    "bytes": int(size.rstrip("KMG")) * scale,
                    "shared_cpu_list": (index / "shared_cpu_list").read_text().strip(),
                }
            )
        except (OSError, ValueError):
            continue
    return caches


def _onednn() -> bool:
    return hasattr(torch.ops.mkldnn, "_linear_pointwise") and torch.backends.mkldnn.is_available()


def int8_weight(weight: torch.Tensor):
    """A [K, N] fp32 weight quantized per output column and packed for torch's quantized dynamic linear, as
    `spacy_elmo.kernels.int8` packs the model's (the lab's own copy of that scheme, for timing only)."""
    scale = torch.maximum(weight.amax(dim=0), weight.amin(dim=0).neg()).div_(127.0).clamp_(min=1e-12)
    qweight = torch.div(weight, scale).round_().clamp_(-127, 127).t().contiguous()
    with warnings.catch_warnings():  # torch deprecates creating quantized tensors; its dynamic linear needs one
        warnings.simplefilter("ignore")
        quantized = torch.quantize_per_channel(
            qweight * scale[:, None], scale.double(), torch.zeros(scale.shape[0], dtype=torch.long), 0, torch.qint8
        )
        return torch.ops.quantized.linear_prepack(quantized, None)


def product_kernels(precision: str, x: torch.Tensor, weights: Sequence[torch.Tensor]) -> dict[str, list[Callable]]:
    """name → one call per weight ([K, N], x·W) of each kernel the model's products of `precision` may take:
    fp32 MKL (`torch.mm`) and oneDNN with a prepacked or a plain weight; bf16 oneDNN with a prepacked bf16
    weight (its input rounded to bf16 in the call) or a plain bf16 `torch.mm`; int8 torch's quantized dynamic
    linear (the input quantized in the call)."""
    if precision == "int8":
        packed = [int8_weight(w) for w in weights]
        return {"int8 dynamic": [lambda p=p: torch.ops.quantized.linear_dynamic(x, p, False) for p in packed]}
    if precision == "bf16":
        plain = [w.to(torch.bfloat16) for w in weights]
        kernels = {"bf16 mm": [lambda w=w: torch.mm(x.to(torch.bfloat16), w) for w in plain]}
        if _onednn():
            linear = torch.ops.mkldnn._linear_pointwise
            packed = [torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), x.shape[0]) for w in plain]
            kernels["bf16 onednn prepacked"] = [
                lambda p=p: linear(x.to(torch.bfloat16), p, None, "none", [], "") for p in packed
            ]
        return kernels
    outs = [torch.empty(x.shape[0], w.shape[1]) for w in weights]
    kernels = {"mkl": [lambda w=w, o=o: torch.mm(x, w, out=o) for w, o in zip(weights, outs)]}
    if _onednn():
        linear = torch.ops.mkldnn._linear_pointwise
        packed = [torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), x.shape[0]) for w in weights]
        kernels["onednn prepacked"] = [lambda p=p: linear(x, p, None, "none", [], "") for p in packed]
        kernels["onednn plain"] = [lambda w=w: linear(x, w.t(), None, "none", [], "") for w in weights]
    return kernels


def gemm_rates(sizes=(1024, 2048, 3072), repeats: int = 7, precisions: Sequence[str] = ("fp32",)) -> dict:
    """GFLOP/s (int8: integer operations/s) of square products [n, n]·[n, n] in each precision (median time per
    size and kernel, `product_kernels`); each precision's `peak` is its best: its roofline."""
    torch.manual_seed(0)
    out = {}
    for precision in precisions:
        rates = {}
        for n in sizes:
            a, b = torch.randn(n, n), torch.randn(n, n)
            for name, (call,) in product_kernels(precision, a, [b]).items():
                try:
                    rates[f"{name} {n}"] = 2.0 * n**3 / _median_seconds(call, repeats) / 1e9
                except RuntimeError:  # a kernel this build lacks
                    continue
        if rates:
            out[precision] = {"per_size": rates, "peak": max(rates.values())}
    return out


def _fastest_product(x: torch.Tensor, weights: list[torch.Tensor], repeats: int, precision: str = "fp32") -> float:
    """Seconds of one x·W, W [K, N] one of `weights` in turn (each product reads the next weight, as
    the model's two directions share the caches): the fastest of `product_kernels(precision)`, each the
    median of `repeats` rounds."""
    best = float("inf")
    for calls in product_kernels(precision, x, weights).values():

        def run(calls=calls):
            for call in calls:
                call()

        best = min(best, _median_seconds(run, repeats) / len(calls))
    return best


def lstm_product_seconds(
    config, lengths: list[int], threads: int, repeats: int = 3, products: dict | None = None
) -> float:
    """A lower bound of the biLSTM's time on one batch of sentences of `lengths` (boundary tokens
    included): its matrix products alone, each at the fastest rate measured for its exact shape
    (`_fastest_product`) in its precision, with no elementwise work.

    `products`: weight name → {"one_row": precision, "rows": precision}, the precisions the model bound
    (None: fp32 throughout). Per layer and direction: the input products of all the batch's tokens as one
    [tokens, proj]·[proj, 4·lstm_dim] (no faster in the kernel's blocks), then at each time step t
    the recurrent product of the n_t sentences still running, [n_t, proj]·[proj, 4·lstm_dim], and the
    cell projection [n_t, lstm_dim]·[lstm_dim, proj]. Timed on one thread, a direction's weight read
    between two of the other's; with 2 or more threads the two directions count once (the packed
    kernel runs them at the same time, one thread each), with 1 twice. Every layer has the same shapes."""
    hidden, proj = config.lstm_dim, config.projection_dim
    products = products or {}

    def precision(name: str, rows: int) -> str:
        return (products.get(name) or {}).get("one_row" if rows == 1 else "rows", "fp32")

    counts = [sum(1 for n in lengths if n > t) for t in range(max(lengths, default=0))]
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    try:
        gates = [torch.randn(proj, 4 * hidden) * 0.05 for _ in range(2)]
        cells = [torch.randn(hidden, proj) * 0.05 for _ in range(2)] if hidden != proj else []
        tokens = sum(lengths)
        seconds = _fastest_product(torch.randn(tokens, proj), gates, repeats, precision("input_weight", tokens))
        for rows in sorted(set(counts)):
            step = _fastest_product(torch.randn(rows, proj), gates, repeats, precision("hidden_weight", rows))
            if cells:
                step += _fastest_product(torch.randn(rows, hidden), cells, repeats, precision("proj_weight", rows))
            seconds += counts.count(rows) * step
    finally:
        torch.set_num_threads(saved)
    return seconds * config.num_layers * (1 if threads >= 2 else 2)


def linear_product_seconds(shapes: Sequence[tuple[int, int, int, str]], repeats: int = 3) -> float:
    """Seconds of the products [rows, K]·[K, N] of `shapes` ((rows, K, N, precision) each, e.g. the highway
    and projection layers on a batch's distinct words), each the fastest kernel of its precision, on the
    caller's threads (the token encoder runs its products with all of them)."""
    torch.manual_seed(0)
    seconds = 0.0
    for rows, k, n, precision in shapes:
        if rows:
            seconds += _fastest_product(torch.randn(rows, k), [torch.randn(k, n) * 0.05], repeats, precision)
    return seconds


def _read_kernels(shape: tuple[int, int]) -> dict[str, Callable[[torch.Tensor], object]]:
    """Read-only kernels over a buffer viewed as a [rows, columns] float32 matrix: a sum, a maximum, and a
    vector-matrix product (which reads the rows as several streams at once)."""
    vector = torch.ones(1, shape[0])
    return {
        "sum": lambda t: t.sum(),
        "amax": lambda t: t.amax(),
        "vector·matrix": lambda t: torch.mm(vector, t.view(shape)),
    }


def step_read_rate(layers: Sequence[Sequence[Sequence[tuple[int, int]]]], steps: int, threads: int) -> dict:
    """GB/s of reading, as the model reads its per-step weights at batch 1, buffers of their sizes.

    `layers[l][d]`: the weights direction d of layer l reads at every step, as (rows, bytes per row) of the
    weight in the precision it is read in (K and N·bytes per value, int8's per-column extras on its rows). Each
    weight is a float32 buffer of those bytes; per layer, `steps` times over that layer's weights, then the next
    layer (the packed kernel runs layer after layer); with 2 or more threads the two directions at the same
    time on two threads of one intra-op thread each (as the kernel does), else in turn. Each read kernel of
    `_read_kernels` once over all of it; `peak` is the best kernel: what this machine can read these bytes at,
    touched in this order."""
    buffers = [
        [[torch.ones(rows, max(row_bytes // 4, 1)) for rows, row_bytes in weights] for weights in layer]
        for layer in layers
    ]
    total = sum(t.numel() * 4 for layer in buffers for weights in layer for t in weights)

    def run(kernel_name: str) -> float:
        kernels = [[[_read_kernels(tuple(t.shape))[kernel_name] for t in w] for w in layer] for layer in buffers]
        n_dir = len(buffers[0]) if buffers else 0
        parallel = threads >= 2 and n_dir == 2

        def direction(d: int, barrier: threading.Barrier | None) -> None:
            if parallel:
                torch.set_num_threads(1)
            for layer, calls in zip(buffers, kernels):
                for _ in range(steps):
                    for t, call in zip(layer[d], calls[d]):
                        call(t)
                if barrier is not None:
                    barrier.wait()

        start = time.perf_counter()
        if parallel:
            barrier = threading.Barrier(2)
            workers = [threading.Thread(target=direction, args=(d, barrier)) for d in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        else:
            for layer, calls in zip(buffers, kernels):
                for _ in range(steps):
                    for d in range(n_dir):
                        for t, call in zip(layer[d], calls[d]):
                            call(t)
        return time.perf_counter() - start

    rates = {}
    for name in _read_kernels((1, 1)):
        run(name)  # warm-up: the buffers touched once, the threads made
        rates[name] = total * steps / run(name) / 1e9
    return {"per_kernel": rates, "peak": max(rates.values()), "bytes_per_step": total, "steps": steps}


def read_bandwidth(megabytes: int = 1024, repeats: int = 7) -> dict:
    """GB/s of reading a buffer far larger than the caches (best of a few read-only kernels): the rate of the
    weights read once per batch."""
    data = torch.ones(megabytes * 2**20 // 4)
    nbytes = data.numel() * 4
    matrix = data.view(-1, 4096)  # a matrix-vector product streams the matrix once, too
    vector, out = torch.ones(1, matrix.shape[0]), torch.empty(1, 4096)
    results = {
        "sum": nbytes / _median_seconds(lambda: data.sum(), repeats) / 1e9,
        "amax": nbytes / _median_seconds(lambda: data.amax(), repeats) / 1e9,
        "gemv": nbytes / _median_seconds(lambda: torch.mm(vector, matrix, out=out), repeats) / 1e9,
    }
    results["peak"] = max(results.values())
    return results


def measure(quick: bool = False, precisions: Sequence[str] = ("fp32",)) -> dict:
    """One sample of the machine's limits: each precision's GEMM rates and the read rate of a large buffer."""
    sizes = (512, 1024) if quick else (1024, 2048, 3072)
    repeats = 3 if quick else 7
    return {
        "gemm": gemm_rates(sizes, repeats, precisions),
        "bandwidth": read_bandwidth(128 if quick else 1024, repeats),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.benchmarks.machine", description=measure.__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller products and buffers, fewer repeats")
    parser.add_argument("--precisions", default="fp32", help="comma-separated: fp32, bf16, int8")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sample = measure(args.quick, [p for p in args.precisions.split(",") if p])
    # the wait policy libgomp read when torch loaded (this process's, unchanged since)
    sample["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY")
    print(json.dumps(sample))
    return 0


if __name__ == "__main__":
    sys.exit(main())
