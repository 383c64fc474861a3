"""Reading training text: which files a path / directory / glob names, one block of lines at a
time (streamed, never the whole corpus), line → words, long lines cut into sequences.

Bad input never stops training: invalid UTF-8 is replaced (U+FFFD), empty lines are skipped,
lines over `max_line_bytes` are cut, and sequences over `max_tokens` words are split.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Callable, Iterator, Sequence


def resolve_files(spec: str | Path | Sequence[str | Path]) -> list[Path]:
    """The files named by a path, a directory (its files), a glob pattern, or a comma-separated list of these."""
    if isinstance(spec, (str, Path)):
        parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    else:
        parts = [str(p) for p in spec]
    files: list[Path] = []
    for part in parts:
        path = Path(part).expanduser()
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            found = [path]
        else:
            found = sorted(Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file())
        if not found:
            raise FileNotFoundError(f"no text files match {part!r}")
        files.extend(found)
    return list(dict.fromkeys(files))


def read_block(path: Path, offset: int, max_lines: int, max_line_bytes: int) -> tuple[list[str], int]:
    """Up to `max_lines` non-empty lines from byte `offset` of `path`, and the offset after them.

    Undecodable bytes become U+FFFD; a line longer than `max_line_bytes` keeps its first
    `max_line_bytes` bytes (up to the last space) and the rest is skipped. Fewer lines than
    asked means the end of the file was reached.
    """
    lines: list[str] = []
    with open(path, "rb") as handle:
        handle.seek(offset)
        while len(lines) < max_lines:
            raw = handle.readline(max_line_bytes + 1)
            if not raw:
                break
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raw = raw[:max_line_bytes].rsplit(b" ", 1)[0]
                while True:  # skip the rest of the huge line
                    rest = handle.readline(1 << 20)
                    if not rest or rest.endswith(b"\n"):
                        break
            text = raw.decode("utf-8", errors="replace").strip()
            if text:
                lines.append(text)
        return lines, handle.tell()


def make_tokenizer(data_format: str = "tokenized", lang: str = "en") -> Callable[[str], list[str]]:
    """Line → words. "tokenized": split on whitespace (bilm-tf format); "text": a blank spaCy tokenizer."""
    if data_format == "tokenized":
        return str.split
    if data_format == "text":
        from ..tokenization_elmo import spacy_word_splitter

        return spacy_word_splitter(lang)
    raise ValueError(f"data format must be 'tokenized' or 'text', got {data_format!r}")


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


__all__ = ["resolve_files", "read_block", "make_tokenizer", "split_long", "iter_sequences"]
