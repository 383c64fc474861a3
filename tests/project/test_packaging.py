"""setup.cfg ships the package data from packages it lists (the wheel's contents are checked by
tests/spacy/test_shipped_configs.py::test_wheel_contains_the_configs, which builds one)."""

from __future__ import annotations

from pathlib import Path

from setuptools.config.setupcfg import read_configuration

ROOT = Path(__file__).resolve().parents[2]


def test_package_data_lies_in_listed_packages():
    """A data file in a directory Python can import (spacy_elmo/configs, a namespace package) that
    setup.cfg does not list as a package makes `pip install` print setuptools' "'spacy_elmo.configs'
    is absent from the `packages` configuration" warning block; every such directory is listed."""
    options = read_configuration(ROOT / "setup.cfg")["options"]
    packages = set(options["packages"])
    assert "spacy_elmo" in packages
    for package, patterns in options["package_data"].items():
        assert package in packages, package
        for pattern in patterns:
            files = sorted((ROOT / package.replace(".", "/")).glob(pattern))
            assert files, f"{package}: {pattern} matches nothing"
            for path in files:
                folder = ".".join(path.parent.relative_to(ROOT).parts)
                assert folder in packages, f"{path.relative_to(ROOT)} lies in {folder}, which setup.cfg does not list"
