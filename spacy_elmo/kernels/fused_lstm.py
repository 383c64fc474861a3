"""One LSTM layer of the biLM (both directions) as a single autograd Function, for training.

Computes what `ElmoLstmLayer.forward` computes, and the same gradients, with far fewer operations:

* forward: the input projection of all steps in one batched matmul, written straight into a
  [2, T, B, 4·hidden] buffer; the recurrent loop then adds `h·W_h` into each step's slice and
  applies the nonlinearities in place, so that buffer ends up holding the gate activations
  (i, j, f, o) that backward needs.  Cells, tanh(cell), pre-clip values and outputs go into
  preallocated [2, T(+1), B, ·] buffers; nothing is allocated per step.
* backward: everything that does not depend on the recurrence (σ' and tanh' terms, the clip
  masks) is computed for all steps at once; the reverse loop then needs one recurrent product,
  one projection product and four elementwise ops per step, and writes the gate gradients for all
  steps into the gate buffer.  The weight gradients are then ONE product each over all steps
  (x·dG, h·dG, m·dh), the bias gradient one sum, the input gradient one batched product.
  `ctx.needs_input_grad` skips the products nobody needs (frozen layers, frozen inputs).

Padding: like the eager layer, every row runs all T steps (rows are left-aligned, so padded steps
come after a row's real ones and never feed them); the final state is taken after each row's
`lengths` steps (the initial state for an empty row), or after all T steps without `lengths`.
Clipping passes gradients exactly where `torch.clamp` does (inside [−clip, clip], ends included).

Written with plain torch ops only (any device).  tanh is torch.tanh, not the inference kernel's
faster 2σ(2x) − 1: near ±1 that formula's ~1e-7 absolute error makes 1 − tanh² (the gradient)
measurably less accurate than eager's.
"""

from __future__ import annotations

import torch


def _inside(x: torch.Tensor, clip: float) -> torch.Tensor:
    """1.0 where torch.clamp(x, −clip, clip) passes the gradient, else 0.0."""
    return ((x >= -clip) & (x <= clip)).to(x.dtype)


# steps per backward chunk ≈ CHUNK_ROWS // batch (bounds the chunk's temporaries)
CHUNK_ROWS = 512


def _prepare_chunk(gates, tanh_cells, cells_prev, cells_pre, proj_pre, cell_clip, proj_clip):
    """For a chunk of steps ([2, k, B, ·] views): overwrites the gate activations (i, j, f, o) with
    the factors that turn the cell gradient (i, j, f) or the gradient of m = o·tanh(c) (o) into
    the gate pre-activation gradients, and returns ∂m/∂c·(1/dm) = o·(1 − tanh²c), the carry
    ∂c_t/∂c_{t−1} = f (zero where the cell was clipped) and the projection clip mask."""
    hidden = tanh_cells.shape[-1]
    i, j = gates[..., :hidden], gates[..., hidden : 2 * hidden]
    f, o = gates[..., 2 * hidden : 3 * hidden], gates[..., 3 * hidden :]
    tc = tanh_cells
    cell_grad_scale = o * (1.0 - tc * tc)
    inside = _inside(cells_pre, cell_clip) if cell_clip else None
    carry = f * inside if cell_clip else f.clone()
    a_i = j * i * (1.0 - i)
    a_j = i * (1.0 - j * j)
    a_f = cells_prev * f * (1.0 - f)
    o.mul_(1.0 - o).mul_(tc)
    i.copy_(a_i)
    j.copy_(a_j)
    f.copy_(a_f)
    if cell_clip:
        gates[..., : 3 * hidden].unflatten(-1, (3, hidden)).mul_(inside.unsqueeze(-2))
    proj_inside = _inside(proj_pre, proj_clip) if proj_clip else None
    return cell_grad_scale, carry, proj_inside


class FusedLstmFunction(torch.autograd.Function):
    """(x, h0, c0, input_weight, hidden_weight, bias, proj_weight, lengths, forget_bias, cell_clip,
    proj_clip) → (outputs [2, B, T, proj], final h [2, B, proj], final c [2, B, hidden])."""

    @staticmethod
    def forward(ctx, x, h0, c0, input_weight, hidden_weight, bias, proj_weight, lengths, forget_bias, cell_clip, proj_clip):
        n_dir, batch, steps, in_dim = x.shape
        hidden = hidden_weight.shape[-1] // 4
        proj = hidden_weight.shape[1]
        has_proj = proj_weight is not None
        proj_clip = proj_clip if has_proj else None
        gate_bias = bias.clone()
        gate_bias[:, 2 * hidden : 3 * hidden] += forget_bias
        # time-major inputs: each step's slice of every buffer is one block per direction
        xt = x.transpose(1, 2).contiguous()
        gates = torch.baddbmm(gate_bias.unsqueeze(1), xt.view(n_dir, steps * batch, in_dim), input_weight)
        gates = gates.view(n_dir, steps, batch, 4 * hidden)
        hs = x.new_empty(n_dir, steps + 1, batch, proj)  # h0, then each step's (clipped) output
        cs = x.new_empty(n_dir, steps + 1, batch, hidden)  # c0, then each step's (clipped) cell
        hs[:, 0] = h0
        cs[:, 0] = c0
        cells_pre = x.new_empty(n_dir, steps, batch, hidden) if cell_clip else None
        proj_pre = x.new_empty(n_dir, steps, batch, proj) if proj_clip else None
        tanh_cells = x.new_empty(n_dir, steps, batch, hidden)
        ms = x.new_empty(n_dir, steps, batch, hidden) if has_proj else None  # projection inputs o·tanh(c)
        for t in range(steps):
            g = gates[:, t]
            for d in range(n_dir):
                g[d].addmm_(hs[d, t], hidden_weight[d])
            i, j, f, o = g[..., :hidden], g[..., hidden : 2 * hidden], g[..., 2 * hidden : 3 * hidden], g[..., 3 * hidden :]
            i.sigmoid_()
            g[..., 2 * hidden :].sigmoid_()  # f and o
            j.tanh_()
            cell = cells_pre[:, t] if cell_clip else cs[:, t + 1]
            torch.mul(f, cs[:, t], out=cell).addcmul_(i, j)
            if cell_clip:
                torch.clamp(cell, -cell_clip, cell_clip, out=cs[:, t + 1])
            tc = torch.tanh(cs[:, t + 1], out=tanh_cells[:, t])
            if has_proj:
                m = torch.mul(o, tc, out=ms[:, t])
                h = proj_pre[:, t] if proj_clip else hs[:, t + 1]
                for d in range(n_dir):
                    torch.mm(m[d], proj_weight[d], out=h[d])
                if proj_clip:
                    torch.clamp(h, -proj_clip, proj_clip, out=hs[:, t + 1])
            else:
                torch.mul(o, tc, out=hs[:, t + 1])
        rows = torch.arange(batch, device=x.device)
        last = torch.full_like(rows, steps) if lengths is None else lengths.to(rows.device)
        final_h, final_c = hs[:, last, rows], cs[:, last, rows]  # index 0 = the initial state

        ctx.needs = ctx.needs_input_grad[:7]
        if any(ctx.needs):
            ctx.save_for_backward(
                xt if ctx.needs[3] else None, gates, hs, cs, cells_pre, proj_pre, tanh_cells, ms if ctx.needs[6] else None,
                input_weight, hidden_weight, proj_weight, last,
            )
            ctx.shape = (n_dir, batch, steps, in_dim, hidden, proj)
            ctx.clips = (cell_clip, proj_clip)
        # [2, B, T, proj] in that memory order, as eager's: the next layer's dropout mask is drawn
        # in memory order, so a time-major layout would get other masks from the same RNG stream
        out = hs[:, 1:].transpose(1, 2).contiguous()
        return out, final_h, final_c

    @staticmethod
    def backward(ctx, grad_out, grad_h, grad_c):
        if getattr(ctx, "consumed", False):  # the gate buffer became the gate gradients
            raise RuntimeError("the fused LSTM's backward runs once per forward (retain_graph is not supported)")
        ctx.consumed = True
        xt, gates, hs, cs, cells_pre, proj_pre, tanh_cells, ms, input_weight, hidden_weight, proj_weight, last = ctx.saved_tensors
        n_dir, batch, steps, in_dim, hidden, proj = ctx.shape
        cell_clip, proj_clip = ctx.clips
        has_proj = proj_weight is not None
        need_x, need_h0, need_c0, need_wi, need_wh, need_b, need_wp = ctx.needs
        rows = torch.arange(batch, device=gates.device)

        # gradient w.r.t. every h_t (index 0 = h0) and, from the final state, every c_t
        grad_hs = gates.new_zeros(n_dir, steps + 1, batch, proj)
        if grad_out is not None:
            grad_hs[:, 1:] = grad_out.transpose(1, 2)
        if grad_h is not None:
            grad_hs[:, last, rows] += grad_h
        grad_cs = None
        if grad_c is not None:
            grad_cs = gates.new_zeros(n_dir, steps + 1, batch, hidden)
            grad_cs[:, last, rows] = grad_c

        # The reverse loop turns `gates` into the gradient of the gate pre-activations, step by step.
        # Before each chunk of steps, everything there that does not depend on the recurrence (σ'
        # and tanh' terms, clip masks) is computed for the whole chunk at once; chunks of about
        # CHUNK_ROWS rows keep those temporaries small (in cache, no page faults).
        grad_proj = gates.new_empty(n_dir, steps, batch, proj) if has_proj else None  # ∂L/∂(m·W_p)
        dh = gates.new_empty(n_dir, batch, proj)
        dm = gates.new_empty(n_dir, batch, hidden) if has_proj else None
        dc = gates.new_empty(n_dir, batch, hidden)
        dc_carry = gates.new_zeros(n_dir, batch, hidden)
        chunk = max(1, CHUNK_ROWS // max(batch, 1))
        end = steps
        while end > 0:
            start = max(0, end - chunk)
            cell_grad_scale, carry, proj_inside = _prepare_chunk(
                gates[:, start:end], tanh_cells[:, start:end], cs[:, start:end],
                cells_pre[:, start:end] if cell_clip else None, proj_pre[:, start:end] if proj_clip else None,
                cell_clip, proj_clip,
            )
            gates_ijf = gates[:, start:end, :, : 3 * hidden].unflatten(-1, (3, hidden))
            out_gate = gates[:, start:end, :, 3 * hidden :]
            for t in range(end - 1, start - 1, -1):
                k = t - start
                target = grad_proj[:, t] if has_proj else dh
                if t == steps - 1:
                    target.copy_(grad_hs[:, t + 1])
                else:
                    for d in range(n_dir):
                        torch.addmm(grad_hs[d, t + 1], gates[d, t + 1], hidden_weight[d].t(), out=target[d])
                if has_proj:
                    if proj_clip:
                        target.mul_(proj_inside[:, k])
                    for d in range(n_dir):
                        torch.mm(target[d], proj_weight[d].t(), out=dm[d])
                    dm_t = dm
                else:
                    dm_t = target
                if grad_cs is not None:
                    dc_carry.add_(grad_cs[:, t + 1])
                torch.addcmul(dc_carry, dm_t, cell_grad_scale[:, k], out=dc)
                gates_ijf[:, k].mul_(dc.unsqueeze(2))
                out_gate[:, k].mul_(dm_t)
                torch.mul(dc, carry[:, k], out=dc_carry)
            end = start
        grad_gates = gates.view(n_dir, steps * batch, 4 * hidden)

        grad_x = grad_h0 = grad_c0 = grad_wi = grad_wh = grad_b = grad_wp = None
        if need_h0:
            grad_h0 = grad_hs[:, 0].clone()
            if steps:
                for d in range(n_dir):
                    grad_h0[d].addmm_(gates[d, 0], hidden_weight[d].t())
        if need_c0:
            grad_c0 = dc_carry if grad_cs is None else dc_carry.add_(grad_cs[:, 0])
        if need_x:
            grad_x = torch.bmm(grad_gates, input_weight.transpose(1, 2)).view(n_dir, steps, batch, in_dim).transpose(1, 2)
        if need_wi:
            grad_wi = torch.bmm(xt.view(n_dir, steps * batch, in_dim).transpose(1, 2), grad_gates)
        if need_wh:
            previous = hs[:, :steps].reshape(n_dir, steps * batch, proj)
            grad_wh = torch.bmm(previous.transpose(1, 2), grad_gates)
        if need_b:
            grad_b = grad_gates.sum(dim=1)
        if need_wp:
            grad_wp = torch.bmm(
                ms.view(n_dir, steps * batch, hidden).transpose(1, 2), grad_proj.view(n_dir, steps * batch, proj)
            )
        return grad_x, grad_h0, grad_c0, grad_wi, grad_wh, grad_b, grad_wp, None, None, None, None


def lstm_layer_fused(
    x: torch.Tensor,
    h0: torch.Tensor,
    c0: torch.Tensor,
    input_weight: torch.Tensor,
    hidden_weight: torch.Tensor,
    bias: torch.Tensor,
    proj_weight: torch.Tensor | None,
    lengths: torch.Tensor | None,
    forget_bias: float,
    cell_clip: float | None,
    proj_clip: float | None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One layer, both directions: x [2, B, T, in] → outputs [2, B, T, proj] and the final (h, c).

    `bias` is the raw gate bias [2, 4·hidden] (the forget gate's `forget_bias` is added here), the
    weights are in TF orientation (x·W) and gate order i, j, f, o, as in `ElmoLstmLayer`.  The
    final state is each row's after `lengths` steps (its initial state when 0), or after all steps
    when `lengths` is None.  Computes in the inputs' dtype with autocast off (exact).
    """
    dtype = input_weight.dtype
    with torch.autocast(x.device.type, enabled=False):
        out, h, c = FusedLstmFunction.apply(
            x.to(dtype), h0.to(dtype), c0.to(dtype), input_weight, hidden_weight, bias, proj_weight, lengths, float(forget_bias), cell_clip, proj_clip
        )
    return out, (h, c)


__all__ = ["FusedLstmFunction", "lstm_layer_fused"]
