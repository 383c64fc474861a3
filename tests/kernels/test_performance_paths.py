"""The fast inference kernels (spacy_elmo/kernels/) compute what the readable forward pass computes.

Packed/length-sorted LSTM, prepacked oneDNN products, column-cut char CNN, token-embedding cache:
identical outputs up to float rounding, i.e. within a small multiple of the readable pass's own
float32 error (both against it in float64, `float32_error`).  int8 and bf16: bounded error.  Runs on CUDA too when
one is available (devices are parametrized, nothing is skipped on a machine that has one).
"""

from __future__ import annotations

import random

import pytest
import torch

from float32_error import assert_float32_error, exact_copy, forward_terms  # tests/ is on sys.path
from spacy_elmo import ElmoConfig, ElmoModel, load_legacy
from spacy_elmo.characters import batch_to_char_ids
from spacy_elmo.hf.quantization import dequantize, quantize_int8
from spacy_elmo.kernels import packed_lstm

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module")
def fixture_model(allennlp_dir):
    return load_legacy(allennlp_dir / "options.json", allennlp_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def random_model():
    """Small random biLM with a cell projection and rows wide enough for the prepacked path."""
    torch.manual_seed(0)
    config = ElmoConfig(
        lstm_dim=96,
        projection_dim=24,
        n_highway=1,
        filters=[[1, 8], [2, 8], [3, 16], [7, 16]],
        char_embedding_dim=4,
        cell_clip=3.0,
        proj_clip=3.0,
    )
    model = ElmoModel(config).eval()
    with torch.no_grad():  # larger weights than the init, so gates and clipping are exercised
        for layer in model.encoder.layers:
            for p in (layer.input_weight, layer.hidden_weight, layer.proj_weight):
                p.uniform_(-0.3, 0.3)
            layer.bias.uniform_(-1, 1)
    return model


def _sentences(count: int, seed: int, vocabulary: int = 60) -> list[list[str]]:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijkl") for _ in range(rng.randint(1, 11))) for _ in range(vocabulary)]
    words += ["x" * 60, "é" * 30, "<S>", "</S>", "a"]  # truncated, multi-byte, boundary look-alikes
    return [[rng.choice(words) for _ in range(rng.randint(1, 17))] for _ in range(count)]


def _batch(sentences, device="cpu"):
    ids, mask = batch_to_char_ids(sentences)
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def _reference(model, ids, mask, **kwargs):
    """The readable forward pass: the eager LSTM, no token cache."""
    model.disable_token_cache()
    model.config.lstm_implementation = "eager"
    try:
        with torch.no_grad():
            return model(ids, mask, **kwargs)
    finally:
        model.config.lstm_implementation = "auto"


def _fast(model, ids, mask, **kwargs):
    with torch.inference_mode():
        return model(ids, mask, **kwargs)


def _max_diff(a, b) -> float:
    return max(float((x.detach().float() - y.detach().float()).abs().max()) for x, y in zip(a, b))


def _outputs(out) -> dict:
    """The layers and, where returned, the final state of a model output, by name."""
    named = {"layers": out.hidden_states}
    if out.state is not None:
        named["state"] = list(out.state)
    return named


def _rounding_only(model, exact, reference, got, what: str = "") -> None:
    """`got` (a fast path, float32) is as close to `exact` (the readable pass in float64) as the
    float32 `reference` is, up to float32_error's factor."""
    assert_float32_error(exact, reference, got, terms=forward_terms(model.config), what=what)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["fixture_model", "random_model"])
def test_packed_lstm_matches_reference(request, which, device):
    model = request.getfixturevalue(which).to(device)
    exact_model = exact_copy(model)
    ids, mask = _batch(_sentences(13, seed=1), device)
    exact = _reference(exact_model, ids, mask, return_state=True)
    ref = _reference(model, ids, mask, return_state=True)
    got = _fast(model, ids, mask, return_state=True)
    _rounding_only(model, _outputs(exact), _outputs(ref), _outputs(got))
    # chained batches (explicit state), as the reference outputs are produced: each its own chain
    ids2, mask2 = _batch(_sentences(13, seed=2), device)
    exact2 = _reference(exact_model, ids2, mask2, initial_state=exact.state, return_state=True)
    ref2 = _reference(model, ids2, mask2, initial_state=ref.state, return_state=True)
    got2 = _fast(model, ids2, mask2, initial_state=got.state, return_state=True)
    _rounding_only(model, _outputs(exact2), _outputs(ref2), _outputs(got2), "chained")
    model.to("cpu")


def test_prepacked_and_plain_products_agree(random_model, monkeypatch):
    ids, mask = _batch(_sentences(20, seed=3))
    exact = _outputs(_reference(exact_copy(random_model), ids, mask, return_state=True))
    ref = _outputs(_reference(random_model, ids, mask, return_state=True))
    monkeypatch.setattr(packed_lstm, "PREPACKED_MIN_ROWS", 1)
    packed = _fast(random_model, ids, mask, return_state=True)
    monkeypatch.setattr(packed_lstm, "USE_PREPACKED", False)
    plain = _fast(random_model, ids, mask, return_state=True)
    _rounding_only(random_model, exact, ref, _outputs(packed), "prepacked")
    _rounding_only(random_model, exact, ref, _outputs(plain), "plain")


def test_prepacked_weights_follow_weight_changes(random_model, monkeypatch):
    monkeypatch.setattr(packed_lstm, "PREPACKED_MIN_ROWS", 1)
    model = ElmoModel(random_model.config).eval()
    model.load_state_dict(random_model.state_dict())
    ids, mask = _batch(_sentences(9, seed=4))
    _fast(model, ids, mask)
    with torch.no_grad():
        model.encoder.layers[0].hidden_weight.mul_(0.5)
        model.encoder.layers[1].input_weight.mul_(0.5)
    exact, ref = _reference(exact_copy(model), ids, mask), _reference(model, ids, mask)
    _rounding_only(model, exact.hidden_states, ref.hidden_states, _fast(model, ids, mask).hidden_states)


@pytest.mark.parametrize("which", ["fixture_model", "random_model"])
def test_rows_do_not_depend_on_the_batch(request, which):
    """Length bucketing (sorted, shrinking active batch) leaves every sentence's output as alone."""
    model = request.getfixturevalue(which)
    sentences = _sentences(9, seed=5)
    ids, mask = _batch(sentences)
    together = _fast(model, ids, mask).last_hidden_state
    exact_model = exact_copy(model)
    for row, sentence in enumerate(sentences):
        alone = _fast(model, *_batch([sentence])).last_hidden_state[0]
        exact = _fast(exact_model, *_batch([sentence])).last_hidden_state[0]
        _rounding_only(model, exact, alone, together[row, : len(sentence)], f"row {row}")
        assert not together[row, len(sentence) :].any()


def test_column_cut_char_cnn_is_exact(fixture_model, random_model):
    for model in (fixture_model, random_model):
        encoder, exact_encoder = model.token_encoder, exact_copy(model).token_encoder
        ids, _ = _batch(_sentences(6, seed=6))
        ids = ids.reshape(-1, ids.shape[-1])
        ids[0] = torch.randint(1, 262, (ids.shape[-1],))  # no constant tail at all
        ids[1] = 0  # all-zero row (a padding token)
        with torch.no_grad():
            full = encoder.token_vectors(encoder.char_features(ids))  # all 50 columns, every row
            exact = exact_encoder.token_vectors(exact_encoder.char_features(ids))
            _rounding_only(model, exact, full, encoder(ids), "column cut")
            _rounding_only(model, exact, full, encoder(ids, unique=False), "column cut, every row")


def test_inference_runs_the_char_cnn_as_one_product_except_for_long_words(random_model, monkeypatch):
    """On a CPU, inference multiplies every word's windows at once (`kernels.pooled_widest_windows`),
    except words that leave the widest filter no room (chunked apart: the convolutions); training
    keeps its own products."""
    from spacy_elmo import kernels

    calls = []
    real = kernels.pooled_widest_windows

    def counted(chars, *args, **kwargs):
        calls.append(chars.shape[0])
        return real(chars, *args, **kwargs)

    monkeypatch.setattr(kernels, "pooled_widest_windows", counted)
    model = ElmoModel(random_model.config).eval()
    model.load_state_dict(random_model.state_dict())
    model.disable_token_cache()
    ids, mask = _batch([["a", "cat", "sat"], ["x" * 60]])
    _fast(model, ids, mask)
    assert calls == [16]  # <S>, </S>, a, cat, sat: padded to MIN_ROWS; "x" * 60 went through the convolutions
    calls.clear()
    model.train()
    model(ids, mask).last_hidden_state.sum().backward()
    assert calls == []


@pytest.mark.parametrize("device", DEVICES)
def test_token_cache_is_exact_bounded_and_invalidated(random_model, device):
    model = ElmoModel(random_model.config).eval().to(device)
    model.load_state_dict(random_model.state_dict())
    batches = [_batch(_sentences(7, seed=s, vocabulary=25), device) for s in range(4)]
    exact_model = exact_copy(model)
    exact = [_reference(exact_model, *b).hidden_states for b in batches]
    expected = [_reference(model, *b).hidden_states for b in batches]
    model.enable_token_cache(max_words=12)
    for batch, want, ref in zip(batches, exact, expected):
        got = _fast(model, *batch).hidden_states
        _rounding_only(model, want, ref, got)
        assert len(model.token_cache) <= 12
    assert model.token_cache.hits > 0
    # a weight change clears the cache: outputs follow the new weights
    with torch.no_grad():
        model.token_encoder.char_embedding.weight.mul_(1.5)
    exact, ref = _reference(exact_copy(model), *batches[0]).hidden_states, _reference(model, *batches[0]).hidden_states
    model.enable_token_cache(max_words=12)
    _fast(model, *batches[0])
    _rounding_only(model, exact, ref, _fast(model, *batches[0]).hidden_states, "after a weight change")


def test_token_cache_not_used_for_training(random_model):
    model = ElmoModel(random_model.config)
    model.load_state_dict(random_model.state_dict())
    model.enable_token_cache(100)
    ids, mask = _batch(_sentences(3, seed=7))
    model.train()
    with torch.no_grad():
        model(ids, mask)
    model.eval()
    out = model(ids, mask)  # gradients flow: no cache either
    assert len(model.token_cache) == 0
    out.last_hidden_state.sum().backward()
    assert model.token_encoder.char_embedding.weight.grad is not None


def test_int8_error_is_bounded_and_reversible(fixture_model, tmp_path):
    """int8 on the trained fixture biLM: within 5% of the largest activation, and undone exactly (the
    fp32 weights it released in eval mode read back from the folder it was loaded from)."""
    fixture_model.save_pretrained(tmp_path)
    model = ElmoModel.from_pretrained(tmp_path)
    keys = list(model.state_dict())
    ids, mask = _batch(_sentences(8, seed=8))
    exact = _fast(model, ids, mask).hidden_states
    quantize_int8(model)
    assert list(model.state_dict()) == keys
    approx = _fast(model, ids, mask).hidden_states
    scale = max(float(h.abs().max()) for h in exact)
    error = _max_diff(exact, approx)
    assert 0 < error < 0.05 * scale
    dequantize(model)  # the float weights come back bit for bit, and so do the outputs
    assert all(map(torch.equal, exact, _fast(model, ids, mask).hidden_states))


@pytest.mark.parametrize("device", DEVICES)
def test_autocast_error_is_bounded(fixture_model, device):
    dtype = torch.bfloat16
    model = fixture_model.to(device)
    ids, mask = _batch(_sentences(8, seed=9), device)
    exact = _fast(model, ids, mask).hidden_states
    with torch.inference_mode(), torch.autocast(device, dtype=dtype):
        approx = model(ids, mask).hidden_states
    scale = max(float(h.abs().max()) for h in exact)
    assert _max_diff(exact, approx) < 0.05 * scale
    model.to("cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_fp32_matches_cpu(fixture_model, device):
    """fp32 on every available device as close to the float64 definition as the CPU's fp32 is, up to
    float32_error's factor (trivially so for the CPU itself)."""
    ids, mask = _batch(_sentences(10, seed=10))
    exact = _reference(exact_copy(fixture_model), ids, mask, return_state=True)
    cpu = _fast(fixture_model, ids, mask, return_state=True)
    model = ElmoModel(fixture_model.config).eval()
    model.load_state_dict(fixture_model.state_dict())
    model.to(device)
    got = _fast(model, ids.to(device), mask.to(device), return_state=True)
    _rounding_only(model, _outputs(exact), _outputs(cpu), _outputs(got), device)


def test_cached_vectors_are_bitwise_fresh_ones(fixture_model):
    """A word's token vector does not depend on the batch that computed it, so a warm cache gives
    bit-identical outputs to a model without one (tests elsewhere compare models with torch.equal)."""
    warm = ElmoModel(fixture_model.config).eval()
    warm.load_state_dict(fixture_model.state_dict())
    cold = ElmoModel(fixture_model.config).eval()
    cold.load_state_dict(fixture_model.state_dict())
    cold.disable_token_cache()
    for seed in range(3):  # history: the same words in other company
        _fast(warm, *_batch(_sentences(11, seed=20 + seed, vocabulary=30)))
    batch = _batch(_sentences(4, seed=30, vocabulary=30))
    got, expected = _fast(warm, *batch), _fast(cold, *batch)
    assert warm.token_cache.hits > 0
    assert all(torch.equal(a, b) for a, b in zip(got.hidden_states, expected.hidden_states))
