"""The declared range of every numeric option of the commands, and the one check of a value.

`OPTIONS` is the table (command → option → `Range`); docs/guarantees.md ("Options") prints it and
tests/formats/test_option_campaign.py runs every entry at its edges, one past them and with a
non-number. A value is checked once where it enters: on the command line by argparse, whose `type`
is the `Range` (`error: argument --batch-size: expected an integer >= 1, got '0'`), and in the
library by the function that takes it (`Range.check`, a one-line `ValueError` naming the parameter),
before any work. 0 is in a range where it means something (`--max-sentences 0`: all, `--layer 0`:
the token vectors, `--seed 0`). A bound that depends on the model (`similar --layer`: at most L) is
checked against the model's config before its weights are read. The standard library only: the
command line imports this to build its parsers.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Integers or (finite) numbers from `low` to `high` (None: unbounded above); `zero`: what 0
    means, where it is in the range and means something other than its magnitude."""

    kind: type  # int or float
    low: int | float
    high: int | float | None = None
    zero: str | None = None
    # (what a bound of the model's gives: shown in the table, checked by the command)
    high_from: str | None = None

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if self.high is not None:
            text = f"{what} from {self.low} to {self.high}"
        elif self.high_from is not None:
            text = f"{what} from {self.low} to {self.high_from}"
        else:
            text = f"{what} >= {self.low}"
        return f"{text} (0 = {self.zero})" if self.zero else text

    def _convert(self, text: str) -> int | float:
        value: int | float
        if self.kind is int:
            value = int(text.strip(), 10)
        else:
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(text)
        return value

    def __call__(self, text: str) -> int | float:
        """The argparse `type`: the value of `text`, or `ArgumentTypeError` (argparse's one line,
        naming the option)."""
        try:
            value = self._convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}") from None
        problem = self.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text!r}")
        return value

    def problem(self, value, high: int | float | None = None) -> str | None:
        """Why `value` is out of range (None: it is in it); `high`: the model's bound, if any."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"expected {self.describe()}, got {value!r}"
        if self.kind is int and not isinstance(value, int):
            return f"expected {self.describe()}, got {value!r}"
        if not math.isfinite(value):
            return f"expected {self.describe()}, got {value!r}"
        top = self.high if high is None else high
        if value < self.low or (top is not None and value > top):
            if high is not None:  # the model's bound, as the model gives it
                what = "an integer" if self.kind is int else "a number"
                return (
                    f"expected {what} from {self.low} to {high} ({self.high_from or 'the bound'} here), got {value!r}"
                )
            return f"expected {self.describe()}, got {value!r}"
        return None

    def check(self, value, name: str, high: int | float | None = None):
        """`value` if it is in the range (and at most `high`, the model's bound, when given), else a
        one-line `ValueError` naming `name` (the parameter, or the option on the command line)."""
        problem = self.problem(value, high)
        if problem:
            raise ValueError(f"{name}: {problem}")
        return value


# torch.manual_seed takes any non-negative 64-bit integer; numpy's generators (spaCy's) 32 bits
SEED = Range(int, 0, 2**32 - 1)

OPTIONS: dict[str, dict[str, Range]] = {
    "embed": {
        "--dims": Range(int, 1),
        "--batch-size": Range(int, 1),
    },
    "similar": {
        "-n": Range(int, 1),
        "--layer": Range(int, 0, zero="the token vectors", high_from="the model's L"),
        "--min-count": Range(int, 1),
        "--max-sentences": Range(int, 0, zero="all"),
    },
    "probe": {
        "--max-sentences": Range(int, 0, zero="all"),
        "--seed": SEED,
        "--l2": Range(float, 0.0),
        "--max-iter": Range(int, 1),
    },
}


def option_table() -> str:
    """The table of `OPTIONS` as Markdown rows (command, option, valid values)."""
    rows = ["| command | option | valid values |", "| --- | --- | --- |"]
    for command, options in OPTIONS.items():
        for option, allowed in options.items():
            rows.append(f"| `{command}` | `{option}` | {allowed.describe()} |")
    return "\n".join(rows)


__all__ = ["OPTIONS", "Range", "SEED", "option_table"]
