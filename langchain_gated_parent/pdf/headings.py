"""Headings from typography (size, weight, numbering, position) or from the bookmark tree."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from langchain_gated_parent.pdf.markdown import Hyphens

from langchain_gated_parent.pdf.layout import column_lefts
from langchain_gated_parent.pdf.page import Line

# --------------------------------------------------------------------------------------------
# Headings from typography

_NUMBERING = re.compile(
    r"^(?:(?:appendix|chapter|section)\s+)?((?:\d{1,2}|[A-Z])(?:\.\d{1,2})*)\.?\s+(?=\S)",
    re.IGNORECASE,
)
_CONTENTS = re.compile(
    r"^(?:table\s+of\s+)?contents$|^index$|^list\s+of\s+(?:figures|tables)$", re.IGNORECASE
)
_ABSTRACT = re.compile(r"^abstract[.:]?$", re.IGNORECASE)
_LEADER = re.compile(r"(?:\.\s?){4,}")
_LETTERS = re.compile(r"[^\W\d_]")
_MAX_HEADING_WORDS = 16
_MAX_HEADING_CHARS = 140
_LARGER = 1.12
_TOC_PAGE_SHARE = 0.3
MAX_LEVEL = 6  # Markdown has six heading levels
_MIN_LETTERS = 2
_SAME_STYLE = 0.3  # points: sizes closer than this are one style
_TITLE_PAGE_MIN_PAGES = 4
_TITLE_PAGE_MAX_LINES = 15
_MAX_HEADING_INDENT = 2.5
_MIN_RUN_IN_CHARS = 2
_MAX_RUN_IN_WORDS = 10


def _numbering(text: str) -> str | None:
    """The section number a heading starts with ('3.2', 'A.1'), ``None`` when unnumbered.

    A bare letter counts only after 'Appendix' ('Appendix A Tools'): 'A Study of ...' is a
    title, not appendix A.
    """
    match = _NUMBERING.match(text)
    if not match:
        return None
    number = match.group(1)
    if number.isalpha() and not text.lower().startswith("appendix"):
        return None
    return number


def body_size(lines: Iterable[Line]) -> float:
    """The font size most text is set in."""
    weights: Counter[float] = Counter()
    for line in lines:
        weights[round(line.size * 2) / 2] += len(line.text)
    return weights.most_common(1)[0][0] if weights else 10.0


def contents_pages(pages: list[list[Line]]) -> set[int]:
    """Pages that are mostly dot-leader lines (tables of contents, indexes)."""
    found = set()
    for number, lines in enumerate(pages):
        leaders = sum(1 for line in lines if _LEADER.search(line.text))
        if lines and leaders / len(lines) >= _TOC_PAGE_SHARE:
            found.add(number)
    return found


def _looks_like_heading(line: Line, body: float, *, bold_body: bool) -> bool:
    """Whether typography and text make ``line`` a heading candidate.

    Larger than body or bold, short, not code, not a contents entry (dot leaders), not a
    sentence fragment (lowercase start; a trailing comma unless the line is set larger, the
    first line of a wrapped heading).
    """
    if not ((line.bold and not bold_body) or line.size >= body * _LARGER) or line.mono:
        return False
    text = line.text
    return not (
        line.words > _MAX_HEADING_WORDS
        or len(text) > _MAX_HEADING_CHARS
        or text[0].islower()
        or (text.endswith((",", ";")) and line.size < body * _LARGER)
        or _CONTENTS.match(text)
        or _LEADER.search(text)
        or len(_LETTERS.findall(text)) < _MIN_LETTERS
    )


def heading_lines(
    lines: list[Line], body: float, skip_pages: set[int], hyphens: Hyphens
) -> list[Line]:
    """Mark heading lines, join headings wrapped over lines, split off run-in headings.

    A heading starts at its column's left margin (figure labels and centred text do not),
    except an abstract heading. On contents and index pages only a larger-than-body first line
    can be a heading (the chapter heading of an index), never the entries or letter groups;
    a title page has none. A paragraph that opens with a few bold words ('Results. We ...')
    has a run-in heading: it becomes a heading line of its own before the paragraph.

    Returns:
        The lines with run-in headings inserted.
    """
    lefts = column_lefts(lines)
    bold_chars = sum(len(line.text) for line in lines if line.bold)
    bold_body = bold_chars > sum(len(line.text) for line in lines) / 2  # bold marks nothing
    flow: list[Line] = []
    previous: Line | None = None
    for line in lines:
        flow.append(line)
        if line.role != "body":
            continue
        if _continues_heading(previous, line):
            assert previous is not None  # noqa: S101  # narrowed by _continues_heading
            joint = hyphens.joint(previous.text, line.text, hyphen=previous.hyphen, code=False)
            previous.title += joint + line.text
            previous.hyphen, previous.text, previous.base = line.hyphen, line.text, line.base
            line.role = "merged"
            continue
        first_on_page = previous is None or previous.page != line.page
        indented = line.x0 - lefts[line.page, line.column] > _MAX_HEADING_INDENT * body
        if line.page in skip_pages and not (first_on_page and line.size >= body * _LARGER):
            pass
        elif _looks_like_heading(line, body, bold_body=bold_body) and (
            not indented or _ABSTRACT.match(line.text)
        ):
            line.role, line.title = "heading", line.text
        elif _is_run_in(line):
            flow.insert(len(flow) - 1, _run_in_heading(line))
        previous = line
    return flow


def _is_run_in(line: Line) -> bool:
    """Whether the line opens with a run-in heading: a few bold words starting with a capital."""
    return (
        len(line.lead) > _MIN_RUN_IN_CHARS
        and len(line.lead.split()) <= _MAX_RUN_IN_WORDS
        and line.lead[0].isupper()
        and not line.mono
    )


def _run_in_heading(line: Line) -> Line:
    """Cut the run-in heading off ``line`` and return it as a heading line of its own."""
    heading = replace(line, text=line.lead, title=line.lead, role="heading", run_in=True)
    line.text = line.text[len(line.lead) :].lstrip()
    return heading


def _continues_heading(previous: Line | None, line: Line) -> bool:
    """Whether ``line`` is the next line of the wrapped heading ``previous``."""
    return (
        previous is not None
        and previous.role == "heading"
        and previous.page == line.page
        and previous.column == line.column
        and abs(previous.size - line.size) < _SAME_STYLE
        and previous.bold == line.bold
        and not line.mono
        and 0 < previous.base - line.base < 1.8 * line.size
        and len(previous.title.split()) + line.words <= 2 * _MAX_HEADING_WORDS
        and not _numbering(line.text)
        and not _ABSTRACT.match(previous.title)
        and not _LEADER.search(line.text)
    )


def _style(line: Line) -> tuple[float, bool]:
    """A heading's typographic style: size to the half point, and weight."""
    return round(line.size * 2) / 2, line.bold


def _style_levels(headings: list[Line], *, numbered: bool) -> dict[tuple[float, bool], int]:
    """Map each heading style to a level.

    In a numbered document, styles seen on numbered headings take the most common depth of
    those numbers. Every other style, in order of size (bold first), sits one level below the
    style before it, so an unnumbered document's sizes still map to levels.
    """
    depths: dict[tuple[float, bool], Counter[int]] = defaultdict(Counter)
    for line in headings:
        number = _numbering(line.title)
        if number and numbered:
            depths[_style(line)][number.count(".") + 1] += 1
    levels: dict[tuple[float, bool], int] = {}
    deepest = 0
    for key in sorted({_style(line) for line in headings}, key=lambda s: (-s[0], not s[1])):
        deepest = depths[key].most_common(1)[0][0] if depths[key] else deepest + 1
        levels[key] = deepest
    return levels


def assign_levels(headings: list[Line]) -> None:
    """Levels from numbering depth in a numbered document, else from the heading's style.

    A document is numbered when most of its displayed headings (abstract aside) carry a
    number; then a stray number in an unnumbered document ('1. Loaded language') does not
    set a level. A run-in heading sits one level below the last displayed heading before it.
    """
    shown = [line for line in headings if not line.run_in and not _ABSTRACT.match(line.title)]
    numbered = sum(1 for line in shown if _numbering(line.title)) > len(shown) / 2
    levels = _style_levels(shown, numbered=numbered)
    above = 0
    for line in headings:
        number = _numbering(line.title) if numbered else None
        if line.run_in:
            level = above + 1
        elif _ABSTRACT.match(line.title):
            level = 1
        elif number:
            level = number.count(".") + 1
        else:
            level = levels[_style(line)]
        line.level = max(1, min(level, MAX_LEVEL))
        if not line.run_in:
            above = line.level


def take_title(lines: list[Line], body: float) -> str | None:
    """Mark the document title (the largest text on page 1, if larger than body) and return it."""
    first_page = [line for line in lines if line.page == 0]
    if not first_page:
        return None
    biggest = max(line.size for line in first_page)
    if biggest < body * _LARGER:
        return None
    title_lines: list[Line] = []
    for line in first_page:
        if abs(line.size - biggest) < _SAME_STYLE and not line.mono:
            title_lines.append(line)
        elif title_lines:
            break
    first = title_lines[0].text if title_lines else ""
    if not first or _ABSTRACT.match(first) or _CONTENTS.match(first) or _numbering(first):
        return None
    for line in title_lines:
        line.role = "title"
    return " ".join(line.text for line in title_lines)


def is_title_page(pages: list[list[Line]]) -> bool:
    """Whether page 1 is a title page (few lines, in a document of several pages)."""
    return len(pages) > _TITLE_PAGE_MIN_PAGES and 0 < len(pages[0]) <= _TITLE_PAGE_MAX_LINES


# --------------------------------------------------------------------------------------------
# Headings from bookmarks

_MATCH_SHARE = 0.5


def _normal(text: str) -> str:
    """Lowercase letters and digits only, for matching bookmark titles to page text."""
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def _strip_number(text: str) -> str:
    match = _NUMBERING.match(text)
    return text[match.end() :] if match else text


def _find_title(
    pages: list[list[Line]], title: str, page: int, y: float | None
) -> tuple[int, int, int] | None:
    """Where ``title`` is printed: ``(page, first line, line count)``, else ``None``.

    Looks on the bookmark's page, then the next, for one line or two consecutive lines that
    read as the title, with or without a section number, nearest the destination height first.
    """
    target = _normal(title)
    for number in (page, page + 1)[: max(0, len(pages) - page)]:
        lines = pages[number]
        order = sorted(
            range(len(lines)), key=lambda i: abs(lines[i].base - y) if y is not None else i
        )
        for index in order:
            if lines[index].role != "body":
                continue
            text = lines[index].text
            candidates = [text]
            if index + 1 < len(lines):
                candidates.append(f"{text} {lines[index + 1].text}")
            for count, candidate in enumerate(candidates, start=1):
                if target in {_normal(candidate), _normal(_strip_number(candidate))}:
                    return number, index, count
    return None


def apply_bookmarks(
    pages: list[list[Line]], marks: list[tuple[int, str, int, float | None]]
) -> bool:
    """Turn the lines bookmarks point at into headings; ``False`` if too few are found.

    Bookmarks are trusted only when most of them are printed where they point (else the
    typography decides). A found heading keeps its printed text (with its number, as in the
    typography path); a bookmark whose title is not found still becomes a heading, placed at
    its destination height.
    """
    found = 0
    placed: list[tuple[int, Line]] = []
    for level, title, page, y in marks:
        hit = _find_title(pages, title, page, y)
        if hit is None:
            placed.append((page, _synthetic(page, title, level, y)))
            continue
        found += 1
        number, index, count = hit
        head, *rest = pages[number][index : index + count]
        printed = " ".join([head.text, *(line.text for line in rest)])
        head.role, head.level, head.title = "heading", min(level, MAX_LEVEL), printed
        for extra in rest:
            extra.role = "merged"
    if not marks or found / len(marks) < _MATCH_SHARE:
        for lines in pages:
            for line in lines:
                if line.role in {"heading", "merged"}:
                    line.role = "body"
        return False
    for page, line in placed:
        lines = pages[page]
        position = next((i for i, other in enumerate(lines) if line.base >= other.base), len(lines))
        lines.insert(position, line)
    return True


def _synthetic(page: int, title: str, level: int, y: float | None) -> Line:
    """A heading line for a bookmark whose title is not on its page."""
    line = Line(page, title, 0.0, 0.0, y if y is not None else 1e9, 0.0, bold=True, mono=False)
    line.role, line.level, line.title = "heading", min(level, MAX_LEVEL), title
    return line
