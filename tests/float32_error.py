"""How close a float32 computation must come to the definition it computes: as close as the
definition's own float32 run, up to a small factor, both measured against the definition in
float64 in the same test.  A fixed bound such as "1e-6 of the scale" is a property of one CPU's
rounding (another CPU's GEMM kernels sum in another order); this one is a property of the
arithmetic, so it holds on any machine and still fails for a computation that is really worse.

Per tensor, with scale = max|exact| and eps the float32 machine epsilon:

    max|got − exact| ≤ RATIO · max(max|reference − exact|, floor_ulps(terms) · eps · scale)

RATIO = 10, measured on the LSTM kernels (tests/kernels/test_kernel_equivalence.py) over the whole
configuration space for 50 seeds (forward values) and 40 seeds (gradients), with the floor of
that test (66 terms, 4.1 ulps): the largest kernel / eager error ratios were 4.9 in 10,800 tensors
(packed forward: its tanh is 2σ(2x) − 1, ~1e-7 off per step), 5.2 in 57,600 (fused gradients)
and 2.4 (fused forward); 99.9% were below 4.3, 2.6 and 1.9.  Each seed draws other roundings, as
another CPU's summation orders do, so 10 leaves about twice the worst of tens of thousands of
draws.  A kernel with one gate off by a relative 5e-6 (42 float32 ulps) fails every test there,
one off by 2e-6 about half of them; one whose input-gate weights are off by a relative 100 eps
(27–41× eager's error) fails at 10 and would pass at 100 (test_the_tolerance_rejects_a_kernel_...).
The other tests that use it (batching, the token cache, the column-cut char CNN, saved layouts,
thinc's scalar mix against torch's) measured ratios below 1.1.

The floor covers a reference that is exact by luck for some tensor while the other computation
sums in another order: the rounding error of a sum of n float32 terms grows like √n · eps/2 of
the terms (independent roundings of random sign), so n is the longest reduction in the test.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy
import torch
from thinc.util import is_cupy_array, to_numpy

EPS = float(numpy.finfo(numpy.float32).eps)
RATIO = 10.0


def floor_ulps(terms: int) -> float:
    """The typical rounding error, in float32 ulps of the result's scale, of a sum of `terms` terms."""
    return 0.5 * math.sqrt(terms)


def forward_terms(config) -> int:
    """The longest sum in the biLM's forward pass (for `floor_ulps`): a char CNN window (width ×
    char_embedding_dim), a highway layer's or the token projection's inner product (Σ filters) or
    the LSTM's projection (lstm_dim)."""
    window = max(width for width, _ in config.filters) * config.char_embedding_dim
    return max(window, sum(number for _, number in config.filters), config.lstm_dim)


def exact_copy(model):
    """The definition in float64: a copy of the biLM `model` with the same weights (float32 values
    are exact in float64) running the readable LSTM (`eager`), without a token cache."""
    exact = copy.deepcopy(model).double()
    exact.config.lstm_implementation = "eager"
    exact.disable_token_cache()
    return exact


def named(tensors: Any, prefix: str = "") -> dict[str, numpy.ndarray]:
    """A dict, tensor or array, or (nested) sequence of them as {name: float64 array}; None is skipped."""
    if tensors is None:
        return {}
    if isinstance(tensors, torch.Tensor):
        return {prefix: tensors.detach().cpu().double().numpy()}
    if is_cupy_array(tensors):  # spaCy's outputs under --spacy-gpu: compared on the host
        tensors = to_numpy(tensors)
    if isinstance(tensors, numpy.ndarray):
        return {prefix: tensors.astype(numpy.float64)}
    items = tensors.items() if isinstance(tensors, dict) else enumerate(tensors)
    out = {}
    for key, value in items:
        out.update(named(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def float32_errors(exact: Any, reference: Any, got: Any, *, terms: int) -> dict[str, tuple[float, float]]:
    """{name: (got's error, allowed error)} for each tensor (the bound above, in absolute units)."""
    exact, reference, got = named(exact), named(reference), named(got)
    assert sorted(got) == sorted(exact) == sorted(reference), (sorted(got), sorted(exact))
    out = {}
    for name, want in exact.items():
        assert got[name].shape == want.shape == reference[name].shape, name
        if not want.size:
            continue
        scale = float(numpy.abs(want).max())
        floor = floor_ulps(terms) * EPS * scale
        out[name] = (
            float(numpy.abs(got[name] - want).max()),
            RATIO * max(float(numpy.abs(reference[name] - want).max()), floor),
        )
    return out


def assert_float32_error(exact: Any, reference: Any, got: Any, *, terms: int, what: str = "") -> None:
    """`got` (float32) is within RATIO times the float32 `reference`'s error of `exact` (the same
    computation in float64), tensor by tensor; `terms` is the longest reduction (see `floor_ulps`).
    The three are tensors, arrays, dicts or sequences of them, with the same names and shapes."""
    worse = {
        name: f"error {err:.3g} > allowed {bound:.3g} ({err / bound * RATIO:.1f}× the reference's error or floor)"
        for name, (err, bound) in float32_errors(exact, reference, got, terms=terms).items()
        if not err <= bound
    }
    assert not worse, f"{what}: float32 error beyond {RATIO:g}× the reference's: {worse}"
