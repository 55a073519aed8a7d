"""Pages of one source merged into one document, as the index stores it.

Page-per-Document loaders (``PyPDFLoader``, ``PyMuPDFLoader``...) give every page of a file the
file's ``source`` and a ``page`` number. The index keys documents by ``doc_id`` (else
``source``), so left alone the pages of a file would collide: refused as duplicates in one
batch, or each page replacing the previous one across calls. Here such pages become one
document per source, its pages in page order, whether they come in one batch or one by one.

A page's text is kept with its document's journal record (:data:`PAGES_RECORD` in the manifest),
so a page added later is merged with the pages already indexed: never one page replacing
another. Adding a page number again replaces that page's text (an edited page); several chunks
of one page in one call (a splitter ran after the loader) are joined in order.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_gated_parent import keys

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

PAGES_RECORD = "pages"
"""Manifest field holding a merged document's page texts, ``{page: text}`` (page as a string)."""
PER_PAGE_KEYS = frozenset({keys.PAGE, "page_label", keys.START_INDEX, "start_index"})
"""Loader metadata that differs from page to page, dropped from the merged document's."""
PAGE_SEPARATOR = "\n\n"
"""Between two pages of the merged text: a paragraph break, so no paragraph spans two pages."""


@dataclass(frozen=True)
class MergedPages:
    """The documents to index, and the page texts to record for each merged one."""

    documents: list[Document]
    """Every input document that is not a page, and one document per source of pages, in the
    order of their first appearance."""
    pages: dict[str, dict[str, str]]
    """For each merged document id, all its page texts (the indexed ones and the new)."""


def page_source(document: Document) -> str | None:
    """The document id a page belongs to, or ``None`` when ``document`` is not a page.

    A page is a Document with a ``page`` in its metadata and a ``doc_id`` or ``source`` to tell
    which document it is a page of.
    """
    metadata = document.metadata
    if metadata.get(keys.PAGE) is None:
        return None
    named = metadata.get(keys.DOC_ID) or metadata.get(keys.SOURCE)
    return str(named) if named else None


def _page_order(page: str) -> tuple[float, str]:
    """Numeric pages in number order, other labels after them in text order."""
    try:
        return (float(page), "")
    except ValueError:
        return (math.inf, page)


def merge_pages(
    documents: Sequence[Document],
    indexed_pages: Callable[[list[str]], Mapping[str, Mapping[str, str]]],
) -> MergedPages:
    """Merge the pages in ``documents`` with each other and with their indexed pages.

    Args:
        documents: The documents given to ``add_documents``.
        indexed_pages: Returns, for document ids, the page texts recorded when each was last
            indexed (ids never indexed as pages are absent).

    Returns:
        The documents to index and the page record of each merged document. Without pages in
        ``documents`` they are returned as given, and ``indexed_pages`` is not called.
    """
    sources = [page_source(d) for d in documents]
    if not any(sources):
        return MergedPages(list(documents), {})
    new: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    metadata: dict[str, dict[str, Any]] = {}
    order: list[Document | str] = []
    for document, source in zip(documents, sources, strict=True):
        if source is None:
            order.append(document)
            continue
        if source not in metadata:
            order.append(source)
            metadata[source] = {}
        new[source][str(document.metadata[keys.PAGE])].append(document.page_content)
        metadata[source].update(
            (k, v) for k, v in document.metadata.items() if k not in PER_PAGE_KEYS
        )
    known = indexed_pages(list(metadata))
    merged: list[Document] = []
    records: dict[str, dict[str, str]] = {}
    for item in order:
        if isinstance(item, Document):
            merged.append(item)
            continue
        pages = {**known.get(item, {}), **{p: "\n".join(t) for p, t in new[item].items()}}
        ordered = sorted(pages, key=_page_order)
        merged.append(
            Document(
                page_content=PAGE_SEPARATOR.join(pages[p] for p in ordered),
                metadata={keys.FORMAT: "text", **metadata[item], keys.DOC_ID: item},
            )
        )
        records[item] = {p: pages[p] for p in ordered}
    return MergedPages(merged, records)
