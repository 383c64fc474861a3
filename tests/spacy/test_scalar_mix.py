"""One scalar mix: the torch `ScalarMix` (HF face) and the thinc layer `spacy-elmo.ScalarMix.v1`
(spaCy face) compute the same mix γ·Σ softmax(s)_j·h_j and the same penalty λ‖s‖² on the
unnormalized weights s (bilm-tf's l2_coef·ΣW²), with the same gradients."""

from __future__ import annotations

import copy

import numpy
import pytest
import torch
from thinc.api import fix_random_seed
from thinc.util import to_numpy

from float32_error import assert_float32_error  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ScalarMix
from spacy_elmo.spacy.layers.scalar_mix import build_scalar_mix, layer_weights

S = [0.3, -0.7, 1.1]
GAMMA = 1.4
L2 = 0.25


def faces(l2: float = L2, dropout: float = 0.0):
    mix = ScalarMix(3, initial_weights=S)
    with torch.no_grad():
        mix.gamma.fill_(GAMMA)
    layer = build_scalar_mix(3, l2=l2, dropout=dropout)
    layer.set_dim("nO", 5)
    layer.initialize()
    layer.set_param("s", layer.ops.asarray1f(S))  # on thinc's current device (cupy under --spacy-gpu)
    layer.set_param("gamma", layer.ops.asarray1f([GAMMA]))
    return mix, layer


def on_device(layer, arrays):
    """Host arrays moved to the layer's device (a no-op on the CPU)."""
    return [layer.ops.asarray(a) for a in arrays]


def test_both_faces_mix_alike_and_penalize_alike():
    rng = numpy.random.default_rng(0)
    docs = [rng.normal(size=(3, n, 5)).astype("f") for n in (4, 1, 6)]
    d_out = [rng.normal(size=(n, 5)).astype("f") for n in (4, 1, 6)]
    mix, layer = faces()

    outputs, backprop = layer.begin_update(on_device(layer, docs))
    d_docs = backprop(on_device(layer, d_out))
    thinc = {
        "outputs": outputs,
        "d_docs": d_docs,
        "weights": layer_weights(layer),
        "s": layer.get_grad("s"),
        "gamma": layer.get_grad("gamma").reshape(-1),
    }

    def torch_face(dtype):
        face = copy.deepcopy(mix).to(dtype)
        layers = [torch.tensor(d, dtype=dtype, requires_grad=True) for d in docs]
        out = [face(list(x)) for x in layers]
        loss = sum((y * torch.from_numpy(d).to(dtype)).sum() for y, d in zip(out, d_out)) + face.regularization(L2)
        loss.backward()
        return {
            "outputs": [y.detach() for y in out],
            "d_docs": [x.grad for x in layers],
            "weights": face.weights.detach(),
            "s": face.scalar_parameters.grad,
            "gamma": face.gamma.grad.reshape(-1),
        }

    # two float32 implementations: thinc's as close to the float64 mix as torch's, up to float32_error's
    # factor; the longest sum is a weight's gradient over every value (11 tokens × 5)
    assert_float32_error(torch_face(torch.float64), torch_face(torch.float32), thinc, terms=11 * 5)


def test_training_dropout_masks_the_gradient_as_it_masks_the_output():
    """With dropout (the shipped configs' 0.1), the output is mix · mask and every gradient is that of
    Σ dY · mix · mask + λ‖s‖²: checked against the definition written out in float64 autograd on the
    mask the forward drew (thinc's `get_dropout_mask`, replayed from the same seed)."""
    rate = 0.1
    rng = numpy.random.default_rng(2)
    docs = [rng.normal(size=(3, n, 5)).astype("f") for n in (4, 1, 6)]
    d_out = [rng.normal(size=(n, 5)).astype("f") for n in (4, 1, 6)]
    _, layer = faces(dropout=rate)

    fix_random_seed(7)
    outputs, backprop = layer.begin_update(on_device(layer, docs))
    d_docs = backprop(on_device(layer, d_out))
    fix_random_seed(7)  # the same draw: the forward's only random numbers are its mask over [11 tokens, 5]
    mask = to_numpy(layer.ops.get_dropout_mask((11, 5), rate))
    # the draw both drops and keeps (else a backward that skips the mask would differ only in scale)
    assert 0 < int((mask == 0).sum()) < mask.size
    thinc = {
        "outputs": outputs,
        "d_docs": d_docs,
        "s": layer.get_grad("s"),
        "gamma": layer.get_grad("gamma").reshape(-1),
    }

    def definition(dtype):
        # the layer's float32 parameters (exact in float64 too)
        s = torch.tensor(S, dtype=torch.float32).to(dtype).requires_grad_()
        gamma = torch.tensor([GAMMA], dtype=torch.float32).to(dtype).requires_grad_()
        layers = [torch.tensor(d, dtype=dtype, requires_grad=True) for d in docs]
        X = torch.cat(layers, dim=1)
        mixed = gamma * torch.einsum("j,jnd->nd", torch.softmax(s, dim=0), X) * torch.from_numpy(mask).to(dtype)
        loss = (mixed * torch.from_numpy(numpy.concatenate(d_out)).to(dtype)).sum() + L2 * (s * s).sum()
        loss.backward()
        return {
            "outputs": list(mixed.detach().split([4, 1, 6])),
            "d_docs": [x.grad for x in layers],
            "s": s.grad,
            "gamma": gamma.grad.reshape(-1),
        }

    # the longest sum is a weight's gradient over every value (11 tokens × 5)
    assert_float32_error(definition(torch.float64), definition(torch.float32), thinc, terms=11 * 5)


def test_the_penalty_is_l2_of_the_unnormalized_weights():
    """λ‖s‖² (not centered, not on softmax(s)): with no data gradient, both faces give 2λs."""
    mix, layer = faces()
    assert float(mix.regularization(L2).detach()) == pytest.approx(L2 * sum(v * v for v in S), rel=1e-6)
    docs = on_device(layer, [numpy.ones((3, 2, 5), dtype="f")])
    _, backprop = layer.begin_update(docs)
    backprop(on_device(layer, [numpy.zeros((2, 5), dtype="f")]))
    numpy.testing.assert_allclose(to_numpy(layer.get_grad("s")), 2 * L2 * numpy.asarray(S, dtype="f"), rtol=1e-6)
    mix.regularization(L2).backward()
    numpy.testing.assert_allclose(mix.scalar_parameters.grad.numpy(), 2 * L2 * numpy.asarray(S, dtype="f"), rtol=1e-6)


def test_prediction_needs_no_gradient_and_keeps_cached_arrays_intact():
    _, layer = faces()
    cached = numpy.random.default_rng(1).normal(size=(3, 4, 5)).astype("f")
    cached.flags.writeable = False  # as the layer cache stores them (a GPU's predict gets device copies of them)
    (y,) = layer.predict(on_device(layer, [cached]))
    s, gamma = torch.tensor(S), numpy.float32(GAMMA)  # the layer's float32 values, exact in float64 too
    weights = [torch.softmax(s.to(dtype), 0).numpy() for dtype in (torch.float32, torch.float64)]
    expected = [w.dtype.type(gamma) * numpy.tensordot(w, cached.astype(w.dtype), axes=1) for w in weights]
    assert_float32_error(expected[1], expected[0], y, terms=3)
