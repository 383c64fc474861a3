"""URL model references (spacy_elmo.formats.download) against a real HTTP server on 127.0.0.1: archives and
legacy pairs are downloaded once into $SPACY_ELMO_CACHE, checked against a sha256 fragment, and a
broken connection, a corrupt or hostile archive or an HTTP error leaves nothing a later run uses."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spacy_elmo.formats.download import DownloadError, cache_dir, fetch, is_url


class _Handler(BaseHTTPRequestHandler):
    """Serves `server.routes[path] = (body, drop)`; `drop` sends the full Content-Length but
    closes the connection after half the body. Records each request path in `server.requests`. With
    `server.hold` seconds, the first request waits up to that long for a second one to come."""

    def do_GET(self):
        self.server.requests.append(self.path)
        deadline = time.monotonic() + self.server.hold  # hold the first request until a second one comes
        while len(self.server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        route = self.server.routes.get(self.path)
        if route is None:
            self.send_error(404)
            return
        body, drop = route
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if drop else body)
        self.close_connection = drop

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.routes, httpd.requests, httpd.hold = {}, [], 0.0
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def serve(httpd, path: str, body: bytes, drop: bool = False) -> str:
    httpd.routes[path] = (body, drop)
    return f"http://127.0.0.1:{httpd.server_port}{path}"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Every test caches under tmp_path, never in ~/.cache; no proxy for the local server."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SPACY_ELMO_CACHE", str(folder))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return folder


def files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.fixture(scope="module")
def model_files(allennlp_dir) -> dict[str, bytes]:
    return {name: (allennlp_dir / name).read_bytes() for name in ("options.json", "lm_weights.hdf5")}


def make_zip(members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as handle:
        for name, data in members.items():
            handle.writestr(name, data)
    return buffer.getvalue()


def make_tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as handle:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            handle.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_is_url_and_local_references_unchanged(tmp_path):
    assert is_url("https://example.org/model.zip") and is_url("HTTP://127.0.0.1:8000/m.tar.gz")
    assert is_url("https://a.org/options.json, https://a.org/w.hdf5") and is_url("opts.json,http://a.org/w.hdf5")
    local_references = (
        "models/fixture_elmo",
        "owner/name",
        "options.json,lm_weights.hdf5",
        "http_model",
        "ftp://a.org/m.zip",
    )
    for local in local_references:
        assert not is_url(local)
        assert fetch(local) == local
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "suffix, build, members, expected",
    [
        # one top-level folder and nothing else: the model directory is that folder
        (".zip", make_zip, {"elmo/options.json": 0, "elmo/lm_weights.hdf5": 1}, "elmo"),
        (".tar.gz", make_tar, {"elmo/options.json": 0, "elmo/lm_weights.hdf5": 1}, "elmo"),
        # files at the top, or a folder beside a file: the extraction folder itself
        (".tgz", make_tar, {"options.json": 0, "lm_weights.hdf5": 1}, "."),
        (".zip", make_zip, {"elmo/options.json": 0, "lm_weights.hdf5": 1}, "."),
    ],
)
def test_archive_extraction_layout(server, cache, model_files, suffix, build, members, expected):
    contents = list(model_files.values())
    url = serve(server, f"/models/m{suffix}", build({name: contents[i] for name, i in members.items()}))
    model_dir = Path(fetch(url, progress=False))
    assert model_dir.is_dir() and model_dir.is_relative_to(cache)
    top = model_dir if expected == "." else model_dir.parent
    assert top.name == "model" and (expected == "." or model_dir.name == expected)
    for name, i in members.items():
        assert (top / name).read_bytes() == contents[i]


def test_downloaded_once(server, model_files):
    url = serve(server, "/m.zip", make_zip({"elmo/" + k: v for k, v in model_files.items()}))
    first = fetch(url, progress=False)
    second = fetch(url, progress=False)
    assert first == second and server.requests == ["/m.zip"]
    # with a matching sha256 the cached file is checked locally: still no request
    assert fetch(f"{url}#sha256={sha256(server.routes['/m.zip'][0])}", progress=False) == first
    assert server.requests == ["/m.zip"]


def test_same_file_name_from_two_urls_does_not_collide(server):
    a = serve(server, "/a/m.zip", make_zip({"x.txt": b"from a"}))
    b = serve(server, "/b/m.zip", make_zip({"x.txt": b"from b"}))
    assert (Path(fetch(a, progress=False)) / "x.txt").read_bytes() == b"from a"
    assert (Path(fetch(b, progress=False)) / "x.txt").read_bytes() == b"from b"


def test_legacy_pair_downloads_and_loads(server, cache, model_files):
    from spacy_elmo import ElmoModel, load_legacy

    options = serve(server, "/elmo/options.json", model_files["options.json"])
    weights = serve(server, "/elmo/lm_weights.hdf5", model_files["lm_weights.hdf5"])
    fetched = fetch(f"{options}#sha256={sha256(model_files['options.json'])}, {weights}", progress=False)
    paths = [Path(p) for p in fetched.split(",")]
    assert [p.name for p in paths] == ["options.json", "lm_weights.hdf5"]
    assert all(p.is_relative_to(cache) for p in paths)
    assert paths[1].read_bytes() == model_files["lm_weights.hdf5"]
    assert isinstance(load_legacy(*fetched.split(",")), ElmoModel)
    assert fetch(f"{options},{weights}", progress=False) == fetched and len(server.requests) == 2
    # a local part of a pair stays as it is
    assert fetch(f"local/options.json,{weights}", progress=False) == f"local/options.json,{paths[1]}"


def test_sha256_mismatch_fails_and_caches_nothing(server, cache, model_files):
    body = make_zip({"elmo/" + k: v for k, v in model_files.items()})
    url = serve(server, "/m.zip", body)
    wrong = "0" * 64
    with pytest.raises(DownloadError) as err:
        fetch(f"{url}#sha256={wrong}", progress=False)
    message = str(err.value)
    assert "\n" not in message and url in message and wrong in message and sha256(body) in message
    assert files_in(cache) == []
    model_dir = fetch(f"{url}#sha256={sha256(body).upper()}", progress=False)
    assert (Path(model_dir) / "lm_weights.hdf5").read_bytes() == model_files["lm_weights.hdf5"]
    assert len(server.requests) == 2


def test_new_sha256_downloads_again_and_replaces_the_extraction(server):
    url = serve(server, "/m.tar.gz", make_tar({"m/v.txt": b"version 1", "m/old.txt": b"gone in 2"}))
    assert (Path(fetch(url, progress=False)) / "v.txt").read_bytes() == b"version 1"
    new = make_tar({"m/v.txt": b"version 2"})
    serve(server, "/m.tar.gz", new)
    model_dir = Path(fetch(f"{url}#sha256={sha256(new)}", progress=False))
    assert (model_dir / "v.txt").read_bytes() == b"version 2" and not (model_dir / "old.txt").exists()
    assert len(server.requests) == 2


@pytest.mark.parametrize("path", ["/m.zip", "/options.json"])
def test_interrupted_download_leaves_nothing(server, cache, model_files, path):
    body = make_zip(model_files, zipfile.ZIP_STORED) if path.endswith(".zip") else model_files["lm_weights.hdf5"]
    url = serve(server, path, body, drop=True)
    reference = url if path.endswith(".zip") else f"{url},{url}"
    with pytest.raises(DownloadError) as err:
        fetch(reference, progress=False)
    message = str(err.value)
    assert "\n" not in message and url in message and "IncompleteRead" in message
    assert files_in(cache) == []
    serve(server, path, body)
    local = fetch(reference, progress=False)
    if path.endswith(".zip"):
        assert (Path(local) / "lm_weights.hdf5").read_bytes() == model_files["lm_weights.hdf5"]
    else:
        assert Path(local.split(",")[0]).read_bytes() == body


def _crc_broken_zip(model_files) -> bytes:
    """A zip whose directory is sound but whose second member fails its CRC: the first member
    extracts before the error."""
    body = bytearray(make_zip({"elmo/" + k: v for k, v in model_files.items()}, zipfile.ZIP_STORED))
    weights_at = bytes(body).index(model_files["lm_weights.hdf5"][:4096])
    body[weights_at + 100_000] ^= 0xFF
    return bytes(body)


@pytest.mark.parametrize("kind", ["crc", "garbage", "truncated_gzip"])
def test_corrupt_archive_removed_then_downloaded_again(server, cache, model_files, kind):
    good_zip = make_zip({"elmo/" + k: v for k, v in model_files.items()})
    good_tar = make_tar({"elmo/" + k: v for k, v in model_files.items()})
    path, bad, good = {
        "crc": ("/m.zip", _crc_broken_zip(model_files), good_zip),
        "garbage": ("/m.zip", b"<html>not a zip</html>" * 50, good_zip),
        "truncated_gzip": ("/m.tar.gz", good_tar[: len(good_tar) // 2], good_tar),
    }[kind]
    url = serve(server, path, bad)
    with pytest.raises(DownloadError) as err:
        fetch(url, progress=False)
    message = str(err.value)
    assert "\n" not in message and url in message and "archive" in message
    assert files_in(cache) == [] and not any(cache.rglob("model"))
    serve(server, path, good)
    model_dir = Path(fetch(url, progress=False))
    assert (model_dir / "lm_weights.hdf5").read_bytes() == model_files["lm_weights.hdf5"]
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "path, build, member",
    [
        ("/evil.zip", make_zip, "../evil"),
        ("/evil.tar.gz", make_tar, "../evil"),
        ("/abs.zip", make_zip, "/abs/evil"),
        ("/abs.tar", lambda members: make_tar(members, "w"), "/abs/evil"),
    ],
)
def test_path_traversal_refused(server, cache, tmp_path, path, build, member):
    body = build({"ok.txt": b"fine", member: b"pwned"})
    url = serve(server, path, body)
    with pytest.raises(DownloadError) as err:
        fetch(url, progress=False)
    message = str(err.value)
    assert "\n" not in message and url in message and member in message
    assert [p for p in tmp_path.rglob("*") if p.name == "evil"] == [] and files_in(cache) == []


def test_tar_link_refused(server, cache):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as handle:
        link = tarfile.TarInfo("m/escape")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        handle.addfile(link)
    url = serve(server, "/link.tar.gz", buffer.getvalue())
    with pytest.raises(DownloadError, match="m/escape' is a link"):
        fetch(url, progress=False)
    assert files_in(cache) == []


def test_http_error_is_one_line(server, cache):
    url = f"http://127.0.0.1:{server.server_port}/missing.zip"
    with pytest.raises(DownloadError) as err:
        fetch(url, progress=False)
    assert str(err.value) == f"{url}: the server answered HTTP 404 Not Found"
    assert files_in(cache) == []


def test_bad_references_fail_before_any_request(server):
    base = f"http://127.0.0.1:{server.server_port}"
    for reference, expected in [
        (f"{base}/lm_weights.hdf5", "must name a model archive"),
        (f"{base}/m.zip#md5=abc", "unsupported URL fragment #md5=abc"),
        (f"{base}/m.zip#sha256=abc", "expected #sha256=<64 hex digits>"),
        (f"{base}/a.json,{base}/b.hdf5,{base}/c", "found 3 parts"),
    ]:
        with pytest.raises(DownloadError, match=expected) as err:
            fetch(reference, progress=False)
        assert "\n" not in str(err.value)
    assert server.requests == []


@pytest.fixture
def stderr_to(monkeypatch):
    """Points sys.stderr, and pooch's log handler (which keeps the stderr of its import), at a stream;
    call it in the test itself (pytest's capture sets sys.stderr again when the test starts)."""
    import pooch

    def point(stream):
        monkeypatch.setattr(sys, "stderr", stream)
        for handler in pooch.get_logger().handlers:
            monkeypatch.setattr(handler, "stream", stream)

    return point


@pytest.fixture
def terminal():
    """(a stream on a real pseudo-terminal, raw: no newline translation; a call returning what was written)."""
    pty, tty, termios = (pytest.importorskip(name) for name in ("pty", "tty", "termios"))
    import fcntl
    import os
    import select
    import struct

    leader, follower = pty.openpty()
    tty.setraw(follower)
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # 80 columns, as a terminal has
    stream = open(follower, "w", buffering=1, encoding="utf-8")

    def written() -> str:
        stream.flush()
        chunks = []
        while select.select([leader], [], [], 0.2)[0]:
            chunks.append(os.read(leader, 65536))
        return b"".join(chunks).decode()

    yield stream, written
    stream.close()
    os.close(leader)


def test_progress_bar_on_a_terminal_only_when_asked(server, terminal, stderr_to):
    stream, written = terminal
    stderr_to(stream)
    quiet = serve(server, "/quiet.zip", make_zip({"a.txt": b"a" * 10_000}))
    loud = serve(server, "/loud.zip", make_zip({"a.txt": b"b" * 10_000}))
    fetch(quiet, progress=False)
    assert written() == ""
    fetch(loud, progress=True)
    err = written()
    assert f"Downloading data from '{loud}'" in err and "100%" in err and "\r" in err
    fetch(loud, progress=True)  # cached: no bar
    assert written() == ""


def test_an_error_after_the_bar_starts_on_its_own_line(server, terminal, stderr_to, tmp_path):
    from spacy_elmo.cli import main

    stream, written = terminal
    stderr_to(stream)
    url = serve(server, "/cut.zip", make_zip({"a.txt": bytes(range(256)) * 4000}, zipfile.ZIP_STORED), drop=True)
    assert main(["convert", url, str(tmp_path / "out")]) == 2
    err = written()
    assert "\r" in err  # the bar was drawn
    assert f"\nerror: {url}: download failed (Connection broken: IncompleteRead" in err


def test_a_log_file_gets_no_bar_and_the_error_on_its_own_line(server, stderr_to, tmp_path):
    from spacy_elmo.cli import main

    url = serve(server, "/cut.zip", make_zip({"a.txt": bytes(range(256)) * 4000}, zipfile.ZIP_STORED), drop=True)
    with open(tmp_path / "log", "w") as log:
        stderr_to(log)
        assert main(["convert", url, str(tmp_path / "out")]) == 2
    lines = (tmp_path / "log").read_text().splitlines()
    assert not any(c in line for line in lines for c in "\r\x1b")
    assert lines[0].startswith(f"Downloading data from '{url}'")
    assert lines[1].startswith(f"error: {url}: download failed (Connection broken: IncompleteRead")
    assert len(lines) == 2


def everything_in(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` (folders included: None) with its bytes; {} when it does not exist."""
    return (
        {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}
        if folder.exists()
        else {}
    )


@pytest.mark.parametrize("failure", ["404", "cut_off", "sha256"])
def test_a_failed_download_leaves_the_cache_as_it_was(server, cache, model_files, failure):
    body = make_zip({"elmo/" + k: v for k, v in model_files.items()}, zipfile.ZIP_STORED)
    url = serve(server, "/m.zip", body, drop=failure == "cut_off")
    reference = f"{url}#sha256={'0' * 64}" if failure == "sha256" else url
    if failure == "404":
        server.routes.clear()
    with pytest.raises(DownloadError):
        fetch(reference, progress=False)
    assert not cache.exists()  # not even the folders made for it
    fetch(serve(server, "/other.zip", make_zip({"a.txt": b"a"})), progress=False)
    if failure == "sha256":  # an extraction of this URL is there: a download checked against another sha256 fails
        fetch(url, progress=False)
    before = everything_in(cache)
    with pytest.raises(DownloadError):
        fetch(reference, progress=False)
    assert everything_in(cache) == before


def test_a_cached_archive_is_held_once(server, cache, model_files):
    body = make_zip({"elmo/" + k: v for k, v in model_files.items()})
    url = serve(server, "/m.zip", body)
    model_dir = Path(fetch(url, progress=False))
    (folder,) = cache.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["model", "model.sha256"]  # no m.zip beside its extraction
    assert (folder / "model.sha256").read_text() == sha256(body) + "\n"
    assert sorted(everything_in(folder / "model")) == ["elmo", "elmo/lm_weights.hdf5", "elmo/options.json"]
    server.routes.clear()  # offline: the extraction and its recorded sha256 are all a later run needs
    assert fetch(url, progress=False) == fetch(f"{url}#sha256={sha256(body)}", progress=False) == str(model_dir)
    assert server.requests == ["/m.zip"]
    # a cache of an earlier version (the archive beside model/, no model.sha256) is used, then trimmed
    (folder / "model.sha256").unlink()
    (folder / "m.zip").write_bytes(body)
    assert fetch(f"{url}#sha256={sha256(body)}", progress=False) == str(model_dir) and server.requests == ["/m.zip"]
    assert sorted(p.name for p in folder.iterdir()) == ["model", "model.sha256"]


def test_cache_location(monkeypatch, tmp_path):
    assert cache_dir() == tmp_path / "cache"
    monkeypatch.delenv("SPACY_ELMO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "spacy_elmo"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "spacy_elmo"


# a process that imports the downloader, says so, waits for a line on stdin, then fetches argv[1]
_FETCH_ON_GO = (
    "import sys; from spacy_elmo.formats.download import fetch; print('ready', flush=True); sys.stdin.readline(); "
    "print(fetch(sys.argv[1], progress=False), flush=True)"
)


def test_processes_fetching_one_url_at_once_download_it_once(server, cache, model_files, tmp_path):
    """Two processes (as the ranks of a torchrun job) fetch one archive URL at the same moment: the server
    sees one download and both get the same, complete model directory. The server holds the first request
    until a second comes (up to 3 s), so without the lock both processes would download it."""
    url = serve(server, "/m.zip", make_zip({"elmo/" + k: v for k, v in model_files.items()}))
    server.hold = 3.0
    (tmp_path / "tmp").mkdir()  # the lock files of this test only
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", _FETCH_ON_GO, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    for rank in ranks:
        assert rank.stdout.readline().strip() == "ready"
    for rank in ranks:
        rank.stdin.write("go\n")
        rank.stdin.flush()
    outputs = [rank.communicate(timeout=120) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [err for _, err in outputs]
    (model_dir,) = {out.strip() for out, _ in outputs}
    assert server.requests == ["/m.zip"]
    assert {p.name: p.read_bytes() for p in Path(model_dir).iterdir()} == model_files
    (folder,) = cache.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["model", "model.sha256"]  # no lock file in the cache
    assert len(list((tmp_path / "tmp").glob("spacy_elmo-fetch-*.lock"))) == 1


# --- URL references wherever a model reference is taken ---------------------------------------------


def _zip_folder(folder: Path, top: str) -> bytes:
    return make_zip({f"{top}/{p.name}": p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()})


def test_loader_convert_and_spacy_take_urls(server, cache, fixtures_dir, tmp_path, model_files):
    """An EFML zip (as EFML distributes its models) and a legacy pair of URLs: the loader, `convert`
    and the spaCy component's `model` accept them; a saved pipeline never asks the server again."""
    import numpy
    import spacy
    from spacy.tokens import Doc

    from spacy_elmo.cli import main
    from spacy_elmo.formats.references import load_pretrained

    efml = serve(server, "/efml/zh.model.zip", _zip_folder(fixtures_dir / "efml_tiny", "zh.model"))
    model, tokenizer = load_pretrained(efml, progress=False)
    assert model.config.char_vocab_size == 120 and tokenizer.word_vocab is not None
    pair = ",".join(serve(server, f"/legacy/{name}", data) for name, data in model_files.items())
    assert main(["convert", pair, str(tmp_path / "converted"), "--no-progress"]) == 0
    assert (tmp_path / "converted" / "model.safetensors").is_file()

    nlp = spacy.blank("xx")
    nlp.add_pipe("elmo", config={"model": efml})
    words = ["The", "cat", "sat"]
    before = nlp(Doc(nlp.vocab, words=words))._.elmo.layers
    nlp.to_disk(tmp_path / "pipeline")
    asked = len(server.requests)
    server.routes.clear()  # the URL now answers 404
    reloaded = spacy.load(tmp_path / "pipeline")
    numpy.testing.assert_array_equal(reloaded(Doc(reloaded.vocab, words=words))._.elmo.layers, before)
    assert len(server.requests) == asked
    assert server.requests.count("/efml/zh.model.zip") == 1  # loader and component shared one download


# --- a damaged copy in the cache is downloaded again -------------------------------------------------


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("kind", ["hf archive", "legacy pair"])
def test_a_damaged_cached_copy_is_downloaded_again(
    server, cache, tiny_model_dir, model_files, kind, monkeypatch, capsys
):
    """A cached copy cut short after it was stored (a full disk, a copy) is found by the model's own
    checks (here the safetensors header and HDF5's superblock) when it is read: it is removed and
    downloaded once more, and the model loads, through `embed` as a user runs it."""
    from spacy_elmo.cli import main

    if kind == "hf archive":
        reference = serve(server, "/elmo.zip", _zip_folder(tiny_model_dir, "elmo"))
        damaged = lambda: Path(fetch(reference, progress=False)) / "model.safetensors"  # noqa: E731
        request = ["/elmo.zip"]
    else:
        reference = ",".join(serve(server, f"/legacy/{name}", data) for name, data in model_files.items())
        damaged = lambda: Path(fetch(reference, progress=False).split(",")[1])  # noqa: E731
        request = ["/legacy/options.json", "/legacy/lm_weights.hdf5"]
    for run in range(2):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat sat .\n")))
        assert main(["embed", reference]) == 0, capsys.readouterr().err
        if run == 0:
            assert server.requests == request
            _truncate(damaged())
    assert server.requests == request * 2  # fetched again, once
    assert "layers: (3, 4, 32)" in capsys.readouterr().out


def test_a_broken_download_is_one_line_naming_the_file_and_the_url(server, cache, tiny_model_dir, tmp_path, capsys):
    """The server's own copy is broken: downloaded twice (the cached copy, then once more), then
    one line naming the file and where it came from."""
    from spacy_elmo.cli import main

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    _truncate(broken / "model.safetensors")
    reference = serve(server, "/elmo.zip", _zip_folder(broken, "elmo"))
    fetch(reference, progress=False)  # cached before it is used
    assert main(["convert", reference, str(tmp_path / "out"), "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    model_dir = Path(fetch(reference, progress=False))
    assert line.startswith(f"error: {model_dir / 'model.safetensors'}: not a readable safetensors file: truncated")
    assert line.endswith(f"(downloaded from {reference})")
    assert server.requests == ["/elmo.zip"] * 2 and not (tmp_path / "out").exists()
