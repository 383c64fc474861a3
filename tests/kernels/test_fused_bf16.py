"""The training kernel's bf16 products (`kernels.fused_lstm`; what `training.precision = "bf16"` runs on a
CPU with native bf16), over the kernel tests' configuration space:

* its forward pass within the running-error bound of bf16 products, the analysis and the bound
  (`kernels.bf16.product_bound`) of the bf16 inference kernels (tests/kernels/test_precision_paths.py);
* its gradients as accurate as torch's own bf16: each within twice the error that the definition
  (the eager layer) has under bf16 autocast, both against the definition in float64;
* chosen only where bf16 autocast is on and the CPU multiplies bf16 natively, else exact fp32.

The kernel is called with `product_dtype=torch.bfloat16` directly, so the bounds are checked on every
CPU (oneDNN emulates bf16 where the CPU has no bf16 instructions; its rounding is the same).
"""

from __future__ import annotations

from functools import partial

import numpy
import pytest
import torch
from test_kernel_equivalence import LENGTHS, SPACE, _config  # tests/kernels is on sys.path
from test_precision_paths import FP32_SLACK, _lstm_direction, _model

from spacy_elmo.kernels import capabilities, lstm_layer_fused

BF16 = torch.bfloat16
# gradients: the fused kernel's error against the definition's own under bf16 autocast. Both round
# every product's operands and result to bf16 (u = 2^-8); eager also rounds the gates and their
# derivatives, fused keeps them fp32, so fused is expected at or below eager; 2× leaves room for
# the two rounding patterns' chance alignment in a norm over a few hundred terms
GRADIENT_FACTOR = 2.0


def _layer_inputs(layer, seed: int = 3):
    """x [2, B, T, in] (standard normal), zero initial state, the ragged lengths of the kernel tests."""
    gen = torch.Generator().manual_seed(seed)
    batch, steps = len(LENGTHS), max(LENGTHS)
    x = torch.randn(2, batch, steps, layer.input_weight.shape[1], generator=gen)
    h0 = torch.zeros(2, batch, layer.hidden_weight.shape[1])
    c0 = torch.zeros(2, batch, layer.hidden_weight.shape[2] // 4)
    return x, h0, c0, torch.tensor(LENGTHS)


def _fused(layer, x, h0, c0, lengths, product_dtype):
    return lstm_layer_fused(
        x, h0, c0, layer.input_weight, layer.hidden_weight, layer.bias, layer.proj_weight,
        lengths, layer.forget_bias, layer.cell_clip, layer.proj_clip, product_dtype=product_dtype,
    )  # fmt: skip


def _eager(layer, x, h0, c0, lengths, autocast: bool):
    """The definition (the eager layer), under bf16 autocast with `autocast`."""
    with torch.autocast("cpu", dtype=BF16, enabled=autocast):
        return layer(x, (h0, c0), lengths)


@pytest.mark.parametrize("skip,cell_proj,cnn_proj,clip,efml", SPACE)
def test_the_fused_kernels_bf16_forward_is_within_the_stated_bound(skip, cell_proj, cnn_proj, clip, efml):
    config = _config(skip, cell_proj, cnn_proj, clip, efml)
    for layer in _model(config).encoder.layers:
        x, h0, c0, lengths = _layer_inputs(layer)
        with torch.no_grad():
            out, _ = _fused(layer, x, h0, c0, lengths, BF16)
        for d in range(2):
            for row, n in enumerate(LENGTHS):
                if n == 0:
                    continue
                xs = x[d, row, :n].double().numpy()
                want, bound = _lstm_direction(layer, d, "bf16", xs, numpy.zeros_like(xs))
                got = out[d, row, :n].double().numpy()
                scale = numpy.abs(want).max()
                worst = (numpy.abs(got - want) / (bound + FP32_SLACK * scale)).max()
                assert worst <= 1, f"direction {d}, row {row}: {worst:.2f}× the bound"
                assert bound.max() < 0.2 * scale, "a vacuous bound"


def _gradients(layer, inputs, run) -> dict[str, torch.Tensor]:
    """The gradients of a fixed linear function of the outputs and final state w.r.t. x and the weights."""
    x, h0, c0, lengths = inputs
    layer.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    out, (h, c) = run(x, h0, c0, lengths)
    gen = torch.Generator().manual_seed(5)
    loss = (out.float() * torch.randn(out.shape, generator=gen)).sum() + h.float().sum() + 0.5 * c.float().sum()
    loss.backward()
    grads = {"x": x.grad}
    grads.update({name: p.grad for name, p in layer.named_parameters() if p.grad is not None})
    return {name: g.detach().double() for name, g in grads.items()}


def _relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).norm() / want.norm().clamp_min(1e-300))


@pytest.mark.parametrize("skip,cell_proj,cnn_proj,clip,efml", SPACE)
def test_the_fused_kernels_bf16_gradients_are_as_accurate_as_autocasts(skip, cell_proj, cnn_proj, clip, efml):
    config = _config(skip, cell_proj, cnn_proj, clip, efml)
    model = _model(config).train()
    for index in range(len(model.encoder.layers)):
        layer = model.encoder.layers[index]
        inputs = _layer_inputs(layer, seed=3 + index)
        exact_layer = _model(config).double().train().encoder.layers[index]
        exact_inputs = tuple(t.double() if t.is_floating_point() else t for t in inputs)
        want = _gradients(exact_layer, exact_inputs, partial(_eager, exact_layer, autocast=False))  # float64
        eager = _gradients(layer, inputs, partial(_eager, layer, autocast=True))
        fused = _gradients(layer, inputs, partial(_fused, layer, product_dtype=BF16))
        fp32 = _gradients(layer, inputs, partial(_fused, layer, product_dtype=None))
        assert set(fused) == set(want) == set(eager), (sorted(fused), sorted(want))
        for name in want:
            error, reference = _relative_error(fused[name], want[name]), _relative_error(eager[name], want[name])
            assert error <= GRADIENT_FACTOR * reference + FP32_SLACK, (index, name, error, reference)
            # and bf16 did happen: fp32's own error is orders of magnitude smaller
            assert _relative_error(fp32[name], want[name]) < 0.05 * error, (index, name)


def test_bf16_products_only_under_bf16_autocast_on_a_cpu_with_native_bf16(monkeypatch):
    """lstm_layer_fused's default follows autocast: bf16 products where bf16 autocast is on and the
    CPU has them natively (`bf16_products`); without native bf16 (forced here) or outside autocast,
    the exact fp32 kernel, bit for bit."""
    config = _config(True, True, True, True)
    layer = _model(config).encoder.layers[0]
    inputs = _layer_inputs(layer)
    with torch.no_grad():
        fp32, _ = _fused(layer, *inputs, None)
        bf16, _ = _fused(layer, *inputs, BF16)
        assert torch.equal(_fused(layer, *inputs, "autocast")[0], fp32)
        with torch.autocast("cpu", dtype=BF16):
            chosen, _ = _fused(layer, *inputs, "autocast")
        assert torch.equal(chosen, bf16 if capabilities.native_bf16_available() else fp32)
        assert not torch.equal(bf16, fp32)
        monkeypatch.setattr(capabilities, "FORCE_FALLBACK", {"native_bf16"})
        with torch.autocast("cpu", dtype=BF16):
            assert torch.equal(_fused(layer, *inputs, "autocast")[0], fp32)
