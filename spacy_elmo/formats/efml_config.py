"""The architecture json of an ELMoForManyLangs model (HIT-SCIR, package `elmoformanylangs`), checked
as `ElmoConfig` checks its fields: `EfmlTokenEmbedder` / `EfmlEncoder` are huggingface_hub `@strict`
dataclasses (types from the annotations, ranges from the validators), `EfmlArchitecture` the two
together. Every problem is one `EfmlFormatError` line naming the json, the field, what it is and what
was expected. `KNOWN_ARCHITECTURES`: the architectures the package ships, for directories whose
config.json names a path on their authors' machines.

The sections, as the package's runtime reads them: `token_embedder` (name "cnn", activation, filters,
n_highway, word_dim, char_dim, max_characters_per_token) and `encoder` (name "elmo", dim,
projection_dim, n_layers, cell_clip, proj_clip). Reading the directory and mapping its weights is
`efml.py`'s.
"""

# (no `from __future__ import annotations`: @strict validates from the evaluated annotations)
from collections.abc import Callable
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Literal

from huggingface_hub.dataclasses import strict, validated_field
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError

from ..compat import OptionalNumber
from .legacy import LegacyFormatError

# the architectures the package ships (configs/*.json), by the basename a config.json names
KNOWN_ARCHITECTURES: dict[str, dict] = {
    "cnn_50_100_512_4096_sample.json": {
        "token_embedder": {
            "name": "cnn",
            "activation": "relu",
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2,
            "word_dim": 100,
            "char_dim": 50,
            "max_characters_per_token": 50,
        },
        "encoder": {"name": "elmo", "projection_dim": 512, "dim": 4096, "n_layers": 2, "cell_clip": 3, "proj_clip": 3},
    },
}


class EfmlFormatError(LegacyFormatError):
    """An ELMoForManyLangs directory is incomplete or does not match the layout its runtime reads."""


class Unsupported(ValueError):
    """A value the runtime takes but this reader does not; the message follows "<field> is <value>"."""


def _field(expected: str, *checks: Callable[[Any], None]) -> Any:
    """A required field: the annotation is its type, `checks` its range; `expected` says both."""
    return validated_field(list(checks), metadata={"expected": expected})


def _count(minimum: int, *checks: Callable[[Any], None]) -> Any:
    def at_least(value) -> None:
        if value < minimum:
            raise ValueError(f"below {minimum}")

    return _field(f"an integer >= {minimum}", at_least, *checks)


def _clip(value) -> None:
    if value is not None and not value >= 0:  # NaN too
        raise ValueError("negative")


def _filters(value) -> None:
    if not value or any(len(pair) != 2 or min(pair) < 1 for pair in value):
        raise ValueError("not [width, number] pairs")


def _unsupported(when: Callable[[Any], bool], why: str) -> Callable[[Any], None]:
    def check(value) -> None:
        if when(value):
            raise Unsupported(why)

    return check


class _Section:
    """One section of the architecture json; `read` makes the line every problem is reported in."""

    section: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # (every section is a dataclass)

    @classmethod
    def read(cls, architecture: dict, source: str):
        values = architecture.get(cls.section)
        if not isinstance(values, dict):
            raise EfmlFormatError(f"{source}: missing section '{cls.section}'")
        names = [f.name for f in fields(cls)]
        try:  # fields are set, and checked, in declaration order; a missing one stops the order there
            return cls(**{name: values[name] for name in names if name in values})
        except StrictDataclassFieldValidationError as err:
            name, cause = str(err).split("'", 2)[1], err.__cause__
            where, value = f"{cls.section}.{name}", values[name]
            if isinstance(cause, Unsupported):
                raise EfmlFormatError(f"{source}: {where} is {value!r}{cause}") from None
            expected = cls.__dataclass_fields__[name].metadata["expected"]
            raise EfmlFormatError(f"{source}: field '{where}' is {value!r}; expected {expected}") from None
        except StrictDataclassClassValidationError as err:  # what involves several fields: said in full
            raise EfmlFormatError(f"{source}: {err.__cause__}") from None
        except TypeError:  # @strict(accept_kwargs=True): "Missing required field"
            missing = [name for name in names if name not in values]
            if not missing:
                raise
            raise EfmlFormatError(f"{source}: missing field '{cls.section}.{missing[0]}'") from None


@strict(accept_kwargs=True)
@dataclass
class EfmlTokenEmbedder(_Section):
    """The architecture's `token_embedder`: the character CNN and the word embedding."""

    section: ClassVar[str] = "token_embedder"
    name: str = _field(
        "a string",
        _unsupported(
            lambda name: name.lower() != "cnn",
            ": the released models use the cnn token embedder; this one is not supported",
        ),
    )
    activation: Literal["relu", "tanh"] = _field("'relu' or 'tanh'")
    filters: list[list[int]] = _field("[width, number] pairs of positive integers", _filters)
    n_highway: int = _count(0)
    word_dim: int = _count(0)
    char_dim: int = _count(
        0, _unsupported(lambda dim: dim == 0, " (a word-only model without the character CNN): not supported")
    )
    max_characters_per_token: int = _count(3)

    def validate_widths(self):
        if max(width for width, _ in self.filters) > self.max_characters_per_token:
            raise ValueError(
                f"field 'token_embedder.filters' is {self.filters!r}; expected widths <= "
                f"max_characters_per_token ({self.max_characters_per_token})"
            )

    @property
    def n_filters(self) -> int:
        return sum(num for _, num in self.filters)


@strict(accept_kwargs=True)
@dataclass
class EfmlEncoder(_Section):
    """The architecture's `encoder`: the biLSTM with projection (AllenNLP's ElmoLstm)."""

    section: ClassVar[str] = "encoder"
    name: str = _field(
        "a string",
        _unsupported(
            lambda name: name.lower() != "elmo", ": only the 'elmo' biLM encoder (the released models') is supported"
        ),
    )
    dim: int = _count(1)
    projection_dim: int = _count(1)
    n_layers: int = _count(1)
    cell_clip: OptionalNumber = _field("a number >= 0 or null", _clip)
    proj_clip: OptionalNumber = _field("a number >= 0 or null", _clip)

    def validate_projection(self):
        if self.projection_dim >= self.dim:
            raise Unsupported(
                f"encoder.projection_dim ({self.projection_dim}) is not below encoder.dim ({self.dim}): the LSTM "
                "then keeps a square projection that this biLM does not have; not supported"
            )


@dataclass(frozen=True)
class EfmlArchitecture:
    """The fields of an architecture json this reader uses, checked (the rest is the runtime's)."""

    token_embedder: EfmlTokenEmbedder
    encoder: EfmlEncoder

    @classmethod
    def read(cls, architecture: dict, source: str) -> "EfmlArchitecture":
        """Checks `architecture` (found in `source`); every problem is one EfmlFormatError line."""
        return cls(EfmlTokenEmbedder.read(architecture, source), EfmlEncoder.read(architecture, source))


__all__ = [
    "KNOWN_ARCHITECTURES",
    "EfmlArchitecture",
    "EfmlEncoder",
    "EfmlFormatError",
    "EfmlTokenEmbedder",
]
