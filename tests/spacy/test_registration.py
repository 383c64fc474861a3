"""Every name spacy_elmo registers with spaCy's registries has its setup.cfg entry point, and every
spaCy entry point in setup.cfg names something the package registers (so an installed package
resolves `spacy-elmo.*` in a config without `import spacy_elmo`)."""

from __future__ import annotations

import configparser
import importlib
import pkgutil
from pathlib import Path

import catalogue

import spacy_elmo

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"


def registered() -> dict[tuple[str, str], str]:
    """{(entry-point group, name): "module:function"} of everything in spaCy's registries from spacy_elmo."""
    for module in pkgutil.walk_packages(spacy_elmo.__path__, "spacy_elmo."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found = {}
    for (namespace, registry, name), func in catalogue.REGISTRY.items():
        module = getattr(func, "__module__", "") or ""
        if namespace != "spacy" or not (module.startswith("spacy_elmo") or name.startswith("spacy-elmo.")):
            continue
        group = "spacy_factories" if registry in ("factories", "internal_factories") else f"spacy_{registry}"
        found[(group, name)] = f"{module}:{func.__qualname__}"
    return found


def declared() -> dict[tuple[str, str], str]:
    """{(group, name): "module:function"} of the spaCy entry points in setup.cfg."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # entry point names are case-sensitive
    parser.read(SETUP_CFG)
    found = {}
    for group, lines in parser["options.entry_points"].items():
        if not group.startswith("spacy_"):
            continue
        for line in filter(None, (line.strip() for line in lines.splitlines())):
            name, _, target = (part.strip() for part in line.partition("="))
            found[(group, name)] = target
    return found


def test_registry_and_entry_points_agree():
    have, want = registered(), declared()
    assert ("spacy_architectures", "spacy-elmo.ElmoBiLM.v2") in have and ("spacy_factories", "elmo") in have
    assert sorted(set(have) - set(want)) == [], "registered but missing from setup.cfg's entry points"
    assert sorted(set(want) - set(have)) == [], "setup.cfg entry points that nothing registers"
    assert want == have  # each entry point points at the registered function
    assert all(name.startswith("spacy-elmo.") for group, name in have if group != "spacy_factories")
