"""Section records: all a query reads about a parent, as one value beside the journal.

The gate ranks candidate sections by their heading titles and opens them by their children;
scoring a child needs its vector and its span. Read from the vector store, that is a metadata
fetch with every parent search, a second fetch for the parents other searches found and a
by-id read of every child with its vector: three round trips per query that cost more than the
searches themselves. A section record holds, for one parent, its document, its heading titles,
its own vector, and each child's id, own metadata and vector, packed into one value and read
by key. A record also holds a copy of its parent (text and metadata), so opening a section
for the first time is one read, not a second one of the docstore, whose parents would
otherwise be read and revived as LangChain documents beside the records. The records live in
a key-value namespace next to the journal (in the docstore's
database, in the index folder's SQLite file, or in memory), are written by the same journalled
writes under the same writer lock, and are deleted with their parent.

The vector store keeps the vectors too: its ANN search over all sections and all children is
what the gate's dense and child searches use across a collection.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.lexical import TERMS_RULE, child_terms
from langchain_gated_parent.records import Section
from langchain_gated_parent.stores.keyvalue import fast_mget

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.stores import BaseStore
    from numpy.typing import NDArray

__all__ = ["SectionStore", "child_texts", "decode", "encode", "parent_copy", "section_of"]

_LENGTHS = struct.Struct("<II")
"""A record starts with the byte lengths of its header and of its children's JSON."""
VERIFY_BATCH = 256
"""Records read at a time when their parents' copies are checked."""


def encode(section: Section) -> bytes:
    """A record as bytes: header, children's JSON, parent, vectors and children's terms.

    The header (document, headings, child count, and the sizes of the parent's metadata JSON
    and text) comes first and apart, so a read of many candidates can skip the rest (see
    :func:`decode`). The children's terms come last, so a record kept before they were ends
    where its vectors do.
    """
    children = json.dumps(section.children, ensure_ascii=False).encode()
    described: dict[str, Any] = {
        "parent_id": section.parent_id,
        "doc_id": section.doc_id,
        "headings": section.headings,
        "child_count": section.child_count,
        "dimension": int(section.vector.shape[0]),
    }
    parent = b""
    if section.parent is not None:
        own = {"id": section.parent.id, "metadata": section.parent.metadata}
        meta = json.dumps(own, ensure_ascii=False).encode()
        # A lone surrogate (text extracted from a broken PDF) is kept as it was given.
        text = section.parent.page_content.encode("utf-8", "surrogatepass")
        parent = meta + text
        described["parent"] = [len(meta), len(text)]
    terms = b""
    if section.child_terms is not None:
        described["terms_rule"] = TERMS_RULE
        terms = "\n".join(section.child_terms).encode()
    header = json.dumps(described, ensure_ascii=False).encode()
    vectors = np.vstack([section.vector[None, :], section.child_vectors]).astype("<f4")
    return (
        _LENGTHS.pack(len(header), len(children))
        + header
        + children
        + parent
        + vectors.tobytes()
        + terms
    )


def decode(raw: bytes, *, children: bool = True, parent: bool = True) -> Section:
    """The inverse of :func:`encode`.

    ``children=False`` leaves the children and the parent unread, ``parent=False`` the parent.
    """
    header, start, at = _layout(raw)
    dimension = header["dimension"]
    count = header["child_count"]
    meta_size, text_size = header.get("parent", (0, 0))
    offset = at + meta_size + text_size
    rows = 1 + count if children else 1
    # Copied out of ``raw``: a view would keep the whole record alive as long as a read cache
    # keeps the section.
    matrix = np.frombuffer(raw, dtype="<f4", count=rows * dimension, offset=offset)
    matrix = matrix.reshape(rows, dimension)
    terms = None
    if children and header.get("terms_rule") == TERMS_RULE:
        terms = raw[offset + 4 * rows * dimension :].decode().split("\n") if count else []
    return Section(
        parent_id=header["parent_id"],
        doc_id=header["doc_id"],
        headings=header["headings"],
        child_count=count,
        vector=matrix[0].copy(),
        children=json.loads(raw[start:at]) if children else [],
        child_vectors=matrix[1:].copy(),
        child_terms=terms,
        parent=_parent(raw, header, at) if children and parent else None,
    )


def parent_copy(raw: bytes) -> Document | None:
    """The parent a record holds, read alone (``None`` for a record written without it)."""
    header, _, at = _layout(raw)
    return _parent(raw, header, at)


def _layout(raw: bytes) -> tuple[dict[str, Any], int, int]:
    """A record's header, where its children's JSON starts and where that JSON ends.

    The parent's copy, if the record holds one, starts where the children's JSON ends.
    """
    header_size, children_size = _LENGTHS.unpack_from(raw)
    start = _LENGTHS.size + header_size
    return json.loads(raw[_LENGTHS.size : start]), start, start + children_size


def _parent(raw: bytes, header: dict[str, Any], at: int) -> Document | None:
    """The parent's copy in ``raw``, whose bytes start ``at``, as ``header`` sizes them."""
    if "parent" not in header:
        return None
    meta_size, text_size = header["parent"]
    own = json.loads(raw[at : at + meta_size])
    text = raw[at + meta_size : at + meta_size + text_size].decode("utf-8", "surrogatepass")
    return Document(id=own["id"], page_content=text, metadata=own["metadata"])


def child_texts(parent: Document, children: Sequence[dict[str, Any]]) -> list[str]:
    """Each child's text, cut from its parent's at the child's span (which lies inside it)."""
    offset = int(parent.metadata[keys.START_INDEX])
    return [
        parent.page_content[int(own[keys.START_INDEX]) - offset : int(own[keys.END_INDEX]) - offset]
        for own in children
    ]


def section_of(
    parent: Document,
    vector: NDArray[np.float32],
    children: Sequence[dict[str, Any]],
    child_vectors: NDArray[np.float32],
) -> Section:
    """The record of a parent about to be written, from its metadata and vectors."""
    meta = parent.metadata
    return Section(
        parent_id=str(meta[keys.PARENT_ID]),
        doc_id=str(meta[keys.DOC_ID]),
        headings=str(meta.get(keys.HEADINGS, "")),
        child_count=len(children),
        vector=np.asarray(vector, dtype=np.float32),
        children=list(children),
        child_vectors=np.asarray(child_vectors, dtype=np.float32).reshape(
            len(children), len(vector)
        ),
        child_terms=[
            " ".join(child_terms(own, text))
            for own, text in zip(children, child_texts(parent, children), strict=True)
        ],
        parent=parent,
    )


class SectionStore:
    """Section records in a byte store, keyed by parent id."""

    def __init__(self, store: BaseStore[str, bytes]) -> None:
        """Keep records in ``store`` (a namespace of their own)."""
        self._store = store
        self._mget = fast_mget(store)

    def put(self, sections: Sequence[Section]) -> None:
        """Write (or replace) these records."""
        if sections:
            self._store.mset([(s.parent_id, encode(s)) for s in sections])

    def delete(self, parent_ids: Sequence[str]) -> None:
        """Forget these parents' records (unknown ids are ignored)."""
        if parent_ids:
            self._store.mdelete(list(parent_ids))

    def get(
        self, parent_ids: Sequence[str], *, children: bool = True, parent: bool = True
    ) -> dict[str, Section]:
        """The records of those parents that have one, by parent id, in the order asked.

        ``children=False`` reads each parent's header and vector only, ``parent=False`` all
        but the parent's copy (see :func:`decode`).
        """
        found = self._mget(list(parent_ids))
        return {
            pid: decode(raw, children=children, parent=parent)
            for pid, raw in zip(parent_ids, found, strict=True)
            if raw is not None
        }

    def copies_out_of_step(
        self,
        parent_ids: Sequence[str],
        read_parents: Callable[[list[str]], list[Document | None]],
    ) -> set[str]:
        """Parents whose record's copy differs from ``read_parents``' (text or metadata).

        Read :data:`VERIFY_BATCH` at a time (for :meth:`~..index.GatedParentIndex.verify`), the
        copies alone: the rest of a record is not decoded.
        """
        found: set[str] = set()
        ids = list(parent_ids)
        for start in range(0, len(ids), VERIFY_BATCH):
            batch = ids[start : start + VERIFY_BATCH]
            records = self._mget(batch)
            for pid, raw, parent in zip(batch, records, read_parents(batch), strict=True):
                copy = None if raw is None else parent_copy(raw)
                if copy is not None and (
                    parent is None
                    or (copy.page_content, copy.metadata) != (parent.page_content, parent.metadata)
                ):
                    found.add(pid)
        return found

    def parent_ids(self) -> set[str]:
        """Every parent with a record (for :meth:`~..index.GatedParentIndex.verify`)."""
        return set(self._store.yield_keys())
