"""Files the package reads and writes as sets and wholes.

- `resolve_files`: which files a path names (a file, a directory, a glob pattern, or a comma-separated
  list of these). Pretraining reads its text through it and provenance hashes the same files, so the
  two always agree on what "the data" is.
- `write_text_atomic`: a file written whole or not at all (a temporary file next to the target,
  flushed to disk, then renamed over it: a reader never sees half a file). Checkpoints, metrics and
  vocab.txt use it.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["resolve_files", "write_text_atomic"]


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


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Writes `text` to a temporary file next to `path`, flushes it to disk, then renames it over `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path
