"""How the biLM computes at inference: the one list of precisions and the one check of a value.

"fp32" is exact (the default); "bf16" computes the matrix products in bf16 with fp32 state and
outputs (`kernels.bf16`), where the device multiplies bf16 natively (elsewhere one warning line,
then fp32); "int8" quantizes the products dynamically (`kernels.int8`, CPU). Computation that
needs a gradient (training) is fp32 whatever the precision says; pretraining has its own
`training.precision`.

A value is checked once, where it enters (`ElmoModel.set_precision`, the `elmo` component's
`precision`, `spacy-elmo embed --precision`); from there it travels typed (`Precision`), is stored
once, in the model's `config.precision`, and bound (`modeling_elmo.bind_precision`: the decider
`kernels.products.decide_product` answers once per product), never checked or copied again. The
standard library only: the command line imports this to list the choices.
"""

from __future__ import annotations

from typing import Literal, cast, get_args

Precision = Literal["fp32", "bf16", "int8"]
PRECISIONS: tuple[str, ...] = get_args(Precision)


def check_precision(value, setting: str = "precision") -> Precision:
    """`value` if it is one of PRECISIONS, else a one-line `ValueError` naming `setting`."""
    if value not in PRECISIONS:
        raise ValueError(f"{setting} must be one of {', '.join(map(repr, PRECISIONS))}, got {value!r}")
    return cast(Precision, value)


__all__ = ["PRECISIONS", "Precision", "check_precision"]
