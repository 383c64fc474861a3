"""Model references given as http(s) URLs: downloaded once into a local cache (with pooch) and
replaced by local paths.

A reference is either one URL of a model archive (.zip, .tar.gz, .tgz, .tar), which becomes the
path of its extracted directory, or a legacy pair "URL_options,URL_weights", which becomes the pair
of downloaded files. Each URL may carry `#sha256=<64 hex digits>`; the download is checked against
it before it enters the cache.

Cache layout, under `cache_dir()`: one folder per URL, `<16 hex of sha256(URL)>-<file name>/`,
holding the downloaded file, or for an archive only its extraction `model/` and `model.sha256` (the
archive's sha256, for a later `#sha256=` check): the archive is deleted once extracted, so a model
takes its size once on disk. pooch downloads into a temporary file and moves it into place only when
complete (and its hash matches), and an archive is extracted into a temporary sibling folder renamed
to `model/` only on success, so an interrupted or failed run leaves nothing that a later run would
use, and no folder it created.

A copy in the cache that turns out damaged when it is read (truncated by a full disk or a copy, a
file removed: what the model's readers find, `references.UrlReference.load`) is removed (`forget`)
and downloaded again, once.

Processes that fetch one URL at once (the ranks of a torchrun job) download it once: a file lock per
cache folder (in the system's temporary folder, so the cache holds only models) lets the first one
download while the others wait, then find it cached. The lock does not reach processes on other
machines that share a cache folder (a network file system): fetch the model on one machine first.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import os
import re
import shutil
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urldefrag, urlsplit

if TYPE_CHECKING:
    from tqdm import tqdm

_URL = re.compile(r"^https?://", re.I)
_SHA256_FRAGMENT = re.compile(r"^sha256=([0-9a-fA-F]{64})$")
_ARCHIVES = {".zip": "zip", ".tar.gz": "tar", ".tgz": "tar", ".tar": "tar"}
_EXTRACTED = "model"  # the extraction's folder name beside the downloaded archive
_RECORD = "model.sha256"  # the sha256 of the archive `model/` was extracted from
_CHUNK = 1 << 18  # bytes per read: pooch's default (1 KiB) is slow for weights of hundreds of MB
_TIMEOUT = 30  # seconds without data before a download fails


class DownloadError(OSError):
    """A URL reference that cannot be fetched: HTTP error, broken connection, checksum mismatch,
    corrupt or unsafe archive. Its message is one line naming the URL."""


def cache_dir() -> Path:
    """`$SPACY_ELMO_CACHE`, else `spacy_elmo` in the user cache (`$XDG_CACHE_HOME` or `~/.cache`,
    as Hugging Face does)."""
    explicit = os.environ.get("SPACY_ELMO_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    root = os.environ.get("XDG_CACHE_HOME") or Path("~/.cache").expanduser()
    return Path(root) / "spacy_elmo"


def reference_parts(reference) -> list[str]:
    """The comma-separated parts of a model reference's text, stripped: the one place it is split
    (`references.parse_reference` splits it once and `UrlReference.parts` keeps the parts)."""
    return [part.strip() for part in str(reference).split(",")]


def is_url(reference) -> bool:
    """Whether `reference` holds an http(s) URL: one URL, or a comma-separated pair with one."""
    return any(_URL.match(part) for part in reference_parts(reference))


def check_url_reference(reference: str) -> None:
    """`check_url_parts` of the reference's text."""
    check_url_parts(reference_parts(reference))


def check_url_parts(parts: Sequence[str]) -> None:
    """Raises `DownloadError` (one line) when a URL reference is malformed: a single URL that is no
    archive, more than two parts, a fragment other than #sha256=<64 hex>. Makes no request."""
    if len(parts) == 1 and _archive_kind(parts[0]) is None:
        raise DownloadError(
            f"{parts[0]}: a single URL must name a model archive (.zip, .tar.gz, .tgz or .tar); "
            'legacy files are given as a pair "URL_options,URL_weights"'
        )
    if len(parts) > 2:
        raise DownloadError(
            f'{",".join(parts)}: expected one URL of an archive or a pair "options,weights", found {len(parts)} parts'
        )
    for part in parts:
        if _URL.match(part):
            _split_fragment(part)


def fetch(reference: str, *, progress: bool = True) -> str:
    """A local reference for `reference`: the extracted directory of an archive URL, the local
    "options,weights" pair of a pair of URLs (a local part stays as it is); a reference without a
    URL is returned unchanged. Downloads only what is not cached yet; raises `DownloadError`."""
    if not is_url(reference):
        return reference
    return fetch_parts(reference_parts(reference), progress=progress)


def fetch_parts(parts: Sequence[str], *, progress: bool = True) -> str:
    """`fetch` of a reference already split into its parts (`UrlReference.parts`)."""
    check_url_parts(parts)
    if len(parts) == 1:
        return _retrieve(parts[0], progress, _Extract(parts[0]))
    if "," in str(cache_dir()):
        raise DownloadError(
            f"the cache folder {cache_dir()} has a comma in its path, which would split the pair; set SPACY_ELMO_CACHE"
        )
    return ",".join(_retrieve(part, progress) if _URL.match(part) else part for part in parts)


def _split_fragment(url: str) -> tuple[str, str | None]:
    """(URL without fragment, pooch's known_hash or None)."""
    address, fragment = urldefrag(url)
    if not fragment:
        return address, None
    match = _SHA256_FRAGMENT.match(fragment)
    if match is None:
        raise DownloadError(f"{url}: unsupported URL fragment #{fragment}; expected #sha256=<64 hex digits>")
    return address, f"sha256:{match.group(1).lower()}"


def _file_name(address: str) -> str:
    name = unquote(PurePosixPath(urlsplit(address).path).name)
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "download"


def _archive_kind(url: str) -> str | None:
    path = urlsplit(urldefrag(url)[0]).path.lower()
    return next((kind for suffix, kind in _ARCHIVES.items() if path.endswith(suffix)), None)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


@contextlib.contextmanager
def _pooch_log(progress: bool):
    """With `progress`, pooch's line naming the URL and the cache file before a download (its bar
    follows); never its advice to pass the printed hash to `pooch.retrieve`."""
    import pooch

    def keep(record: logging.LogRecord) -> bool:
        return progress and str(record.msg).startswith("%s data from")

    logger = pooch.get_logger()
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def _cache_folder(url: str) -> tuple[Path, str, str, str | None]:
    """(cache folder, file name, address, pooch's known_hash) of a URL."""
    address, known_hash = _split_fragment(url)
    name = _file_name(address)
    return cache_dir() / f"{hashlib.sha256(address.encode()).hexdigest()[:16]}-{name}", name, address, known_hash


def is_cached(parts: Sequence[str]) -> bool:
    """Whether every URL of a reference (split into its parts) has its copy in the cache."""
    check_url_parts(parts)
    for part in parts:
        if not _URL.match(part):
            continue
        folder, name, _, known_hash = _cache_folder(part)
        if len(parts) == 1:
            if _Extract.cached(folder, known_hash) is None:
                return False
        elif not (folder / name).is_file():
            return False
    return True


def forget(parts: Sequence[str]) -> None:
    """Removes the cached copies of a reference's URLs (a copy found damaged), so the next fetch
    downloads them again."""
    check_url_parts(parts)
    for part in parts:
        if _URL.match(part):
            folder = _cache_folder(part)[0]
            with _one_fetch_at_a_time(folder):
                shutil.rmtree(folder, ignore_errors=True)


def _retrieve(url: str, progress: bool, processor=None) -> str:
    """The cached local path of `url` (downloaded if missing or not matching its sha256), passed
    through `processor` (pooch's post-download hook, which also knows what it cached) when given;
    a failure removes the folders it created."""
    folder, name, address, known_hash = _cache_folder(url)
    with _one_fetch_at_a_time(folder):
        if processor is not None:
            cached = processor.cached(folder, known_hash)
            if cached is not None:
                return cached
        created = [p for p in (folder, *folder.parents) if not p.exists()]  # nearest first
        try:
            return _download(address, known_hash, name, folder, progress, processor)
        except BaseException:
            for path in created:  # only folders this run made, and only if empty: never what another run put there
                with contextlib.suppress(OSError):
                    path.rmdir()
            raise


@contextlib.contextmanager
def _one_fetch_at_a_time(folder: Path):
    """Holds the lock of cache folder `folder` while it is checked and filled. The lock file is
    named by the folder's absolute path and kept in the temporary folder, not in the cache."""
    from filelock import FileLock

    key = hashlib.sha256(str(folder.absolute()).encode()).hexdigest()[:16]
    with FileLock(Path(tempfile.gettempdir()) / f"spacy_elmo-fetch-{key}.lock"):
        yield


def _download(address: str, known_hash: str | None, name: str, folder: Path, progress: bool, processor) -> str:
    import pooch
    import requests

    bar: _Bar | Literal[False] = _Bar() if progress else False
    try:
        with _pooch_log(progress):
            return pooch.retrieve(
                address, known_hash=known_hash, fname=name, path=folder, processor=processor,
                downloader=pooch.HTTPDownloader(progressbar=bar, chunk_size=_CHUNK, timeout=_TIMEOUT),
            )  # fmt: skip
    except DownloadError:
        raise
    except requests.HTTPError as err:
        response = err.response
        status = f"HTTP {response.status_code} {response.reason}" if response is not None else _one_line(err)
        raise DownloadError(f"{address}: the server answered {status}") from None
    except requests.Timeout:
        raise DownloadError(f"{address}: no answer from the server within {_TIMEOUT} s") from None
    except requests.RequestException as err:
        raise DownloadError(
            f"{address}: download failed ({_network_reason(err)}); nothing was cached, try again"
        ) from None
    except ValueError as err:
        found = re.search(r"but got ([0-9a-fA-F]+)", str(err))
        if known_hash is None or found is None:
            raise DownloadError(f"{address}: {_one_line(err)}") from None
        # pooch: the download's hash differs from the fragment's; it deleted the temporary file
        raise DownloadError(
            f"{address}: sha256 mismatch: expected {known_hash.split(':')[1]}, found {found.group(1)}; "
            "the download was discarded"
        ) from None
    except OSError as err:  # the cache folder: permissions, disk full
        raise DownloadError(f"{address}: cannot store the download in {folder}: {_one_line(err)}") from None
    finally:
        if bar:
            bar.close()  # also after a failure: what is printed next starts on its own line


class _Bar:
    """pooch's progress bar: a tqdm made when a download starts (none for a cached file), drawn only
    on a terminal (`disable=None`: never into a log file)."""

    def __init__(self):
        self._tqdm: tqdm | None = None

    @property
    def total(self):
        return self._tqdm.total if self._tqdm is not None else None

    @total.setter
    def total(self, total: int) -> None:
        from tqdm import tqdm

        self._tqdm = tqdm(total=total, unit="B", unit_scale=True, disable=None, leave=True)

    def update(self, n: int) -> None:
        assert self._tqdm is not None, "pooch sets `total` before it updates the bar"
        self._tqdm.update(n)

    def reset(self) -> None:
        assert self._tqdm is not None, "pooch sets `total` before it resets the bar"
        self._tqdm.reset()

    def close(self) -> None:
        if self._tqdm is not None:
            self._tqdm.close()


def _network_reason(err) -> str:
    """The useful part of a requests/urllib3 error: 'Connection broken: IncompleteRead(...)',
    '[Errno 111] Connection refused', ..."""
    text = str(err)
    for pattern in (r"Connection broken: [^'\"]*\)", r"\[Errno -?\d+\] [^'\")]+"):
        match = re.search(pattern, text)
        if match:
            return match.group(0)
    return _one_line(text)[:200] or type(err).__name__


def _unsafe_member(name: str) -> bool:
    """Whether an archive member's name would land outside the extraction folder."""
    posix = name.replace("\\", "/")
    return posix.startswith("/") or bool(re.match(r"^[A-Za-z]:", posix)) or ".." in PurePosixPath(posix).parts


def _model_dir(target: Path) -> str:
    """The model directory in an extraction: the archive's single top-level folder when it holds
    only that, else the extraction folder."""
    entries = list(target.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        return str(entries[0])
    return str(target)


class _Extract:
    """pooch processor: extracts the downloaded archive into `model/` beside it (again after a
    re-download), through a temporary sibling folder renamed into place on success, records the
    archive's sha256 in `model.sha256`, deletes the archive and returns the model directory."""

    def __init__(self, url: str):
        self.url = urldefrag(url)[0]
        self.kind = _archive_kind(url)

    @staticmethod
    def cached(folder: Path, known_hash: str | None) -> str | None:
        """The model directory of an extraction in `folder` that needs no download: any, or with
        `known_hash` the one extracted from an archive of that sha256."""
        target, record = folder / _EXTRACTED, folder / _RECORD
        if not (target.is_dir() and record.is_file()):
            return None
        if known_hash is not None and record.read_text().strip() != known_hash.split(":")[1]:
            return None
        return _model_dir(target)

    def __call__(self, fname: str, action: str, pooch) -> str:
        from pooch import file_hash  # sha256, read in blocks

        archive = Path(fname)
        target = archive.parent / _EXTRACTED
        if action != "fetch" or not target.is_dir():  # "fetch": an archive cached before model.sha256 existed
            self._extract_into_place(archive, target)
        # written after model/ is in place: a torn record only costs a download
        (archive.parent / _RECORD).write_text(file_hash(str(archive)) + "\n")
        archive.unlink()
        return _model_dir(target)

    def _extract_into_place(self, archive: Path, target: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix=f".{_EXTRACTED}-", dir=archive.parent))
        try:
            self._extract(archive, staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        (archive.parent / _RECORD).unlink(missing_ok=True)  # it names the archive of the extraction replaced now
        if target.exists():  # the extraction of an earlier download of this URL
            shutil.rmtree(target)
        try:
            os.replace(staging, target)
        except OSError:
            if not target.is_dir():
                raise
            shutil.rmtree(staging, ignore_errors=True)  # another process extracted it meanwhile

    def _extract(self, archive: Path, staging: Path) -> None:
        try:
            if self.kind == "zip":
                with zipfile.ZipFile(archive) as handle:
                    self._check([(info.filename, True) for info in handle.infolist()])
                    handle.extractall(staging)
            else:
                with tarfile.open(archive, "r:*") as handle:
                    members = handle.getmembers()
                    self._check([(m.name, m.isfile() or m.isdir()) for m in members])
                    if hasattr(tarfile, "data_filter"):
                        handle.extractall(staging, filter="data")
                    else:  # Python < 3.11.4: `_check` allowed regular files and folders only
                        handle.extractall(staging)
        except DownloadError:
            archive.unlink(missing_ok=True)
            raise
        except (
            zipfile.BadZipFile,
            tarfile.TarError,
            EOFError,
            zlib.error,
            gzip.BadGzipFile,
            NotImplementedError,
        ) as err:
            archive.unlink(missing_ok=True)
            kind = "zip" if self.kind == "zip" else "tar"
            raise DownloadError(
                f"{self.url}: the downloaded file is not a readable {kind} archive "
                f"({_one_line(err) or type(err).__name__}); removed it, the next run downloads it again"
            ) from None

    def _check(self, members: list[tuple[str, bool]]) -> None:
        for name, plain in members:
            if _unsafe_member(name):
                raise DownloadError(
                    f"{self.url}: refused the archive: member '{name}' would be written outside its folder"
                )
            if not plain:
                raise DownloadError(f"{self.url}: refused the archive: member '{name}' is a link or special file")
