"""First step of the project's workflows: is everything they need installed?

Reads the requirements that the installed `spacy-elmo` package declares (its own and those of the
extras named with --extras, e.g. `plot` for matplotlib) from its metadata and checks each is
installed in a matching version, plus the tools the steps call (`pip download` for the assets).
Nothing heavy is imported (well under a second). On a problem it prints ONE line saying what to
`pip install` and exits 1.

    python -m lab.experiments.check_requirements --extras plot
"""

from __future__ import annotations

import argparse
import importlib.metadata as metadata
import importlib.util
import sys

PACKAGE = "spacy-elmo"
# used by the steps but not declared by the package: module -> what to install
TOOLS = {"pip": "pip"}


def _install_hint(extras: list[str]) -> str:
    spec = f"{PACKAGE}[{','.join(extras)}]" if extras else PACKAGE
    return f"pip install '{spec}' (in a checkout: pip install -e '.{spec[len(PACKAGE) :]}')"


def problems(extras: list[str]) -> tuple[list[str], str]:
    """(what is missing or too old, what to run to fix it); an empty list when all is there."""
    try:
        declared = metadata.requires(PACKAGE) or []
    except metadata.PackageNotFoundError:
        return [f"{PACKAGE} (not installed)"], _install_hint(extras)
    try:
        from packaging.requirements import Requirement
    except ImportError:  # a broken environment: spacy itself depends on packaging
        return ["packaging (not installed)"], _install_hint(extras)
    found, fixes = [], []
    for text in declared:
        req = Requirement(text)
        base = req.marker is None or req.marker.evaluate({"extra": ""})
        wanted = [] if base else [e for e in extras if req.marker.evaluate({"extra": e})]
        if not base and not wanted:
            continue  # another extra's requirement, or not for this platform
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            why = "not installed"
        else:
            if req.specifier.contains(version, prereleases=True):
                continue
            why = f"found {version}"
        spec = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + str(req.specifier)
        found.append(f"{spec} ({why}" + (f"; the {PACKAGE}[{wanted[0]}] extra)" if wanted else ")"))
        fixes.append(spec)
    for module, dist in TOOLS.items():
        if importlib.util.find_spec(module) is None:
            found.append(f"{dist} (not installed)")
            fixes.append(dist)
    return found, "pip install " + " ".join(f"'{f}'" for f in fixes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", nargs="*", default=[], help="extras of spacy-elmo the workflow needs (e.g. plot)")
    args = parser.parse_args(argv)
    missing, fix = problems(args.extras)
    if missing:
        print(f"error: this workflow needs {', '.join(missing)}: {fix}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
