"""Small real PDFs for the tests (reportlab, pypdf): a good one and each kind of bad one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

PAGES = (
    (
        "1 Introduction",
        [
            "Glycolysis converts glucose into pyruvate in the cytosol of every cell we examined.",
            "The knockdown of GAPDH slowed glycolysis by half within two days of transfection.",
        ],
    ),
    (
        "2 Methods",
        [
            "HeLa cells were transfected with 20 nM siRNA forty-eight hours before extraction.",
            "RNA was extracted with a silica column and quantified by absorbance at 260 nm.",
        ],
    ),
    (
        "3 Results",
        [
            "Telescopes on the southern ridge recorded the comet passing behind the moon at dawn.",
            "The ridge observatory logged a clear sky and steady seeing for the whole night.",
        ],
    ),
)
"""Three pages, one section each: (heading, paragraphs). Each page has its own vocabulary."""
OTHER_PAGES = (
    (
        "1 Site",
        ["The observatory sits on a ridge at 2,400 m, above the inversion layer most nights."],
    ),
    (
        "2 Instruments",
        ["A 60 cm reflector with a cooled camera records the comet every clear night."],
    ),
)
"""A second, unrelated document of two pages."""


def write_pdf(path: Path, pages: tuple[tuple[str, list[str]], ...] = PAGES) -> Path:
    """A text PDF: a 22 pt title on page 1; on each page a bold 14 pt heading, then 10 pt
    paragraphs and a page number."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.setTitle("Knockdown notes")
    width, height = A4
    for number, (heading, paragraphs) in enumerate(pages, start=1):
        y = height - 72
        if number == 1:
            pdf.setFont("Helvetica-Bold", 22)
            pdf.drawString(72, y, "Knockdown notes")
            y -= 48
        pdf.setFont("Helvetica-Bold", 14)
        pdf.drawString(72, y, heading)
        y -= 30
        pdf.setFont("Times-Roman", 10)
        for paragraph in paragraphs:
            pdf.drawString(72, y, paragraph)
            y -= 24
        pdf.drawCentredString(width / 2, 40, str(number))
        pdf.showPage()
    pdf.save()
    return path


def write_image_only_pdf(path: Path) -> Path:
    """A PDF whose page has shapes but no text layer (what a scanner gives)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    for row in range(20):
        pdf.rect(72, 100 + row * 30, 400, 12, fill=1)
    pdf.showPage()
    pdf.save()
    return path


def write_encrypted_pdf(path: Path, source: Path) -> Path:
    """``source`` encrypted with a user password."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(source))
    # RC4 needs no crypto library; the passwords are throwaway test values.
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")  # noqa: S106
    with path.open("wb") as handle:
        writer.write(handle)
    return path


def write_truncated_pdf(path: Path, source: Path) -> Path:
    """The first half of ``source``'s bytes (an interrupted download)."""
    data = source.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def write_not_a_pdf(path: Path) -> Path:
    """A ``.pdf`` file that holds HTML (a login page saved under the paper's name)."""
    path.write_text("<html><body>Please sign in to download this paper.</body></html>")
    return path
