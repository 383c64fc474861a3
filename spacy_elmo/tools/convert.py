"""`spacy-elmo convert`: any model reference (legacy options.json + weights, an ELMoForManyLangs
directory, a URL, an HF directory or hub id) → a model directory (config.json, model.safetensors,
tokenizer, model card naming where the weights came from)."""

from __future__ import annotations

from pathlib import Path

from ..formats.download import is_url
from ..formats.references import load_pretrained
from ..hf.model_directory import save_model_directory


def convert(
    source: list[str], output: str | Path, *, lang: str | None = None, license: str | None = None, progress: bool = True
):
    """Reads `source` (one reference, or OPTIONS.json and WEIGHTS.hdf5) and writes it to `output` as a
    model directory; returns the model. `lang`: the spaCy language of the tokenizer saved with it."""
    if len(source) == 2:
        check_legacy_order(Path(source[0]), Path(source[1]))
    model, tokenizer = load_pretrained(",".join(source), lang=lang, progress=progress)
    card = {"source": describe_source(source), "license": license, "language": tokenizer.lang}
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
    """What a model card says the model was converted from (file names, or the URL)."""
    if len(source) == 1 and is_url(source[0]):
        return source[0]
    names = " + ".join(f"`{Path(s).name}`" for s in source)
    efml = len(source) == 1 and (Path(source[0]) / "token_embedder.pkl").is_file()
    return f"the ELMoForManyLangs directory {names}" if efml else names


__all__ = ["convert", "check_legacy_order", "describe_source"]
