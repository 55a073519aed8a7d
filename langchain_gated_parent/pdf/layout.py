"""Page layout: drop running heads, footers and page numbers; read columns in order."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from langchain_gated_parent.pdf.page import Line


# --------------------------------------------------------------------------------------------
# Page furniture: running heads, footers, page numbers

_PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:/|of)\s*\d+)?$", re.IGNORECASE
)
_DIGITS = re.compile(r"\d+")
_EDGE_LINES = 3
_MIN_FURNISHED_LINES = 3
_APART = 1.5  # line heights


def _furniture_key(line: Line) -> str:
    """Text of a line with numbers masked, so 'Chapter 2 ... 14' repeats across pages."""
    return _DIGITS.sub("#", " ".join(line.text.lower().split()))


def remove_furniture(pages: list[list[Line]], height: list[float]) -> None:
    """Drop running heads, footers and page numbers in place.

    A line among the top or bottom few of its page is furniture when it stands apart from the
    text (no other line within a line and a half above or below, beside it aside) and is a
    bare page number, or the same text (numbers masked) sits at about the same height on
    another page. A page of one or two lines keeps them: they are its text.
    """
    seen: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for lines in pages:
        for line in _edge_lines(lines):
            seen[_furniture_key(line)].append((line.page, line.base))
    for number, lines in enumerate(pages):
        if len(lines) < _MIN_FURNISHED_LINES:
            continue
        edges = {id(line) for line in _edge_lines(lines) if _apart(line, lines)}
        keep = []
        for line in lines:
            if id(line) in edges:
                same_place = [
                    page
                    for page, base in seen[_furniture_key(line)]
                    if page != number and abs(base - line.base) < 0.02 * height[number]
                ]
                if _PAGE_NUMBER.match(line.text) or same_place:
                    continue
            keep.append(line)
        lines[:] = keep


def _apart(line: Line, lines: Sequence[Line]) -> bool:
    """Whether no other line sits within a line and a half above or below ``line``."""
    return not any(
        line.size / 2 < abs(other.base - line.base) < _APART * line.size for other in lines
    )


def _edge_lines(lines: Sequence[Line]) -> list[Line]:
    """The topmost and bottommost few lines of a page."""
    ordered = sorted(lines, key=lambda line: -line.base)
    return ordered[:_EDGE_LINES] + ordered[-_EDGE_LINES:]


# --------------------------------------------------------------------------------------------
# Reading order

_MIN_COLUMN_LINES = 3
_NEAR = 1.5  # line heights
_ACROSS, _LEFT, _RIGHT = 0, 1, 2  # values of Line.column


def text_area(pages: list[list[Line]]) -> tuple[float, float]:
    """Left and right edges of the document's text, at percentiles (overfull lines stick out).

    Taken over the whole document, as one page's text may not reach across (a last page
    whose right column holds a few lines).
    """
    starts = sorted(line.x0 for lines in pages for line in lines)
    ends = sorted(line.x1 for lines in pages for line in lines)
    if not starts:
        return 0.0, 0.0
    return starts[len(starts) // 20], ends[-1 - len(ends) // 20]


def _assign_columns(lines: list[Line], area: tuple[float, float]) -> bool:
    """Set each line's column (1 left, 2 right, 0 across); ``True`` if the page has two.

    A page is two-column when enough lines sit wholly in each half of the text area, most
    right-half lines start at one margin (short lines and display fragments of a one-column
    page do not), and fewer lines cross the middle than keep to a half. A line crossing the
    middle inside the columns is an overfull column line.
    """
    left_edge, right_edge = area
    middle = (left_edge + right_edge) / 2
    tolerance = 0.01 * (right_edge - left_edge)
    for line in lines:
        if line.x1 <= middle + tolerance:
            line.column = _LEFT
        elif line.x0 >= middle - tolerance:
            line.column = _RIGHT
        else:
            line.column = _ACROSS
    by_column = Counter(line.column for line in lines)
    right_starts = Counter(round(line.x0) for line in lines if line.column == _RIGHT)
    if (
        min(by_column[_LEFT], by_column[_RIGHT]) < _MIN_COLUMN_LINES
        or by_column[_ACROSS] > by_column[_LEFT] + by_column[_RIGHT]
        or right_starts.most_common(1)[0][1] < by_column[_RIGHT] / 2
    ):
        for line in lines:
            line.column = _ACROSS
        return False
    for line in lines:
        if line.column == _ACROSS and _overfull(line, lines):
            line.column = _LEFT if line.x0 < middle else _RIGHT
    return True


def _overfull(line: Line, lines: list[Line]) -> bool:
    """Whether a line crossing the middle runs inside the columns (an overfull column line).

    It does when lines of both columns sit within a line's height above or below it; a
    full-width title, figure or table stands clear of the columns.
    """
    near = {other.column for other in lines if abs(other.base - line.base) < _NEAR * line.size}
    return {_LEFT, _RIGHT} <= near


def reading_order(lines: list[Line], area: tuple[float, float]) -> list[Line]:
    """Lines of one page in reading order: full-width bands, and columns left before right.

    ``area`` is the document's :func:`text_area`. Lines that cross the middle break the page
    into bands; within a band the left column is read top to bottom before the right one.
    """
    if not lines:
        return lines
    top_down = sorted(lines, key=lambda line: (-round(line.base, 0), line.x0))
    if not _assign_columns(lines, area):
        return top_down
    ordered: list[Line] = []
    band: list[Line] = []
    for line in [*top_down, None]:
        if line is None or line.column == 0:
            ordered += sorted(band, key=lambda x: x.column)  # stable: top to bottom per column
            band = []
            if line is not None:
                ordered.append(line)
        else:
            band.append(line)
    return ordered


def column_lefts(lines: Iterable[Line]) -> dict[tuple[int, int], float]:
    """The left margin of each page column: the most common line start."""
    starts: dict[tuple[int, int], Counter[int]] = defaultdict(Counter)
    for line in lines:
        starts[line.page, line.column][round(line.x0)] += 1
    return {key: float(counts.most_common(1)[0][0]) for key, counts in starts.items()}
