"""Sampled softmax with a log-uniform (Zipfian) sampler, as bilm-tf trains large vocabularies.

Instead of normalising over all V words, each call scores the true word against S words drawn
once for the whole batch from P(k) = log((k + 2) / (k + 1)) / log(V + 1), which suits a vocabulary
sorted by falling frequency. Draws are unique (rejection of repeats, like TensorFlow's
`log_uniform_candidate_sampler(unique=True)`), so each candidate's expected count after `tries`
draws is 1 − (1 − P(k))^tries; logits are corrected by −log(expected count) and a sampled word
equal to the target ("accidental hit") is masked out. Evaluation always uses the full softmax.

Two implementations compute that loss from the same draws (chosen explicitly, `implementation=`):
`"eager"`, the readable definition below (`sampled_softmax_loss`), and `"fused"`, one autograd
Function (`SampledSoftmaxLoss`) with the same value and gradients up to float rounding and far
fewer passes over the [targets, negatives] logits: the −log Q correction folded into the bias of
the one matrix product, accidental hits masked in place, the softmax's probabilities kept in the
logits buffer and turned into their gradient in place, and the gradient of the head's weight and
bias written by two `index_add_`s per call instead of four dense scatters (tests/training/test_sampled_softmax.py).
Under bf16 autocast on a CPU with native bf16 products, its three matrix products take bf16 operands
and give bf16 results widened to fp32 (autocast's precision, `kernels.bf16.product_bound` per product);
everything else stays fp32.
"""

from __future__ import annotations

import math

import torch

from ..kernels import autocast_product_dtype
from ..kernels.bf16 import widened_matmul


class LogUniformSampler:
    """Unique draws from the log-uniform distribution over ids 0..range_max-1."""

    def __init__(self, range_max: int):
        if range_max < 2:
            raise ValueError(f"LogUniformSampler needs range_max >= 2, got {range_max}")
        self.range_max = range_max
        self.log_range = math.log(range_max + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.double()
        return torch.log1p(1.0 / (ids + 1.0)) / self.log_range

    def expected_count(self, ids: torch.Tensor, tries: int) -> torch.Tensor:
        """Expected number of times each id shows up in `tries` draws: 1 − (1 − P)^tries."""
        return -torch.expm1(tries * torch.log1p(-self.probability(ids)))

    def _draw(self, n: int, generator: torch.Generator | None, device) -> torch.Tensor:
        u = torch.rand(n, generator=generator, dtype=torch.float64, device=device)
        ids = torch.floor(torch.exp(u * self.log_range)).long() - 1
        return ids.clamp_(0, self.range_max - 1)

    def sample(self, num: int, generator: torch.Generator | None = None, device=None) -> tuple[torch.Tensor, int]:
        """`num` distinct ids in order of first draw, and how many draws it took."""
        if not 0 < num < self.range_max:
            raise ValueError(f"can only sample 1..{self.range_max - 1} distinct ids, asked for {num}")
        seen = torch.zeros(self.range_max, dtype=torch.bool, device=device)
        found: list[torch.Tensor] = []
        need, tries = num, 0
        while need:
            draws = self._draw(max(2 * need, 1024), generator, device)
            # first occurrence of each id in this round, and not drawn in an earlier round
            uniq, inverse = torch.unique(draws, return_inverse=True)
            first = torch.full((uniq.numel(),), draws.numel(), dtype=torch.long, device=draws.device)
            first.scatter_reduce_(0, inverse, torch.arange(draws.numel(), device=draws.device), "amin")
            new = torch.zeros(draws.numel(), dtype=torch.bool, device=draws.device)
            new[first] = True
            new &= ~seen[draws]
            total = torch.cumsum(new, 0)
            if int(total[-1]) >= need:
                stop = int(torch.searchsorted(total, need)) + 1  # draws used up to the need-th new id
                new[stop:] = False
                tries += stop
            else:
                tries += draws.numel()
            picked = draws[new]
            seen[picked] = True
            found.append(picked)
            need -= picked.numel()
        return torch.cat(found), tries


def sampled_softmax_loss(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    targets: torch.Tensor,
    sampled: torch.Tensor,
    log_q_targets: torch.Tensor,
    log_q_sampled: torch.Tensor,
    hit_rows: torch.Tensor,
    hit_cols: torch.Tensor,
) -> torch.Tensor:
    """The definition: Σ_rows −log softmax([true logit, sampled logits])[0], logits corrected by −log Q
    and row `hit_rows[k]`'s sampled logit `hit_cols[k]` (its own target, drawn) removed."""
    true_logits = (hidden * weight[targets]).sum(-1) + bias[targets]
    true_logits = true_logits - log_q_targets
    sampled_logits = torch.addmm(bias[sampled], hidden, weight[sampled].t())
    sampled_logits = sampled_logits - log_q_sampled
    if hit_rows.numel():
        mask_value = torch.tensor(torch.finfo(hidden.dtype).min / 2, dtype=hidden.dtype, device=hidden.device)
        sampled_logits = sampled_logits.index_put((hit_rows, hit_cols), mask_value)
    # cross-entropy with the target in front: log(e^true + Σ e^sampled) − true, without a [N, 1+S] copy
    return (torch.logaddexp(true_logits, torch.logsumexp(sampled_logits, dim=1)) - true_logits).sum()


class SampledSoftmaxLoss(torch.autograd.Function):
    """`sampled_softmax_loss` as one Function: the same value and gradients (up to float rounding).

    Forward: logits = hidden·W_sᵀ + (b_s − log Q_s) in one product, hits masked in place, then the
    logits buffer becomes exp(logit − row max) (kept for backward with the row sums).  Backward:
    that buffer is scaled in place into ∂loss/∂logits; ∂hidden is one product (plus the target
    rows' term), ∂W_s one product, and the head's gradients two `index_add_`s each.  Runs once
    per forward (the saved buffer becomes the gradient).  With `product_dtype` (bf16), the three
    matrix products take operands in that dtype and widen their results to fp32."""

    @staticmethod
    def forward(
        ctx,
        hidden,
        weight,
        bias,
        targets,
        sampled,
        log_q_targets,
        log_q_sampled,
        hit_rows,
        hit_cols,
        product_dtype=None,
    ):
        w_sampled = weight.index_select(0, sampled)
        w_targets = weight.index_select(0, targets)
        corrected_bias = bias.index_select(0, sampled) - log_q_sampled
        if product_dtype is None:
            logits = torch.addmm(corrected_bias, hidden, w_sampled.t())
        else:
            logits = widened_matmul(hidden, w_sampled.t(), product_dtype).add_(corrected_bias)
        ctx.product_dtype = product_dtype
        if hit_rows.numel():
            logits.index_put_((hit_rows, hit_cols), logits.new_tensor(torch.finfo(logits.dtype).min / 2))
        true = torch.einsum("np,np->n", hidden, w_targets) + bias.index_select(0, targets) - log_q_targets
        top = torch.maximum(logits.amax(dim=1), true) if logits.shape[1] else true
        exp_logits = logits.sub_(top.unsqueeze(1)).exp_()  # in place: the logits are not needed again
        exp_true = (true - top).exp_()
        total = exp_logits.sum(dim=1).add_(exp_true)
        loss = (top + total.log() - true).sum()
        ctx.save_for_backward(hidden, weight, targets, sampled, w_sampled, w_targets, exp_logits, exp_true, total)
        return loss

    @staticmethod
    def backward(ctx, grad):
        if getattr(ctx, "consumed", False):
            raise RuntimeError(
                "the fused sampled softmax's backward runs once per forward (retain_graph is not supported)"
            )
        ctx.consumed = True
        hidden, weight, targets, sampled, w_sampled, w_targets, exp_logits, exp_true, total = ctx.saved_tensors
        need_hidden, need_weight, need_bias = ctx.needs_input_grad[:3]
        scale = grad / total
        grad_logits = exp_logits.mul_(scale.unsqueeze(1))  # p_ij · grad
        grad_true = exp_true * scale - grad  # (p_true − 1) · grad
        grad_hidden = grad_weight = grad_bias = None
        low = ctx.product_dtype
        # the [targets, negatives] gradient in the products' dtype, rounded once for both products
        operand = grad_logits if low is None else grad_logits.to(low)

        if need_hidden:
            grad_hidden = (grad_true.unsqueeze(1) * w_targets).add_(widened_matmul(operand, w_sampled, low))
        if need_weight:
            grad_weight = torch.zeros_like(weight)
            grad_weight.index_add_(0, sampled, widened_matmul(operand.t(), hidden, low))
            grad_weight.index_add_(0, targets, grad_true.unsqueeze(1) * hidden)
        if need_bias:
            grad_bias = weight.new_zeros(weight.shape[0])
            grad_bias.index_add_(0, sampled, grad_logits.sum(dim=0))
            grad_bias.index_add_(0, targets, grad_true)
        return grad_hidden, grad_weight, grad_bias, None, None, None, None, None, None, None


IMPLEMENTATIONS = ("auto", "eager", "fused")


class SampledSoftmax:
    """`softmax_fn` for `ElmoForBidirectionalLM`: summed sampled-softmax loss over the rows of `hidden`.

    Uses the model's own LM head (weights are shared with the full softmax used at evaluation).
    Random draws come from torch's default generator, so checkpointing its state makes runs resumable.
    `implementation`: "eager" (the definition), "fused" (the same loss as one autograd Function), or
    "auto": fused (its products in bf16 under bf16 autocast on a CPU with native bf16), except
    under autocast on other devices (where eager's products follow autocast's precision).
    """

    def __init__(self, lm_head, num_sampled: int, implementation: str = "auto"):
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation: expected one of {', '.join(IMPLEMENTATIONS)}, found {implementation!r}")
        self.lm_head = lm_head
        self.sampler = LogUniformSampler(lm_head.weight.shape[0])
        self.num_sampled = num_sampled
        self.implementation = implementation

    def resolve(self, device: torch.device) -> str:
        """The implementation a call on `device` runs ("auto" resolved)."""
        if self.implementation != "auto":
            return self.implementation
        return "eager" if device.type != "cpu" and torch.is_autocast_enabled(device.type) else "fused"

    def __call__(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        weight, bias = self.lm_head.weight, self.lm_head.bias
        sampled, tries = self.sampler.sample(self.num_sampled, device=weight.device)
        log_q_targets = torch.log(self.sampler.expected_count(targets, tries)).to(hidden.dtype)
        log_q_sampled = torch.log(self.sampler.expected_count(sampled, tries)).to(hidden.dtype)
        # accidental hits: where a row's target was also sampled, that sampled logit is removed
        column = torch.full((weight.shape[0],), -1, dtype=torch.long, device=weight.device)
        column[sampled] = torch.arange(sampled.numel(), device=weight.device)
        hit_col = column[targets]
        hit_rows = (hit_col >= 0).nonzero().squeeze(1)
        args = (hidden, weight, bias, targets, sampled, log_q_targets, log_q_sampled, hit_rows, hit_col[hit_rows])
        if self.resolve(hidden.device) == "eager":
            return sampled_softmax_loss(*args)
        product_dtype = autocast_product_dtype(hidden.device.type)
        with torch.autocast(hidden.device.type, enabled=False):  # computes in the head's dtype
            return SampledSoftmaxLoss.apply(
                hidden.to(weight.dtype),
                *args[1:5],
                *(t.to(weight.dtype) for t in args[5:7]),
                *args[7:],
                product_dtype,
            )


__all__ = ["LogUniformSampler", "SampledSoftmax", "SampledSoftmaxLoss", "sampled_softmax_loss", "IMPLEMENTATIONS"]
