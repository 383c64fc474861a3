"""The `cuda_graphs` kernel's own code (`hf.lstm_implementations.bilstm_cuda_graphs` and
`kernels.cuda_graphs.graphed_call`: padding to buckets, the graph key, the graphs kept per model, the
static inputs a replay reads, the copies of its outputs, the bf16 path) run on the CPU, driven through
its `GraphCapture` argument by a capture that "replays" by running the captured function again into
the captured outputs. The math is the kernel's own, on CPU tensors, held to the definition; only
CUDA's graph mechanism is left out. Where CUDA exists the same tests run with the real graphs."""

from __future__ import annotations

import pytest
import torch
from test_kernel_equivalence import LENGTHS, _config, _model, _state  # tests/kernels is on sys.path

from float32_error import assert_float32_error, exact_copy
from spacy_elmo import ElmoState
from spacy_elmo.hf.lstm_implementations import bilstm_cuda_graphs, bilstm_eager
from spacy_elmo.kernels import Capabilities, bf16, cuda_graphs

TERMS = len(LENGTHS) * (max(LENGTHS) + 2)


class ReplayedOnCpu:
    """A `cuda_graphs.GraphCapture` on the CPU: capturing runs the function once and keeps its
    outputs; a replay runs it again (on the static inputs it closes over) and writes its outputs
    into the kept ones, as a CUDA graph's replay rewrites its output memory."""

    device_type = "cpu"

    def __init__(self):
        self.captures = 0
        self.replays = 0

    def capture(self, run):
        self.captures += 1
        outputs = run()

        def replay():
            self.replays += 1
            for kept, new in zip(outputs, run(), strict=True):
                kept.copy_(new)

        return replay, outputs


class CountedCudaGraphs(cuda_graphs.CudaGraphs):
    """The real CUDA graphs, counted."""

    def __init__(self):
        self.captures = 0
        self.replays = 0

    def capture(self, run):
        self.captures += 1
        replay, outputs = super().capture(run)

        def counted():
            self.replays += 1
            replay()

        return counted, outputs


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _graphs(device: str):
    return ReplayedOnCpu() if device == "cpu" else CountedCudaGraphs()


def _batch(config, seed: int, lengths=LENGTHS, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    tokens = torch.randn(len(lengths), max(lengths), config.projection_dim, generator=g) * mask.unsqueeze(-1)
    return tokens.to(device), mask.to(device)


def _named(layers, final) -> dict:
    out = {f"layer{k}": layer for k, layer in enumerate(layers)}
    if final is not None:
        out.update(h=final.h, c=final.c)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("return_state", [False, True])
def test_the_graphed_bilstm_computes_the_definition_and_replays_its_graph(device, return_state):
    """A ragged batch (an empty row, one-token rows) padded to its bucket, captured once, replayed on
    new values of the same bucket: every output within float32 rounding of the definition (the padded
    rows and steps leave the real ones unchanged), and the second batch read from the static inputs."""
    config = _config(True, True, True, True)  # skip connections, both projections, clipping
    model = _model(config).to(device)
    exact = exact_copy(model)
    bilstm, graphs = model.encoder, _graphs(device)
    for seed in (1, 2):  # the second batch replays the graph the first captured
        tokens, mask = _batch(config, seed, device=device)
        state = _state(config, len(LENGTHS), seed)
        state = ElmoState(state.h.to(device), state.c.to(device))
        with torch.no_grad():
            got = _named(*bilstm_cuda_graphs(bilstm, tokens, mask, state, return_state, graphs))
            eager = _named(*bilstm_eager(bilstm, tokens, mask, state, return_state))
            exact_state = ElmoState(state.h.double(), state.c.double())
            want = _named(*bilstm_eager(exact.encoder, tokens.double(), mask, exact_state, return_state))
        assert all(t.shape == want[name].shape for name, t in got.items())
        assert_float32_error(want, eager, got, terms=TERMS, what=f"cuda_graphs on {device}, batch {seed}")
    assert (graphs.captures, graphs.replays) == (1, 2)
    assert [key[:2] for key in cuda_graphs.graphs_of(bilstm)] == [(8, 16)]  # one bucket: 6 rows, 9 steps


def test_graphs_are_kept_per_bucket_and_weights_least_recently_used_dropped(monkeypatch):
    """One graph per bucketed (batch, steps), per autocast state and per weights' addresses, at most
    MAX_GRAPHS per model (the least recently used dropped, captured again when needed)."""
    monkeypatch.setattr(cuda_graphs, "MAX_GRAPHS", 3)
    config = _config(False, True, False, False)
    model = _model(config)
    bilstm, graphs = model.encoder, ReplayedOnCpu()

    def call(lengths):
        tokens, mask = _batch(config, 0, lengths)
        with torch.no_grad():
            layers, _ = bilstm_cuda_graphs(bilstm, tokens, mask, bilstm.zero_state(len(lengths), tokens), False, graphs)
        return layers

    call([3, 2])  # bucket (8, 8)
    call([7, 1, 5])  # the same bucket: a replay
    assert graphs.captures == 1
    call([9])  # (8, 16)
    call([2] * 9)  # (16, 8)
    assert graphs.captures == 3 and [key[:2] for key in cuda_graphs.graphs_of(bilstm)] == [(8, 8), (8, 16), (16, 8)]
    call([4])  # (8, 8) used again: now the most recent
    call([17])  # (8, 24): drops the least recently used, (8, 16)
    assert graphs.captures == 4 and [key[:2] for key in cuda_graphs.graphs_of(bilstm)] == [(16, 8), (8, 8), (8, 24)]
    call([10])  # (8, 16) again: captured again
    assert graphs.captures == 5
    with torch.no_grad():  # a replaced weight has another address: a new graph, reading the new weight
        bilstm.layers[0].hidden_weight = torch.nn.Parameter(bilstm.layers[0].hidden_weight * 0.5)
    tokens, mask = _batch(config, 0, [4])
    with torch.no_grad():
        got, _ = bilstm_cuda_graphs(bilstm, tokens, mask, bilstm.zero_state(1, tokens), False, graphs)
        want, _ = bilstm_eager(bilstm, tokens, mask, bilstm.zero_state(1, tokens), False)
    assert graphs.captures == 6
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # autocast: another graph, its own casts
        call([4])
    assert graphs.captures == 7


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_products_bound_as_on_cuda_run_the_fused_forward_in_the_graph(device):
    """With the products bound to bf16 as the decider binds them on CUDA (native bf16, no oneDNN), the
    graph holds the fused layers' forward with bf16 products and fp32 state: the graphed outputs are
    that forward's on the unpadded batch (within the bf16 rounding of a product's result), not fp32's."""
    config = _config(True, True, True, True)
    model = _model(config).to(device)
    for layer in model.encoder.layers:
        layer.bind_products("bf16", "cuda", Capabilities(native_bf16=True, int8=False, onednn=False))
    bilstm, graphs = model.encoder, _graphs(device)
    tokens, mask = _batch(config, 3, device=device)
    state = bilstm.zero_state(len(LENGTHS), tokens)
    with torch.no_grad():
        got = _named(*bilstm_cuda_graphs(bilstm, tokens, mask, state, True, graphs))
        fused = _named(*bilstm.run_layers(tokens, mask, state, True, fused=True, product_dtype=torch.bfloat16))
        fp32 = _named(*bilstm_eager(bilstm, tokens, mask, state, True))
    assert graphs.captures == 1
    for name, want in fused.items():
        scale = float(fp32[name].abs().max())
        assert float((got[name] - want).abs().max()) <= 4 * bf16.UNIT_ROUNDOFF * scale, name
    assert max(float((got[name] - fp32[name]).abs().max()) for name in fp32) > 1e-5  # bf16 products, not fp32's
