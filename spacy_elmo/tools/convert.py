"""`spacy-elmo convert`: any model reference (legacy options.json + weights, an ELMoForManyLangs
directory, a URL, an HF directory or hub id) → a model directory (config.json, model.safetensors,
tokenizer, model card naming where the weights came from)."""

from __future__ import annotations

from pathlib import Path

from ..formats.references import parse_reference
from ..hf.model_directory import save_model_directory


def convert(
    source: list[str], output: str | Path, *, lang: str | None = None, license: str | None = None, progress: bool = True
):
    """Reads `source` (one reference, or OPTIONS.json and WEIGHTS.hdf5) and writes it to `output` as a
    model directory; returns the model. `lang`: the spaCy language of the tokenizer saved with it."""
    if len(source) == 2:
        check_legacy_order(Path(source[0]), Path(source[1]))
    reference = parse_reference(",".join(source))
    model, tokenizer = reference.load(lang=lang, progress=progress)
    card = {"source": reference.describe(), "license": license, "language": tokenizer.lang}
    save_model_directory(output, model, tokenizer, card=card)
    return model


def check_legacy_order(options: Path, weights: Path) -> None:
    """OPTIONS.json WEIGHTS.hdf5 given the other way round: say so instead of "not valid JSON"."""

    def head(path: Path) -> bytes:
        try:
            with open(path, "rb") as handle:
                return handle.read(8)
        except OSError:
            return b""

    if head(options).startswith(b"\x89HDF") and head(weights).lstrip()[:1] == b"{":
        raise ValueError(
            f"{options} is an HDF5 file and {weights} JSON: the order is `convert OPTIONS.json WEIGHTS.hdf5 OUTPUT`"
        )


def describe_source(source: list[str]) -> str:
    """Deprecated: `parse_reference(",".join(source)).describe()` (what a model card says the model
    was converted from); kept for one release."""
    import warnings

    warnings.warn(
        "spacy_elmo.tools.convert.describe_source is deprecated: use "
        "spacy_elmo.formats.references.parse_reference(reference).describe()",
        DeprecationWarning,
        stacklevel=2,
    )
    return parse_reference(",".join(source)).describe()


__all__ = ["convert", "check_legacy_order"]
