"""The training step's fast paths compute their definitions, to the accuracy of float32 (each
measured against the definition in float64 in the same test): torch's fused optimizers make the
op-by-op optimizers' updates, the char CNN's convolutions as matrix products give the
convolutions' features and gradients; and a pretraining run (`build_run`) and the model choose them."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from helpers import TINY, write_grammar_corpus  # tests/ is on sys.path (rootdir conftest)
from spacy_elmo import ElmoConfig, ElmoModel
from spacy_elmo.characters import batch_to_char_ids
from spacy_elmo.training.run import build_run, fused_optimizer
from spacy_elmo.training.settings import learning_rate_at, read_settings
from spacy_elmo.training.steps import evaluate, train_step, train_steps

SHAPES = [(300, 24), (300,), (2, 24, 64), (16, 8, 3)]
SETTINGS = {
    "adam": (torch.optim.Adam, dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    "adagrad": (torch.optim.Adagrad, dict(initial_accumulator_value=1.0, weight_decay=0.01)),
}


def _train(kind: str, dtype, fused: bool, steps: int = 8) -> list[torch.Tensor]:
    """`steps` updates of the same parameters with the same gradients and a changing learning rate
    (as the schedule sets it), as a pretraining run runs them."""
    cls, settings = SETTINGS[kind]
    g = torch.Generator().manual_seed(3)
    params = [torch.nn.Parameter(torch.randn(shape, generator=g).to(dtype)) for shape in SHAPES]
    grads = [
        [(torch.randn(shape, generator=g) * 10.0 ** (k % 3 - 1)).to(dtype) for shape in SHAPES] for k in range(steps)
    ]
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


def test_a_pretraining_run_uses_the_fused_optimizer_and_softmax(tmp_path):
    train = write_grammar_corpus(tmp_path / "train.txt", 200, seed=5)
    settings = read_settings(
        TINY, {"paths.train": str(train), "training.softmax": "sampled", "training.n_negative_samples": 8}
    )
    run = build_run(settings, Path(tmp_path / "out"))
    assert run.optimizer.defaults["fused"] is True
    assert run.softmax_fn.resolve(torch.device("cpu")) == "fused"


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_a_pretraining_runs_optimizer_steps_on_every_device(tmp_path, optimizer, device):
    """Each optimizer steps wherever a pretraining run runs: fused where torch has the kernel for that
    device, the loop elsewhere. (torch makes a fused Adagrad on CUDA, then refuses its first step:
    `spacy-elmo pretrain` on a GPU with the bilm-tf recipe stopped there.)"""
    train = write_grammar_corpus(tmp_path / "train.txt", 200, seed=5)
    settings = read_settings(
        TINY, {"paths.train": str(train), "system.device": device, "training.optimizer": optimizer}
    )
    run = build_run(settings, Path(tmp_path / "out"))
    assert bool(run.optimizer.defaults.get("fused")) is fused_optimizer(optimizer, torch.device(device))
    assert device != "cpu" or run.optimizer.defaults["fused"]  # both are fused on the CPU
    before = [p.detach().clone() for p in run.params]
    batches = run.corpus.batches()
    for _ in range(2):
        loss, _, _ = train_step(run, next(batches)[0])
        assert math.isfinite(loss)
    assert all(p.device.type == device for p in run.params)
    assert max(float((p.detach() - b).abs().max()) for p, b in zip(run.params, before)) > 0.0


def test_train_steps_yields_each_step_and_advances_the_run(tmp_path):
    """The public step API (what `pretrain` consumes): one StepInfo per
    optimizer step, numbered on from the run's state, with the schedule's rate and the batch's words."""
    train = write_grammar_corpus(tmp_path / "train.txt", 200, seed=5)
    settings = read_settings(TINY, {"paths.train": str(train), "training.warmup_steps": 4})
    run = build_run(settings, Path(tmp_path / "out"))
    steps = train_steps(run)
    infos = [next(steps) for _ in range(3)]
    assert [info.step for info in infos] == [1, 2, 3] and run.state.step == 3
    assert [info.lr for info in infos] == [learning_rate_at(settings.training, s) for s in (1, 2, 3)]
    assert run.state.words == sum(info.words for info in infos) > 0
    assert all(math.isfinite(info.loss) and 0 <= info.data_seconds <= info.seconds for info in infos)
    assert run.state.position == infos[-1].position


def test_evaluation_after_fused_optimizer_steps_sees_the_new_weights(tmp_path):
    """A fused optimizer writes the parameters without bumping their version counters; the
    inference kernel's prepacked weights and the token cache key on them. Held-out evaluation
    between training steps must score the current weights: the same perplexity as the definition
    (eager, no cache) computes from them. (The first project run with fused Adam reported a
    held-out perplexity from stale prepacked weights.)"""
    corpus = write_grammar_corpus(tmp_path / "train.txt", 400, seed=1)
    heldout = write_grammar_corpus(tmp_path / "heldout.txt", 40, seed=2)
    settings = read_settings(
        TINY, {"paths.train": str(corpus), "paths.heldout": str(heldout), "training.learning_rate": 0.05}
    )
    run = build_run(settings, Path(tmp_path / "out"))
    assert run.optimizer.defaults["fused"] is True
    batches = run.corpus.batches()
    evaluate(run)  # fills the packed kernel's prepacked weights and the token cache
    for _ in range(5):
        train_step(run, next(batches)[0])
    served = evaluate(run)["heldout_ppl"]
    elmo = run.model.elmo
    elmo.config.lstm_implementation, elmo.token_cache_size = "eager", 0
    definition = evaluate(run)["heldout_ppl"]
    assert abs(served - definition) <= 1e-4 * definition, (served, definition)


def _char_cnn(dtype, definition: bool, monkeypatch, autocast: bool = False):
    """Features and every gradient of the char CNN (embedding, convolutions) for a weighted sum of
    its features, through the model's definition (conv1d) or the products over windows (under bf16
    autocast with `autocast`)."""
    config = ElmoConfig(
        filters=[[1, 4], [2, 6], [3, 8], [5, 8]], char_embedding_dim=4, n_highway=1, lstm_dim=16, projection_dim=8
    )
    torch.manual_seed(0)
    encoder = ElmoModel(config).token_encoder.to(dtype)
    if definition:
        monkeypatch.setattr(encoder, "_convolutions_as_products", lambda chars: False)
    words = ["a", "aa", "abc", "letter", "Bookkeeper", "x" * 11, "é", "Mississippi", "tat", "0.5"]
    ids = torch.from_numpy(batch_to_char_ids([words], config.max_characters_per_token)[0][0])[:, :16]  # cut columns
    assert encoder._convolutions_as_products(encoder.char_embedding(ids)) is not definition
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        features = encoder.char_features(ids)
    weights = torch.randn(features.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    (features.double() * weights).sum().backward()
    return [features.detach()] + [p.grad for p in encoder.parameters() if p.grad is not None]


def test_char_cnn_as_products_gives_the_convolutions_features_and_gradients(monkeypatch):
    exact = _char_cnn(torch.float64, True, monkeypatch)
    with monkeypatch.context() as patch:
        definition = _char_cnn(torch.float32, True, patch)
    products = _char_cnn(torch.float32, False, monkeypatch)
    assert len(exact) == len(products) == 1 + 1 + 2 * 4  # features, embedding, 4 × (weight, bias)
    unit = torch.finfo(torch.float32).eps
    for want, ref, got in zip(exact, definition, products):
        scale = float(want.abs().max())
        ref_error = float((ref.double() - want).abs().max())
        got_error = float((got.double() - want).abs().max())
        assert got_error <= 2 * ref_error + 4 * unit * scale, (got_error, ref_error, scale)


def test_char_cnn_as_products_under_bf16_autocast_is_as_accurate_as_the_convolutions(monkeypatch):
    """Under bf16 autocast (`training.precision = "bf16"`) the products over windows take autocast's
    bf16, as conv1d does: each output and gradient within twice the convolutions' own bf16 error."""
    exact = _char_cnn(torch.float64, True, monkeypatch)
    with monkeypatch.context() as patch:
        definition = _char_cnn(torch.float32, True, patch, autocast=True)
    products = _char_cnn(torch.float32, False, monkeypatch, autocast=True)
    for want, ref, got in zip(exact, definition, products):
        scale = float(want.abs().max())
        ref_error = float((ref.double() - want).abs().max())
        got_error = float((got.double() - want).abs().max())
        assert ref_error > 1e-4 * scale  # bf16 did happen (fp32's error is ~1e-7 of the scale)
        assert got_error <= 2 * ref_error, (got_error, ref_error, scale)


def test_char_cnn_products_only_where_gradients_flow():
    encoder = ElmoModel(
        ElmoConfig(filters=[[1, 4], [2, 4]], char_embedding_dim=4, lstm_dim=16, projection_dim=8)
    ).token_encoder
    chars = encoder.char_embedding(torch.ones(3, 8, dtype=torch.long))
    assert encoder._convolutions_as_products(chars)
    with torch.no_grad():  # inference keeps the convolutions (the token cache's bitwise property rests on them)
        assert not encoder._convolutions_as_products(encoder.char_embedding(torch.ones(3, 8, dtype=torch.long)))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # training in bf16: the products follow autocast
        assert encoder._convolutions_as_products(chars)
