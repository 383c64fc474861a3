"""Which code evaluates the biLSTM: the table of kernels, as Hugging Face's `ALL_ATTENTION_FUNCTIONS`
sits apart from `modeling_bert.py`.

`config.lstm_implementation` names an entry of `LSTM_IMPLEMENTATIONS` (or "auto", which
`resolve_lstm_implementation` turns into one); `ElmoBiLstm.forward` calls it. Every entry has one
signature, `(bilstm, tokens, mask, state, return_state) -> (layers, final state or None)`, and
computes the same function: the definition, `ElmoBiLstm.run_layers` in `modeling_elmo.py` (the
"eager" entry). The others run it faster through `kernels/`.

The resolver chooses by what it reads (the choice, gradients, mode, autocast, device), not by the
inference precision: how each product of the LSTM computes is bound to its layers when the precision
is (`ElmoLstmLayer.bind_products`, the decider `kernels.products.decide_product`), and the `packed`
kernel computes their bf16 and int8 products (`cuda_graphs` the bf16 ones; the others are exact).

This module imports nothing from the model (the model imports it): an adapter reaches the network
through the `bilstm` it is given, and builds states of the type of the `state` it is given (the
model's `ElmoState`).
"""

from __future__ import annotations

import torch

from .. import kernels


def resolve_lstm_implementation(
    choice: str, *, needs_grad: bool, training: bool, autocast: bool, device_type: str
) -> str:
    """The kernel for a choice of `config.lstm_implementation` (a pure function of its arguments).

    "auto" is an inference kernel when nothing can need a gradient (inputs, initial state, *any*
    parameter) and the model is in eval mode, else the training kernel "fused" (dropout stays
    outside the kernels; under CPU autocast its products follow autocast's bf16, see
    `kernels.fused_lstm`), or "eager" under autocast on other devices. The inference kernel
    is "packed" on the CPU and "cuda_graphs" on CUDA, where the recurrent loop's launches, not its
    arithmetic, bound a batch: on an H200 it was faster than "packed" and "eager" at batch 1 to 128 in
    every precision and architecture measured (bench/results/gpu_h200_a10544b; not at batch 512 in bf16,
    nor, in a later run, in fp32 at 128: bench/results/README.md, "On a GPU"). The inference
    precision does not change that choice: both compute the products as the layers bound them,
    autocast's dtype rules under autocast, and a gradient makes them fp32 (the training kernels).
    An explicit choice that cannot run here raises `RuntimeError`.
    """
    if choice == "auto":
        if not (needs_grad or training):
            return "cuda_graphs" if device_type == "cuda" else "packed"
        return "eager" if autocast and device_type != "cpu" else "fused"
    if choice not in LSTM_IMPLEMENTATIONS:
        raise ValueError(f"lstm_implementation must be 'auto' or one of {sorted(LSTM_IMPLEMENTATIONS)}, got {choice!r}")
    if choice in ("packed", "cuda_graphs") and needs_grad:
        raise RuntimeError(
            f"lstm_implementation={choice!r} is an inference kernel without autograd, but a gradient "
            "is needed here; use 'eager' or 'auto', or run under torch.no_grad()"
        )
    if choice == "cuda_graphs" and (device_type != "cuda" or training):
        raise RuntimeError(
            "lstm_implementation='cuda_graphs' runs inference (eval mode) on a CUDA device; "
            f"the inputs are on {device_type} and the model is in {'train' if training else 'eval'} mode"
        )
    return choice


# --- the biLSTM kernels: one signature (bilstm, tokens, mask, state, return_state) → (layers, final state)


def bilstm_eager(bilstm, tokens, mask, state, return_state):
    """The definition, `ElmoBiLstm.run_layers`: both directions step by step, layer after layer."""
    return bilstm.run_layers(tokens, mask, state, return_state)


def bilstm_fused(bilstm, tokens, mask, state, return_state):
    """`bilstm_eager` with each layer as one autograd Function (`kernels.lstm_layer_fused`): training."""
    return bilstm.run_layers(tokens, mask, state, return_state, fused=True)


def bilstm_packed(bilstm, tokens, mask, state, return_state):
    """`bilstm_eager` over a packed, length-sorted batch, in place, without autograd (`kernels.packed_lstm`),
    each product as its layer bound it (`ElmoLstmLayer.kernel_weights`)."""
    layers, final = kernels.bilstm_packed(
        [layer.kernel_weights() for layer in bilstm.layers],
        tokens,
        mask,
        state.h,
        state.c,
        skip_connections=bilstm.use_skip_connections,
        dropout=bilstm.dropout,
        return_state=return_state,
    )
    return layers, type(state)(*final) if final is not None else None


def bilstm_cuda_graphs(
    bilstm, tokens, mask, state, return_state, graphs: kernels.cuda_graphs.GraphCapture | None = None
):
    """`bilstm_eager` replayed from a CUDA graph captured per bucketed (batch, steps): extra rows are
    empty and extra steps padding, which leave the real rows' values unchanged. With bf16 products
    bound (`ElmoLstmLayer.bind_products`), the layers run as `bilstm_fused`'s forward with bf16
    products (bf16 weights made once per replay, fp32 state, `kernels.fused_lstm`), as "packed"
    computes them on the CPU; eager would multiply the fp32 weights. `graphs`: how a graph is captured
    and replayed (`kernels.cuda_graphs.CUDA_GRAPHS`; a test gives one that replays on the CPU)."""
    graphs = graphs if graphs is not None else kernels.cuda_graphs.CUDA_GRAPHS
    bf16 = any(p.rows.dtype == "bf16" for layer in bilstm.layers for p in layer.weight_products().values())
    batch, steps, dim = tokens.shape
    rows, time = kernels.cuda_graphs.bucket(batch), kernels.cuda_graphs.bucket(steps)
    padded = tokens.new_zeros(rows, time, dim)
    padded[:batch, :steps] = tokens
    padded_mask = mask.new_zeros(rows, time)
    padded_mask[:batch, :steps] = mask
    h = state.h.new_zeros(*state.h.shape[:2], rows, state.h.shape[-1])
    c = state.c.new_zeros(*state.c.shape[:2], rows, state.c.shape[-1])
    h[:, :, :batch], c[:, :, :batch] = state.h, state.c
    device_type = graphs.device_type
    key = (
        rows,
        time,
        tokens.dtype,
        mask.dtype,
        return_state,
        torch.is_autocast_enabled(device_type),
        kernels.autocast_dtype(device_type),
        tuple(p.data_ptr() for p in bilstm.parameters()),
        bf16,
    )

    def run(x, m, h0, c0):
        start = type(state)(h0, c0)
        if bf16:
            layers, final = bilstm.run_layers(x, m, start, return_state, fused=True, product_dtype=torch.bfloat16)
        else:
            layers, final = bilstm_eager(bilstm, x, m, start, return_state)
        return layers + (list(final) if final is not None else [])

    outputs = kernels.cuda_graphs.graphed_call(bilstm, key, run, [padded, padded_mask, h, c], graphs)
    layers = [out[:batch, :steps] for out in outputs[: len(bilstm.layers)]]
    final = type(state)(*(t[:, :, :batch] for t in outputs[len(bilstm.layers) :])) if return_state else None
    return layers, final


# name → kernel, as HF's ALL_ATTENTION_FUNCTIONS; `config.lstm_implementation` names one (or "auto")
LSTM_IMPLEMENTATIONS = {
    "eager": bilstm_eager,
    "fused": bilstm_fused,
    "packed": bilstm_packed,
    "cuda_graphs": bilstm_cuda_graphs,
}

__all__ = [
    "LSTM_IMPLEMENTATIONS",
    "resolve_lstm_implementation",
    "bilstm_eager",
    "bilstm_fused",
    "bilstm_packed",
    "bilstm_cuda_graphs",
]
