"""`python -m lab.gpu.pack`: what the GPU harness (`bash lab/gpu/gpu.sh`, lab/gpu/) carries to the device machine,
prepared here, where pip reaches PyPI, into the ignored folder .gpu/ (the device tool's `carry: [".gpu"]`).

    python -m lab.gpu.pack              # site, corpus, stamp and the size check, in that order
    python -m lab.gpu.pack stamp        # again just before each device call: the commit and tree it measures

- `site`: the package's requirements that the device image lacks (lab/gpu/image.txt lists what it holds), for
  CPython 3.12 on Linux x86-64, in the versions installed here (those the tests ran with), installed by pip into
  one folder with the package's own metadata (its spaCy entry points; its code is the checkout's), the debug
  information stripped from the compiled modules, their tests and sources left out, as .gpu/site.tar.xz: the
  wheels as downloaded (60 MB, spaCy 36 MB of it) do not fit beside the checkout in the device tool's 64 MiB.
- `corpus`: the project's pretraining text by its own steps (lab.data.fetch_assets, lab.data.preprocess_conll --lm-text,
  lab.data.preprocess_lm_text), as .gpu/corpus/{train,heldout}.txt; `--corpus-from DIR` copies DIR/train.txt and
  DIR/heldout.txt instead (e.g. work/corpus/lm of a project run).
- `stamp`: .gpu/stamp.json, the commit (`git rev-parse HEAD`), the dirty paths (`git status --porcelain`) and the
  git blob hash of every file that travels; on the device the harness records these and checks the files it
  got against them (it never asks git there: the tool sends its own git metadata).
- `check`: the size of what travels (tracked and untracked-not-ignored files that exist, and .gpu/) against
  the tool's 64 MiB; one line and exit 1 when it is over, naming the largest files.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.metadata
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from lab import ROOT
from lab.gpu.common import PREP, blob_sha1
from spacy_elmo.provenance import portable

IMAGE = Path(__file__).with_name("image.txt")  # what the device image holds
LIMIT = 64 * 2**20  # bytes the device tool carries: the working tree and the carried paths together
# pydantic 2.14 needs typing-extensions >= 4.16, newer than the image may hold; a newer one serves its users too
CARRY_ALWAYS = ["typing-extensions"]
# the device image's interpreter: for requirement markers and wheel tags
DEVICE_PYTHON = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}
DEVICE_TAG = "cp312 linux x86_64"  # lab.gpu.interpreter_tag() there
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 4, -1)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]
TARGET = ["--python-version", "3.12", "--implementation", "cp", "--only-binary=:all:"]
TARGET += [option for platform in PLATFORMS for option in ("--platform", platform)]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image() -> set[str]:
    lines = IMAGE.read_text(encoding="utf-8").splitlines()
    return {canonical(line) for line in lines if line.strip() and not line.startswith("#")}


def carried() -> dict[str, str]:
    """{distribution: version installed here} of setup.cfg's requirements and theirs (markers read for the device's
    Python) that the image lacks, plus CARRY_ALWAYS."""
    from packaging.requirements import Requirement

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    todo = [(Requirement(x), set()) for x in config["options"]["install_requires"].splitlines() if x.strip()]
    todo += [(Requirement(name), set()) for name in CARRY_ALWAYS]
    have, out = image() - {canonical(n) for n in CARRY_ALWAYS}, {}
    while todo:
        requirement, extras = todo.pop()
        name = canonical(requirement.name)
        marker = requirement.marker
        if marker is not None and not any(marker.evaluate({**DEVICE_PYTHON, "extra": e}) for e in extras | {""}):
            continue
        if name in have or name in out:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(f"lab.gpu.pack: {requirement} is needed on the device but not installed here") from None
        out[name] = dist.version
        todo += [(Requirement(line), set(requirement.extras)) for line in dist.requires or []]
    return dict(sorted(out.items()))


def _pip(*args: str, cwd: Path = ROOT) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()
        raise SystemExit(f"lab.gpu.pack: pip {args[0]} failed: {errors[-1] if errors else done.returncode}")


def prune(site: Path) -> dict:
    """What the harness never reads, out of the installed folder: the package's own code (the checkout's is
    imported), console scripts made for this machine's Python, the packages' tests, C/Cython sources and
    byte code; and the debug information of the compiled modules (`strip --strip-debug`, where it exists)."""
    removed = 0
    for path in [site / "spacy_elmo", site / "spacy_elmo_cli.py", site / "bin", *site.glob("*/tests")]:
        if path.is_dir():
            removed += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            shutil.rmtree(path)
        elif path.is_file():
            removed += path.stat().st_size
            path.unlink()
    for path in list(site.rglob("*")):
        if path.is_file() and (path.suffix in (".pyx", ".pxd", ".pyi", ".c", ".cpp", ".h", ".pyc")):
            removed += path.stat().st_size
            path.unlink()
    strip = shutil.which("strip")
    stripped = 0
    if strip:
        for path in site.rglob("*.so"):
            before = path.stat().st_size
            subprocess.run([strip, "--strip-debug", str(path)], check=True)
            stripped += before - path.stat().st_size
    return {"removed_bytes": removed, "stripped_bytes": stripped, "strip": bool(strip)}


def install(wheels: list[Path], folder: Path) -> None:
    """The wheels installed by pip into `folder` for the device's Python (not this one), without their requirements."""
    _pip("install", "--quiet", "--no-index", "--no-deps", "--no-compile", *TARGET, "--target", str(folder),
         *[str(w) for w in wheels])  # fmt: skip


def pack(folder: Path, dest: Path, manifest: dict) -> Path:
    """`folder` as dest/site.tar.xz, with `manifest` inside it (site.json) and beside it, read before unpacking."""
    manifest = dict(manifest, unpacked_bytes=sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()))
    text = json.dumps(manifest, indent=1) + "\n"
    (folder / "site.json").write_text(text, encoding="utf-8")
    dest.mkdir(parents=True, exist_ok=True)
    archive = dest / "site.tar.xz"
    partial = archive.with_name(archive.name + ".partial")
    # preset 9: a 64 MiB dictionary, so blis's two copies of BLIS compress as one
    with lzma.open(partial, "wb", preset=9) as packed, tarfile.open(fileobj=packed, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    os.replace(partial, archive)
    (dest / "site.json").write_text(text, encoding="utf-8")
    return archive


def package_wheel(wheels: Path) -> Path:
    """A wheel of this checkout: the package's metadata, its spaCy entry points above all."""
    before = set(wheels.glob("*.whl"))
    _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(ROOT))
    (built,) = set(wheels.glob("spacy_elmo-*.whl")) - before
    return built


def site(dest: Path) -> Path:
    wanted = carried()
    with tempfile.TemporaryDirectory() as tmp:
        wheels, folder = Path(tmp) / "wheels", Path(tmp) / "site"
        _pip(
            "download",
            "--quiet",
            "--no-deps",
            *TARGET,
            "--dest",
            str(wheels),
            *[f"{n}=={v}" for n, v in wanted.items()],
        )
        package_wheel(wheels)
        names = sorted(p.name for p in wheels.glob("*.whl"))
        install([wheels / n for n in names], folder)
        manifest = {"packages": wanted, "wheels": names, "pruned": prune(folder), "python": DEVICE_TAG}
        archive = pack(folder, dest, manifest)
    print(f"{portable(str(archive))}: {archive.stat().st_size / 2**20:.1f} MiB, {len(wanted)} distributions")
    return archive


def corpus(dest: Path, source: Path | None) -> Path:
    out = dest / "corpus"
    out.mkdir(parents=True, exist_ok=True)
    if source is not None:
        for name in ("train.txt", "heldout.txt"):
            shutil.copyfile(source / name, out / name)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            steps = [
                ["lab.data.fetch_assets", "--dest", "assets"],
                ["lab.data.preprocess_conll", "assets/conll2003/train.txt", f"{tmp}/train.spacy"]
                + ["--lm-text", f"{tmp}/conll_train.txt"],
                ["lab.data.preprocess_lm_text", "--bbc-dir", "assets/bbcnews", "--conll-text", f"{tmp}/conll_train.txt"]
                + ["--output-dir", str(out), "--seed", "0"],
            ]
            for step in steps:
                subprocess.run([sys.executable, "-m", *step], cwd=ROOT, check=True)
    for name in ("train.txt", "heldout.txt"):
        path = out / name
        print(f"{portable(str(path))}: {path.stat().st_size / 2**20:.1f} MiB, {sum(1 for _ in open(path))} lines")
    return out


def travelling(root: Path = ROOT) -> list[str]:
    """The files the device tool sends besides the carried paths: tracked, or untracked and not ignored, that exist
    (git's own list of them; the commit and the changes are provenance's `git_state`, as every record's)."""
    listed = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    names = subprocess.run(listed, cwd=root, capture_output=True, text=True, check=True).stdout.split("\0")
    return sorted({n for n in names if n and (root / n).is_file() and not (root / n).is_symlink()})


def stamp(dest: Path, root: Path = ROOT) -> Path:
    """dest/stamp.json: the commit of the checkout `root`, its changes, the files left behind for the call and the
    blob hash of every file that travels."""
    from spacy_elmo.provenance import git_state, utc_now

    tree = git_state(root)
    # a changed path that is not here was deleted, left behind for the call (bench/results/README.md): not a change
    # of the code
    gone = sorted(name for name in tree["dirty_paths"] if not (root / name).exists())
    record = {
        "commit": tree["commit"],
        "dirty": sorted(set(tree["dirty_paths"]) - set(gone)),
        "left_behind": gone,
        "stamped_utc": utc_now(),
        "files": {name: blob_sha1(root / name) for name in travelling(root)},
    }
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "stamp.json"
    path.write_text(json.dumps(record, indent=0) + "\n", encoding="utf-8")
    dirty = f", dirty: {', '.join(record['dirty'][:5])}" if record["dirty"] else ", clean"
    dirty += f"; left behind: {', '.join(gone)}" if gone else ""
    print(f"{portable(str(path))}: commit {record['commit'][:7]}{dirty}; {len(record['files'])} files")
    return path


def check(dest: Path) -> int:
    sizes = {name: (ROOT / name).stat().st_size for name in travelling()}
    carried_bytes = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file()) if dest.is_dir() else 0
    total = sum(sizes.values()) + carried_bytes
    line = f"travels: {total / 2**20:.1f} MiB of {LIMIT / 2**20:.0f} (the tree {sum(sizes.values()) / 2**20:.1f}, "
    line += f"{dest.name}/ {carried_bytes / 2**20:.1f})"
    if total <= LIMIT:
        print(line)
        return 0
    largest = sorted(sizes, key=sizes.get, reverse=True)[:4]
    print(
        f"lab.gpu.pack: {line}: over the device tool's limit; the largest files: "
        + ", ".join(f"{n} ({sizes[n] / 2**20:.1f} MiB)" for n in largest)
        + " (docs/performance.md, 'The GPU harness', says how to leave tracked files behind for a call)"
    )
    return 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.gpu.pack", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="all", choices=["all", "site", "corpus", "stamp", "check"])
    parser.add_argument("--dest", type=Path, default=PREP, help="the carried folder (default .gpu)")
    parser.add_argument("--corpus-from", type=Path, help="a folder holding train.txt and heldout.txt to carry")
    args = parser.parse_args(argv)
    if args.what in ("all", "site"):
        site(args.dest)
    if args.what in ("all", "corpus"):
        corpus(args.dest, args.corpus_from)
    if args.what in ("all", "stamp"):
        stamp(args.dest)
    if args.what in ("all", "check", "stamp"):
        over = check(args.dest)
        return over if args.what != "stamp" else 0  # a stamp is written whatever the size
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
