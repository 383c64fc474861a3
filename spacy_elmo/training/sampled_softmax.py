"""Sampled softmax with a log-uniform (Zipfian) sampler, as bilm-tf trains large vocabularies.

Instead of normalising over all V words, each call scores the true word against S words drawn
once for the whole batch from P(k) = log((k + 2) / (k + 1)) / log(V + 1), which suits a vocabulary
sorted by falling frequency. Draws are unique (rejection of repeats, like TensorFlow's
`log_uniform_candidate_sampler(unique=True)`), so each candidate's expected count after `tries`
draws is 1 − (1 − P(k))^tries; logits are corrected by −log(expected count) and a sampled word
equal to the target ("accidental hit") is masked out. Evaluation always uses the full softmax.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


class LogUniformSampler:
    """Unique draws from the log-uniform distribution over ids 0..range_max-1."""

    def __init__(self, range_max: int):
        if range_max < 2:
            raise ValueError(f"LogUniformSampler needs range_max >= 2, got {range_max}")
        self.range_max = range_max
        self.log_range = math.log(range_max + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.double()
        return (torch.log1p(1.0 / (ids + 1.0)) / self.log_range)

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


class SampledSoftmax:
    """`softmax_fn` for `ElmoForBidirectionalLM`: summed sampled-softmax loss over the rows of `hidden`.

    Uses the model's own LM head (weights are shared with the full softmax used at evaluation).
    Random draws come from torch's default generator, so checkpointing its state makes runs resumable.
    """

    def __init__(self, lm_head, num_sampled: int):
        self.lm_head = lm_head
        self.sampler = LogUniformSampler(lm_head.weight.shape[0])
        self.num_sampled = num_sampled

    def __call__(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        weight, bias = self.lm_head.weight, self.lm_head.bias
        sampled, tries = self.sampler.sample(self.num_sampled, device=weight.device)
        true_logits = (hidden * weight[targets]).sum(-1) + bias[targets]
        true_logits = true_logits - torch.log(self.sampler.expected_count(targets, tries)).to(hidden.dtype)
        sampled_logits = torch.addmm(bias[sampled], hidden, weight[sampled].t())
        sampled_logits = sampled_logits - torch.log(self.sampler.expected_count(sampled, tries)).to(hidden.dtype)
        # accidental hits: where a row's target was also sampled, that sampled logit is removed
        column = torch.full((weight.shape[0],), -1, dtype=torch.long, device=weight.device)
        column[sampled] = torch.arange(sampled.numel(), device=weight.device)
        hit_col = column[targets]
        hit_rows = (hit_col >= 0).nonzero().squeeze(1)
        if hit_rows.numel():
            mask_value = torch.tensor(torch.finfo(hidden.dtype).min / 2, dtype=hidden.dtype, device=hidden.device)
            sampled_logits = sampled_logits.index_put((hit_rows, hit_col[hit_rows]), mask_value)
        # cross-entropy with the target in front: log(e^true + Σ e^sampled) − true, without a [N, 1+S] copy
        return (torch.logaddexp(true_logits, torch.logsumexp(sampled_logits, dim=1)) - true_logits).sum()


__all__ = ["LogUniformSampler", "SampledSoftmax"]
