"""Files the package reads and writes as sets and wholes.

- `resolve_files`: which files a path names (a file, a directory, a glob pattern, or a comma-separated
  list of these). Pretraining reads its text through it and provenance hashes the same files, so the
  two always agree on what "the data" is.
- `write_text_atomic`: a file written whole or not at all (a temporary file next to the target,
  flushed to disk, then renamed over it: a reader never sees half a file). Checkpoints, metrics and
  vocab.txt use it.
- `temporary_sibling`: the one way a command writes an output: into `.NAME.tmpPID` beside it, renamed
  over it when complete, removed when the block fails or is interrupted (Ctrl-C, and SIGTERM, which
  the CLI turns into an exception so that this cleanup runs); what a run killed with `kill -9` left
  (its process gone) is removed by the next run writing that output.
- `made_folders`: the missing folders of an output path, made for a block and removed (when still
  empty) if it fails, so that a failed command leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = [
    "check_writable",
    "made_folders",
    "resolve_files",
    "start_temporary",
    "temporary_sibling",
    "write_text_atomic",
]


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
    with temporary_sibling(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    return path


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM): alive
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def temporary_sibling(path: str | Path) -> Iterator[Path]:
    """`.NAME.tmpPID` beside `path`, for the block to write (a file or a folder) and rename into
    place; whatever is left of it when the block ends (a failure, Ctrl-C, SIGTERM under the CLI) is
    removed. Temporaries of the same output left by processes that are gone (`kill -9`) are removed
    first: the next run cleans up."""
    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.tmp(\d+)$")
    if path.parent.is_dir():
        for sibling in path.parent.iterdir():
            found = pattern.match(sibling.name)
            if found and int(found.group(1)) != os.getpid() and not _process_alive(int(found.group(1))):
                _remove(sibling)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
    finally:
        if tmp.exists() or tmp.is_symlink():
            _remove(tmp)


def start_temporary(tmp: Path, output: Path, *, folder: bool = False) -> None:
    """Makes the (empty) temporary file or folder `tmp` of `output` now, before any work: an output
    that cannot be written is one line at once, not after the work."""
    try:
        if folder:
            tmp.mkdir()
        else:
            tmp.open("wb").close()
    except OSError as err:
        raise OSError(f"{output}: cannot write there ({err.strerror or err})") from None


def check_writable(path: str | Path, what: str = "output") -> None:
    """Before any work: `path` can be written (not a folder; its nearest existing folder writable)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory; the {what} is a file")
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"{path}: cannot write there ({folder} is not a writable folder)")


@contextlib.contextmanager
def made_folders(folder: str | Path) -> Iterator[Path]:
    """`folder` and its missing parents, made now; those made here are removed again (if still empty)
    when the block fails, so a failed command leaves no folder of its own behind."""
    folder = Path(folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # nearest first
    there = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if there is not None and not there.is_dir():
        raise NotADirectoryError(f"{folder}: cannot write there: {there} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OSError(f"{folder}: cannot make this folder ({err.strerror or err})") from None
    try:
        yield folder
    except BaseException:
        for path in made:
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
