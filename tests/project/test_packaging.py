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
