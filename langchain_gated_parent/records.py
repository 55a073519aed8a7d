"""What the retriever consumes from storage: the records it reads and the protocol it reads them by.

The retriever depends on this module only, never on the index or on a vector store: any object
with :class:`SearchStore`'s methods can be searched, and the metadata keys the stores write are
read here, once, into the typed fields the scoring needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_gated_parent import keys
from langchain_gated_parent.lexical import child_terms, searchable, term_lengths

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from numpy.typing import NDArray


@dataclass(frozen=True)
class Section:
    """One parent as the gate reads it, from its section record (one read per candidate)."""

    parent_id: str
    doc_id: str
    headings: str
    """The parent's heading titles (its path and its subsections'), for the title signal."""
    child_count: int
    """How many children the parent has (how far the gate must open)."""
    vector: NDArray[np.float32]
    """The parent's vector (L2-normalized), as the vector store holds it."""
    children: list[dict[str, Any]]
    """Each child's own metadata (``chunk_id``, ``parent_id``, span, ...), in child order
    (empty, with ``child_vectors``, when a read of the gate's candidates skipped them)."""
    child_vectors: NDArray[np.float32]
    """One row per child, L2-normalized."""
    child_terms: list[str] | None = None
    """Each child's BM25 terms (:func:`~.lexical.child_terms`) as :func:`~.lexical.searchable`
    strings; ``None`` when not read, or for a record kept before terms were (they are then
    counted from the text)."""
    parent: Document | None = None
    """The parent itself (its text and metadata, as the docstore holds it), so opening the
    section reads nothing else; ``None`` when not read, or for a record written before records
    carried it (the parent is then read from the docstore)."""


@dataclass(frozen=True)
class ChildRows:
    """Children fetched for scoring: parallel lists plus their vectors (rows L2-normalized).

    ``parents`` are the children's parents, read to cut the texts (so ``return_parents`` needs
    no second read).
    """

    ids: list[str]
    texts: list[str]
    metadatas: list[dict[str, Any]]
    vectors: NDArray[np.float32]
    parents: dict[str, Document] = field(default_factory=dict)
    terms: list[str] | None = None
    """Each child's BM25 terms (:func:`~.lexical.searchable`); ``None``: listed from the texts
    when asked."""
    lengths: NDArray[np.float64] | None = None
    """How many BM25 terms each child has; ``None``: counted when asked."""

    @cached_property
    def parent_ids(self) -> list[str]:
        """Each child's parent (computed once: scoring, dedupe and the learned ranker read it)."""
        return [meta[keys.PARENT_ID] for meta in self.metadatas]

    @cached_property
    def spans(self) -> list[tuple[str, int, int]]:
        """Each child's ``(doc_id, start, end)`` in its document: one span is one fact."""
        return [
            (meta[keys.DOC_ID], meta[keys.START_INDEX], meta[keys.END_INDEX])
            for meta in self.metadatas
        ]

    @cached_property
    def bm25_lengths(self) -> NDArray[np.float64]:
        """Each child's number of BM25 terms (:func:`~.lexical.term_lengths`), counted once.

        An opened section's rows are kept between queries, so their count is too.
        """
        return term_lengths(self.bm25_terms) if self.lengths is None else self.lengths

    @cached_property
    def bm25_terms(self) -> list[str]:
        """Each child's BM25 terms (:func:`~.lexical.child_terms`, :func:`~.lexical.searchable`)."""
        if self.terms is not None:
            return self.terms
        return [
            searchable(" ".join(child_terms(meta, text)))
            for meta, text in zip(self.metadatas, self.texts, strict=True)
        ]


@runtime_checkable
class SearchStore(Protocol):
    """What the retriever needs from an index: the query model, two reads and two checks."""

    embeddings: Embeddings
    """Embeds the query (``embed_query`` / ``aembed_query``)."""
    vector_store_provider: str
    """The vector store's name, reported to tracing as ``ls_vector_store_provider``."""

    @property
    def embedding_model(self) -> str:
        """The embedding model's name, reported to tracing as ``ls_embedding_provider``."""
        ...

    @property
    def searches_in_process(self) -> bool:
        """Whether the gate's searches all run in this process, not on servers.

        The retriever then runs them one after the other: beside each other, Python work on
        one thread holds up the other's return from a search that let go of the GIL.
        """
        ...

    def check_dimension(self, vector: Sequence[float]) -> None:
        """Refuse a query vector of another length than the stored vectors'."""
        ...

    def check_filter(self, where: dict[str, Any] | None) -> None:
        """Refuse a malformed filter, or one on a key no stored document has."""
        ...

    def search_parents(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``n`` parents nearest the query vector, as ``(parent_id, score in [0, 1])``."""
        ...

    def searches_apply(self, where: dict[str, Any] | None) -> bool:
        """Whether the term and child-vector searches apply ``where`` themselves."""
        ...

    def search_sparse(
        self, query: str, n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``n`` best ``(parent_id, term score)`` of a term search (``[]`` without one)."""
        ...

    def search_children(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``n`` children nearest the query vector, as ``(child_id, score in [0, 1])``."""
        ...

    def sections(
        self,
        parent_ids: Sequence[str],
        where: dict[str, Any] | None = None,
        *,
        unchecked: Sequence[str] = (),
    ) -> dict[str, Section]:
        """Section records by parent id; of ``unchecked`` ids, those failing ``where`` left out."""
        ...

    def document_sections(self, where: dict[str, Any] | None) -> dict[str, Section] | None:
        """Every section of the few documents a ``doc_id`` filter names, else ``None``."""
        ...

    def children_of(self, parent_ids: Sequence[str]) -> ChildRows:
        """Every child of the given parents, with vectors and texts."""
        ...


@dataclass(frozen=True)
class Explanation:
    """What the gate did for one query, to see and tune its failures.

    ``parents`` are the opened parents (metadata ``parent_score`` and ``gate_rank``);
    ``considered`` every child scored inside them; ``documents`` what the retriever returned.
    When the evidence is in none of ``parents``, the gate missed ("parent recall all misses,
    child recall zero"): widen ``parent_top_k`` or ``gate_margin``, or use smaller parents.
    """

    query: str
    alpha: float
    """The fused score's alpha for this query; ``nan`` with the learned ranker (it has none)."""
    parents: list[Document] = field(default_factory=list)
    considered: list[Document] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
