"""Lines of text from pdfium: characters grouped into lines with their typography, and bookmarks.

The only module that talks to pdfium; the rest of the package works on :class:`Line` values.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import statistics
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from langchain_gated_parent.pdf.text import PdfError

if TYPE_CHECKING:
    from pathlib import Path

try:
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c
except ImportError as _err:  # pragma: no cover - exercised only without the extra
    _msg = (
        'reading PDFs needs pypdfium2; install it with `pip install "langchain-gated-parent[pdf]"`'
    )
    raise ImportError(_msg) from _err

PdfiumError = pdfium.PdfiumError
"""What pdfium raises on a broken file, for callers that must not import pdfium themselves."""


# --------------------------------------------------------------------------------------------
# Opening


def open_pdf(path: Path, password: str | None) -> Any:
    """Open ``path`` with pdfium, turning every failure into a :class:`PdfError` with a fix."""
    try:
        with path.open("rb") as handle:
            head = handle.read(1024)
            handle.seek(max(0, path.stat().st_size - 2048))
            tail = handle.read()
    except OSError as err:
        msg = f"{path}: cannot be read ({err.strerror}); check the path and permissions"
        raise PdfError(msg) from err
    if not head:
        msg = f"{path}: empty (0 bytes); download it again or leave it out"
        raise PdfError(msg)
    if b"%PDF-" not in head:
        msg = f"{path}: not a PDF (no %PDF- header); pass a PDF file"
        raise PdfError(msg)
    try:
        document = pdfium.PdfDocument(path, password=password)
    except pdfium.PdfiumError as err:
        if err.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            # the CLI takes no password, so without one the fix named is to decrypt the file
            decrypt = f"qpdf --password=PASSWORD --decrypt {path.name} decrypted.pdf"
            if password:
                msg = (
                    f"{path}: the password given is wrong; pass the right one or decrypt it "
                    f"first: {decrypt}"
                )
            else:
                msg = f"{path}: it is encrypted; decrypt it first with its password: {decrypt}"
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
class Line:
    """A physical line of text on a page, with the typography the heuristics read.

    Attributes:
        page: 0-based page index.
        text: The line's text, NFKC-normalised (ligatures become letters).
        x0: Left edge of the first character, in points from the page's left.
        x1: Right edge of the last character.
        base: Baseline height of the first character, in points from the page's bottom.
        size: Font size (median of three sampled characters).
        bold: Whether the line is set bold (its first and middle characters are).
        mono: Whether the line is set in a monospaced font (code).
        hyphen: Whether the line ended in a hyphen pdfium took off (a word broken here).
        column: 0 across the page (or one-column), 1 left column, 2 right column.
        role: What the line is, set as the structure is recovered.
        level: Heading level, for a heading.
        title: Heading text (a wrapped heading's lines joined), for a heading.
        lead: The bold words the line starts with when the rest is not bold.
        run_in: Whether this heading was cut off the start of a paragraph.
    """

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


class PageChars:
    """Character queries on one pdfium text page (ctypes calls, kept few per line)."""

    def __init__(self, textpage: Any) -> None:
        """Wrap ``textpage`` with reusable ctypes buffers."""
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


def _column_gap(chars: PageChars, start: int, count: int, size: float) -> int | None:
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


def _make_line(chars: PageChars, page: int, text: str, start: int, *, hyphen: bool) -> Line:
    """A line from the characters ``start .. start + len(text)`` (``text`` already stripped)."""
    last = start + len(text) - 1
    left, _, _, _ = chars.box(start)
    _, right, _, _ = chars.box(last)
    samples = [chars.font(i) for i in (start, (start + last) // 2, last)]
    return Line(
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


def _bold_lead(chars: PageChars, text: str, start: int) -> str:
    """The bold words a line starts with, when the rest of it is not bold (a run-in heading)."""
    end = 0
    for offset, char in enumerate(text):
        if char.isspace():
            continue
        if not chars.font(start + offset)[1]:
            break
        end = offset + 1
    return unicodedata.normalize("NFKC", text[:end].strip()) if end < len(text) else ""


def read_lines(document: Any, index: int) -> tuple[list[Line], float, float]:
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
        chars = PageChars(textpage)
        lines: list[Line] = []
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


def read_bookmarks(document: Any) -> list[tuple[int, str, int, float | None]]:
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
