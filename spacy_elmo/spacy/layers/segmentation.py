"""How the biLM layer cuts a Doc into the sequences it runs: a segmenter, chosen in the config.

A segmenter is a function `Doc -> segments`, each segment a span of tokens the biLM reads as one
sequence (from a zero LSTM state), given as a spaCy `Span`, a `(start, end)` pair (all of it kept)
or `(start, end, keep_start, keep_end)` (the biLM reads [start, end), the Doc takes the vectors of
[keep_start, keep_end) from it: overlapping windows keep each token from the window where it is
furthest from an edge). The kept ranges must cover the Doc's tokens in order, each token once
(`doc_segments` checks it and says which Doc and segment break it, in one line).

Two ship, registered in spaCy's `registry.misc` (`spacy/architectures.py`):

- `spacy-elmo.sentences_or_windows.v1` (the default): the whole Doc up to `max_length` tokens;
  past it, its sentences when they are set (`doc.has_annotation("SENT_START")`), else the whole Doc,
  each cut into windows of `max_length` tokens that overlap by `window_overlap`;
- `spacy-elmo.windows.v1`: windows of `max_length` tokens overlapping by `window_overlap`, whatever
  the sentences (a Doc up to `max_length` tokens is one window).

A user's own is any function registered the same way (docs/spacy.md has an example). A Doc's
vectors depend on its words and its segments only, so the layer cache's key is both
(`bilm.doc_key`): two segmentations of one text never share cached layers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spacy.tokens import Doc, Span

from ...constants import MAX_LENGTH, WINDOW_OVERLAP

# what a segmenter returns for a segment
SegmentSpec = Span | tuple[int, int] | tuple[int, int, int, int]
Segmenter = Callable[[Doc], Iterable[SegmentSpec]]
Window = tuple[int, int, int, int]  # (start, end, keep_start, keep_end)


@dataclass(frozen=True)
class Segment:
    """Tokens [start, end) of Doc `doc` run as one biLM sequence; [keep_start, keep_end) is used."""

    doc: int
    start: int
    end: int
    keep_start: int
    keep_end: int

    def __len__(self) -> int:
        return self.end - self.start


def window_spans(start: int, end: int, size: int, overlap: int) -> list[Window]:
    """(start, end, keep_start, keep_end) windows of at most `size` tokens covering [start, end).

    Neighbouring windows share `overlap` tokens (more for the last one, which is moved back to be
    full length); each shared token is kept from the window where it is further from the edge.
    """
    if end - start <= size:
        return [(start, end, start, end)]
    starts = list(range(start, end - size + 1, size - overlap))
    if starts[-1] + size < end:
        starts.append(end - size)
    spans = []
    for i, s in enumerate(starts):
        keep_start = start if i == 0 else (s + starts[i - 1] + size) // 2
        keep_end = end if i == len(starts) - 1 else (starts[i + 1] + s + size) // 2
        spans.append((s, s + size, keep_start, keep_end))
    return spans


@dataclass(frozen=True)
class SentencesOrWindows:
    """`spacy-elmo.sentences_or_windows.v1`, the default: the Doc; past `max_length` tokens its
    sentences (when set), each (or the Doc) cut into windows of `max_length` tokens overlapping by
    `window_overlap`. (A dataclass, not a closure, so a pipeline pickles.)"""

    max_length: int = MAX_LENGTH
    window_overlap: int = WINDOW_OVERLAP
    __name__ = "spacy-elmo.sentences_or_windows.v1"

    def __post_init__(self) -> None:
        _check_window(self.max_length, self.window_overlap, self.__name__)

    def __call__(self, doc: Doc) -> list[Window]:
        if len(doc) > self.max_length and doc.has_annotation("SENT_START"):
            parts = [(s.start, s.end) for s in doc.sents]
        else:
            parts = [(0, len(doc))]
        return [span for start, end in parts for span in window_spans(start, end, self.max_length, self.window_overlap)]


@dataclass(frozen=True)
class Windows:
    """`spacy-elmo.windows.v1`: windows of `max_length` tokens overlapping by `window_overlap` over
    the whole Doc, ignoring its sentences."""

    max_length: int = MAX_LENGTH
    window_overlap: int = WINDOW_OVERLAP
    __name__ = "spacy-elmo.windows.v1"

    def __post_init__(self) -> None:
        _check_window(self.max_length, self.window_overlap, self.__name__)

    def __call__(self, doc: Doc) -> list[Window]:
        return window_spans(0, len(doc), self.max_length, self.window_overlap)


def _check_window(max_length: int, window_overlap: int, name: str) -> None:
    """One line naming the segmenter for a window size or overlap it cannot use."""
    if max_length < 1:
        raise ValueError(f"{name}: max_length must be >= 1, got {max_length}")
    if not 0 <= window_overlap < max_length:
        raise ValueError(
            f"{name}: window_overlap must be in [0, max_length), got {window_overlap} (max_length={max_length})"
        )


def doc_segments(segmenter: Segmenter, doc: Doc, index: int = 0) -> tuple[Window, ...]:
    """The segments `segmenter` makes of `doc`, as (start, end, keep_start, keep_end), checked: each
    within the Doc and keeping a part of itself, the kept parts covering the Doc in order, each token
    once. A Doc without tokens has none. `index` names the Doc in the one-line `ValueError`."""
    if len(doc) == 0:
        return ()
    name = getattr(segmenter, "__name__", None) or type(segmenter).__name__
    where = f"elmo segmenter {name!r}, Doc {index} ({len(doc)} tokens)"
    found: list[Window] = []
    for item in segmenter(doc):
        window = _window(item, where)
        start, end, keep_start, keep_end = window
        if not 0 <= start <= keep_start < keep_end <= end <= len(doc):
            raise ValueError(f"{where}: segment {window} is not (start, end, keep_start, keep_end) with "
                             f"0 <= start <= keep_start < keep_end <= end <= {len(doc)}")  # fmt: skip
        expected = found[-1][3] if found else 0
        if keep_start != expected:
            raise ValueError(
                f"{where}: segment {window} keeps tokens from {keep_start}, expected {expected} "
                "(the kept parts cover the Doc in order, each token once)"
            )
        found.append(window)
    covered = found[-1][3] if found else 0
    if covered != len(doc):
        raise ValueError(f"{where}: the segments keep tokens up to {covered}, expected all {len(doc)}")
    return tuple(found)


def _window(item: Any, where: str) -> Window:
    if isinstance(item, Span):
        return (item.start, item.end, item.start, item.end)
    try:
        values = tuple(int(v) for v in item)
    except (TypeError, ValueError):
        values = ()
    if len(values) == 2:
        return (values[0], values[1], values[0], values[1])
    if len(values) == 4:
        return values
    raise ValueError(f"{where}: a segment is a Span, (start, end) or (start, end, keep_start, keep_end), got {item!r}")


def plan_segments(docs: Sequence[Doc], segmenter: Segmenter) -> list[Segment]:
    """The segments of every Doc (`doc_segments`), numbered by the Doc's position in `docs`."""
    return [Segment(i, *window) for i, doc in enumerate(docs) for window in doc_segments(segmenter, doc, i)]


__all__ = [
    "Segment",
    "Segmenter",
    "SentencesOrWindows",
    "Windows",
    "doc_segments",
    "plan_segments",
    "window_spans",
]
