"""A warning for documents that reach the index without the section structure the gate needs.

The gate chooses between a document's sections. A long document with no heading at all is one
preamble section: nothing to choose, and retrieval quietly degrades to flat search. The usual
cause is upstream: a loader that strips the markup (``BSHTMLLoader``,
``UnstructuredMarkdownLoader``, ``UnstructuredHTMLLoader``) or reads a PDF page by page as plain
text (``PyPDFLoader``), so the headings never reach the splitter. Saying so at index time, with
the fix, is cheaper than a user finding out from answers that never open the right section.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

LONG_WITHOUT_HEADINGS = 5000
"""Characters from which a document without any heading is worth a warning (~1,200 tokens:
longer than a few paragraphs, where sections start to matter)."""


class StructureWarning(UserWarning):
    """A document has no detectable section structure (see :func:`flat_structure_advice`)."""


def flat_structure_advice(
    doc_id: str, levels: Iterable[int], length: int, source: str | None = None
) -> str | None:
    """Why a document without headings retrieves badly and how to fix it; ``None`` if it has some.

    Args:
        doc_id: The document's id, named in the message.
        levels: The heading level of each of its sections (0 for the preamble, text before any
            heading).
        length: The length of its text in characters.
        source: Its ``source`` metadata, to tailor the advice to PDFs.

    Returns:
        The message, when every section is the preamble and the text is at least
        :data:`LONG_WITHOUT_HEADINGS` characters long; else ``None``.
    """
    if length < LONG_WITHOUT_HEADINGS or any(level > 0 for level in levels):
        return None
    advice = (
        "load a PDF with langchain_gated_parent.loaders.GatedParentLoader, which recovers its "
        "headings from the page, rather than page by page as plain text (PyPDFLoader)"
        if source is not None and source.lower().endswith(".pdf")
        else "if a loader stripped the markup (BSHTMLLoader, UnstructuredMarkdownLoader, "
        "UnstructuredHTMLLoader), load the raw file instead (TextLoader, or "
        "langchain_gated_parent.loaders.GatedParentLoader) so that Markdown '#' headings or "
        "HTML <h1>-<h6> reach the splitter"
    )
    return (
        f"document {doc_id!r} has no headings ({length} characters in one section), so the "
        f"gate has no sections to choose between and retrieval is flat; {advice}"
    )


def warn_flat_structure(
    doc_id: str, levels: Iterable[int], length: int, source: str | None = None
) -> None:
    """Warn (:class:`StructureWarning`) when :func:`flat_structure_advice` applies.

    A warning rather than a log line: it shows once in a notebook or script, and callers can
    filter it or turn it into an error (``warnings.simplefilter("error", StructureWarning)``).
    """
    message = flat_structure_advice(doc_id, levels, length, source)
    if message is not None:
        warnings.warn(message, StructureWarning, stacklevel=3)
