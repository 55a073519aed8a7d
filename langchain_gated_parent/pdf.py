"""Read a PDF into Markdown whose headings are the document's section tree.

PDFs keep no structure, only glyphs at positions. This module recovers it the way a reader does:
the bookmark tree when the file has one (each bookmark checked against the text of its page),
else typography: the body font is the most used size, headings are larger or bold short lines,
their levels come from numbering depth ("3.2") and font size. Running heads, footers and page
numbers (lines repeated at the same place across pages) are dropped, two-column pages are read
column by column, line-end hyphens are joined, ligatures normalised (NFKC), and paragraphs are
cut at indents and vertical gaps. Tables of contents and indexes never yield headings.

The result, :class:`PdfText`, is Markdown that :func:`~langchain_gated_parent.sections.
parse_markdown` turns into exactly the headings found here, plus page offsets so that a
section can be traced back to its page.

Needs the optional dependency pypdfium2 (``pip install "langchain-gated-parent[pdf]"``).

Example:
    .. code-block:: python

        from langchain_gated_parent.pdf import read_pdf

        text = read_pdf("paper.pdf")
        [(h.level, h.title, h.page) for h in text.headings][:2]
        # [(1, 'Abstract', 1), (1, '1 Introduction', 1)]
"""

from __future__ import annotations

import ctypes
import itertools
import re
import statistics
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Sequence

try:
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    _msg = (
        'reading PDFs needs pypdfium2; install it with `pip install "langchain-gated-parent[pdf]"`'
    )
    raise ImportError(_msg) from _err

__all__ = ["PdfError", "PdfHeading", "PdfText", "read_pdf"]


class PdfError(ValueError):
    """A file that cannot be read as a PDF with text; the message names the file and the fix."""


@dataclass(frozen=True)
class PdfHeading:
    """One heading recovered from a PDF.

    Attributes:
        title: The heading as printed (numbering kept, e.g. ``"3.2 Results"``).
        level: Depth in the section tree, 1 for top level.
        page: 1-based page the heading is on.
        start: Start of the heading line (``#`` marks included) in :attr:`PdfText.markdown`.
        end: End of that line.
    """

    title: str
    level: int
    page: int
    start: int
    end: int


@dataclass(frozen=True)
class PdfText:
    """A PDF read as Markdown, with the headings and page offsets found on the way.

    Attributes:
        markdown: ``#`` headings by level, paragraphs separated by blank lines; body lines that
            Markdown would misread as headings or code fences are escaped with a backslash.
        title: The document title: the largest text on the first page, else the PDF metadata
            (which is often a file name or "untitled", so it comes second).
        headings: The headings in document order, as ``parse_markdown`` finds them.
        page_starts: Offset in ``markdown`` where the text of page ``n`` begins, at ``n - 1``.
        pages: Number of pages.
        outline_used: Whether the headings came from the bookmark tree.
    """

    markdown: str
    title: str | None
    headings: tuple[PdfHeading, ...]
    page_starts: tuple[int, ...]
    pages: int
    outline_used: bool


# --------------------------------------------------------------------------------------------
# Opening


def _open(path: Path, password: str | None) -> Any:
    """Open ``path`` with pdfium, turning every failure into a :class:`PdfError` with a fix."""
    try:
        with path.open("rb") as handle:
            head = handle.read(1024)
            handle.seek(max(0, path.stat().st_size - 2048))
            tail = handle.read()
    except OSError as err:
        msg = f"{path}: cannot be read ({err.strerror}); check the path and permissions"
        raise PdfError(msg) from err
    if b"%PDF-" not in head:
        msg = f"{path}: not a PDF (no %PDF- header); pass a PDF file"
        raise PdfError(msg)
    try:
        document = pdfium.PdfDocument(path, password=password)
    except pdfium.PdfiumError as err:
        if err.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            fix = "the password given is wrong" if password else "it is encrypted"
            msg = f"{path}: {fix}; pass the right password or decrypt it first (qpdf --decrypt)"
        elif b"%%EOF" not in tail:
            msg = f"{path}: truncated (no end-of-file marker); download it again or repair it"
        else:
            msg = f"{path}: corrupt PDF ({err}); download it again or repair it (qpdf, mutool)"
        raise PdfError(msg) from err
    if b"%%EOF" not in tail:
        document.close()
        msg = f"{path}: truncated (no end-of-file marker); download it again or repair it"
        raise PdfError(msg)
    if len(document) == 0:
        document.close()
        msg = f"{path}: corrupt PDF (no pages); download it again or repair it"
        raise PdfError(msg)
    return document


# --------------------------------------------------------------------------------------------
# Lines

_BOLD_NAME = re.compile(
    r"bold|black|heavy|semibold|demi|medi(?!um)|cmbx|[-+]bx|bx\d", re.IGNORECASE
)
_MONO_NAME = re.compile(r"mono|courier|cmtt|typewriter|consol|[-+]tt|lmtt", re.IGNORECASE)
_FIXED_PITCH = 1
_BOLD_WEIGHT = 600
_BREAKS = re.compile(r"\r\n|\r|\n|\ufffe|\x02")
_GUTTER_EMS = 1.5


Role = Literal["body", "heading", "merged", "title"]
"""What a line is: body text, a heading (or its first line), a wrapped heading's next line, the
document title."""


@dataclass
class _Line:
    """A physical line of text on a page, with the typography the heuristics read."""

    page: int
    text: str
    x0: float
    x1: float
    base: float
    size: float
    bold: bool
    mono: bool
    hyphen: bool = False
    column: int = 0
    role: Role = "body"
    level: int = 0
    title: str = ""
    lead: str = ""
    run_in: bool = False

    @property
    def words(self) -> int:
        """Number of words on the line."""
        return len(self.text.split())


class _Page:
    """Character queries on one pdfium text page (ctypes calls, kept few per line)."""

    def __init__(self, textpage: Any) -> None:
        self._tp = textpage
        self._name = ctypes.create_string_buffer(128)
        self._flags = ctypes.c_int()
        self._box = [ctypes.c_double() for _ in range(4)]
        self._x = ctypes.c_double()
        self._y = ctypes.c_double()

    def box(self, index: int) -> tuple[float, float, float, float]:
        """``(left, right, bottom, top)`` of character ``index``."""
        left, right, bottom, top = self._box
        pdfium_c.FPDFText_GetCharBox(self._tp, index, left, right, bottom, top)
        return left.value, right.value, bottom.value, top.value

    def rects(self, start: int, count: int) -> list[tuple[float, float, float, float]]:
        """``(left, right, bottom, top)`` of pdfium's text runs over ``count`` characters."""
        left, top, right, bottom = self._box
        found = []
        for rect in range(pdfium_c.FPDFText_CountRects(self._tp, start, count)):
            pdfium_c.FPDFText_GetRect(self._tp, rect, left, top, right, bottom)
            found.append((left.value, right.value, bottom.value, top.value))
        return found

    def index_at(self, x: float, y: float) -> int:
        """Index of the character at ``(x, y)``, -1 when there is none."""
        return int(pdfium_c.FPDFText_GetCharIndexAtPos(self._tp, x, y, 2.0, 2.0))

    def baseline(self, index: int) -> float:
        """Y of the character's origin (its baseline)."""
        pdfium_c.FPDFText_GetCharOrigin(self._tp, index, self._x, self._y)
        return self._y.value

    def font(self, index: int) -> tuple[float, bool, bool]:
        """``(size, bold, monospaced)`` of character ``index``."""
        size = pdfium_c.FPDFText_GetFontSize(self._tp, index)
        pdfium_c.FPDFText_GetFontInfo(self._tp, index, self._name, 128, self._flags)
        name = self._name.value.decode("latin-1")
        weight = pdfium_c.FPDFText_GetFontWeight(self._tp, index)
        bold = bool(_BOLD_NAME.search(name)) or weight >= _BOLD_WEIGHT
        mono = bool(_MONO_NAME.search(name)) or bool(self._flags.value & _FIXED_PITCH)
        return size, bold, mono


def _page_text(textpage: Any, count: int) -> str:
    """The page's characters, one per character index (generated spaces and breaks included)."""
    text: str = textpage.get_text_range()
    if len(text) == count:
        return text
    return "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(count))


def _column_gap(chars: _Page, start: int, count: int, size: float) -> int | None:
    """Index of the first character after a gap wider than a column gutter, if any.

    Text of two columns on one baseline can come out as one line when the page's content
    stream interleaves them. pdfium's text rectangles for the line then show the gutter.
    """
    rects = chars.rects(start, count)
    for (_, right, low, high), (left, _, bottom, top) in itertools.pairwise(rects):
        same_row = abs(low - bottom) < size / 2 and abs(high - top) < size
        if same_row and left - right > _GUTTER_EMS * size:
            index = chars.index_at(left + 0.5, (bottom + top) / 2)
            if start < index < start + count:
                return index
    return None


def _make_line(chars: _Page, page: int, text: str, start: int, *, hyphen: bool) -> _Line:
    """A line from the characters ``start .. start + len(text)`` (``text`` already stripped)."""
    last = start + len(text) - 1
    left, _, _, _ = chars.box(start)
    _, right, _, _ = chars.box(last)
    samples = [chars.font(i) for i in (start, (start + last) // 2, last)]
    return _Line(
        page=page,
        text=unicodedata.normalize("NFKC", text),
        x0=left,
        x1=right,
        base=chars.baseline(start),
        size=statistics.median(sample[0] for sample in samples),
        bold=samples[0][1] and samples[1][1],
        mono=samples[0][2] and samples[1][2],
        hyphen=hyphen,
        lead=_bold_lead(chars, text, start) if samples[0][1] and not samples[1][1] else "",
    )


def _bold_lead(chars: _Page, text: str, start: int) -> str:
    """The bold words a line starts with, when the rest of it is not bold (a run-in heading)."""
    end = 0
    for offset, char in enumerate(text):
        if char.isspace():
            continue
        if not chars.font(start + offset)[1]:
            break
        end = offset + 1
    return unicodedata.normalize("NFKC", text[:end].strip()) if end < len(text) else ""


def _read_lines(document: Any, index: int) -> tuple[list[_Line], float, float]:
    """Physical lines of page ``index`` and the page's width and height.

    pdfium ends lines with CR LF and marks a line-end hyphen with U+FFFE, then runs the next
    line on; both are line breaks here, the hyphen remembered on the line it ends.
    """
    page = document[index]
    width, height = page.get_size()
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        text = _page_text(textpage, count)
        chars = _Page(textpage)
        lines: list[_Line] = []
        position = 0
        for match in [*_BREAKS.finditer(text), None]:
            end = match.start() if match else len(text)
            hyphen = bool(match and match.group() in "\ufffe\x02")
            pieces = [(position, text[position:end])]
            while pieces:
                offset, segment = pieces.pop(0)
                stripped = segment.strip()
                if not stripped:
                    if hyphen and lines and not pieces:
                        lines[-1].hyphen = True
                    continue
                start = offset + len(segment) - len(segment.lstrip())
                line = _make_line(chars, index, stripped, start, hyphen=hyphen and not pieces)
                gap = _column_gap(chars, start, len(stripped), line.size)
                if gap is None:
                    lines.append(line)
                else:
                    cut = gap - start
                    pieces[:0] = [(start, stripped[:cut]), (gap, stripped[cut:])]
            position = match.end() if match else len(text)
    finally:
        textpage.close()
        page.close()
    return lines, width, height


# --------------------------------------------------------------------------------------------
# Page furniture: running heads, footers, page numbers

_PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:/|of)\s*\d+)?$", re.IGNORECASE
)
_DIGITS = re.compile(r"\d+")
_EDGE_LINES = 3


def _furniture_key(line: _Line) -> str:
    """Text of a line with numbers masked, so 'Chapter 2 ... 14' repeats across pages."""
    return _DIGITS.sub("#", " ".join(line.text.lower().split()))


def _remove_furniture(pages: list[list[_Line]], height: list[float]) -> None:
    """Drop running heads, footers and page numbers in place.

    A line among the top or bottom few of its page is furniture when it is a bare page number,
    or when the same text (numbers masked) sits at about the same height on another page.
    """
    seen: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for lines in pages:
        for line in _edge_lines(lines):
            seen[_furniture_key(line)].append((line.page, line.base))
    for number, lines in enumerate(pages):
        edges = {id(line) for line in _edge_lines(lines)}
        keep = []
        for line in lines:
            if id(line) in edges:
                key = _furniture_key(line)
                same_place = [
                    page
                    for page, base in seen[key]
                    if page != number and abs(base - line.base) < 0.02 * height[number]
                ]
                if _PAGE_NUMBER.match(line.text) or same_place:
                    continue
            keep.append(line)
        lines[:] = keep


def _edge_lines(lines: Sequence[_Line]) -> list[_Line]:
    """The topmost and bottommost few lines of a page."""
    ordered = sorted(lines, key=lambda line: -line.base)
    return ordered[:_EDGE_LINES] + ordered[-_EDGE_LINES:]


# --------------------------------------------------------------------------------------------
# Reading order

_MIN_COLUMN_LINES = 6
_ACROSS, _LEFT, _RIGHT = 0, 1, 2  # values of _Line.column


def _assign_columns(lines: list[_Line]) -> bool:
    """Set each line's column (1 left, 2 right, 0 across); ``True`` if the page has two.

    A page is two-column when enough lines sit wholly in each half of its text area (edges
    taken at percentiles: an overfull line may stick out) and most right-half lines start at
    one margin (short lines and display fragments of a one-column page do not). A line
    crossing the middle with a column line beside it is an overfull column line.
    """
    starts, ends = sorted(line.x0 for line in lines), sorted(line.x1 for line in lines)
    left_edge, right_edge = starts[len(starts) // 20], ends[-1 - len(ends) // 20]
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
        or right_starts.most_common(1)[0][1] < by_column[_RIGHT] / 2
    ):
        for line in lines:
            line.column = _ACROSS
        return False
    placed = [line for line in lines if line.column != _ACROSS]
    for line in lines:
        if line.column == _ACROSS and any(
            abs(other.base - line.base) < line.size and (other.x0 >= line.x1 or other.x1 <= line.x0)
            for other in placed
        ):
            line.column = _LEFT if line.x0 < middle else _RIGHT
    return True


def _reading_order(lines: list[_Line]) -> list[_Line]:
    """Lines of one page in reading order: full-width bands, and columns left before right.

    Lines that cross the middle break the page into bands; within a band the left column is
    read top to bottom before the right one.
    """
    if not lines:
        return lines
    top_down = sorted(lines, key=lambda line: (-round(line.base, 0), line.x0))
    if not _assign_columns(lines):
        return top_down
    ordered: list[_Line] = []
    band: list[_Line] = []
    for line in [*top_down, None]:
        if line is None or line.column == 0:
            ordered += sorted(band, key=lambda x: x.column)  # stable: top to bottom per column
            band = []
            if line is not None:
                ordered.append(line)
        else:
            band.append(line)
    return ordered


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
_MAX_LEVEL = 6  # Markdown has six heading levels
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


def _body_size(lines: Iterable[_Line]) -> float:
    """The font size most text is set in."""
    weights: Counter[float] = Counter()
    for line in lines:
        weights[round(line.size * 2) / 2] += len(line.text)
    return weights.most_common(1)[0][0] if weights else 10.0


def _toc_pages(pages: list[list[_Line]]) -> set[int]:
    """Pages that are mostly dot-leader lines (tables of contents, indexes)."""
    found = set()
    for number, lines in enumerate(pages):
        leaders = sum(1 for line in lines if _LEADER.search(line.text))
        if lines and leaders / len(lines) >= _TOC_PAGE_SHARE:
            found.add(number)
    return found


def _looks_like_heading(line: _Line, body: float) -> bool:
    """Whether typography and text make ``line`` a heading candidate.

    Larger than body or bold, short, not code, not a contents entry (dot leaders), not a
    sentence fragment (lowercase start, trailing comma).
    """
    if not (line.bold or line.size >= body * _LARGER) or line.mono:
        return False
    text = line.text
    return not (
        line.words > _MAX_HEADING_WORDS
        or len(text) > _MAX_HEADING_CHARS
        or text[0].islower()
        or text.endswith((",", ";"))
        or _CONTENTS.match(text)
        or _LEADER.search(text)
        or len(_LETTERS.findall(text)) < _MIN_LETTERS
    )


def _heading_lines(
    lines: list[_Line], body: float, skip_pages: set[int], hyphens: _Hyphens
) -> list[_Line]:
    """Mark heading lines, join headings wrapped over lines, split off run-in headings.

    A heading starts at its column's left margin (figure labels and centred text do not),
    except an abstract heading. On contents and index pages only a larger-than-body first line
    can be a heading (the chapter heading of an index), never the entries or letter groups;
    a title page has none. A paragraph that opens with a few bold words ('Results. We ...')
    has a run-in heading: it becomes a heading line of its own before the paragraph.

    Returns:
        The lines with run-in headings inserted.
    """
    lefts = _column_lefts(lines)
    flow: list[_Line] = []
    previous: _Line | None = None
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
        elif _looks_like_heading(line, body) and (not indented or _ABSTRACT.match(line.text)):
            line.role, line.title = "heading", line.text
        elif _is_run_in(line):
            flow.insert(len(flow) - 1, _run_in_heading(line))
        previous = line
    return flow


def _is_run_in(line: _Line) -> bool:
    """Whether the line opens with a run-in heading: a few bold words starting with a capital."""
    return (
        len(line.lead) > _MIN_RUN_IN_CHARS
        and len(line.lead.split()) <= _MAX_RUN_IN_WORDS
        and line.lead[0].isupper()
        and not line.mono
    )


def _run_in_heading(line: _Line) -> _Line:
    """Cut the run-in heading off ``line`` and return it as a heading line of its own."""
    heading = replace(line, text=line.lead, title=line.lead, role="heading", run_in=True)
    line.text = line.text[len(line.lead) :].lstrip()
    return heading


def _continues_heading(previous: _Line | None, line: _Line) -> bool:
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


def _style(line: _Line) -> tuple[float, bool]:
    """A heading's typographic style: size to the half point, and weight."""
    return round(line.size * 2) / 2, line.bold


def _style_levels(headings: list[_Line], *, numbered: bool) -> dict[tuple[float, bool], int]:
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


def _assign_levels(headings: list[_Line]) -> None:
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
        line.level = max(1, min(level, _MAX_LEVEL))
        if not line.run_in:
            above = line.level


def _take_title(lines: list[_Line], body: float) -> str | None:
    """Mark the document title (the largest text on page 1, if larger than body) and return it."""
    first_page = [line for line in lines if line.page == 0]
    if not first_page:
        return None
    biggest = max(line.size for line in first_page)
    if biggest < body * _LARGER:
        return None
    title_lines: list[_Line] = []
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


def _title_page(pages: list[list[_Line]]) -> bool:
    """Whether page 1 is a title page (few lines, in a document of several pages)."""
    return len(pages) > _TITLE_PAGE_MIN_PAGES and 0 < len(pages[0]) <= _TITLE_PAGE_MAX_LINES


def _column_lefts(lines: Iterable[_Line]) -> dict[tuple[int, int], float]:
    """The left margin of each page column: the most common line start."""
    starts: dict[tuple[int, int], Counter[int]] = defaultdict(Counter)
    for line in lines:
        starts[line.page, line.column][round(line.x0)] += 1
    return {key: float(counts.most_common(1)[0][0]) for key, counts in starts.items()}


# --------------------------------------------------------------------------------------------
# Headings from bookmarks

_MATCH_SHARE = 0.5


def _normal(text: str) -> str:
    """Lowercase letters and digits only, for matching bookmark titles to page text."""
    return re.sub(r"[^0-9a-z]+", "", text.lower())


def _strip_number(text: str) -> str:
    match = _NUMBERING.match(text)
    return text[match.end() :] if match else text


def _bookmarks(document: Any) -> list[tuple[int, str, int, float | None]]:
    """``(level, title, page index, y)`` of each bookmark with a page destination."""
    found = []
    for bookmark in document.get_toc():
        destination = bookmark.get_dest()
        if destination is None:
            continue
        page = destination.get_index()
        if page is None:
            continue
        _, view = destination.get_view()
        y = float(view[1]) if len(view) > 1 and view[1] else None
        title = " ".join(unicodedata.normalize("NFKC", bookmark.get_title()).split())
        if title:
            found.append((bookmark.level + 1, title, page, y))
    return found


def _find_title(
    pages: list[list[_Line]], title: str, page: int, y: float | None
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


def _apply_bookmarks(
    pages: list[list[_Line]], marks: list[tuple[int, str, int, float | None]]
) -> bool:
    """Turn the lines bookmarks point at into headings; ``False`` if too few are found.

    Bookmarks are trusted only when most of them are printed where they point (else the
    typography decides). A bookmark whose title is not found still becomes a heading, placed
    at its destination height.
    """
    found = 0
    placed: list[tuple[int, _Line]] = []
    for level, title, page, y in marks:
        hit = _find_title(pages, title, page, y)
        if hit is None:
            placed.append((page, _synthetic(page, title, level, y)))
            continue
        found += 1
        number, index, count = hit
        head = pages[number][index]
        head.role, head.level, head.title = "heading", min(level, _MAX_LEVEL), title
        for extra in pages[number][index + 1 : index + count]:
            extra.role = "merged"
    if not marks or found / len(marks) < _MATCH_SHARE:
        for lines in pages:
            for line in lines:
                line.role = "body"
        return False
    for page, line in placed:
        lines = pages[page]
        position = next((i for i, other in enumerate(lines) if line.base >= other.base), len(lines))
        lines.insert(position, line)
    return True


def _synthetic(page: int, title: str, level: int, y: float | None) -> _Line:
    """A heading line for a bookmark whose title is not on its page."""
    line = _Line(page, title, 0.0, 0.0, y if y is not None else 1e9, 0.0, bold=True, mono=False)
    line.role, line.level, line.title = "heading", min(level, _MAX_LEVEL), title
    return line


# --------------------------------------------------------------------------------------------
# Paragraphs and Markdown

_MARKDOWN_TRAP = re.compile(r"^(\s{0,3})(#|`{3}|~{3}|=+\s*$|-+\s*$)")
_INDENT_EMS = 0.6
_SHORT_EMS = 2.0
_ITEM_EMS = 4.0
_PARAGRAPH_GAP = 1.5
_MAX_LEADING = 3.0
_SAME_SIZE = 0.5


def _escape(line: str) -> str:
    """Backslash-escape a body line Markdown would read as a heading, fence or rule."""
    return _MARKDOWN_TRAP.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", line, count=1)


_WORD = re.compile(r"[^\W\d_](?:[\w-]*[^\W\d_])?")


class _Hyphens:
    """Decides whether a line-end hyphen was inserted by hyphenation or belongs to the word.

    The document itself is the dictionary: 'back-' + 'translation' keeps its hyphen when
    'back-translation' is printed unbroken elsewhere and 'backtranslation' is not. Otherwise the
    hyphen is dropped before a lowercase letter (hyphenation) and kept before anything else.
    """

    def __init__(self, lines: Iterable[_Line]) -> None:
        self._words: set[str] = set()
        for line in lines:
            tokens = _WORD.findall(line.text.lower())
            self._words.update(tokens[:-1] if line.hyphen else tokens)

    def joint(self, previous: str, text: str, *, hyphen: bool, code: bool) -> str:
        """What goes between two lines of a paragraph: a space, a newline (code), a hyphen or ''."""
        if not hyphen:
            return "\n" if code else " "
        if code:
            return "-\n"
        head = _WORD.findall(previous.lower()[-40:])
        tail = _WORD.match(text.lower())
        if head and tail and previous[-1:].isalpha():
            joined, kept = head[-1] + tail.group(), f"{head[-1]}-{tail.group()}"
            if kept in self._words and joined not in self._words:
                return "-"
            if joined in self._words:
                return ""
        first = text[:1]
        if first.islower() or (first.isupper() and previous[-1:].isupper()):
            return ""
        return "-"


@dataclass
class _Writer:
    """Assembles Markdown blocks and records heading spans and page offsets."""

    parts: list[str] = field(default_factory=list)
    length: int = 0
    headings: list[PdfHeading] = field(default_factory=list)
    page_starts: dict[int, int] = field(default_factory=dict)
    paragraph: list[tuple[_Line, str]] = field(default_factory=list)
    hyphens: _Hyphens = field(default_factory=lambda: _Hyphens(()))

    def _append(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def _separator(self) -> None:
        if self.parts:
            self._append("\n\n")

    def heading(self, line: _Line) -> None:
        self.flush()
        self._separator()
        self.page_starts.setdefault(line.page, self.length)
        title = " ".join(line.title.split())
        text = f"{'#' * line.level} {title}"
        self.headings.append(
            PdfHeading(title, line.level, line.page + 1, self.length, self.length + len(text))
        )
        self._append(text)

    def line(self, line: _Line, *, new_paragraph: bool) -> None:
        if new_paragraph:
            self.flush()
        self.paragraph.append((line, line.text))

    def flush(self) -> None:
        """Write the open paragraph: lines joined by spaces (code by newlines), hyphens joined."""
        if not self.paragraph:
            return
        self._separator()
        previous: _Line | None = None
        for line, text in self.paragraph:
            if previous is not None:
                code = previous.mono and line.mono
                self._append(
                    self.hyphens.joint(previous.text, text, hyphen=previous.hyphen, code=code)
                )
            self.page_starts.setdefault(line.page, self.length)
            self._append(_escape(text) if previous is None or line.mono else text)
            previous = line
        if previous is not None and previous.hyphen:
            self._append("-")
        self.paragraph = []

    def text(self) -> str:
        return "".join(self.parts)


class _Paragraphs:
    """Decides where paragraphs start, from the margins and line spacing of each page column.

    A line starts a paragraph after a heading, when code starts or stops, after a vertical gap
    wider than the usual line spacing, when it is indented from its column's left margin
    (unless the line before was indented too and ran to the right margin: a list item's second
    line), or when the line before stopped short of the right margin.
    """

    def __init__(self, lines: list[_Line], body: float) -> None:
        self._body = body
        self._lefts = _column_lefts(lines)
        gaps = [
            a.base - b.base
            for a, b in itertools.pairwise(lines)
            if a.page == b.page
            and a.column == b.column
            and abs(a.size - body) < _SAME_SIZE
            and 0 < a.base - b.base < _MAX_LEADING * body
        ]
        self._leading = statistics.median(gaps) if gaps else 1.2 * body
        reaches: dict[tuple[int, int], list[float]] = defaultdict(list)
        for line in lines:
            reaches[line.page, line.column].append(self._reach(line))
        self._full = {
            key: sorted(values)[int(0.9 * (len(values) - 1))] for key, values in reaches.items()
        }

    def _indented(self, line: _Line) -> bool:
        return line.x0 - self._lefts[line.page, line.column] > _INDENT_EMS * self._body

    def _reach(self, line: _Line) -> float:
        """How far right of its column's left margin a line ends."""
        return line.x1 - self._lefts[line.page, line.column]

    def _short(self, before: _Line | None, previous: _Line, line: _Line) -> bool:
        """Whether ``previous`` stopped well short of the right margin.

        The margin is the column's. Between two lines inset from the left it is the farther end
        of the neighbours, ``before`` and ``line`` (an abstract set narrower than the text),
        unless both lines end far short of the column (list items, display lines).
        """
        full = self._full[previous.page, previous.column]
        if not (self._indented(previous) and self._indented(line)):
            return self._reach(previous) < full - _SHORT_EMS * self._body
        if max(self._reach(previous), self._reach(line)) < full - _ITEM_EMS * self._body:
            return True  # short indented lines one after another: list items, display lines
        neighbours = [self._reach(line)]
        if before is not None and before.role == "body":
            neighbours.append(self._reach(before))
        return self._reach(previous) < max(neighbours) - _SHORT_EMS * self._body

    def starts(self, before: _Line | None, previous: _Line | None, line: _Line) -> bool:
        """Whether ``line`` begins a new paragraph after ``previous`` (``before`` precedes it)."""
        if previous is None or previous.role != "body" or previous.mono != line.mono:
            return True
        if line.mono:
            return previous.page == line.page and not (
                0 < previous.base - line.base < _PARAGRAPH_GAP * self._leading
            )
        if self._short(before, previous, line):
            return True
        if previous.page == line.page and previous.column == line.column:
            gap = previous.base - line.base
            if not 0 < gap < _PARAGRAPH_GAP * self._leading:
                return True
        return self._indented(line) and not self._indented(previous)


# --------------------------------------------------------------------------------------------
# Entry point


def read_pdf(path: str | os.PathLike[str], *, password: str | None = None) -> PdfText:
    """Read a PDF into Markdown with its section headings recovered.

    Args:
        path: The PDF file.
        password: Password of an encrypted PDF.

    Returns:
        The text as Markdown, its headings, title and page offsets.

    Raises:
        PdfError: If the file is not a PDF, is encrypted (and no right password is given),
            truncated, corrupt, or has no text layer (a scan: run OCR first). The message
            names the file and the fix.
    """
    file = Path(path)
    document = _open(file, password)
    try:
        pages: list[list[_Line]] = []
        heights: list[float] = []
        for index in range(len(document)):
            lines, _, height = _read_lines(document, index)
            pages.append(lines)
            heights.append(height)
        marks = _bookmarks(document)
        metadata_title = _metadata_title(document.get_metadata_value("Title") or "")
    except pdfium.PdfiumError as err:
        msg = f"{file}: corrupt PDF ({err}); download it again or repair it (qpdf, mutool)"
        raise PdfError(msg) from err
    finally:
        document.close()
    if not any(pages):
        msg = (
            f"{file}: no text layer (image-only or scanned); run OCR first, "
            f"e.g. `ocrmypdf {file.name} ocr.pdf`"
        )
        raise PdfError(msg)
    return _structure(pages, heights, marks, metadata_title or None)


_PLACEHOLDER_TITLE = re.compile(
    r"^(?:untitled(?: document)?|microsoft word - .*|.*\.(?:pdf|docx?|tex|dvi|ps|indd))$",
    re.IGNORECASE,
)


def _metadata_title(title: str) -> str:
    """The metadata title, or '' when it is a placeholder ('untitled', a file name)."""
    title = " ".join(title.split())
    return "" if _PLACEHOLDER_TITLE.match(title) else title


def _structure(
    pages: list[list[_Line]],
    heights: list[float],
    marks: list[tuple[int, str, int, float | None]],
    metadata_title: str | None,
) -> PdfText:
    """Recover headings and paragraphs from the lines of every page and render Markdown."""
    _remove_furniture(pages, heights)
    pages = [_reading_order(lines) for lines in pages]
    flow = [line for lines in pages for line in lines]
    body = _body_size(flow)
    outline_used = bool(marks) and _apply_bookmarks(pages, marks)
    flow = [line for lines in pages for line in lines]
    title = metadata_title
    hyphens = _Hyphens(flow)
    if not outline_used:
        title = _take_title(flow, body) or title
        skip = _toc_pages(pages)
        if _title_page(pages):
            skip.add(0)
        flow = _heading_lines(flow, body, skip, hyphens)
        _assign_levels([line for line in flow if line.role == "heading"])
    paragraphs = _Paragraphs([line for line in flow if line.role == "body"], body)
    writer = _Writer(hyphens=hyphens)
    before: _Line | None = None
    previous: _Line | None = None
    for line in flow:
        if line.role == "heading":
            writer.heading(line)
            before, previous = previous, line
        elif line.role == "body":
            writer.line(line, new_paragraph=paragraphs.starts(before, previous, line))
            before, previous = previous, line
        elif line.role == "title":
            writer.page_starts.setdefault(line.page, 0)
    writer.flush()
    markdown = writer.text()
    starts = []
    next_start = len(markdown)
    for number in reversed(range(len(pages))):
        next_start = writer.page_starts.get(number, next_start)
        starts.append(next_start)
    starts.reverse()
    return PdfText(
        markdown=markdown,
        title=title,
        headings=tuple(writer.headings),
        page_starts=tuple(starts),
        pages=len(pages),
        outline_used=outline_used,
    )
