"""`spacy-elmo convert`: any model reference (legacy options.json + weights, an ELMoForManyLangs
directory, a URL, an HF directory or hub id) → a model directory (config.json, model.safetensors,
tokenizer, model card naming where the weights came from).

OUTPUT is checked before the model is read (`files.check_output`, the one overwrite policy of the
commands): a file there is refused, and so is a folder holding the files of a model directory
(`MODEL_FILES`) unless `overwrite`. The directory is written into a temporary folder beside OUTPUT
(`files.temporary_sibling`, removed on failure, Ctrl-C and SIGTERM) and moved into place when
complete: renamed, or, into an existing folder, file by file (each keeps the mode of the file it
replaces; other files stay, and so does a README.md convert did not write).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from ..constants import CARD_FILE, MODEL_FILES
from ..files import check_output, made_folders, start_temporary, temporary_sibling
from ..formats.references import parse_reference
from ..hf.model_card import CARD_MARK
from ..hf.model_directory import save_model_directory

logger = logging.getLogger(__name__)


def convert(
    source: list[str],
    output: str | Path,
    *,
    lang: str | None = None,
    license: str | None = None,
    progress: bool = True,
    overwrite: bool = False,
):
    """Reads `source` (one reference, or OPTIONS.json and WEIGHTS.hdf5) and writes it to `output` as a
    model directory; returns the model. `lang`: the spaCy language of the tokenizer saved with it
    (None: the source's own, else "en"); `overwrite`: replace the model files of an existing OUTPUT
    folder (see the module docstring)."""
    if len(source) == 2:
        check_legacy_order(Path(source[0]), Path(source[1]))
    output = Path(output)
    check_output(output, overwrite=overwrite, folder=True, holds=MODEL_FILES)  # before any work
    if lang is not None:
        from .init_config import language_class

        language_class(lang)
    reference = parse_reference(",".join(source))
    checked = reference.check()  # cheap: no weights read, no network
    with made_folders(output.parent), temporary_sibling(output) as tmp:
        start_temporary(tmp, output, folder=True)
        model, tokenizer = reference.load(checked=checked, lang=lang, progress=progress)
        card = {
            "source": reference.describe(),
            "license": license,
            "language": tokenizer.lang,
            "reference": str(output),
        }
        save_model_directory(tmp, model, tokenizer, card=card)
        _move_into_place(tmp, output)
    return model


def written_by_convert(folder: Path) -> bool:
    """Whether `folder` is a model directory this package wrote (its model card's mark)."""
    card = folder / CARD_FILE
    try:
        return card.is_file() and CARD_MARK in card.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _move_into_place(tmp: Path, output: Path) -> None:
    if not output.exists():
        os.replace(tmp, output)
        return
    for written in sorted(tmp.iterdir()):
        target = output / written.name
        if written.name == CARD_FILE and target.is_file() and not written_by_convert(output):
            logger.warning("kept %s: it was not written by spacy-elmo, so no model card was written", target)
            continue
        if target.is_file():
            os.chmod(written, stat.S_IMODE(target.stat().st_mode))
        os.replace(written, target)


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


__all__ = ["check_legacy_order", "convert", "written_by_convert"]
