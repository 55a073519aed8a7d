"""What reading a PDF gives: the Markdown with its headings, or an error that names the fix."""

from __future__ import annotations

from dataclasses import dataclass


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
