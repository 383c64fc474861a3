"""Files written whole or not at all: a temporary file next to the target, flushed to disk, then
renamed over it (a reader never sees half a file). Checkpoints, metrics and vocab.txt use it."""

from __future__ import annotations

import os
from pathlib import Path


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


__all__ = ["write_text_atomic"]
