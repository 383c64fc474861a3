"""The `spacy-elmo` console script.

`import spacy_elmo` registers the model type with transformers' AutoConfig, which imports torch and
transformers (seconds). `spacy-elmo --version` answers from the installed distribution's metadata
without that import; every other command line goes to `spacy_elmo.cli.main`.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from importlib.metadata import version

        print(f"spacy-elmo {version('spacy-elmo')}")
        return 0
    from spacy_elmo.cli import main as run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
