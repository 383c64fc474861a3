"""The sampled softmax: the fused implementation computes the definition's loss and gradients from
the same draws, to the accuracy of float32 arithmetic (measured against float64 in the same test)."""

from __future__ import annotations

import pytest
import torch

from spacy_elmo.kernels import capabilities
from spacy_elmo.training.sampled_softmax import LogUniformSampler, SampledSoftmax

V, P, N, S = 400, 24, 300, 64


class Head(torch.nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.weight = torch.nn.Parameter((torch.randn(V, P, generator=g) * 0.3).to(dtype))
        self.bias = torch.nn.Parameter((torch.randn(V, generator=g) * 0.5).to(dtype))


def _inputs(dtype):
    g = torch.Generator().manual_seed(1)
    hidden = (torch.randn(N, P, generator=g) * 2.0).to(dtype)
    # Zipfian targets, as a vocabulary sorted by frequency gives: repeated ids and accidental hits
    targets = (torch.rand(N, generator=g, dtype=torch.float64) ** 4 * V).long()
    return hidden, targets


def _run(implementation: str, dtype, autocast: bool = False) -> tuple[torch.Tensor, ...]:
    head = Head(dtype)
    hidden, targets = _inputs(dtype)
    hidden.requires_grad_(True)
    softmax = SampledSoftmax(head, S, implementation=implementation)
    torch.manual_seed(7)  # the same draws for every run
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = softmax(hidden, targets)
    loss.backward()
    return loss.detach(), hidden.grad, head.weight.grad, head.bias.grad, torch.get_rng_state()


def test_fused_gives_the_definitions_loss_and_gradients():
    """Value, ∂hidden, ∂weight, ∂bias: float32 fused vs float64 definition within twice float32
    eager's own error (plus a few units of float32 rounding at the tensor's scale, for entries
    where eager happens to round exactly)."""
    exact = _run("eager", torch.float64)
    eager = _run("eager", torch.float32)
    fused = _run("fused", torch.float32)
    unit = torch.finfo(torch.float32).eps
    for name, want, ref, got in zip(("loss", "hidden", "weight", "bias"), exact, eager, fused):
        scale = float(want.abs().max())
        eager_error = float((ref.double() - want).abs().max())
        fused_error = float((got.double() - want).abs().max())
        assert fused_error <= 2 * eager_error + 4 * unit * scale, (name, fused_error, eager_error, scale)
    assert torch.equal(eager[-1], fused[-1])  # both consumed the generator alike (resume stays exact)


def test_fused_under_bf16_autocast_is_as_accurate_as_the_definition_under_it():
    """Under bf16 autocast on a CPU with native bf16 (`training.precision = "bf16"`), the fused loss
    takes bf16 products: loss and gradients within twice the error the definition has under the same
    autocast, both against float64."""
    exact = _run("eager", torch.float64)
    eager = _run("eager", torch.float32, autocast=True)
    fused = _run("fused", torch.float32, autocast=True)
    plain = _run("fused", torch.float32)
    for name, want, ref, got, fp32 in zip(("loss", "hidden", "weight", "bias"), exact, eager, fused, plain):
        scale = float(want.abs().max())
        eager_error = float((ref.double() - want).abs().max())
        fused_error = float((got.double() - want).abs().max())
        assert fused_error <= 2 * eager_error, (name, fused_error, eager_error, scale)
        if capabilities.native_bf16_available() and name != "bias":  # the bias gradient is a sum: no product
            assert fused_error > 10 * float((fp32.double() - want).abs().max()), name  # bf16 did happen


def test_the_draws_hit_targets_and_the_hits_are_masked():
    """The comparison above covers accidental hits (a row's target among the negatives): without
    masking them, the fused loss would differ from the definition's."""
    hidden, targets = _inputs(torch.float32)
    torch.manual_seed(7)
    sampled, _ = LogUniformSampler(V).sample(S)
    assert int(torch.isin(targets, sampled).sum()) > N // 4
    assert len(set(targets.tolist())) < N // 2  # repeated targets: index_add_ must accumulate


def test_fused_backward_runs_once():
    head = Head()
    hidden, targets = _inputs(torch.float32)
    loss = SampledSoftmax(head, S, implementation="fused")(hidden.requires_grad_(True), targets)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="once per forward"):
        loss.backward()


def test_auto_is_fused_except_under_autocast_off_the_cpu_and_names_are_checked():
    softmax = SampledSoftmax(Head(), S)
    cpu = torch.device("cpu")
    assert softmax.resolve(cpu) == "fused"
    with torch.autocast("cpu", dtype=torch.bfloat16):  # with bf16 products (the test above)
        assert softmax.resolve(cpu) == "fused"
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=torch.cuda.is_available()):
        assert softmax.resolve(torch.device("cuda")) == ("eager" if torch.cuda.is_available() else "fused")
    with pytest.raises(ValueError, match="implementation: expected one of auto, eager, fused, found 'fast'"):
        SampledSoftmax(Head(), S, implementation="fast")
