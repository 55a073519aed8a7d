"""Vectors a write need not embed: those of the texts the documents it replaces already had.

A changed document is written whole, as a new version (its ids, spans and records follow from
the new split), but most of its texts are usually the same as before: an edited paragraph, a
page added to a PDF indexed page by page, a change of metadata only. Embedding is most of what
a write costs, so the vectors the index holds for the replaced version (the vector store's own
float32 copies, read for the write's undo record anyway) are kept for every text that comes
back unchanged, and only new texts are embedded, each once. A text is its own key: the model
is the index's (a model with other vectors is refused at open), so the same text has the same
vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from langchain_gated_parent.prepare import heading_context
from langchain_gated_parent.stores.sections import child_texts

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_gated_parent.prepare import EmbeddingWork
    from langchain_gated_parent.stores.undo import SavedVersion

__all__ = ["BatchEmbedding"]

Vector = Any
"""A vector as an embedding call gives it (a list of floats) or as the index holds it (numpy)."""


@dataclass(frozen=True)
class BatchEmbedding:
    """What one write batch still has to embed, and then every vector it needs, in place."""

    work: EmbeddingWork
    documents: dict[str, Vector]
    """Known vectors of ``embed_documents`` texts: children's texts, parents' contexts."""
    queries: dict[str, Vector]
    """Known vectors of ``embed_query`` texts: childless parents' contexts (``"centroid"``)."""

    @classmethod
    def of(
        cls, work: EmbeddingWork, replaced: Sequence[SavedVersion], representation: str
    ) -> BatchEmbedding:
        """``work``, with the texts and vectors of the ``replaced`` versions known.

        Children are embedded as their text; a parent as its heading path and text under the
        ``"text"`` representation, and under ``"centroid"`` only when it has no children, as
        a query (:func:`~.prepare.lay_out`): a centroid is no text's vector.
        """
        documents: dict[str, Vector] = {}
        queries: dict[str, Vector] = {}
        for version in replaced:
            for section in version.sections:
                if section.parent is None:
                    continue
                texts = child_texts(section.parent, section.children)
                documents.update(zip(texts, section.child_vectors, strict=True))
                context = heading_context(section.parent.metadata, section.parent.page_content)
                if representation == "text":
                    documents[context] = section.vector
                elif not section.child_count:
                    queries[context] = section.vector
        return cls(work, documents, queries)

    @property
    def document_texts(self) -> list[str]:
        """Every ``embed_documents`` text of the batch: the children's, then the parents'."""
        return [*self.work.children, *self.work.parents]

    @cached_property
    def new_texts(self) -> list[str]:
        """The ``embed_documents`` texts to embed: those not known, each once.

        Worked out once: the batch embeds them, then :meth:`vectors` places their vectors.
        """
        return _unknown(self.document_texts, self.documents)

    @cached_property
    def new_queries(self) -> list[str]:
        """The ``embed_query`` texts to embed: those not known, each once."""
        return _unknown(self.work.queries, self.queries)

    @property
    def reused(self) -> int:
        """How many of the batch's texts have a known vector (and are not embedded again)."""
        return sum(t in self.documents for t in self.document_texts) + sum(
            t in self.queries for t in self.work.queries
        )

    def vectors(
        self, texts: Sequence[Vector], queries: Sequence[Vector]
    ) -> tuple[list[Vector], list[Vector], list[Vector]]:
        """The children's, the parents' and the queries' vectors, in :class:`EmbeddingWork` order.

        ``texts`` and ``queries`` are the vectors of :attr:`new_texts` and :attr:`new_queries`.
        """
        documents = {**self.documents, **dict(zip(self.new_texts, texts, strict=True))}
        known_queries = {**self.queries, **dict(zip(self.new_queries, queries, strict=True))}
        return (
            [documents[t] for t in self.work.children],
            [documents[t] for t in self.work.parents],
            [known_queries[t] for t in self.work.queries],
        )


def _unknown(texts: Sequence[str], known: dict[str, Vector]) -> list[str]:
    return list(dict.fromkeys(t for t in texts if t not in known))
