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
- `check_input_file` and `check_output`: what a command reads and writes, checked before any work.
  `check_output` is the one overwrite policy of every command that writes (embed, convert,
  init-config, probe, pretrain): an existing output is kept unless `overwrite` (`--overwrite`); a
  folder where a file is expected, a file where a folder is, or a path through a file, is refused
  in any case. That it can be written is shown by making its temporary (`start_temporary`), so the
  OS's reason ("Permission denied", "Read-only file system") is the one given.
- `user_path`: a message's paths as the user gave them: a temporary `.NAME.tmpPID` is shown as NAME.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

__all__ = [
    "check_input_file",
    "check_output",
    "check_writable",
    "made_folders",
    "resolve_files",
    "start_temporary",
    "temporary_sibling",
    "user_path",
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


def start_temporary(tmp: Path, output: Path, *, folder: bool = False, what: str = "OUTPUT") -> None:
    """Makes the (empty) temporary file or folder `tmp` of `output` (named `what` in errors) now,
    before any work: an output that cannot be written is one line at once, not after the work. An
    existing output folder, whose files are replaced one by one, must take a new file too."""
    try:
        if folder:
            tmp.mkdir()
        else:
            tmp.open("wb").close()
    except OSError as err:
        raise OSError(f"{what} {output}: cannot write there ({err.strerror or err})") from None
    if folder and output.is_dir():
        inside = output / tmp.name
        try:
            inside.open("wb").close()
            inside.unlink()
        except OSError as err:
            raise OSError(f"{what} {output}: cannot write into this folder ({err.strerror or err})") from None


_TEMPORARY = re.compile(r"\.([^/\s'\"]+)\.tmp\d+")


def user_path(text: str | os.PathLike) -> str:
    """`text` (a path, or a message naming paths) with each temporary `.NAME.tmpPID` shown as the
    output NAME it stands for: messages name what the user gave."""
    return _TEMPORARY.sub(r"\1", str(text))


def _named(path: Path, what: str | None) -> str:
    return f"{what} {path}" if what else str(path)


def check_input_file(path: str | Path, what: str | None = None) -> Path:
    """Before any work: `path` is a file (not a folder) that this process can open for reading (a
    FIFO or a device is opened without waiting for a writer); `what` (e.g. "--vocab") names it in the
    one-line `OSError` otherwise, which keeps the OS's reason ("Permission denied", "Not a
    directory" for a path through a file)."""
    path = Path(path)
    named = _named(path, what)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{named}: no such file") from None
    except OSError as err:
        raise OSError(f"{named}: cannot read it ({err.strerror or err})") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{named}: is a directory, expected a file")
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as err:
        raise OSError(f"{named}: cannot read it ({err.strerror or err})") from None
    return path


def _through_a_file(path: Path) -> Path | None:
    """The nearest existing folder above `path` when it is not a folder (a path through a file)."""
    there = next((p for p in path.parents if p.exists() or p.is_symlink()), None)
    return there if there is not None and not there.is_dir() else None


def check_output(
    path: str | Path,
    *,
    overwrite: bool = False,
    folder: bool = False,
    holds: Iterable[str] | None = None,
    what: str = "OUTPUT",
) -> Path:
    """The one overwrite policy (see the module docstring), before any work: `path` is a file to
    write (a folder with `folder`); an existing one is refused unless `overwrite`. An output folder
    is there already when it holds any of `holds` (the names the command writes there: other files
    are left as they are), or anything at all when `holds` is None. A folder where a file is
    expected, a file where a folder is, or a path through a file is refused in any case. One-line
    `OSError`s naming `what` and `path`."""
    path = Path(path)
    named = _named(path, what)
    blocking = _through_a_file(path)
    if blocking is not None:
        raise NotADirectoryError(f"{named}: cannot write there: {blocking} is a file, not a folder")
    if folder and path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{named}: is a file, expected a folder")
    if not folder and path.is_dir():
        raise IsADirectoryError(f"{named}: is a directory, expected a file")
    if overwrite or not (path.exists() or path.is_symlink()):
        return path
    if folder:
        try:
            names = sorted(os.listdir(path))
        except OSError as err:
            raise OSError(f"{named}: cannot read this folder ({err.strerror or err})") from None
        found = names if holds is None else [name for name in holds if name in names]
        if not found:
            return path
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise FileExistsError(
            f"{named} already holds {shown}; pass --overwrite to replace them, or choose another {what}"
        )
    raise FileExistsError(f"{named} exists; pass --overwrite to replace it, or choose another {what}")


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
