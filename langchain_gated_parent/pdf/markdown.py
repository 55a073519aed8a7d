"""Paragraphs and Markdown: where paragraphs start, hyphens, escaping, heading spans."""

from __future__ import annotations

import itertools
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from langchain_gated_parent.pdf.page import Line

from langchain_gated_parent.pdf.layout import column_lefts
from langchain_gated_parent.pdf.text import PdfHeading

_MARKDOWN_TRAP = re.compile(r"^(\s{0,3})(#|`{3}|~{3}|=+\s*$|-+\s*$)")
_INDENT_EMS = 0.6
_SHORT_EMS = 2.0
_ITEM_EMS = 4.0
_LIST_ITEM = re.compile(r"^(?:\d{1,2}[.)]|[\u2022\u25e6\u25aa\u2219\u00b7\u2013])\s")
_PARAGRAPH_GAP = 1.5
_MAX_LEADING = 3.0
_SAME_SIZE = 0.5


def _escape(line: str) -> str:
    """Backslash-escape a body line Markdown would read as a heading, fence or rule."""
    return _MARKDOWN_TRAP.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", line, count=1)


_WORD = re.compile(r"[^\W\d_](?:[\w-]*[^\W\d_])?")


class Hyphens:
    """Decides whether a line-end hyphen was inserted by hyphenation or belongs to the word.

    The document itself is the dictionary: 'back-' + 'translation' keeps its hyphen when
    'back-translation' is printed unbroken elsewhere and 'backtranslation' is not. Otherwise the
    hyphen is dropped before a lowercase letter (hyphenation) and kept before anything else.
    A hyphen pdfium did not mark (after a symbol) stays, and the lines join without a space.
    """

    def __init__(self, lines: Iterable[Line]) -> None:
        """Collect the words printed whole in ``lines``."""
        self._words: set[str] = set()
        for line in lines:
            tokens = _WORD.findall(line.text.lower())
            self._words.update(tokens[:-1] if line.hyphen else tokens)

    def joint(self, previous: str, text: str, *, hyphen: bool, code: bool) -> str:
        """What goes between two lines of a paragraph: a space, a newline (code), a hyphen or ''."""
        if code:
            return "-\n" if hyphen else "\n"
        if not hyphen:
            literal = previous.endswith("-") and not previous.endswith(" -")
            return "" if literal and text[:1].isalnum() else " "
        return "-" if self._keeps_hyphen(previous, text) else ""

    def _keeps_hyphen(self, previous: str, text: str) -> bool:
        """Whether the hyphen pdfium took off the end of ``previous`` belongs to the word."""
        head = _WORD.findall(previous.lower()[-40:])
        tail = _WORD.match(text.lower())
        if head and tail and previous[-1:].isalpha():
            joined, kept = head[-1] + tail.group(), f"{head[-1]}-{tail.group()}"
            if kept in self._words or joined in self._words:
                return joined not in self._words
        first = text[:1]
        return not (first.islower() or (first.isupper() and previous[-1:].isupper()))


@dataclass
class Writer:
    """Assembles Markdown blocks and records heading spans and page offsets."""

    parts: list[str] = field(default_factory=list)
    length: int = 0
    headings: list[PdfHeading] = field(default_factory=list)
    page_starts: dict[int, int] = field(default_factory=dict)
    paragraph: list[tuple[Line, str]] = field(default_factory=list)
    hyphens: Hyphens = field(default_factory=lambda: Hyphens(()))

    def _append(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def _separator(self) -> None:
        if self.parts:
            self._append("\n\n")

    def heading(self, line: Line) -> None:
        """Write ``line`` as a Markdown heading (closing the open paragraph) and record it."""
        self.flush()
        self._separator()
        self.page_starts.setdefault(line.page, self.length)
        title = " ".join(line.title.split())
        text = f"{'#' * line.level} {title}"
        self.headings.append(
            PdfHeading(title, line.level, line.page + 1, self.length, self.length + len(text))
        )
        self._append(text)

    def line(self, line: Line, *, new_paragraph: bool) -> None:
        """Add a body line to the open paragraph, or start a new one."""
        if new_paragraph:
            self.flush()
        self.paragraph.append((line, line.text))

    def flush(self) -> None:
        """Write the open paragraph: lines joined by spaces (code by newlines), hyphens joined."""
        if not self.paragraph:
            return
        self._separator()
        previous: Line | None = None
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
        """The Markdown written so far."""
        return "".join(self.parts)


class Paragraphs:
    """Decides where paragraphs start, from the margins and line spacing of each page column.

    A line starts a paragraph after a heading, when code starts or stops, after a vertical gap
    wider than the usual line spacing, when it is indented from its column's left margin
    (unless the line before was indented too and ran to the right margin: a list item's second
    line), when it is an indented list item ('1.', a bullet), or when the line before stopped
    short of the right margin.
    """

    def __init__(self, lines: list[Line], body: float) -> None:
        """Measure margins and line spacing over the body ``lines`` of the whole document."""
        self._body = body
        self._lefts = column_lefts(lines)
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

    def _indented(self, line: Line) -> bool:
        return line.x0 - self._lefts[line.page, line.column] > _INDENT_EMS * self._body

    def _reach(self, line: Line) -> float:
        """How far right of its column's left margin a line ends."""
        return line.x1 - self._lefts[line.page, line.column]

    def _short(self, before: Line | None, previous: Line, line: Line) -> bool:
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

    def starts(self, before: Line | None, previous: Line | None, line: Line) -> bool:
        """Whether ``line`` begins a new paragraph after ``previous`` (``before`` precedes it)."""
        if previous is None or previous.role != "body" or previous.mono != line.mono:
            return True
        if line.mono:
            return previous.page == line.page and not (
                0 < previous.base - line.base < _PARAGRAPH_GAP * self._leading
            )
        if self._short(before, previous, line) or (
            self._indented(line) and _LIST_ITEM.match(line.text)
        ):
            return True
        if previous.page == line.page and previous.column == line.column:
            gap = previous.base - line.base
            if not 0 < gap < _PARAGRAPH_GAP * self._leading:
                return True
        return self._indented(line) and not self._indented(previous)
