"""Read a PDF into Markdown whose headings are the document's section tree.

PDFs keep no structure, only glyphs at positions. This package recovers it the way a reader does:
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

from langchain_gated_parent.pdf.reader import read_pdf
from langchain_gated_parent.pdf.text import PdfError, PdfHeading, PdfText

__all__ = ["PdfError", "PdfHeading", "PdfText", "read_pdf"]
