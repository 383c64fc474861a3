"""The lab's marker-splicing helper, for the regions still spliced: every such region of the repository's Markdown
sits between `<!-- NAME:start -->` and `<!-- NAME:end -->` and is rewritten through `splice` (and `write_or_check`),
never by hand. The regions and their writers:

| region | in | written by |
| --- | --- | --- |
| `results` | results/README.md (the results folder's page) | `python -m lab.report readme` (lab/readme_results.py) |
| `results-summary` | README.md | the same command, from the same results |
| `precision-error` | docs/performance.md | `python -m lab.precision_error doc` |

It imports nothing but the standard library, and spacy_elmo/ never imports it.
"""  # noqa: E501 - the table's rows stay whole (Markdown has no continuation line)

from __future__ import annotations

import sys
from pathlib import Path


def markers(name: str) -> tuple[str, str]:
    """The start and end markers of region `name`."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def has_region(text: str, name: str) -> bool:
    start, end = markers(name)
    return start in text and end in text.split(start, 1)[1]


def region(text: str, name: str) -> str:
    """What `text` holds between the markers of region `name`."""
    if not has_region(text, name):
        raise ValueError(f"no {' … '.join(markers(name))} markers")
    start, end = markers(name)
    return text.split(start, 1)[1].split(end, 1)[0]


def splice(text: str, name: str, body: str, *, where: str = "the text", missing_ok: bool = False) -> str:
    """`text` with what lies between the markers of region `name` replaced by `body` (the markers stay).
    Without the markers: `text` unchanged when `missing_ok`, else a one-line SystemExit naming `where`."""
    if not has_region(text, name):
        if missing_ok:
            return text
        start, end = markers(name)
        raise SystemExit(f"{where} has no {start} … {end} markers to write between")
    start, end = markers(name)
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}{body}{end}{tail}"


def write_or_check(pages: dict[Path, tuple[str, str]], check: bool, command: str) -> int:
    """{path: (current text, new text)}: write the changed pages, or with `check` write nothing and return 1
    (naming each stale page and the command that writes it) when any differs."""
    stale = [path for path, (current, new) in pages.items() if new != current]
    if check:
        for path in stale:
            print(
                f"{path}: a generated region differs from what `{command}` writes now: rerun it "
                "(never edit a generated region by hand)",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pages[path][1], encoding="utf-8")
    return 0
