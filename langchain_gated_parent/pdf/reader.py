"""The entry point: open a PDF, recover its structure, render Markdown."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import os

from langchain_gated_parent.pdf.headings import (
    apply_bookmarks,
    assign_levels,
    body_size,
    contents_pages,
    heading_lines,
    is_title_page,
    take_title,
)
from langchain_gated_parent.pdf.layout import reading_order, remove_furniture, text_area
from langchain_gated_parent.pdf.markdown import Hyphens, Paragraphs, Writer
from langchain_gated_parent.pdf.page import (
    Line,
    PdfiumError,
    open_pdf,
    read_bookmarks,
    read_lines,
)
from langchain_gated_parent.pdf.text import PdfError, PdfText


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

    Note:
        pdfium is not thread-safe: read PDFs from one thread per process (use processes to
        read many in parallel).
    """
    file = Path(path)
    document = open_pdf(file, password)
    try:
        pages: list[list[Line]] = []
        heights: list[float] = []
        for index in range(len(document)):
            lines, _, height = read_lines(document, index)
            pages.append(lines)
            heights.append(height)
        marks = read_bookmarks(document)
        metadata_title = _metadata_title(document.get_metadata_value("Title") or "")
    except PdfiumError as err:
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
    pages: list[list[Line]],
    heights: list[float],
    marks: list[tuple[int, str, int, float | None]],
    metadata_title: str | None,
) -> PdfText:
    """Recover headings and paragraphs from the lines of every page and render Markdown."""
    remove_furniture(pages, heights)
    area = text_area(pages)
    pages = [reading_order(lines, area) for lines in pages]
    flow = [line for lines in pages for line in lines]
    body = body_size(flow)
    title = take_title(flow, body) or metadata_title
    outline_used = bool(marks) and apply_bookmarks(pages, marks)
    flow = [line for lines in pages for line in lines]
    hyphens = Hyphens(flow)
    if not outline_used:
        skip = contents_pages(pages)
        if is_title_page(pages):
            skip.add(0)
        flow = heading_lines(flow, body, skip, hyphens)
        assign_levels([line for line in flow if line.role == "heading"])
    paragraphs = Paragraphs([line for line in flow if line.role == "body"], body)
    writer = Writer(hyphens=hyphens)
    before: Line | None = None
    previous: Line | None = None
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
