"""Retrievers that read the QASPER papers as PDFs (``--pdf-dir``): none sees the truth text.

Each peer reads ``<pdf-dir>/<paper_id>.pdf`` and returns texts with their paper ids; the
benchmark maps the texts to the truth paragraphs by normalised text
(:class:`benchmarks.metrics.TextLocator`), since PDF text shares no character offsets with the
truth.

Peers:

* ``gated``: this package's PDF path: :func:`langchain_gated_parent.loaders.pdf_document`
  (Markdown with the section tree recovered from the page) into ``GatedParentIndex``.
* ``flat-chunk-pdf``: what a LangChain user builds today: ``PyPDFLoader`` pages,
  ``RecursiveCharacterTextSplitter(1000, 100)``, a Chroma collection (cosine), top 30.
* ``gated-pages``: the same ``PyPDFLoader`` pages added to ``GatedParentIndex`` as they are
  (merged into one document per paper, no structure recovered): what the tree buys.
* ``gated-markdown``: the ``gated`` peer of :mod:`benchmarks.peers` on the truth Markdown, for
  the ratio PDF / Markdown; scored both by spans and by text, which validates the text mapping.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.peers import (
    DOC_ID,
    GATED_VARIANTS,
    GatedPeer,
    Peer,
    SearchResult,
    _add_batched,
    _chroma_client,
    _cosine_collection,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    from benchmarks.qasper_data import Paper

PDF_RETRIEVERS = ("gated", "flat-chunk-pdf", "gated-pages", "gated-markdown")
"""The peers of a ``--pdf-dir`` run, in run order."""


def pypdf_pages(path: Path, paper_id: str) -> list[Document]:
    """``PyPDFLoader`` pages of one PDF, with the paper id as ``doc_id``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.document_loaders import PyPDFLoader

    pages = PyPDFLoader(str(path)).load()
    for page in pages:
        page.metadata[DOC_ID] = paper_id
    return pages


@dataclass
class _PdfPeer(Peer):
    """A peer that reads PDFs; records how long reading them took and how many pages."""

    pdf_dir: Path = field(default=Path(), kw_only=True)
    parse_s: float = field(default=0.0, init=False)
    pages: int = field(default=0, init=False)

    def pdf(self, paper: Paper) -> Path:
        return self.pdf_dir / f"{paper.paper_id}.pdf"


@dataclass
class GatedPdf(_PdfPeer):
    """``gated`` through the package's PDF path, or (``structure=False``) through PyPDFLoader."""

    structure: bool = True
    _index: Any = field(default=None, init=False, repr=False)
    _retriever: Any = field(default=None, init=False, repr=False)

    def documents(self, papers: Sequence[Paper]) -> list[Document]:
        from langchain_gated_parent import keys
        from langchain_gated_parent.loaders import pdf_document

        documents: list[Document] = []
        started = time.process_time()
        for paper in papers:
            if self.structure:
                document = pdf_document(self.pdf(paper), paper.paper_id)
                self.pages += int(document.metadata["total_pages"])
                document.metadata.pop(keys.SOURCE)  # the paper id is the document id
                documents.append(document)
            else:
                pages = pypdf_pages(self.pdf(paper), paper.paper_id)
                self.pages += len(pages)
                documents.extend(pages)
        self.parse_s = time.process_time() - started
        return documents

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        from langchain_gated_parent.index import GatedParentIndex
        from langchain_gated_parent.structure import StructureWarning

        variant = GATED_VARIANTS["gated"]
        self._index = GatedParentIndex(embeddings, directory=directory / "gated", **variant.build)
        documents = self.documents(papers)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StructureWarning)  # expected of gated-pages
            report = self._index.add_documents(documents)
        self._retriever = self._index.as_retriever(**variant.retriever)
        return int(report.children + report.parents)  # what the build wrote (GatedPeer.build)

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        kwargs = {"filter": {DOC_ID: paper_id}} if paper_id is not None else {}
        docs = self._retriever.invoke(question, **kwargs)
        return SearchResult(
            texts=[d.page_content for d in docs],
            spans=None,
            paper_ids=[str(d.metadata[DOC_ID]) for d in docs],
        )

    def close(self) -> None:
        self._retriever = None
        self._index = None


@dataclass
class FlatChunksPdf(_PdfPeer):
    """``flat-chunk-pdf``: PyPDFLoader + ``RecursiveCharacterTextSplitter(1000, 100)`` + Chroma."""

    k: int = 30
    _collection: Any = field(default=None, init=False, repr=False)
    _client: Any = field(default=None, init=False, repr=False)
    _embeddings: Any = field(default=None, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=100)
        started = time.process_time()
        pages = [page for paper in papers for page in pypdf_pages(self.pdf(paper), paper.paper_id)]
        self.parse_s = time.process_time() - started
        self.pages = len(pages)
        chunks = splitter.split_documents(pages)
        texts = [c.page_content for c in chunks]
        self._embeddings = embeddings
        self._client = _chroma_client(directory)
        self._collection = _cosine_collection(self._client, "flat_chunk_pdf")
        _add_batched(
            self._client,
            self._collection,
            ids=[f"chunk-{n}" for n in range(len(chunks))],
            texts=texts,
            vectors=embeddings.embed_documents(texts),
            metadatas=[{DOC_ID: c.metadata[DOC_ID]} for c in chunks],
        )
        return len(chunks)

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        res = self._collection.query(
            query_embeddings=[self._embeddings.embed_query(question)],
            n_results=self.k,
            where={DOC_ID: paper_id} if paper_id is not None else None,
            include=["documents", "metadatas"],
        )
        return SearchResult(
            texts=list(res["documents"][0]),
            spans=None,
            paper_ids=[str(m[DOC_ID]) for m in res["metadatas"][0]],
        )

    def close(self) -> None:
        self._collection = None
        self._client = None


def make_pdf_peer(name: str, pdf_dir: Path) -> Peer:
    """A fresh peer of a ``--pdf-dir`` run by name (see :data:`PDF_RETRIEVERS`).

    Raises:
        ValueError: If the name is unknown.
    """
    factories: dict[str, Callable[[], Peer]] = {
        "gated": lambda: GatedPdf(name="gated", pdf_dir=pdf_dir),
        "gated-pages": lambda: GatedPdf(name="gated-pages", pdf_dir=pdf_dir, structure=False),
        "flat-chunk-pdf": lambda: FlatChunksPdf(name="flat-chunk-pdf", pdf_dir=pdf_dir),
        "gated-markdown": lambda: GatedPeer(name="gated-markdown", variant=GATED_VARIANTS["gated"]),
    }
    try:
        return factories[name]()
    except KeyError:
        msg = f"unknown retriever {name!r} with --pdf-dir; choose from {', '.join(factories)}"
        raise ValueError(msg) from None
