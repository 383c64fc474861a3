"""The private torch APIs the kernels use, each behind a capability check with an exact fallback.

| API                                        | used for                        | fallback (exact)               |
| ------------------------------------------ | ------------------------------- | ------------------------------ |
| `torch.ops.mkldnn._reorder_linear_weight`, | oneDNN-prepacked recurrent and  | plain `addmm` / `mm` (MKL)      |
| `torch.ops.mkldnn._linear_pointwise`       | input products (plain weights   |                                |
|                                            | too, for large batches)         |                                |
| `torch.ops.quantized.linear_prepack`,     | int8 products (`kernels.int8`): | none: int8 is not taken (one   |
| `torch.ops.quantized.linear_dynamic`       | fbgemm / oneDNN with VNNI       | warning line, then fp32)       |
| (weights made with the deprecated          |                                 |                                |
| `torch._make_per_channel_quantized_tensor`)|                                 |                                |
| `Tensor._version`                          | noticing in-place weight edits  | no derived-weight caching      |
| `torch.get_autocast_dtype`                 | the autocast dtype              | bf16 on CPU, fp16 on CUDA       |
| per-thread `torch.set_num_threads` (ATen's | the two LSTM directions on two  | the directions one after the   |
| OpenMP backend keeps a count per thread)   | threads (`packed_lstm`)         | other (same operations)        |

The probes of the private ops are plain functions of the op namespace (`onednn_linear_works`,
`quantized_linear_works`: torch's by default), so a test hands them one that lacks an op or computes
something else. Where a probe finds one missing or different (an older or newer torch, a build without
oneDNN or fbgemm), its path falls back to the exact one with one warning line, once per process (no
silent fallbacks); tests switch every fallback on (`FORCE_FALLBACK`, logged once as info).

Two hardware capabilities are checked here too, once per process, from the CPU's flags
(/proc/cpuinfo; torch 2.13 has no public query for the instruction set itself:
`torch.backends.cpu.get_cpu_capability()` says "AVX512" with or without them):

- native bf16 products (`native_bf16`: `avx512_bf16` or `amx_bf16` on x86, `bf16` on Arm, and
  oneDNN's bf16 GEMM built into torch; `torch.ops.mkldnn._is_mkldnn_bf16_supported()` is also true
  where oneDNN only emulates bf16). Without them a bf16 request (`precision="bf16"`) is not
  refused: `bf16_products` warns in one line, once, and the model computes in exact fp32 (emulated
  bf16 GEMMs are slower than fp32 ones). Tests switch it off with `FORCE_FALLBACK.add("native_bf16")`.
- int8 dot products that beat fp32 (`int8`: the table `INT8_CPUS` below, by flags, not by a timing
  probe), with torch's quantized dynamic linear working. Without them an int8 request warns in one
  line, once (`int8_products`), and the model computes in exact fp32. `FORCE_FALLBACK.add("int8")`.
"""

from __future__ import annotations

import functools
import logging
import platform
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger("spacy_elmo.kernels")

# names of capabilities that tests switch off to run the fallbacks
FORCE_FALLBACK: set[str] = set()
_logged: set[str] = set()


def _fallback(name: str, why: str) -> bool:
    """False, after one line the first time: a warning where a probe found the capability missing or
    different, info where a test switched it off."""
    if name not in _logged:
        _logged.add(name)
        level = logging.INFO if name in FORCE_FALLBACK else logging.WARNING
        logger.log(level, "spacy_elmo.kernels: %s unavailable (%s); using the exact fallback", name, why)
    return False


def _probe_onednn(ops: Any = None) -> str | None:
    """None when oneDNN's linear ops (`ops`: torch.ops.mkldnn unless given) compute what the fast paths
    expect of them, else why not."""
    try:
        if ops is None:
            if not torch.backends.mkldnn.is_available():
                return "oneDNN not built"
            ops = torch.ops.mkldnn
        weight = ops._reorder_linear_weight(torch.ones(4, 3), 2)
        out = ops._linear_pointwise(torch.ones(2, 3), weight, None, "none", [], "")
        if out.shape != (2, 4) or not torch.equal(out, torch.full((2, 4), 3.0)):
            return "unexpected result"
        out = ops._linear_pointwise.binary(torch.ones(2, 3), torch.ones(2, 4), weight, None, "add")
        if not torch.equal(out, torch.full((2, 4), 4.0)):
            return "unexpected result of the binary variant"
        plain = torch.arange(12.0).view(3, 4)  # a plain (not prepacked) [out, in] weight, as a view
        out = ops._linear_pointwise(torch.ones(2, 3), plain.t(), None, "none", [], "")
        if not torch.equal(out, plain.sum(0).expand(2, 4)):
            return "unexpected result with a plain weight"
    except (AttributeError, RuntimeError, TypeError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def onednn_linear_works(ops: Any = None) -> bool:
    """Whether oneDNN's prepacked linear is there and computes what the fast paths expect: `ops`
    (torch.ops.mkldnn unless given) has `_reorder_linear_weight` and `_linear_pointwise` (its `binary`
    variant too), which give the products of a prepacked and of a plain weight."""
    return _probe_onednn(ops) is None


_ONEDNN_PROBLEM = _probe_onednn()
_HAS_VERSION = hasattr(torch.ones(1), "_version")


def _available(name: str, problem: str | None) -> bool:
    """True unless the capability was switched off or its probe found a problem (then logged once)."""
    if name in FORCE_FALLBACK:
        return _fallback(name, "switched off")
    if problem is not None:
        return _fallback(name, problem)
    return True


def onednn_linear_available() -> bool:
    """oneDNN's prepacked linear (CPU fp32)."""
    return _available("onednn", _ONEDNN_PROBLEM)


def _in_new_thread(fn):
    """fn() on a fresh thread (whose first torch call takes the process-wide default thread count)."""
    result = []
    thread = threading.Thread(target=lambda: result.append(fn()))
    thread.start()
    thread.join()
    return result[0] if result else None


def set_thread_intraop_threads(threads: int) -> None:
    """Sets the calling thread's intra-op thread count, leaving the default that other threads
    take on their first torch call as it was (`torch.set_num_threads` sets both)."""
    default = _in_new_thread(torch.get_num_threads)
    torch.get_num_threads()  # this thread's lazy initialization, which would reset the count later
    torch.set_num_threads(threads)
    _in_new_thread(lambda: torch.set_num_threads(default))


_PER_THREAD: list[str | None] = []


def _probe_per_thread() -> str | None:
    mine = torch.get_num_threads()

    def other():
        set_thread_intraop_threads(mine + 1)
        return torch.get_num_threads()

    try:
        theirs = _in_new_thread(other)
    except RuntimeError as err:
        return f"{type(err).__name__}: {err}"
    if torch.get_num_threads() != mine:
        torch.set_num_threads(mine)
        return "the thread count is process-wide"
    if theirs != mine + 1:
        return "a thread's count did not change"
    return None


def per_thread_intraop_threads() -> bool:
    """Whether `torch.set_num_threads` on one thread leaves the other threads' counts alone
    (ATen's OpenMP backend); probed once, on first use."""
    if "per_thread_threads" in FORCE_FALLBACK:
        return _fallback("per_thread_threads", "switched off")
    if not _PER_THREAD:
        _PER_THREAD.append(_probe_per_thread())
    if _PER_THREAD[0] is not None:
        return _fallback("per_thread_threads", _PER_THREAD[0])
    return True


def tensor_version(tensor: torch.Tensor) -> int | None:
    """The in-place modification counter, or None where torch does not expose it."""
    if "version" in FORCE_FALLBACK:
        return _fallback("version", "switched off") or None
    if not _HAS_VERSION:
        return _fallback("version", "Tensor._version missing") or None
    return tensor._version


def _cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The CPU's flags (/proc/cpuinfo's `flags`, `Features` on Arm), or None without a /proc/cpuinfo."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


def _probe_native_bf16(cpuinfo: str | None = None, ops: Any = None) -> str | None:
    """None when the CPU multiplies bf16 natively (and torch's oneDNN, `ops` unless torch.ops.mkldnn, can
    use it), else why not."""
    flags = _cpu_flags(cpuinfo)
    if flags is None:
        return "no /proc/cpuinfo to read the CPU's flags from"
    machine = platform.machine().lower()
    wanted = {"bf16"} if machine in ("aarch64", "arm64") else {"avx512_bf16", "amx_bf16"}
    if not flags & wanted:
        return f"the CPU has none of the flags {', '.join(sorted(wanted))}"
    try:
        if not (torch.ops.mkldnn if ops is None else ops)._is_mkldnn_bf16_supported():
            return "torch's oneDNN has no bf16 GEMM here"
    except (AttributeError, RuntimeError) as err:
        return f"{type(err).__name__}: {err}"
    return None


# Where int8 products beat fp32, by the CPU's flags (x86; the first row whose flag the CPU has
# decides). VNNI (`vpdpbusd`, and AMX's tiles) multiplies 8-bit activations by 8-bit weights into
# int32 without an int16 step that could saturate, at several times the fp32 rate. Without it
# (AVX2 / AVX-512 F only) int8 needs 7-bit activations (`reduce_range`, twice the error) and runs at
# about half that rate, so it is not taken there; nor on other architectures (not measured).
# docs/performance.md ("Which precision on which CPU") has the measured rows.
INT8_CPUS: tuple[tuple[str, str], ...] = (
    ("amx_int8", "Intel AMX (not measured)"),
    ("avx512_vnni", "AVX-512 VNNI (AMD EPYC Zen 4: family 25 model 17)"),
    ("avx_vnni", "AVX-VNNI (not measured)"),
)
# the quantized engines, in order of preference, whose dynamic linear computes the int8 products
_INT8_ENGINES = ("x86", "fbgemm", "onednn")
_QUANTIZED_DEPRECATION = "torch.quantize_per_tensor, torch.quantize_per_channel and other quantized tensor creation"


def int8_engine() -> str | None:
    """The quantized engine that packs int8 weights (`kernels.int8`), or None where torch has none."""
    try:
        engines = torch.backends.quantized.supported_engines
    except (AttributeError, RuntimeError):
        return None
    return next((engine for engine in _INT8_ENGINES if engine in engines), None)


def pack_int8_weight(qweight: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None, ops: Any = None):
    """torch's packed weight for `quantized.linear_dynamic` (`ops`: torch.ops.quantized unless given):
    int8 [N, K] with per-row (output) `scales` [N] (zero points 0) and an fp32 bias. The packing takes a
    quantized tensor, whose creation torch deprecates (the warning is ours to handle: without it,
    `int8_products` says no)."""
    ops = torch.ops.quantized if ops is None else ops
    engine = int8_engine()
    if engine is None:
        raise RuntimeError("torch has no x86 / fbgemm / oneDNN quantized engine")
    previous = torch.backends.quantized.engine
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_QUANTIZED_DEPRECATION)
        try:
            torch.backends.quantized.engine = engine
            quantized = torch._make_per_channel_quantized_tensor(
                qweight, scales.double(), torch.zeros(qweight.shape[0], dtype=torch.long), 0
            )
            return ops.linear_prepack(quantized, bias)
        finally:
            torch.backends.quantized.engine = previous


def _probe_quantized_linear(ops: Any = None) -> str | None:
    """None when torch's quantized dynamic linear (`ops`: torch.ops.quantized unless given) gives the
    integer products exactly, else why not."""
    ops = torch.ops.quantized if ops is None else ops
    try:
        # integers: activations 0..255 (scale 1, zero point 0) times weights in [-127, 127], summed exactly
        x = torch.arange(70 * 3, dtype=torch.float32).reshape(3, 70) * 37 % 256
        x[0, 0], x[0, 1] = 0.0, 255.0
        w = (torch.arange(4 * 70).reshape(4, 70) * 53 % 255 - 127).to(torch.int8)
        y = ops.linear_dynamic(x, pack_int8_weight(w, torch.ones(4), None, ops), False)
        if not torch.equal(y, x @ w.float().t()):
            return "torch's quantized dynamic linear gave an unexpected result"
    except (AttributeError, RuntimeError, TypeError) as err:
        return f"{type(err).__name__}: {err}"
    return None


def quantized_linear_works(ops: Any = None) -> bool:
    """Whether torch's int8 dynamic linear is there and gives the integer products exactly: `ops`
    (torch.ops.quantized unless given) has `linear_prepack` (of a weight made by
    `torch._make_per_channel_quantized_tensor`) and `linear_dynamic`, and an engine packs for them."""
    return _probe_quantized_linear(ops) is None


def _probe_int8(cpuinfo: str | None = None, ops: Any = None) -> str | None:
    """None when int8 products beat fp32 here (`INT8_CPUS`) and torch's quantized dynamic linear (`ops`
    unless torch.ops.quantized) gives the integer products exactly, else why not."""
    if not _is_x86():
        return f"int8 products are not taken on {platform.machine() or 'this CPU'}"
    flags = _cpu_flags(cpuinfo)
    if flags is None:
        return "no /proc/cpuinfo to read the CPU's flags from"
    if not any(flag in flags for flag, _ in INT8_CPUS):
        return f"the CPU has none of the flags {', '.join(flag for flag, _ in INT8_CPUS)}"
    return _probe_quantized_linear(ops)


@functools.cache
def _native_bf16_missing() -> str | None:
    """Why this CPU lacks native bf16 products (None: it has them), probed once per process."""
    return _probe_native_bf16()


_warned_bf16: set[str] = set()


def native_bf16_available() -> bool:
    """Whether this CPU computes bf16 products natively (probed once, on first use)."""
    return "native_bf16" not in FORCE_FALLBACK and _native_bf16_missing() is None


def bf16_products(device_type: str) -> bool:
    """Whether a bf16 request (`precision="bf16"`) computes its products in bf16 on this device
    type: on CUDA, where the GPU supports bf16; on CPU, where it is native (`native_bf16_available`).
    Otherwise one warning line, once per process and device type, and False: the caller computes
    in exact fp32 (emulated bf16 would be slower than fp32, and no more exact)."""
    if device_type == "cuda":
        ok, why = torch.cuda.is_available() and torch.cuda.is_bf16_supported(), "this GPU has no bf16"
    elif device_type == "cpu":
        ok = native_bf16_available()
        why = "switched off" if "native_bf16" in FORCE_FALLBACK else (_native_bf16_missing() or "")
    else:
        ok, why = False, f"no bf16 kernels for {device_type}"
    if not ok and device_type not in _warned_bf16:
        _warned_bf16.add(device_type)
        logger.warning(
            "spacy_elmo: precision='bf16' requested, but %s has no native bf16 products (%s); computing in fp32",
            device_type.upper(),
            why,
        )
    return ok


@functools.cache
def _int8_missing() -> str | None:
    """Why this CPU does not take int8 products (None: it does), probed once per process."""
    return _probe_int8()


_warned_int8: set[str] = set()


def int8_available() -> bool:
    """Whether this CPU takes int8 products (`INT8_CPUS`, probed once, on first use)."""
    return "int8" not in FORCE_FALLBACK and _int8_missing() is None


def int8_products(device_type: str) -> bool:
    """Whether an int8 request (`precision="int8"`) computes its products in int8 on this device type:
    on a CPU of `INT8_CPUS`. Otherwise one warning line, once per process and device type, and False:
    the caller computes in exact fp32 (int8 would not beat it there)."""
    if device_type == "cpu":
        ok = int8_available()
        why = "switched off" if "int8" in FORCE_FALLBACK else (_int8_missing() or "")
    else:
        ok, why = False, f"no int8 kernels for {device_type}"
    if not ok and device_type not in _warned_int8:
        _warned_int8.add(device_type)
        logger.warning(
            "spacy_elmo: precision='int8' requested, but %s has no int8 products faster than fp32 (%s); "
            "computing in fp32",
            device_type.upper(),
            why,
        )
    return ok


def autocast_product_dtype(device_type: str) -> torch.dtype | None:
    """The dtype the training kernels (fused LSTM, fused sampled softmax) multiply in: bf16 when bf16
    autocast is on for `device_type` and the device has native bf16 products (`bf16_products`, which
    warns once where it has not), else None (fp32)."""
    if not torch.is_autocast_enabled(device_type) or autocast_dtype(device_type) != torch.bfloat16:
        return None
    return torch.bfloat16 if bf16_products(device_type) else None


def autocast_dtype(device_type: str) -> torch.dtype:
    """The dtype autocast computes in on this device type."""
    getter = getattr(torch, "get_autocast_dtype", None)
    if getter is not None and "autocast_dtype" not in FORCE_FALLBACK:
        return getter(device_type)
    _fallback("autocast_dtype", "torch.get_autocast_dtype missing")
    if device_type == "cuda":
        return torch.get_autocast_gpu_dtype()
    return torch.get_autocast_cpu_dtype()
