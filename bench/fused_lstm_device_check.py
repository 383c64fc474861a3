"""Device check of the training LSTM kernel: fused vs eager gradients and fwd+bwd time on one device.

    python bench/fused_lstm_device_check.py [--device cuda] [--json out.json]

Gradient check: a small configuration with clipping, projection, ragged rows and an initial state
(with gradient); every parameter's, the input's and the state's gradient, fused vs eager on the
device (relative to each gradient's scale).  Timing: one biLSTM forward+backward per architecture
(small 2x1024_128 and medium 2x2048_256 shapes), eager and fused interleaved, median of repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from spacy_elmo import ElmoConfig, ElmoModel, ElmoState  # noqa: E402


def bilstm_of(config: ElmoConfig):
    """The biLSTM of a model built from `config` (`ElmoModel.encoder`, the public way to one)."""
    return ElmoModel(config).encoder


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gradient_check(device) -> float:
    torch.manual_seed(0)
    config = ElmoConfig(lstm_dim=48, projection_dim=24, filters=[[1, 8]], cell_clip=0.5, proj_clip=0.4, dropout=0.0)
    bilstm = bilstm_of(config).to(device).train()
    with torch.no_grad():
        for p in bilstm.parameters():
            p.uniform_(-0.6, 0.6)
    lengths = torch.tensor([5, 0, 1, 9, 3, 1], device=device)
    mask = torch.arange(9, device=device).unsqueeze(0) < lengths.unsqueeze(1)
    tokens = torch.randn(6, 9, 24, device=device) * mask.unsqueeze(-1)
    h0 = torch.rand(2, 2, 6, 24, device=device) - 0.5
    c0 = torch.rand(2, 2, 6, 48, device=device) - 0.5
    weights = None
    grads = {}
    for impl in ("eager", "fused"):
        bilstm.config.lstm_implementation = impl
        bilstm.zero_grad(set_to_none=True)
        x, h, c = (t.clone().requires_grad_(True) for t in (tokens, h0, c0))
        layers, final = bilstm(x, mask, ElmoState(h, c), return_state=True)
        outputs = list(layers) + list(final)
        if weights is None:
            g = torch.Generator(device=device).manual_seed(1)
            weights = [torch.rand(o.shape, generator=g, device=device) - 0.5 for o in outputs]
        sum((o * w).sum() for o, w in zip(outputs, weights)).backward()
        grads[impl] = {n: p.grad for n, p in bilstm.named_parameters()} | {"x": x.grad, "h0": h.grad, "c0": c.grad}
    return max(
        float((grads["fused"][n] - grads["eager"][n]).abs().max()) / max(1.0, float(grads["eager"][n].abs().max()))
        for n in grads["eager"]
    )


def timing(device, lstm_dim, projection_dim, batch, steps, repeats) -> dict:
    torch.manual_seed(0)
    config = ElmoConfig(lstm_dim=lstm_dim, projection_dim=projection_dim, filters=[[1, 8]], dropout=0.1)
    bilstm = bilstm_of(config).to(device).train()
    with torch.no_grad():
        for p in bilstm.parameters():
            p.uniform_(-0.05, 0.05)
    tokens = torch.randn(batch, steps, projection_dim, device=device, requires_grad=True)
    mask = torch.ones(batch, steps, dtype=torch.bool, device=device)
    times = {"eager": [], "fused": []}
    for r in range(repeats + 1):
        for impl in ("eager", "fused") if r % 2 == 0 else ("fused", "eager"):
            bilstm.config.lstm_implementation = impl
            _sync(device)
            start = time.perf_counter()
            layers, _ = bilstm(tokens, mask)
            sum(layer.sum() for layer in layers).backward()
            _sync(device)
            if r:
                times[impl].append(time.perf_counter() - start)
            bilstm.zero_grad(set_to_none=True)
            tokens.grad = None
    flops = 3 * 2 * 2 * (2 * 2.0 * projection_dim * 4 * lstm_dim + 2.0 * lstm_dim * projection_dim) * batch * steps
    result = {impl: statistics.median(t) for impl, t in times.items()}
    return {
        "shape": f"2x{lstm_dim}_{projection_dim}, batch {batch} x {steps} steps",
        "seconds": result,
        "tflops": {impl: flops / s / 1e12 for impl, s in result.items()},
        "speedup": result["eager"] / result["fused"],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    device = torch.device(args.device)
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "max_relative_gradient_difference": gradient_check(device),
        "timing": [
            timing(device, 1024, 128, 128, 20, args.repeats),
            timing(device, 2048, 256, 128, 20, args.repeats),
        ],
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
