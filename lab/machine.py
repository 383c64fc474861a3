"""What this machine can do, measured in the benchmark's own run: fp32 GEMM rate and read bandwidth, and the
biLSTM's products alone at their exact shapes (`lstm_product_seconds`)."""

from __future__ import annotations

import statistics
import time

import torch


def _median_seconds(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gemm_rate(sizes=(1024, 2048, 3072), repeats: int = 7) -> dict:
    """fp32 GFLOP/s of square matmuls (median time per size), with MKL (`torch.mm`) and, where
    available, oneDNN with a prepacked weight; `peak` is the best of all: the roofline."""
    torch.manual_seed(0)
    rates = {}
    onednn = hasattr(torch.ops.mkldnn, "_linear_pointwise") and torch.backends.mkldnn.is_available()
    for n in sizes:
        a, b, out = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
        seconds = _median_seconds(lambda: torch.mm(a, b, out=out), repeats)  # noqa: B023 - timed within this iteration
        rates[f"mkl {n}"] = 2.0 * n**3 / seconds / 1e9
        if onednn:
            try:
                packed = torch.ops.mkldnn._reorder_linear_weight(b, n)
                seconds = _median_seconds(
                    lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], ""),  # noqa: B023 - timed now
                    repeats,
                )
                rates[f"onednn {n}"] = 2.0 * n**3 / seconds / 1e9
            except RuntimeError:
                onednn = False
    return {"per_size": rates, "peak": max(rates.values())}


def skinny_gemm_rates(k: int = 512, n: int = 16384, rows=(1, 32, 128), repeats: int = 7) -> dict:
    """GFLOP/s of the recurrent products' shapes ([2, rows, k] · [2, k, n], both directions)."""
    weight = torch.randn(2, k, n)
    rates = {}
    for m in rows:
        x, out = torch.randn(2, m, k), torch.empty(2, m, n)
        seconds = _median_seconds(lambda: torch.bmm(x, weight, out=out), repeats)  # noqa: B023 - timed within this iteration
        rates[m] = 2.0 * 2 * m * k * n / seconds / 1e9
    return rates


def _fastest_product(x: torch.Tensor, weights: list[torch.Tensor], repeats: int) -> float:
    """Seconds of one x·W, W [K, N] one of `weights` in turn (each product reads the next weight, as
    the model's two directions share the caches): the fastest of MKL (`torch.mm`), oneDNN with a
    prepacked weight and oneDNN with the plain one, each the median of `repeats` rounds."""
    outs = [torch.empty(x.shape[0], w.shape[1]) for w in weights]
    kernels = {"mkl": [lambda w=w, o=o: torch.mm(x, w, out=o) for w, o in zip(weights, outs)]}
    if hasattr(torch.ops.mkldnn, "_linear_pointwise") and torch.backends.mkldnn.is_available():
        linear = torch.ops.mkldnn._linear_pointwise
        packed = [torch.ops.mkldnn._reorder_linear_weight(w.t().contiguous(), 32) for w in weights]
        kernels["onednn prepacked"] = [lambda p=p: linear(x, p, None, "none", [], "") for p in packed]
        kernels["onednn plain"] = [lambda w=w: linear(x, w.t(), None, "none", [], "") for w in weights]
    best = float("inf")
    for calls in kernels.values():

        def run(calls=calls):
            for call in calls:
                call()

        best = min(best, _median_seconds(run, repeats) / len(calls))
    return best


def lstm_product_seconds(config, lengths: list[int], threads: int, repeats: int = 3) -> float:
    """A lower bound of the biLSTM's time on one batch of sentences of `lengths` (boundary tokens
    included): its matrix products alone, each at the fastest rate measured for its exact shape
    (`_fastest_product`), with no elementwise work.

    Per layer and direction: the input products of all the batch's tokens as one
    [tokens, proj]·[proj, 4·lstm_dim] (no faster in the kernel's blocks), then at each time step t
    the recurrent product of the n_t sentences still running, [n_t, proj]·[proj, 4·lstm_dim], and the
    cell projection [n_t, lstm_dim]·[lstm_dim, proj]. Timed on one thread, a direction's weight read
    between two of the other's; with 2 or more threads the two directions count once (the packed
    kernel runs them at the same time, one thread each), with 1 twice. Every layer has the same shapes."""
    hidden, proj = config.lstm_dim, config.projection_dim
    counts = [sum(1 for n in lengths if n > t) for t in range(max(lengths, default=0))]
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    try:
        gates = [torch.randn(proj, 4 * hidden) for _ in range(2)]
        cells = [torch.randn(hidden, proj) for _ in range(2)] if hidden != proj else []
        seconds = _fastest_product(torch.randn(sum(lengths), proj), gates, repeats)
        for rows in sorted(set(counts)):
            step = _fastest_product(torch.randn(rows, proj), gates, repeats)
            if cells:
                step += _fastest_product(torch.randn(rows, hidden), cells, repeats)
            seconds += counts.count(rows) * step
    finally:
        torch.set_num_threads(saved)
    return seconds * config.num_layers * (1 if threads >= 2 else 2)


def read_bandwidth(megabytes: int = 1024, repeats: int = 7) -> dict:
    """GB/s of reading a buffer far larger than the caches (best of a few read-only kernels)."""
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


def measure(quick: bool = False) -> dict:
    sizes = (512, 1024) if quick else (1024, 2048, 3072)
    repeats = 3 if quick else 7
    return {
        "gemm": gemm_rate(sizes, repeats),
        "skinny": skinny_gemm_rates(repeats=repeats) if not quick else {},
        "bandwidth": read_bandwidth(128 if quick else 1024, repeats),
    }
