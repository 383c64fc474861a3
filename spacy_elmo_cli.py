"""The `spacy-elmo` console script.

`import spacy_elmo` registers the model type with transformers' AutoConfig, which imports torch and
transformers (seconds). `spacy-elmo --version` answers without that import: it reads the version from
`spacy_elmo/constants.py` (standard library only), the one place it is written, without running the
package's `__init__`; every other command line goes to `spacy_elmo.cli.main`.
"""

from __future__ import annotations

import sys


def version() -> str:
    """`spacy_elmo.constants.VERSION`, read without importing the package (its `__init__` imports transformers)."""
    import importlib.util
    from pathlib import Path

    package = importlib.util.find_spec("spacy_elmo")  # finds the package without running its __init__
    assert package is not None and package.submodule_search_locations, "spacy_elmo is installed beside this script"
    path = Path(list(package.submodule_search_locations)[0]) / "constants.py"
    spec = importlib.util.spec_from_file_location("_spacy_elmo_constants", path)
    assert spec is not None and spec.loader is not None
    constants = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(constants)
    return constants.VERSION


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        print(f"spacy-elmo {version()}")
        return 0
    from spacy_elmo.cli import main as run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
