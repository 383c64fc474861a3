"""Which files a path names: a file, a directory (its files), a glob pattern, or a comma-separated
list of these. Pretraining reads its text through it and provenance hashes the same files, so the
two always agree on what "the data" is."""

from __future__ import annotations

import glob
from collections.abc import Sequence
from pathlib import Path

__all__ = ["resolve_files"]


def resolve_files(spec: str | Path | Sequence[str | Path], setting: str | None = None) -> list[Path]:
    """The files named by a path, a directory (its files), a glob pattern, or a comma-separated list
    of these. `setting` (e.g. "paths.heldout") is named in the error when something matches nothing."""
    if isinstance(spec, (str, Path)):
        parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    else:
        parts = [str(p) for p in spec]
    files: list[Path] = []
    for part in parts:
        path = Path(part).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            found = [path]
        else:
            found = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not found:
            raise FileNotFoundError(f"{setting + ': ' if setting else ''}no text files match {part!r}")
        files.extend(found)
    return list(dict.fromkeys(files))
