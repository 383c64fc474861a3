"""Training text: the sequences of a corpus's files, streamed a block of lines at a time (never the
whole corpus), each line → words, long lines cut into sequences of at most `max_tokens` words.

Reading and checking the lines (UTF-8 only, `TextError` naming the file and line) is
`spacy_elmo.text_input`'s, which the tools share; which files a path names is `spacy_elmo.files`'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..text_input import read_block


def split_long(tokens: list[str], max_tokens: int) -> list[list[str]]:
    """Cuts a line into sequences of at most `max_tokens` words (each becomes `<S>` … `</S>`)."""
    return [tokens[i : i + max_tokens] for i in range(0, len(tokens), max_tokens)]


def iter_sequences(
    files: Sequence[Path],
    tokenize: Callable[[str], list[str]] = str.split,
    max_tokens: int = 100,
    max_line_bytes: int = 1 << 20,
    block_lines: int = 10_000,
) -> Iterator[list[str]]:
    """Every training sequence of `files` in file order (streamed; for the vocabulary and evaluation)."""
    for path in files:
        offset = 0
        while True:
            lines, offset = read_block(path, offset, block_lines, max_line_bytes)
            if not lines:
                break
            for line in lines:
                yield from split_long(tokenize(line), max_tokens)


__all__ = ["iter_sequences", "split_long"]
