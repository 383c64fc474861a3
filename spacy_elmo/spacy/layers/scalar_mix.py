"""Learned scalar mix of the biLM layers (Peters et al., 2018, eq. 1) as a thinc layer.

ELMo_k = γ · Σ_j softmax(s)_j · h_{k,j}, per token, for a list of Docs' layers [L+1, n, dim].
The mix and its penalty λ‖s‖² are `spacy_elmo.hf.modeling_elmo.scalar_mix` / `scalar_mix_penalty`, the same
functions as the torch `ScalarMix`, run through torch on this layer's thinc parameters (`s`,
`gamma`, kept as thinc params so saved pipelines keep their format). Training adds dropout on
the mixed vectors; the penalty's gradient (2λs) is added in backprop, since thinc layers have no
loss of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
from thinc.api import Model, torch2xp, xp2torch
from thinc.types import Floats2d, Floats3d, FloatsXd


def build_scalar_mix(
    n_layers: int | None = None, *, dropout: float = 0.0, l2: float = 0.0
) -> Model[list[Floats3d], list[Floats2d]]:
    """Layers per Doc [L+1, n, dim] → mixed vectors per Doc [n, dim]; nL/nO are inferred if None."""
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    if l2 < 0:
        raise ValueError(f"l2 must be >= 0, got {l2}")
    return Model(
        "elmo-scalar-mix",
        scalar_mix_forward,
        init=scalar_mix_init,
        params={"s": None, "gamma": None},
        dims={"nL": n_layers, "nO": None},
        attrs={"elmo_dropout": float(dropout), "l2": float(l2)},
    )


def scalar_mix_init(model: Model, X: list[Floats3d] | None = None, Y=None) -> None:
    if X:
        model.set_dim("nL", X[0].shape[0], force=True)
        model.set_dim("nO", X[0].shape[2], force=True)
    if not model.has_dim("nL"):
        raise ValueError("elmo-scalar-mix: the number of layers (nL) is unknown; initialize with sample data")
    n_layers = model.get_dim("nL")
    model.set_param("s", model.ops.alloc1f(n_layers))  # equal weights
    gamma = model.ops.alloc1f(1)
    gamma[0] = 1.0
    model.set_param("gamma", gamma)


def layer_weights(model: Model):
    """softmax(s): the normalized layer weights."""
    return torch2xp(torch.softmax(xp2torch(model.get_param("s")), dim=0), ops=model.ops)


def scalar_mix_forward(model: Model, Xs: list[Floats3d], is_train: bool) -> tuple[list[Floats2d], Callable]:
    # imported here, not at the top: spaCy loads this module through its entry points whenever it makes
    # any pipeline (spacy.blank too), and the model module brings transformers (~1.5 s) with it
    from ...hf.modeling_elmo import scalar_mix, scalar_mix_penalty

    ops = model.ops
    xp = ops.xp
    if not Xs:
        return [], lambda dYs: []
    lengths = [x.shape[1] for x in Xs]
    X = xp.concatenate(Xs, axis=1)  # [L+1, N, dim], a copy (cached layers are read-only)
    s = xp2torch(model.get_param("s"), requires_grad=is_train)
    gamma = xp2torch(model.get_param("gamma"), requires_grad=is_train)
    X_torch = xp2torch(X, requires_grad=is_train)
    with torch.set_grad_enabled(is_train):
        Y_torch = scalar_mix(X_torch, s, gamma)  # [N, dim]
    Y = torch2xp(Y_torch, ops=ops)
    rate = model.attrs["elmo_dropout"] if is_train else 0.0
    mask = ops.get_dropout_mask(Y.shape, rate) if rate > 0 else None
    if mask is not None:
        Y = Y * mask

    def backprop(dYs: list[Floats2d]) -> list[Floats3d]:
        dY = xp.concatenate(dYs, axis=0) if len(dYs) > 1 else dYs[0]
        if mask is not None:
            dY = dY * mask
        penalty = scalar_mix_penalty(s, model.attrs["l2"])
        d_s, d_gamma, dX = torch.autograd.grad(
            (Y_torch, penalty), (s, gamma, X_torch), (xp2torch(ops.asarray(dY, dtype="f")), torch.ones_like(penalty))
        )
        # (torch2xp is typed as any array; these gradients are floats)
        model.inc_grad("s", cast(FloatsXd, torch2xp(d_s, ops=ops)))
        model.inc_grad("gamma", cast(FloatsXd, torch2xp(d_gamma, ops=ops)))
        return _split(ops, torch2xp(dX, ops=ops), lengths, axis=1)

    return _split(ops, Y, lengths), backprop


def _split(ops, array, lengths: list[int], axis: int = 0) -> list:
    out = []
    start = 0
    for n in lengths:
        index = [slice(None)] * array.ndim
        index[axis] = slice(start, start + n)
        out.append(ops.as_contig(array[tuple(index)]))
        start += n
    return out


__all__ = ["build_scalar_mix", "layer_weights"]
