"""UTF-8 text input, shared by pretraining and the tools (embed, similar): lines read and decoded
strictly, files checked before any work, blocks of lines streamed from a byte offset, line → words.

Text must be UTF-8. A file that is not (a UTF-16/32 byte-order mark, NUL bytes as in UTF-16 or a
binary file, bytes that are not UTF-8 as in Latin-1 text) is refused with a `TextError` naming the
file, the line and what was found: `check_text_files` looks at the start of every file before any
work, and every line read later is decoded strictly too. Data with no text at all is an error.
A UTF-8 byte-order mark is skipped, empty lines are skipped and lines over `max_line_bytes` are cut.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

UTF8_BOM = b"\xef\xbb\xbf"
# longest first: a UTF-32 little-endian mark begins with the UTF-16 one
OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)
CHECK_BYTES = 1 << 16  # how much of each file `check_text_files` reads up front


class TextError(ValueError):
    """Input that is not usable text: not UTF-8, NUL bytes, or no text at all (one line)."""


def decode_line(raw: bytes, where: str, line: int | Callable[[], int]) -> str:
    """`raw` decoded as UTF-8, or a `TextError` naming `where` and the (1-based) `line`
    (a number, or a function giving it: counted only when there is an error)."""
    if b"\x00" in raw or raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        number = line() if callable(line) else line
        for bom, encoding in OTHER_BOMS:
            if number == 1 and raw.startswith(bom):
                raise TextError(
                    f"{where}, line 1: starts with a {encoding} byte-order mark: the text must be "
                    f"UTF-8 (convert it, e.g. `iconv -f {encoding} -t UTF-8`)"
                )
        if b"\x00" in raw:
            raise TextError(
                f"{where}, line {number}: NUL bytes (at byte {raw.index(0) + 1} of the line): not UTF-8 "
                "text (UTF-16 or UTF-32 text, or a binary file?); convert it, e.g. `iconv -f UTF-16 -t UTF-8`"
            )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        number = line() if callable(line) else line
        found = " ".join(f"0x{byte:02x}" for byte in raw[err.start : err.end])
        raise TextError(
            f"{where}, line {number}: not UTF-8 ({found} at byte {err.start + 1} of the line; "
            "Latin-1 or Windows-1252 text?); convert it, e.g. `iconv -f latin1 -t UTF-8`"
        ) from None


def read_lines(handle: Iterable[bytes], where: str) -> Iterator[str]:
    """The lines of a binary stream (a file, `stdin_bytes()`) as UTF-8 text, without line ends; a UTF-8
    byte-order mark is skipped, anything else that is not UTF-8 raises `TextError`."""
    for number, raw in enumerate(handle, 1):
        if number == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        yield decode_line(raw, where, number).rstrip("\r\n")


def stdin_bytes() -> Iterable[bytes]:
    """Standard input as binary lines for `read_lines`: its buffer, or a text stream without one
    (e.g. a StringIO put in its place) encoded back to UTF-8."""
    buffer = getattr(sys.stdin, "buffer", None)
    return buffer if buffer is not None else (line.encode("utf-8", "surrogateescape") for line in sys.stdin)


def _drop_partial_character(raw: bytes) -> bytes:
    """`raw` without a UTF-8 sequence cut off at its end (a long line cut at a byte count)."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte < 0x80:
            return raw
        if byte >= 0xC0:  # the first byte of the last sequence: is the sequence complete?
            length = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return raw if back >= length else raw[:-back]
    return raw


def _line_at(path: Path, offset: int) -> int:
    """The (1-based) number of the line starting at byte `offset` of `path`."""
    count, left = 1, offset
    with open(path, "rb") as handle:
        while left > 0 and (chunk := handle.read(min(left, 1 << 22))):
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


def _check_start(head: bytes, at_end: bool, where: str) -> bool:
    """Decodes the complete lines of `head`, the first bytes of a text (`TextError` naming `where`
    and the line); whether they hold any text."""
    lines = head.split(b"\n")
    if not at_end:
        lines.pop()  # possibly cut in the middle of a character
    has_text = False
    for number, raw in enumerate(lines, 1):
        if number == 1 and raw.startswith(UTF8_BOM):
            raw = raw[len(UTF8_BOM) :]
        has_text = decode_line(raw, where, number).strip() != "" or has_text
    return has_text


def _file_has_text(path: Path) -> bool:
    """`_check_start` of a file's first CHECK_BYTES (further on past a long blank start)."""
    with open(path, "rb") as handle:
        head = handle.read(CHECK_BYTES)
        at_end = not handle.read(1)
    has_text = _check_start(head, at_end, str(path))
    if not has_text and not at_end:  # a long blank start: look on for a first line of text
        has_text = bool(read_block(path, 0, 1, 1 << 20)[0])
    return has_text


def check_text_files(files: Iterable[Path], setting: str) -> None:
    """Refuses, before any work, files whose start is not UTF-8 text (`TextError` naming file and
    line) and data with no text: `setting` (e.g. "paths.train") is named when all of it is empty."""
    files = list(files)
    has_text = False
    for path in files:
        has_text = _file_has_text(path) or has_text
    if not has_text:
        shown = ", ".join(str(p) for p in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        raise TextError(f"{setting}: no text in {shown} (empty files, or only empty lines)")


def check_text_input(path: str | Path) -> None:
    """Before any work, the input a command reads ("-": standard input): a readable file whose
    start is UTF-8 text with some text in it; of standard input, what is there to read now without
    consuming it (its buffer's `peek`: the first block of a pipe or a file). Raises `TextError`,
    `FileNotFoundError`, `IsADirectoryError` or `PermissionError`, one line naming the input."""
    if str(path) == "-":
        peek = getattr(getattr(sys.stdin, "buffer", None), "peek", None)
        if peek is None:  # (a stream put in its place: checked as it is read)
            return
        head = peek(CHECK_BYTES)
        if not head:
            raise TextError("<stdin>: no input: give one sentence per line on stdin")
        _check_start(head, False, "<stdin>")
        return
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, expected a text file (one sentence per line)")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        has_text = _file_has_text(path)
    except PermissionError as err:
        raise PermissionError(f"{path}: cannot read it ({err.strerror})") from None
    if not has_text:
        raise TextError(f"{path}: no input: the file is empty or holds only empty lines (give one sentence per line)")


def read_block(path: Path, offset: int, max_lines: int, max_line_bytes: int) -> tuple[list[str], int]:
    """Up to `max_lines` non-empty lines from byte `offset` of `path`, and the offset after them.

    A line longer than `max_line_bytes` keeps its first `max_line_bytes` bytes (up to the last
    space) and the rest is skipped. A line that is not UTF-8 raises `TextError` (file and line
    number). Fewer lines than asked means the end of the file was reached.
    """
    lines: list[str] = []
    with open(path, "rb") as handle:
        handle.seek(offset)
        read = 0  # lines read from `offset` on (their numbers are counted only for an error)
        while len(lines) < max_lines:
            start = handle.tell()
            raw = handle.readline(max_line_bytes + 1)
            if not raw:
                break
            if start == 0 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM) :]
            read += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raw = _drop_partial_character(raw[:max_line_bytes].rsplit(b" ", 1)[0])
                while True:  # skip the rest of the huge line
                    rest = handle.readline(1 << 20)
                    if not rest or rest.endswith(b"\n"):
                        break
            text = decode_line(raw, str(path), lambda: _line_at(path, offset) + read - 1).strip()  # noqa: B023 (called at once)
            if text:
                lines.append(text)
        return lines, handle.tell()


def make_tokenizer(data_format: str = "tokenized", lang: str = "en") -> Callable[[str], list[str]]:
    """Line → words. "tokenized": split on whitespace (bilm-tf format); "text": a blank spaCy tokenizer."""
    if data_format == "tokenized":
        return str.split
    if data_format == "text":
        from .hf.tokenization_elmo import spacy_word_splitter

        return spacy_word_splitter(lang)
    raise ValueError(f"data format must be 'tokenized' or 'text', got {data_format!r}")


__all__ = [
    "TextError",
    "check_text_files",
    "check_text_input",
    "decode_line",
    "make_tokenizer",
    "read_block",
    "read_lines",
    "stdin_bytes",
]
