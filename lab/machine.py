"""What this machine can do, measured in the benchmark's own run: fp32 GEMM rate and read bandwidth."""

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
