"""The training step's fast paths compute their definitions: torch's fused optimizers make the
op-by-op optimizers' updates, to the accuracy of float32 (both measured against float64 in the
same test), and the Pretrainer chooses them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from spacy_elmo.training.pretrain import Pretrainer
from spacy_elmo.training.settings import load_settings

from test_pretrain import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)

SHAPES = [(300, 24), (300,), (2, 24, 64), (16, 8, 3)]
SETTINGS = {
    "adam": (torch.optim.Adam, dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    "adagrad": (torch.optim.Adagrad, dict(initial_accumulator_value=1.0, weight_decay=0.01)),
}


def _train(kind: str, dtype, fused: bool, steps: int = 8) -> list[torch.Tensor]:
    """`steps` updates of the same parameters with the same gradients and a changing learning rate
    (as the schedule sets it), as the Pretrainer runs them."""
    cls, settings = SETTINGS[kind]
    g = torch.Generator().manual_seed(3)
    params = [torch.nn.Parameter(torch.randn(shape, generator=g).to(dtype)) for shape in SHAPES]
    grads = [[(torch.randn(shape, generator=g) * 10.0 ** (k % 3 - 1)).to(dtype) for shape in SHAPES] for k in range(steps)]
    optimizer = cls(params, lr=0.01, **settings, **({"fused": True} if fused else {"foreach": False}))
    for step, step_grads in enumerate(grads):
        for p, grad in zip(params, step_grads):
            p.grad = grad.clone()
        for group in optimizer.param_groups:
            group["lr"] = 0.01 * (1.0 - step / steps)
        optimizer.step()
    return [p.detach() for p in params]


@pytest.mark.parametrize("kind", sorted(SETTINGS))
def test_fused_optimizers_make_the_loops_updates(kind):
    """After 8 steps, every parameter: float32 fused vs float64 loop within twice float32 loop's own
    error plus a few units of float32 rounding at the parameter's scale."""
    exact = _train(kind, torch.float64, fused=False)
    loop = _train(kind, torch.float32, fused=False)
    fused = _train(kind, torch.float32, fused=True)
    unit = torch.finfo(torch.float32).eps
    for want, ref, got in zip(exact, loop, fused):
        scale = float(want.abs().max())
        loop_error = float((ref.double() - want).abs().max())
        fused_error = float((got.double() - want).abs().max())
        assert fused_error <= 2 * loop_error + 4 * unit * scale, (fused_error, loop_error, scale)


def test_the_pretrainer_runs_the_fused_optimizer_and_softmax(tmp_path):
    train = write_grammar_corpus(tmp_path / "train.txt", 200, seed=5)
    cfg = load_settings(TINY, {"paths.train": str(train), "training.softmax": "sampled", "training.n_negative_samples": 8})
    trainer = Pretrainer(cfg, Path(tmp_path / "out"), progress=False)
    assert trainer.optimizer.defaults["fused"] is True
    assert trainer.softmax_fn.resolve(torch.device("cpu")) == "fused"
