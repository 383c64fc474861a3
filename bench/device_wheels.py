"""The wheels that `bash bench/gpu.sh` installs on the device machine. Its image has torch (a CUDA
build), numpy and transformers but not spaCy, thinc or pydantic, and it reaches no package index
(bench/device_image.txt lists what it holds).

    python -m bench.device_wheels [FOLDER]     # here, where pip reaches PyPI; FOLDER defaults to .whl

Downloads, for the image's Python (CPython 3.12, Linux x86-64), one wheel of each distribution the
package needs (setup.cfg's install_requires and theirs, markers read for that Python) that the image
lacks, in the version installed here: the one the tests ran with. Carry FOLDER with the device call
(`carry: [".whl"]`); gpu.sh installs the package from it with pip --no-index, keeping the image's torch.
"""

from __future__ import annotations

import configparser
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT / "bench" / "device_image.txt"
# the image's interpreter: for requirement markers and wheel tags
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
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def image() -> set[str]:
    """The distributions the device image holds (canonical names)."""
    lines = IMAGE.read_text(encoding="utf-8").splitlines()
    return {canonical(line) for line in lines if line.strip() and not line.startswith("#")}


def requirements() -> list[Requirement]:
    """setup.cfg's install_requires: what `pip install -e .` asks for."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return [Requirement(line) for line in config["options"]["install_requires"].splitlines() if line.strip()]


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    marker = requirement.marker
    return marker is None or any(marker.evaluate({**DEVICE_PYTHON, "extra": extra}) for extra in extras | {""})


def carried() -> dict[str, str]:
    """{distribution: the version installed here} of every requirement, direct or not, that the image
    lacks (one the image holds comes with its own requirements there)."""
    have, out = image(), {}
    todo = [(requirement, set()) for requirement in requirements()]
    while todo:
        requirement, extras = todo.pop()
        name = canonical(requirement.name)
        if not _applies(requirement, extras) or name in have or name in out:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise SystemExit(
                f"device_wheels: {requirement} is needed on the device but not installed here: no tested version to "
                "carry"
            ) from None
        out[name] = dist.version
        todo += [(Requirement(line), set(requirement.extras)) for line in dist.requires or []]
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0] if argv else ".whl")
    wanted = [f"{name}=={version}" for name, version in carried().items()]
    platforms = [option for platform in PLATFORMS for option in ("--platform", platform)]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        *platforms,
        "--dest",
        str(folder),
        *wanted,
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()[
            -1:
        ]
        print(f"device_wheels: pip download failed: {errors[0] if errors else done.returncode}", file=sys.stderr)
        return 1
    size = sum(path.stat().st_size for path in folder.glob("*.whl"))
    print(
        f"{len(wanted)} wheels in {folder} ({size / 2**20:.1f} MiB; the device tool carries 64 MiB with the tree): "
        f"{' '.join(wanted)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
