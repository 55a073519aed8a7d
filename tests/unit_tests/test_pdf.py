"""The PDF reader: headings, reading order, page furniture, hyphens, bookmarks, bad files.

Most PDFs here are drawn by the tests with reportlab (standard fonts, exact positions); one
test reads a typeset paper from the shared QASPER PDFs and compares its heading tree with
the truth.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from pypdf import PdfReader, PdfWriter
from reportlab.lib.utils import ImageReader
from reportlab.pdfbase.pdfmetrics import registerFont, stringWidth
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas

from langchain_gated_parent.pdf import PdfError, PdfText, read_pdf
from langchain_gated_parent.sections import parse_markdown

QASPER_PDF = Path(__file__).resolve().parents[3] / "shared" / "data" / "qasper-pdf"

BODY = "Times-Roman"
BOLD = "Times-Bold"
MEASURE = 400.0  # width of a justified line


class Item(NamedTuple):
    """A string drawn at a position; ``width`` stretches it by letter spacing (justified)."""

    font: str
    size: float
    x: float
    y: float
    text: str
    width: float | None = None


def write_pdf(
    path: Path,
    pages: list[list[Item]],
    outline: list[tuple[int, str, int, float]] = (),  # type: ignore[assignment]
) -> Path:
    """Draw ``pages`` into ``path``; ``outline`` is ``(level, title, page index, y)``."""
    pdf = canvas.Canvas(str(path), pagesize=(612, 792))
    for number, items in enumerate(pages):
        for font, size, x, y, text, width in items:
            pdf.setFont(font, size)
            natural = stringWidth(text, font, size)
            spacing = (width - natural) / (len(text) - 1) if width else 0
            pdf.drawString(x, y, text, charSpace=spacing)
        for index, (level, title, page, y) in enumerate(outline):
            if page == number:
                pdf.bookmarkPage(f"b{index}", fit="XYZ", left=0, top=y + 20)
                pdf.addOutlineEntry(title, f"b{index}", level=level)
        pdf.showPage()
    pdf.save()
    return path


def paragraph(x: float, y: float, lines: list[str], indent: float = 15) -> list[Item]:
    """Justified body lines from ``y`` down, the first indented, the last one short."""
    items = []
    for i, line in enumerate(lines):
        shift = indent if i == 0 else 0
        width = MEASURE - shift if i < len(lines) - 1 else None
        items.append(Item(BODY, 10, x + shift, y - 12 * i, line, width))
    return items


FILLER = [
    "the method reads the page as a reader does and keeps every paragraph of",
    "the document in order while the headings open the sections of the tree",
    "so that a question about one part of the text finds the part it needs.",
]


def furniture(number: int) -> list[Item]:
    return [
        Item(BODY, 9, 72, 760, "Gated Parents in Practice"),
        Item(BODY, 10, 300, 40, str(number)),
    ]


def paper_pages() -> list[list[Item]]:
    first = [
        *furniture(1),
        Item(BOLD, 17, 72, 700, "A Study of Gated Parents"),
        Item(BOLD, 12, 72, 660, "Abstract"),
        *paragraph(72, 644, FILLER, indent=0),
        Item(BOLD, 14, 72, 590, "1 Introduction"),
        *paragraph(72, 570, FILLER, indent=0),
        *paragraph(72, 534, FILLER),
        Item(BOLD, 12, 72, 490, "1.1 Background"),
        *paragraph(72, 470, FILLER, indent=0),
    ]
    second = [
        *furniture(2),
        Item(BOLD, 14, 72, 700, "2 Methods"),
        *paragraph(
            72,
            680,
            ["we describe the segmen-", "tation of pages into lines and the joining of", "words."],
            indent=0,
        ),
        Item(BOLD, 12, 72, 630, "2.1 Data"),
        *paragraph(72, 610, FILLER, indent=0),
        Item(BOLD, 14, 72, 560, "3 Results"),
        *paragraph(72, 540, FILLER, indent=0),
    ]
    return [first, second]


@pytest.fixture
def paper(tmp_path: Path) -> PdfText:
    return read_pdf(write_pdf(tmp_path / "paper.pdf", paper_pages()))


EXPECTED = [
    ("Abstract", 1),
    ("1 Introduction", 1),
    ("1.1 Background", 2),
    ("2 Methods", 1),
    ("2.1 Data", 2),
    ("3 Results", 1),
]


def test_headings_from_typography(paper: PdfText) -> None:
    assert [(h.title, h.level) for h in paper.headings] == EXPECTED
    assert [h.page for h in paper.headings] == [1, 1, 1, 2, 2, 2]
    assert paper.title == "A Study of Gated Parents"
    assert not paper.outline_used
    assert paper.pages == 2


def test_parse_markdown_finds_exactly_the_headings(paper: PdfText) -> None:
    tree = parse_markdown(paper.markdown)
    found = [(s.title, s.level, s.heading) for s in tree.sections if s.heading is not None]
    assert found == [(h.title, h.level, (h.start, h.end)) for h in paper.headings]
    for heading in paper.headings:
        assert (
            paper.markdown[heading.start : heading.end] == f"{'#' * heading.level} {heading.title}"
        )


def test_page_starts_point_at_each_page(paper: PdfText) -> None:
    first, second = paper.page_starts
    assert first == 0
    assert paper.markdown[second:].startswith("# 2 Methods")


def test_running_head_and_page_numbers_removed(paper: PdfText) -> None:
    assert "Gated Parents in Practice" not in paper.markdown
    lines = paper.markdown.splitlines()
    assert "1" not in lines
    assert "2" not in lines


def test_paragraphs_from_indent_and_hyphenation_joined(paper: PdfText) -> None:
    tree = parse_markdown(paper.markdown)
    intro = next(s for s in tree.sections if s.title == "1 Introduction")
    assert len(intro.paragraphs) == 2
    methods = next(s for s in tree.sections if s.title == "2 Methods")
    ((start, end),) = methods.paragraphs
    assert "segmentation of pages" in tree.text[start:end]
    assert "segmen-" not in paper.markdown


def test_pages_of_one_line_keep_their_text(tmp_path: Path) -> None:
    pages = [[Item(BODY, 10, 72, 700, f"Page {n} says something of its own.")] for n in (1, 2, 3)]
    text = read_pdf(write_pdf(tmp_path / "short.pdf", pages))
    for n, start in enumerate(text.page_starts, start=1):
        assert text.markdown[start:].startswith(f"Page {n} says")
    assert text.headings == ()


def test_two_column_reading_order(tmp_path: Path) -> None:
    items: list[Item] = [Item(BOLD, 14, 60, 720, "1 Introduction")]
    for row in range(12):  # drawn row by row: the stream interleaves the columns
        y = 700 - 12 * row
        items.append(Item(BODY, 10, 60, y, f"left column line {row} reads on", 220))
        items.append(Item(BODY, 10, 330, y, f"right column line {row} reads on", 220))
    text = read_pdf(write_pdf(tmp_path / "columns.pdf", [items])).markdown
    positions = [text.index(f"left column line {row} ") for row in range(12)]
    positions += [text.index(f"right column line {row} ") for row in range(12)]
    assert positions == sorted(positions)


def test_bookmarks_give_the_headings(tmp_path: Path) -> None:
    outline = [  # "2.1 Data" is left out: with bookmarks, typography adds no headings
        (0, "Introduction", 0, 590),
        (1, "Background", 0, 490),
        (0, "Methods", 1, 700),
        (0, "Results", 1, 560),
        (0, "Appendix", 1, 300),  # printed nowhere: placed at its destination
    ]
    text = read_pdf(write_pdf(tmp_path / "marked.pdf", paper_pages(), outline))
    assert text.outline_used
    assert text.title == "A Study of Gated Parents"
    assert [(h.title, h.level, h.page) for h in text.headings] == [
        ("1 Introduction", 1, 1),
        ("1.1 Background", 2, 1),
        ("2 Methods", 1, 2),
        ("3 Results", 1, 2),
        ("Appendix", 1, 2),
    ]
    tree = parse_markdown(text.markdown)
    assert [s.title for s in tree.sections if s.heading] == [h.title for h in text.headings]
    assert "2.1 Data" in text.markdown  # still there, as text


def test_bookmarks_not_on_their_pages_are_ignored(tmp_path: Path) -> None:
    outline = [(0, "Chapter One", 0, 590), (0, "Chapter Two", 1, 700)]
    text = read_pdf(write_pdf(tmp_path / "stale.pdf", paper_pages(), outline))
    assert not text.outline_used
    assert [(h.title, h.level) for h in text.headings] == EXPECTED


def true_headings(paper: dict[str, Any]) -> list[tuple[str, int]]:
    """Every heading of a QASPER paper (each new prefix of its paths), lowercased, with depth."""
    headings: list[tuple[str, int]] = []
    previous: tuple[str, ...] = ()
    for section in paper["sections"]:
        parts = tuple(section["title"].lower().split(" ::: "))
        same = next(
            (d for d, (a, b) in enumerate(zip(parts, previous, strict=False)) if a != b), None
        )
        start = min(len(parts), len(previous)) if same is None else same
        start = min(start, len(parts) - 1)
        headings += [(parts[d], d + 1) for d in range(start, len(parts))]
        previous = parts
    return headings


@pytest.mark.parametrize(
    "doc_id",
    [
        "1603.01514",  # two columns, numbered, Latin Modern, running head
        "1503.00841",  # one column, unnumbered, Palatino
        "1601.02403",  # one column, numbered, Times
    ],
)
def test_typeset_paper_matches_its_truth(doc_id: str) -> None:
    with (QASPER_PDF / "truth.jsonl").open() as handle:
        paper = next(json.loads(row) for row in handle if f'"{doc_id}"' in row[:40])
    text = read_pdf(QASPER_PDF / "pdf" / f"{doc_id}.pdf")
    true = true_headings(paper)
    found = [(re.sub(r"^[\d.]+\s+", "", h.title).lower(), h.level) for h in text.headings]
    titles_found = {title for title, _ in found}
    assert sum(title in titles_found for title, _ in true) >= 0.95 * len(true)  # recall
    assert sum(heading in true for heading in found) >= 0.95 * len(found)  # precision, levels
    assert text.title == paper["title"]


def test_ligatures_come_out_as_letters(tmp_path: Path) -> None:
    registerFont(TTFont("Vera", "Vera.ttf"))  # ships with reportlab; has the fi/fl glyphs
    path = tmp_path / "ligatures.pdf"
    pdf = canvas.Canvas(str(path), pagesize=(612, 792))
    pdf.setFont("Vera", 10)
    pdf.drawString(72, 700, "We \ufb01nd the \ufb02ow of text.")
    pdf.showPage()
    pdf.save()
    assert read_pdf(path).markdown == "We find the flow of text."


def test_body_lines_that_look_like_markdown_are_escaped(tmp_path: Path) -> None:
    items = [
        Item(BOLD, 14, 72, 700, "1 Notes"),
        *paragraph(72, 680, ["# not a heading but a hash sign", "in the text."], indent=0),
        *paragraph(72, 640, ["``` is not a fence either, and then more", "words."]),
    ]
    text = read_pdf(write_pdf(tmp_path / "escape.pdf", [items]))
    tree = parse_markdown(text.markdown)
    assert [s.title for s in tree.sections if s.heading] == ["1 Notes"]
    assert "\\# not a heading" in text.markdown


def test_run_in_heading_opens_a_section_below_the_last_heading(tmp_path: Path) -> None:
    path = tmp_path / "runin.pdf"
    pdf = canvas.Canvas(str(path), pagesize=(612, 792))
    pdf.setFont(BOLD, 14)
    pdf.drawString(72, 700, "2 Results")
    pdf.setFont(BOLD, 12)
    pdf.drawString(72, 670, "2.1 Counts")
    line = pdf.beginText(87, 650)
    line.setFont(BOLD, 10)
    line.textOut("Quantitative Results. ")
    line.setFont(BODY, 10)
    line.textOut("We count every heading the reader finds in the page and compare.")
    pdf.drawText(line)
    pdf.setFont(BODY, 10)
    pdf.drawString(72, 638, "The counts agree with the truth on every page we read.")
    pdf.showPage()
    pdf.save()
    text = read_pdf(path)
    assert [(h.title, h.level) for h in text.headings] == [
        ("2 Results", 1),
        ("2.1 Counts", 2),
        ("Quantitative Results.", 3),
    ]
    tree = parse_markdown(text.markdown)
    start, end = tree.sections[-1].paragraphs[0]
    assert tree.text[start:end].startswith("We count every heading")


def test_contents_page_gives_no_headings(tmp_path: Path) -> None:
    contents = [
        Item(BOLD, 17, 72, 700, "Table of Contents"),
        Item(BOLD, 12, 72, 660, "1 Introduction . . . . . . . . . . . . . . . . . . . . 2"),
        Item(BODY, 10, 87, 645, "1.1 Scope . . . . . . . . . . . . . . . . . . . . . . . 2"),
        Item(BOLD, 12, 72, 630, "2 Methods . . . . . . . . . . . . . . . . . . . . . . . 2"),
    ]
    body = [
        Item(BOLD, 14, 72, 700, "1 Introduction"),
        *paragraph(72, 680, FILLER, indent=0),
        Item(BOLD, 12, 72, 630, "1.1 Scope"),
        *paragraph(72, 610, FILLER, indent=0),
        Item(BOLD, 14, 72, 560, "2 Methods"),
        *paragraph(72, 540, FILLER, indent=0),
    ]
    text = read_pdf(write_pdf(tmp_path / "contents.pdf", [contents, body]))
    assert [(h.title, h.page) for h in text.headings] == [
        ("1 Introduction", 2),
        ("1.1 Scope", 2),
        ("2 Methods", 2),
    ]
    assert "1 Introduction . . ." in text.markdown  # kept as text, not as a section
    assert text.title is None


# -- bad files -------------------------------------------------------------------------------


SECRET = "s3cret"  # noqa: S105  # the test's own throwaway password


def test_encrypted_pdf(tmp_path: Path) -> None:
    plain = write_pdf(tmp_path / "plain.pdf", paper_pages())
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(SECRET, algorithm="RC4-128")
    locked = tmp_path / "locked.pdf"
    with locked.open("wb") as handle:
        writer.write(handle)
    with pytest.raises(PdfError, match=r"locked\.pdf.*encrypted.*password"):
        read_pdf(locked)
    with pytest.raises(PdfError, match=r"locked\.pdf.*password given is wrong"):
        read_pdf(locked, password=SECRET[::-1])
    assert read_pdf(locked, password=SECRET).headings[0].title == "Abstract"


def test_truncated_pdf(tmp_path: Path) -> None:
    data = write_pdf(tmp_path / "whole.pdf", paper_pages()).read_bytes()
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(PdfError, match=r"cut\.pdf.*truncated.*download it again"):
        read_pdf(cut)


def test_image_only_pdf(tmp_path: Path) -> None:
    from PIL import Image

    path = tmp_path / "scan.pdf"
    pdf = canvas.Canvas(str(path), pagesize=(612, 792))
    pdf.drawImage(ImageReader(Image.new("RGB", (40, 40), "gray")), 72, 600, 200, 200)
    pdf.showPage()
    pdf.save()
    with pytest.raises(PdfError, match=r"scan\.pdf.*no text layer.*OCR"):
        read_pdf(path)


def test_not_a_pdf(tmp_path: Path) -> None:
    path = tmp_path / "notes.pdf"
    path.write_text("# Just Markdown\n\nwith a .pdf name.\n")
    with pytest.raises(PdfError, match=r"notes\.pdf.*not a PDF"):
        read_pdf(path)


def test_corrupt_pdf(tmp_path: Path) -> None:
    path = tmp_path / "garbled.pdf"
    path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 20 + b"\n%%EOF\n")
    with pytest.raises(PdfError, match=r"garbled\.pdf.*corrupt"):
        read_pdf(path)


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pypdfium2", None)
    for name in [m for m in sys.modules if m.startswith("langchain_gated_parent.pdf")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ImportError, match=r'pip install "langchain-gated-parent\[pdf\]"'):
        importlib.import_module("langchain_gated_parent.pdf")
