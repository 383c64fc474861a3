"""setup.cfg lists every package of spacy_elmo and ships the package data from packages it lists (the
wheel's contents are checked by tests/tools/test_init_config.py::test_wheel_contains_the_configs and
tests/project/test_release.py, which build one)."""

from __future__ import annotations

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
    import re

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
