"""Learned scalar mix of the biLM layers (Peters et al., 2018, eq. 1) as a thinc layer.

ELMo_k = γ · Σ_j softmax(s)_j · h_{k,j}, per token, for a list of Docs' layers [L+1, n, dim].
Training adds dropout on the mixed vectors and λ‖s‖² on the layer weights (its gradient, 2λs,
is added in backprop: thinc layers have no loss of their own).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

from thinc.api import Model
from thinc.types import Floats2d, Floats3d


def build_scalar_mix(
    n_layers: Optional[int] = None, *, dropout: float = 0.0, l2: float = 0.0
) -> Model[List[Floats3d], List[Floats2d]]:
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


def scalar_mix_init(model: Model, X: Optional[List[Floats3d]] = None, Y=None) -> None:
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
    s = model.get_param("s")
    e = model.ops.xp.exp(s - s.max())
    return e / e.sum()


def scalar_mix_forward(model: Model, Xs: List[Floats3d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    ops = model.ops
    xp = ops.xp
    if not Xs:
        return [], lambda dYs: []
    gamma = float(model.get_param("gamma")[0])
    weights = layer_weights(model)
    lengths = [x.shape[1] for x in Xs]
    X = xp.concatenate(Xs, axis=1) if len(Xs) > 1 else Xs[0]  # [L+1, N, dim]
    mixed = xp.tensordot(weights, X, axes=1).astype("f", copy=False)  # [N, dim]
    rate = model.attrs["elmo_dropout"] if is_train else 0.0
    mask = ops.get_dropout_mask(mixed.shape, rate) if rate > 0 else None
    Y = gamma * mixed
    if mask is not None:
        Y = Y * mask
    Ys = _split(ops, Y, lengths)

    def backprop(dYs: List[Floats2d]) -> List[Floats3d]:
        dY = xp.concatenate(dYs, axis=0) if len(dYs) > 1 else dYs[0]
        if mask is not None:
            dY = dY * mask
        d_gamma = (dY * mixed).sum()
        d_mixed = gamma * dY
        d_weights = xp.tensordot(X, d_mixed, axes=([1, 2], [0, 1]))  # [L+1]
        d_s = weights * (d_weights - (weights * d_weights).sum())
        d_s = d_s + 2.0 * model.attrs["l2"] * model.get_param("s")
        model.inc_grad("s", d_s.astype("f"))
        model.inc_grad("gamma", xp.asarray(d_gamma, dtype="f").reshape((1,)))
        dX = weights[:, None, None].astype("f") * d_mixed[None]
        return _split(ops, dX, lengths, axis=1)

    return Ys, backprop


def _split(ops, array, lengths: List[int], axis: int = 0) -> list:
    out = []
    start = 0
    for n in lengths:
        index = [slice(None)] * array.ndim
        index[axis] = slice(start, start + n)
        out.append(ops.as_contig(array[tuple(index)]))
        start += n
    return out


__all__ = ["build_scalar_mix", "layer_weights"]
