"""One LSTM layer of the biLM (both directions) as a single autograd Function, for training.

Computes what `ElmoLstmLayer.forward` computes, and the same gradients, with far fewer operations:

* forward: the input projection of all steps in one batched matmul, written straight into a
  [2, T, B, 4·hidden] buffer; the recurrent loop then adds `h·W_h` into each step's slice and
  applies the nonlinearities in place, so that buffer ends up holding the gate activations
  (i, j, f, o) that backward needs.  Cells, tanh(cell), pre-clip values and outputs go into
  preallocated [2, T(+1), B, ·] buffers; nothing is allocated per step.
* backward: everything that does not depend on the recurrence (σ' and tanh' terms, the clip
  masks) is computed per chunk of steps at once, in place in the gate buffer where it can be
  (fused multiply-adds: ~13 passes over a chunk instead of ~25); the reverse loop then needs one
  recurrent product, one projection product and six elementwise ops per step, and writes the gate
  gradients for all steps into the gate buffer.  Per-step views are made once (`unbind`), and the
  transposed recurrent and projection weights are laid out contiguously once per backward.  The
  weight gradients are then ONE product each over all steps (x·dG, h·dG, m·dh), the bias gradient
  one sum, the input gradient one batched product.
  `ctx.needs_input_grad` skips the products nobody needs (frozen layers, frozen inputs).

Padding: like the eager layer, every row runs all T steps (rows are left-aligned, so padded steps
come after a row's real ones and never feed them); the final state is taken after each row's
`lengths` steps (the initial state for an empty row), or after all T steps without `lengths`.
Clipping passes gradients exactly where `torch.clamp` does (inside [−clip, clip], ends included).

bf16 products (`product_dtype=torch.bfloat16`, what `lstm_layer_fused` chooses under bf16 autocast on
a CPU with native bf16 products): every matrix product — the input projection, the per-step
recurrent and projection products, and the weight-gradient products — takes bf16 copies of its
operands (the weights converted once per call) and gives a bf16 result that is widened into the
fp32 buffers; gates, cell state, clipping, outputs and every elementwise step of the backward stay
fp32.  Each product is then within `kernels.bf16.product_bound(K)`·Σ|x||w| of its fp32 value, the
bound of the bf16 inference kernels; tests/kernels/test_fused_bf16.py carries it through the layer
(forward) and holds the gradients to the error of eager under bf16 autocast.  With
`product_dtype=None` (the default) everything is fp32 and the kernel is exact.

Written with plain torch ops only (any device).  tanh is torch.tanh, not the inference kernel's
faster 2σ(2x) − 1: near ±1 that formula's ~1e-7 absolute error makes 1 − tanh² (the gradient)
measurably less accurate than eager's.
"""

from __future__ import annotations

import torch

from .bf16 import widened_matmul
from .capabilities import autocast_product_dtype


def _inside(x: torch.Tensor, clip: float) -> torch.Tensor:
    """True where torch.clamp(x, −clip, clip) passes the gradient (inside, ends included)."""
    return x.abs() <= clip


# steps per backward chunk ≈ CHUNK_ROWS // batch (bounds the chunk's temporaries)
CHUNK_ROWS = 512


def _prepare_chunk(gates, tanh_cells, cells_prev, cells_pre, proj_pre, cell_clip, proj_clip):
    """For a chunk of steps ([2, k, B, ·] views), everything the reverse loop needs that does not
    depend on the recurrence, in few passes: overwrites the i, j, o activations with the factors
    that turn ∂L/∂c̃ (i, j) or ∂L/∂m (o) into the gate pre-activation gradients — i(1−i)·j,
    i·(1−j²), o(1−o)·tanh c — and keeps f (the loop needs it for the carry ∂c_t/∂c_{t−1} = f);
    returns ∂m/∂c = o·(1 − tanh² c), c_{t−1}·(1−f) (∂L/∂f = ∂L/∂c̃·f · that) and the clip masks."""
    hidden = tanh_cells.shape[-1]
    i, j = gates[..., :hidden], gates[..., hidden : 2 * hidden]
    f, o = gates[..., 2 * hidden : 3 * hidden], gates[..., 3 * hidden :]
    tc = tanh_cells
    scratch = tc * tc
    cell_grad_scale = torch.addcmul(o, o, scratch, value=-1.0)  # o − o·tanh²c
    o.addcmul_(o, o, value=-1.0).mul_(tc)  # (o − o²)·tanh c
    torch.addcmul(torch.ones((), dtype=j.dtype, device=j.device), j, j, value=-1.0, out=scratch).mul_(i)  # i·(1 − j²)
    i.addcmul_(i, i, value=-1.0).mul_(j)  # (i − i²)·j, before j is overwritten
    j.copy_(scratch)
    forget_scale = torch.addcmul(cells_prev, cells_prev, f, value=-1.0)  # c_{t−1}·(1 − f)
    inside = _inside(cells_pre, cell_clip) if cell_clip else None
    proj_inside = _inside(proj_pre, proj_clip) if proj_clip else None
    return cell_grad_scale, forget_scale, inside, proj_inside


class FusedLstmFunction(torch.autograd.Function):
    """(x, h0, c0, input_weight, hidden_weight, bias, proj_weight, lengths, forget_bias, cell_clip,
    proj_clip, product_dtype) → (outputs [2, B, T, proj], final h [2, B, proj], final c [2, B, hidden])."""

    @staticmethod
    def forward(
        ctx,
        x,
        h0,
        c0,
        input_weight,
        hidden_weight,
        bias,
        proj_weight,
        lengths,
        forget_bias,
        cell_clip,
        proj_clip,
        product_dtype=None,
    ):
        n_dir, batch, steps, in_dim = x.shape
        hidden = hidden_weight.shape[-1] // 4
        proj = hidden_weight.shape[1]
        has_proj = proj_weight is not None
        proj_clip = proj_clip if has_proj else None
        gate_bias = bias.clone()
        gate_bias[:, 2 * hidden : 3 * hidden] += forget_bias
        # time-major inputs: each step's slice of every buffer is one block per direction
        xt = x.transpose(1, 2).contiguous()
        low = product_dtype  # None: fp32 products (exact)
        if low is None:
            gates = torch.baddbmm(gate_bias.unsqueeze(1), xt.view(n_dir, steps * batch, in_dim), input_weight)
        else:
            xt = xt.to(low)  # (what backward's input-weight gradient reads, too)
            gates = torch.bmm(xt.view(n_dir, steps * batch, in_dim), input_weight.to(low)).float()
            gates.add_(gate_bias.unsqueeze(1))
            # the products' bf16 operands: each step's h (beside the fp32 h), the weights once
            hs_low = x.new_empty(n_dir, steps + 1, batch, proj, dtype=low)
            hs_low[:, 0] = h0
            recurrent_low = hidden_weight.to(low)
            projection_low = proj_weight.to(low) if has_proj else hidden_weight.new_empty(0)  # (empty: unread)
        gates = gates.view(n_dir, steps, batch, 4 * hidden)
        hs = x.new_empty(n_dir, steps + 1, batch, proj)  # h0, then each step's (clipped) output
        cs = x.new_empty(n_dir, steps + 1, batch, hidden)  # c0, then each step's (clipped) cell
        hs[:, 0] = h0
        cs[:, 0] = c0
        cells_pre = x.new_empty(n_dir, steps, batch, hidden) if cell_clip else None
        proj_pre = x.new_empty(n_dir, steps, batch, proj) if proj_clip else None
        tanh_cells = x.new_empty(n_dir, steps, batch, hidden)
        # projection inputs o·tanh(c) (in the products' dtype: only products read them)
        ms = x.new_empty(n_dir, steps, batch, hidden, dtype=low or x.dtype) if has_proj else None
        # per-step views, made once (unbind) instead of indexed out step by step
        gates_d = [g.unbind(0) for g in gates.unbind(0)]
        hs_d = [h.unbind(0) for h in hs.unbind(0)]
        i_steps = gates[..., :hidden].unbind(1)
        j_steps = gates[..., hidden : 2 * hidden].unbind(1)
        f_steps = gates[..., 2 * hidden : 3 * hidden].unbind(1)
        fo_steps = gates[..., 2 * hidden :].unbind(1)
        o_steps = gates[..., 3 * hidden :].unbind(1)
        cs_steps = cs.unbind(1)
        cell_steps = cells_pre.unbind(1) if cells_pre is not None else cs_steps[1:]  # (None unless cell_clip)
        tanh_steps = tanh_cells.unbind(1)
        recurrent = hidden_weight.unbind(0)
        if ms is not None:  # has_proj
            m_steps, m_d = ms.unbind(1), [m.unbind(0) for m in ms.unbind(0)]
            out_buffer = proj_pre if proj_pre is not None else hs[:, 1:]  # (None unless proj_clip)
            out_steps, out_d = out_buffer.unbind(1), [h.unbind(0) for h in out_buffer.unbind(0)]
            hs_steps, projection = hs.unbind(1), proj_weight.unbind(0)
        else:
            hs_steps = hs.unbind(1)
        for t in range(steps):
            if low is None:
                for d in range(n_dir):
                    gates_d[d][t].addmm_(hs_d[d][t], recurrent[d])
            else:
                gates[:, t].add_(torch.bmm(hs_low[:, t], recurrent_low))
            i, j, o = i_steps[t], j_steps[t], o_steps[t]
            i.sigmoid_()
            fo_steps[t].sigmoid_()  # f and o
            j.tanh_()
            cell = cell_steps[t]
            torch.mul(f_steps[t], cs_steps[t], out=cell).addcmul_(i, j)
            if cell_clip:
                torch.clamp(cell, -cell_clip, cell_clip, out=cs_steps[t + 1])
            tc = torch.tanh(cs_steps[t + 1], out=tanh_steps[t])
            if has_proj:
                torch.mul(o, tc, out=m_steps[t])
                if low is None:
                    for d in range(n_dir):
                        torch.mm(m_d[d][t], projection[d], out=out_d[d][t])
                else:
                    out_steps[t].copy_(torch.bmm(m_steps[t], projection_low))
                if proj_clip:
                    torch.clamp(out_steps[t], -proj_clip, proj_clip, out=hs_steps[t + 1])
            else:
                torch.mul(o, tc, out=hs_steps[t + 1])
            if low is not None:
                hs_low[:, t + 1].copy_(hs_steps[t + 1])
        rows = torch.arange(batch, device=x.device)
        last = torch.full_like(rows, steps) if lengths is None else lengths.to(rows.device)
        final_h, final_c = hs[:, last, rows], cs[:, last, rows]  # index 0 = the initial state

        ctx.needs = ctx.needs_input_grad[:7]
        if any(ctx.needs):
            ctx.save_for_backward(
                xt if ctx.needs[3] else None,
                gates,
                hs if low is None else hs_low,  # (backward reads h only in products)
                cs,
                cells_pre,
                proj_pre,
                tanh_cells,
                ms if ctx.needs[6] else None,
                input_weight,
                hidden_weight,
                proj_weight,
                last,
            )
            ctx.shape = (n_dir, batch, steps, in_dim, hidden, proj)
            ctx.low = low
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
        xt, gates, hs, cs, cells_pre, proj_pre, tanh_cells, ms, input_weight, hidden_weight, proj_weight, last = (
            ctx.saved_tensors
        )
        n_dir, batch, steps, in_dim, hidden, proj = ctx.shape
        cell_clip, proj_clip = ctx.clips
        low = ctx.low  # the products' dtype (None: fp32)
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
        # CHUNK_ROWS rows keep those temporaries small (in cache, no page faults).  Per-step views
        # are made once (unbind), not indexed out step by step.
        grad_proj = gates.new_empty(n_dir, steps, batch, proj) if has_proj else None  # ∂L/∂(m·W_p)
        dh = gates.new_empty(n_dir, batch, proj)
        dm = gates.new_empty(n_dir, batch, hidden) if has_proj else None
        dc = gates.new_empty(n_dir, batch, hidden)
        dc_carry = gates.new_zeros(n_dir, batch, hidden)
        gate_steps_d = [g.unbind(0) for g in gates.unbind(0)]  # [B, 4·hidden] per direction and step
        ij_steps = gates[..., : 2 * hidden].unflatten(-1, (2, hidden)).unbind(1)
        f_steps = gates[..., 2 * hidden : 3 * hidden].unbind(1)
        o_steps = gates[..., 3 * hidden :].unbind(1)
        grad_hs_d = [g.unbind(0) for g in grad_hs.unbind(0)]
        targets = grad_proj.unbind(1) if grad_proj is not None else [dh] * steps  # (None unless has_proj)
        targets_d = [t.unbind(0) for t in targets] if has_proj else [dh.unbind(0)] * steps
        grad_hs_steps = grad_hs.unbind(1)
        grad_cs_steps = grad_cs.unbind(1) if grad_cs is not None else None
        # transposed weights laid out contiguously once: the per-step products read them faster
        recurrent_t = hidden_weight.transpose(1, 2).contiguous().to(low or hidden_weight.dtype)
        projection_t = (  # (empty where there is no projection: unread)
            proj_weight.transpose(1, 2).contiguous().to(low or proj_weight.dtype) if has_proj else gates.new_empty(0)
        )
        recurrent_t_d = recurrent_t.unbind(0)
        projection_t_d = projection_t.unbind(0) if has_proj else ()
        dm_d = dm.unbind(0) if dm is not None else ()  # (None unless has_proj)
        chunk = max(1, CHUNK_ROWS // max(batch, 1))
        end = steps
        while end > 0:
            start = max(0, end - chunk)
            cell_grad_scale, forget_scale, inside, proj_inside = _prepare_chunk(
                gates[:, start:end],
                tanh_cells[:, start:end],
                cs[:, start:end],
                cells_pre[:, start:end] if cell_clip else None,
                proj_pre[:, start:end] if proj_clip else None,
                cell_clip,
                proj_clip,
            )
            scale_steps, forget_steps = cell_grad_scale.unbind(1), forget_scale.unbind(1)
            # (an empty tuple where the loop does not read them)
            inside_steps = inside.unbind(1) if cell_clip else ()
            proj_inside_steps = proj_inside.unbind(1) if proj_clip else ()
            for t in range(end - 1, start - 1, -1):
                k = t - start
                target, target_d = targets[t], targets_d[t]
                if t == steps - 1:
                    target.copy_(grad_hs_steps[t + 1])
                elif low is None:
                    for d in range(n_dir):
                        torch.addmm(grad_hs_d[d][t + 1], gate_steps_d[d][t + 1], recurrent_t_d[d], out=target_d[d])
                else:
                    torch.add(grad_hs_steps[t + 1], torch.bmm(gates[:, t + 1].to(low), recurrent_t), out=target)
                if dm is not None:  # has_proj
                    if proj_clip:
                        target.mul_(proj_inside_steps[k])
                    if low is None:
                        for d in range(n_dir):
                            torch.mm(target_d[d], projection_t_d[d], out=dm_d[d])
                    else:
                        dm.copy_(torch.bmm(target.to(low), projection_t))
                    dm_t = dm
                else:
                    dm_t = target
                if grad_cs_steps is not None:
                    dc_carry.add_(grad_cs_steps[t + 1])
                torch.addcmul(dc_carry, dm_t, scale_steps[k], out=dc)  # ∂L/∂c_t
                if cell_clip:
                    dc.mul_(inside_steps[k])  # ∂L/∂c̃_t (before the clip)
                f_t = f_steps[t]
                torch.mul(dc, f_t, out=dc_carry)  # ∂L/∂c_{t−1} through the cell
                torch.mul(dc_carry, forget_steps[k], out=f_t)  # ∂L/∂f pre-activation = ∂L/∂c̃·f·(1−f)·c_{t−1}
                ij_steps[t].mul_(dc.unsqueeze(2))
                o_steps[t].mul_(dm_t)
            end = start
        grad_gates = gates.view(n_dir, steps * batch, 4 * hidden)

        grad_x = grad_h0 = grad_c0 = grad_wi = grad_wh = grad_b = grad_wp = None
        if need_h0:
            grad_h0 = grad_hs[:, 0].clone()
            if steps and low is None:
                for d in range(n_dir):
                    grad_h0[d].addmm_(gates[d, 0], hidden_weight[d].t())
            elif steps:
                grad_h0.add_(widened_matmul(gates[:, 0], recurrent_t, low))
        if need_c0:
            grad_c0 = dc_carry if grad_cs is None else dc_carry.add_(grad_cs[:, 0])
        gates_low = grad_gates.to(low) if low is not None and (need_x or need_wi or need_wh) else grad_gates
        if need_x:
            grad_x = (
                widened_matmul(gates_low, input_weight.transpose(1, 2), low)
                .view(n_dir, steps, batch, in_dim)
                .transpose(1, 2)
            )
        if need_wi:
            grad_wi = widened_matmul(xt.view(n_dir, steps * batch, in_dim).transpose(1, 2), gates_low, low)
        if need_wh:
            previous = hs[:, :steps].reshape(n_dir, steps * batch, proj)
            grad_wh = widened_matmul(previous.transpose(1, 2), gates_low, low)
        if need_b:
            grad_b = grad_gates.sum(dim=1)
        if need_wp:
            assert grad_proj is not None, "a projection weight needs a gradient only when there is one"
            grad_wp = widened_matmul(
                ms.view(n_dir, steps * batch, hidden).transpose(1, 2), grad_proj.view(n_dir, steps * batch, proj), low
            )
        return grad_x, grad_h0, grad_c0, grad_wi, grad_wh, grad_b, grad_wp, None, None, None, None, None


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
    product_dtype: torch.dtype | str | None = "autocast",
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One layer, both directions: x [2, B, T, in] → outputs [2, B, T, proj] and the final (h, c).

    `bias` is the raw gate bias [2, 4·hidden] (the forget gate's `forget_bias` is added here), the
    weights are in TF orientation (x·W) and gate order i, j, f, o, as in `ElmoLstmLayer`.  The
    final state is each row's after `lengths` steps (its initial state when 0), or after all steps
    when `lengths` is None.  Computes in the weights' dtype with autocast off (exact), its matrix
    products in `product_dtype` when given (bf16: see the module's docstring); "autocast" (the
    default) is bf16 under bf16 autocast where the device multiplies bf16 natively, else None.
    """
    if product_dtype == "autocast":
        product_dtype = autocast_product_dtype(x.device.type)
    dtype = input_weight.dtype
    with torch.autocast(x.device.type, enabled=False):
        out, h, c = FusedLstmFunction.apply(
            x.to(dtype),
            h0.to(dtype),
            c0.to(dtype),
            input_weight,
            hidden_weight,
            bias,
            proj_weight,
            lengths,
            float(forget_bias),
            cell_clip,
            proj_clip,
            product_dtype,
        )
    return out, (h, c)


__all__ = ["FusedLstmFunction", "lstm_layer_fused"]
