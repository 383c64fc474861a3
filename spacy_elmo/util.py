"""Resolving a model reference (HF directory, hub id, legacy files) to an `ElmoModel`."""

from __future__ import annotations

from pathlib import Path

from .legacy import LegacyFormatError, load_legacy


def resolve_legacy(reference: str | Path) -> tuple[Path, Path] | None:
    """(options.json, weights.hdf5) if `reference` names legacy files: a directory holding both,
    or "OPTIONS.json,WEIGHTS.hdf5"; else None."""
    text = str(reference)
    if "," in text:
        options, weights = (Path(p.strip()) for p in text.split(",", 1))
        return options, weights
    path = Path(text)
    if path.is_dir() and (path / "options.json").is_file() and not (path / "config.json").is_file():
        weights = sorted(path.glob("*.hdf5"))
        if not weights:
            raise LegacyFormatError(f"{path}: has options.json but no .hdf5 weights file")
        preferred = [w for w in weights if w.name == "lm_weights.hdf5"]
        return path / "options.json", (preferred or weights)[0]
    return None


def load_model(reference: str | Path, **kwargs):
    """An `ElmoModel` in eval mode from an HF directory, a hub id, or legacy options+weights files."""
    from .modeling_elmo import ElmoModel

    legacy = resolve_legacy(reference)
    if legacy is not None:
        return load_legacy(*legacy)
    path = Path(str(reference))
    if path.exists() and not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{path}: not an ELMo model: expected config.json + model.safetensors (HF layout) "
            "or options.json + lm_weights.hdf5 (legacy layout)"
        )
    return ElmoModel.from_pretrained(str(reference), **kwargs).eval()
