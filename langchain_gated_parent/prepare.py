"""A batch of documents made ready to write: checked, laid out, then given their vectors.

No I/O here: :func:`lay_out` says which texts a batch needs embedded, the index embeds them
(with ``embed_documents`` or ``aembed_documents``), and :func:`attach` puts the vectors in
place. The sync and async writers share every step but the embedding call.

Metadata layout: the document's own metadata is stored once, with each parent; a child keeps
only the reserved keys (ids, span, heading path) and gets the rest back from its parent.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.scoring import unit

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from numpy.typing import NDArray

    from langchain_gated_parent.splitters import ParentChildSplit

WRITE_BATCH_CHILDREN = 1024
"""Documents are embedded and written in batches of about this many children.

It bounds memory (the embedding model answers with Python lists of floats, ~10 KB per vector)
whatever the size of one ``add_documents`` call; each batch is journalled on its own.
"""

Item = tuple[Document, "ParentChildSplit", str]
"""A document to write: the document, its split and its content hash."""


@dataclass
class Prepared:
    """A document split and laid out (and, after :func:`attach`, embedded), ready to write."""

    doc_id: str
    digest: str
    parents: list[Document]
    children: list[Document]
    child_vectors: NDArray[np.float32]
    parent_vectors: NDArray[np.float32]
    pages: dict[str, str] | None = None
    """The page texts of a document merged from pages, kept in its manifest."""


@dataclass(frozen=True)
class EmbeddingWork:
    """The texts a write batch needs embedded, in the order :func:`attach` consumes them."""

    children: list[str]
    """Every child's text (``embed_documents``)."""
    parents: list[str]
    """``"text"`` representation: each parent's heading path and text (``embed_documents``)."""
    queries: list[str]
    """``"centroid"`` representation: childless parents' heading path and text (``embed_query``)."""


def user_metadata(document: Document) -> dict[str, Any]:
    """Document-level metadata copied onto parents and children so filters match both."""
    return {
        k: v
        for k, v in document.metadata.items()
        if k not in keys.RESERVED and isinstance(v, keys.USER_VALUE_TYPES)
    }


def content_hash(document: Document) -> str:
    """What decides whether a document changed since it was indexed: text and own metadata."""
    payload = json.dumps(
        [document.page_content, sorted(user_metadata(document).items())], ensure_ascii=False
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def own_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A child's own metadata: the document's metadata is stored once, with each parent."""
    return {k: v for k, v in metadata.items() if k in keys.RESERVED}


def document_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The document's metadata, as its parents carry it."""
    return {k: v for k, v in metadata.items() if k not in keys.RESERVED}


def heading_context(metadata: Mapping[str, Any], text: str) -> str:
    """The text a parent is embedded as (``"text"`` representation): heading path, then text.

    Children are embedded as their own text only: on QASPER, prefixing the heading path to
    each paragraph lowered paragraph nDCG@10 (the shared prefix pulls a section's paragraphs
    together and blurs the one that answers). The section signal enters through the parent
    score instead.
    """
    path = metadata.get(keys.SECTION_PATH) or []
    title = metadata.get(keys.TITLE)
    head = " > ".join([*([title] if title else []), *path])
    return f"{head}\n\n{text}" if head else text


def normalized(
    rows: Sequence[Sequence[float]] | NDArray[np.float32], count: int
) -> NDArray[np.float32]:
    """Embeddings as an L2-normalized ``(count, dimension)`` matrix (``(0, 0)`` when empty)."""
    if not count:
        return np.empty((0, 0), np.float32)
    return unit(np.asarray(rows, dtype=np.float32).reshape(count, -1))


def refuse_non_documents(documents: object) -> None:
    """A single Document or a string iterates into nonsense: refuse it by name."""
    if isinstance(documents, (Document, str, bytes)) or not isinstance(documents, Sequence):
        msg = (
            f"add_documents takes a list of Documents, got {type(documents).__name__}; "
            "wrap a single document in a list: add_documents([document])"
        )
        raise TypeError(msg)
    for position, document in enumerate(documents):
        if not isinstance(document, Document):
            msg = (
                f"documents[{position}] is a {type(document).__name__}, not a Document; "
                "wrap text as Document(page_content=text, metadata={'doc_id': ...})"
            )
            raise TypeError(msg)


def refuse_empty(splits: Sequence[ParentChildSplit]) -> None:
    """A document without text would be recorded as indexed while holding nothing."""
    for split in splits:
        if not split.parents:
            msg = (
                f"document {split.doc_id!r} has no text to index (empty or whitespace only); "
                f"leave it out, or remove its indexed version with delete([{split.doc_id!r}])"
            )
            raise ValueError(msg)


def refuse_unstorable(documents: Sequence[Document], doc_ids: Sequence[str]) -> None:
    """Refuse what the stores cannot hold, before any write: it would fail the write halfway.

    Text and metadata are stored as UTF-8 (a lone surrogate, from text decoded with
    ``errors="surrogateescape"``, has no UTF-8 form), and metadata as JSON with each parent (a
    datetime, a numpy number or a set has none).
    """
    for document, doc_id in zip(documents, doc_ids, strict=True):
        bad = _unencodable(document.page_content)
        if bad is not None:
            msg = (
                f"document {doc_id!r}: its text holds {document.page_content[bad]!r} at "
                f"position {bad}, which UTF-8 cannot store; decode the source with "
                "errors='replace', or remove it"
            )
            raise ValueError(msg)
        for key, value in document.metadata.items():
            if not _is_json(value):
                msg = (
                    f"document {doc_id!r}: metadata {key!r} is a {type(value).__name__} the "
                    "index cannot store; give a str, int, float, bool, None, or a list or dict "
                    "of those (for example str(value) or float(value))"
                )
                raise ValueError(msg)


def _unencodable(text: str) -> int | None:
    """Where ``text`` first has no UTF-8 form, if anywhere."""
    try:
        text.encode()
    except UnicodeEncodeError as error:
        return error.start
    return None


def _is_json(value: object) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode()
    except (TypeError, ValueError):  # UnicodeEncodeError is a ValueError
        return False
    return True


def refuse_duplicates(doc_ids: Sequence[str]) -> None:
    """Two versions of one document in one call: which one wins would be arbitrary."""
    seen: set[str] = set()
    for doc_id in doc_ids:
        if doc_id in seen:
            msg = (
                f"document id {doc_id!r} appears twice in one batch; give each document a "
                "unique 'doc_id' in its metadata, or add the versions in separate calls"
            )
            raise ValueError(msg)
        seen.add(doc_id)


def write_batches(todo: Sequence[Item]) -> Iterator[list[Item]]:
    """Group documents, in order, into batches of at least ``WRITE_BATCH_CHILDREN`` children."""
    batch: list[Item] = []
    size = 0
    for item in todo:
        batch.append(item)
        size += len(item[1].children)
        if size >= WRITE_BATCH_CHILDREN:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def lay_out(items: Sequence[Item], representation: str) -> tuple[list[Prepared], EmbeddingWork]:
    """Parents and children with the document's metadata, and the texts to embed for them."""
    prepared: list[Prepared] = []
    for doc, split, digest in items:
        user = user_metadata(doc)
        counts = Counter(c.metadata[keys.PARENT_ID] for c in split.children)
        headings = _headings(split.parents, split.children)
        parents = [
            _with_user(
                p,
                {
                    **user,
                    keys.CHILD_COUNT: counts[p.metadata[keys.PARENT_ID]],
                    keys.HEADINGS: headings[p.metadata[keys.PARENT_ID]],
                },
            )
            for p in split.parents
        ]
        children = [_with_user(c, user) for c in split.children]
        empty = np.empty((0, 0), np.float32)
        prepared.append(Prepared(split.doc_id, digest, parents, children, empty, empty))
    all_parents = [p for item in prepared for p in item.parents]
    texts = [heading_context(p.metadata, p.page_content) for p in all_parents]
    return prepared, EmbeddingWork(
        children=[c.page_content for item in prepared for c in item.children],
        parents=texts if representation == "text" else [],
        queries=[]
        if representation == "text"
        else [
            t for p, t in zip(all_parents, texts, strict=True) if not p.metadata[keys.CHILD_COUNT]
        ],
    )


def attach(
    prepared: Sequence[Prepared],
    children: NDArray[np.float32],
    parents: NDArray[np.float32],
    queries: Sequence[Sequence[float]],
) -> None:
    """Give each document its vectors, embedded as :class:`EmbeddingWork` asked.

    ``children`` and ``parents`` are normalized matrices; with no parent texts (``"centroid"``)
    a parent's vector is the normalized mean of its children's, or the next of ``queries``
    for a parent without children.
    """
    child_offset = parent_offset = 0
    remaining = iter(queries)
    for item in prepared:
        item.child_vectors = children[child_offset : child_offset + len(item.children)]
        child_offset += len(item.children)
        if len(parents):
            item.parent_vectors = parents[parent_offset : parent_offset + len(item.parents)]
            parent_offset += len(item.parents)
        else:
            item.parent_vectors = _centroids(item, remaining)


def _centroids(item: Prepared, queries: Iterator[Sequence[float]]) -> NDArray[np.float32]:
    """Normalized mean of each parent's child vectors (a childless parent: its query vector)."""
    rows: list[NDArray[np.float32]] = []
    for parent in item.parents:
        pid = parent.metadata[keys.PARENT_ID]
        mask = [c.metadata[keys.PARENT_ID] == pid for c in item.children]
        if any(mask):
            rows.append(item.child_vectors[np.asarray(mask)].mean(axis=0))
        else:
            rows.append(np.asarray(next(queries), dtype=np.float32))
    return normalized(np.stack(rows), len(rows))


def _headings(parents: Sequence[Document], children: Sequence[Document]) -> dict[str, str]:
    """Each parent's distinct heading titles: its own path, then its subsections' titles."""
    titles: dict[str, dict[str, None]] = {
        p.metadata[keys.PARENT_ID]: dict.fromkeys(p.metadata.get(keys.SECTION_PATH) or [])
        for p in parents
    }
    for child in children:
        titles[child.metadata[keys.PARENT_ID]].update(
            dict.fromkeys(child.metadata.get(keys.SECTION_PATH) or [])
        )
    return {pid: " ".join(found) for pid, found in titles.items()}


def _with_user(document: Document, user: dict[str, Any]) -> Document:
    return Document(page_content=document.page_content, metadata={**user, **document.metadata})
