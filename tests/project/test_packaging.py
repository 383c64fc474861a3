"""setup.cfg lists every package of spacy_elmo and ships the package data from packages it lists (the
wheel's contents are checked by tests/tools/test_init_config.py::test_wheel_contains_the_configs and
tests/project/test_release.py, which build one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from setuptools.config.setupcfg import read_configuration

ROOT = Path(__file__).resolve().parents[2]


def folder_of(package: str, package_dir: dict[str, str]) -> Path:
    """Where a package's files are: its package_dir mapping (spacy_elmo.configs → configs), else its dotted path."""
    return ROOT / package_dir.get(package, package.replace(".", "/"))


def test_every_package_is_listed():
    """setup.cfg lists the packages by name (one is mapped from configs/): a new folder of the package that
    is not listed would be left out of the wheel."""
    options = read_configuration(ROOT / "setup.cfg")["options"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "spacy_elmo").rglob("__init__.py")}
    assert set(options["packages"]) == found | {"spacy_elmo.configs"}


def test_package_data_lies_in_listed_packages():
    """A data file in a directory that setup.cfg does not list as a package makes `pip install` print
    setuptools' "is absent from the `packages` configuration" warning block; every such directory is listed."""
    options = read_configuration(ROOT / "setup.cfg")["options"]
    packages, package_dir = set(options["packages"]), options.get("package_dir", {})
    assert "spacy_elmo" in packages and package_dir == {"spacy_elmo.configs": "configs"}
    for package, patterns in options["package_data"].items():
        assert package in packages, package
        for pattern in patterns:
            files = sorted(folder_of(package, package_dir).glob(pattern))
            assert files, f"{package}: {pattern} matches nothing"
            assert {path.parent for path in files} == {folder_of(package, package_dir)}


def test_make_test_compat_installs_every_declared_lower_bound():
    """constraints-compat.txt pins each dependency of setup.cfg at its lower bound (so `make test-compat` tests
    the bound), except transformers: 4.53.2 there, the newest spacy-transformers 1.4.0 takes, and its own lower
    bound in the Makefile's TRANSFORMERS_FLOOR, the second step of `make test-compat`."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    declared = {}
    for line in read_configuration(ROOT / "setup.cfg")["options"]["install_requires"]:
        requirement = Requirement(line)
        (floor,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        declared[requirement.name.replace("_", "-").lower()] = Version(floor)
    pins = {}
    for line in (ROOT / "constraints-compat.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.replace("_", "-").lower()] = Version(version)
    floor = re.search(r"^TRANSFORMERS_FLOOR := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert floor and Version(floor.group(1)) == declared.pop("transformers")
    assert pins.pop("transformers") == Version("4.53.2") and pins.pop("spacy-transformers") == Version("1.4.0")
    assert pins == declared


def _declared():
    """setup.cfg's python_requires and install_requires, parsed: (SpecifierSet, {name: Requirement})."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    options = read_configuration(ROOT / "setup.cfg")["options"]
    requirements = {Requirement(line).name.lower(): Requirement(line) for line in options["install_requires"]}
    return SpecifierSet(options["python_requires"]), requirements


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            package, version = line.split("==")
            pins[package.replace("_", "-").lower()] = version
    return pins


def _make_python(variable: str) -> str:
    """The X.Y of the Python a Makefile variable names (`COMPAT_PYTHON ?= $(HOME)/.pyenv/versions/3.10.13/...`)."""
    import re

    found = re.search(
        rf"^{variable} \?= .*/versions/(\d+\.\d+)\.\d+/bin/python$", (ROOT / "Makefile").read_text(), re.M
    )
    assert found, f"Makefile: no {variable}"
    return found.group(1)


def test_the_readme_says_what_each_leg_runs():
    """README's install line and "Tested versions" name the range setup.cfg declares and what each leg installs:
    the oldest Python and torch's floor (the compat leg's, COMPAT_PYTHON and constraints-compat.txt), the newest
    Python (NEWEST_PYTHON), the main leg's torch (constraints.txt) and Python (its last recorded run,
    bench/results/make_test.txt), and each release the compat sentence names at its pin."""
    from packaging.version import Version

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    python, requirements = _declared()
    (torch_floor,) = [spec.version for spec in requirements["torch"].specifier if spec.operator == ">="]
    oldest, newest = _make_python("COMPAT_PYTHON"), _make_python("NEWEST_PYTHON")
    assert python.contains(f"{oldest}.0") and not python.contains(
        f"{Version(oldest).major}.{Version(oldest).minor - 1}"
    )
    assert f"**Install** (Python {oldest} to {newest}, PyTorch ≥ {torch_floor})" in readme

    tested = " ".join(readme.split("**Tested versions.**")[1].split("\n\n")[0].split())
    main, rest = tested.split("`make test-compat`:")
    compat, newest_leg = rest.split("`make test-newest`:")
    main_python = re.search(r"Python (\d+\.\d+)\.\d+", (ROOT / "bench/results/make_test.txt").read_text()).group(1)
    assert f"Python {main_python}," in main and f"torch {_pins('constraints.txt')['torch']}," in main
    assert compat.startswith(f" Python {oldest},") and newest_leg.startswith(f" Python {newest},")

    named, floor = compat.split("then transformers ")
    pins = _pins("constraints-compat.txt")
    said = dict(
        re.findall(r"\b(torch|transformers|spacy-transformers|huggingface_hub|spaCy|numpy) (\d+(?:\.\d+)+)", named)
    )
    assert set(said) == {"torch", "transformers", "spacy-transformers", "huggingface_hub", "spaCy", "numpy"}, said
    for name, version in said.items():
        pin = pins[name.replace("_", "-").lower()]
        assert pin == version or pin.startswith(version + "."), (name, version, pin)
    makefile_floor = re.search(r"^TRANSFORMERS_FLOOR := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert floor.startswith(makefile_floor + ".")


def test_the_gpu_harness_image_is_inside_the_declared_range():
    """The device image the GPU harness runs on (lab/gpu/pack.py's DEVICE_PYTHON; lab/gpu/image.txt: its own
    torch and transformers, not carried) is one setup.cfg accepts: its Python, and the torch and transformers
    the newest GPU record found there (bench/results/runs.jsonl)."""
    from lab.gpu.pack import DEVICE_PYTHON, image

    python, requirements = _declared()
    assert python.contains(DEVICE_PYTHON["python_full_version"])
    assert {"torch", "transformers"} <= image()
    runs = [json.loads(line) for line in (ROOT / "bench/results/runs.jsonl").read_text().splitlines() if line.strip()]
    machine = [run["machine"] for run in runs if run.get("kind") == "gpu" and (run.get("machine") or {}).get("torch")][
        -1
    ]
    assert machine["python"] == DEVICE_PYTHON["python_full_version"]
    for name in ("torch", "transformers"):
        assert requirements[name].specifier.contains(machine[name]), (name, machine[name])
