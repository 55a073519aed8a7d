"""Section records: all a query reads about a parent, as one value beside the journal.

The gate ranks candidate sections by their heading titles and opens them by their children;
scoring a child needs its vector and its span. Read from the vector store, that is a metadata
fetch with every parent search, a second fetch for the parents other searches found and a
by-id read of every child with its vector: three round trips per query that cost more than the
searches themselves. A section record holds, for one parent, its document, its heading titles,
its own vector, and each child's id, own metadata and vector, packed into one value and read
by key. A record also holds a copy of its parent (text and metadata), so opening a section
for the first time is one read, not a second one of the docstore, whose parents would
otherwise be read and revived as LangChain documents beside the records. Its layout (3, see
:func:`encode`) is read with few parses and objects, since a query's first reads of records
are most of what it costs beyond the vector search; records of layouts 1 and 2, written
before, are read as they are. The records live in
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
from langchain_gated_parent.lexical import TERMS_RULE, child_terms, searchable
from langchain_gated_parent.records import Section
from langchain_gated_parent.stores.keyvalue import fast_mget

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.stores import BaseStore
    from numpy.typing import NDArray

__all__ = ["SectionStore", "child_texts", "decode", "encode", "parent_copy", "section_of"]

_LENGTHS = struct.Struct("<II")
"""A layout-1 record starts with the byte lengths of its JSON header and of its children's JSON."""
LAYOUT = 3
"""The record layout :func:`encode` writes (layout 2: the same with float32 vectors; layout 1:
a JSON header, each child's metadata as one JSON object, and terms to be made searchable on
every read)."""
VECTOR_TYPES: dict[int, np.dtype[Any]] = {2: np.dtype("<f4"), LAYOUT: np.dtype("<f2")}
"""The vectors' type in each marked layout. Layout 3 keeps float16, half the bytes: the vectors
are of length 1, so a cosine from them is off by at most about 1e-3, and on QASPER dev every
measure came out the same to five decimals in both settings (BENCHMARKS.md, "Build time, disk
and memory"); the vector store keeps its own float32 copies for its searches."""
_MARK = 0xFFFFFFFF
"""A marked record (layout 2 or later) starts with this where a layout-1 record has its
header's size (4 GiB)."""
_MARKED = struct.pack("<I", _MARK)
_FIELDS = struct.Struct("<12I")
"""A marked record's fixed fields: the mark, the layout, the vectors' dimension, the child
count, the terms' rule, then the byte sizes of the parent id, the document id, the headings,
the children's metadata, the parent's id and metadata, the parent's text and the terms."""
_OWN_SIZE = 8
"""Where the children's metadata size is among a marked record's fixed fields."""
VERIFY_BATCH = 256
"""Records read at a time when their parents' copies are checked."""


def encode(section: Section, *, layout: int = LAYOUT) -> bytes:
    """A record as bytes (layout 3): fixed fields, header strings, vectors, then the rest.

    ``layout=2`` keeps the vectors in float32, for a saved version (:mod:`~.undo`), which
    writes them back to the vector store as they were.

    What a read of many candidates needs (ids, headings, child count, the parent's vector)
    comes first and is read without JSON, so a header read skips the rest (see :func:`decode`).
    The children's metadata is stored by column, each value shared by all children once, and
    their terms in the form BM25 searches (:func:`~.lexical.searchable`): opening a section
    then builds few objects. The record must hold its parent and its children's terms (what
    :func:`section_of` makes).
    """
    if section.parent is None or section.child_terms is None:
        msg = f"section record {section.parent_id!r} lacks its parent or its children's terms"
        raise ValueError(msg)
    strings = [s.encode() for s in (section.parent_id, section.doc_id, section.headings)]
    own = {"id": section.parent.id, "metadata": section.parent.metadata}
    blobs = [
        _dumps(_by_column(section.children)),
        _dumps(own),
        # A lone surrogate (text extracted from a broken PDF) is kept as it was given.
        section.parent.page_content.encode("utf-8", "surrogatepass"),
        "\n".join(section.child_terms).encode(),
    ]
    dimension = int(section.vector.shape[0])
    fields = _FIELDS.pack(
        _MARK,
        layout,
        dimension,
        section.child_count,
        TERMS_RULE,
        *map(len, strings),
        *map(len, blobs),
    )
    head = fields + b"".join(strings)
    vectors = np.vstack([section.vector[None, :], section.child_vectors])
    stored = vectors.astype(VECTOR_TYPES[layout]).tobytes()
    return b"".join([head, bytes(-len(head) % 4), stored, *blobs])


def decode(raw: bytes, *, children: bool = True, parent: bool = True) -> Section:
    """The inverse of :func:`encode`, for every layout; vectors come back as float32.

    ``children=False`` leaves the children and the parent unread, ``parent=False`` the parent.
    """
    if raw.startswith(_MARKED):
        return _decode_marked(raw, children=children, parent=parent)
    return _decode_1(raw, children=children, parent=parent)


def parent_copy(raw: bytes) -> Document | None:
    """The parent a record holds, read alone (``None`` for a record written without it)."""
    if raw.startswith(_MARKED):
        fields = _FIELDS.unpack_from(raw)
        meta_size, text_size = fields[_OWN_SIZE + 1 : _OWN_SIZE + 3]
        return _parent_at(raw, _children_at(fields) + fields[_OWN_SIZE], meta_size, text_size)
    header, _, at = _layout(raw)
    return _parent(raw, header, at)


def _decode_marked(raw: bytes, *, children: bool, parent: bool) -> Section:
    """A record of layout 2 or 3 (see :func:`encode`)."""
    fields = _FIELDS.unpack_from(raw)
    _, _, dimension, count, rule, *sizes = fields
    at = _FIELDS.size
    strings = []
    for size in sizes[:3]:
        strings.append(raw[at : at + size].decode())
        at += size
    rows = 1 + count if children else 1
    matrix = np.frombuffer(
        raw, dtype=_vector_type(fields), count=rows * dimension, offset=_vectors_at(fields)
    ).reshape(rows, dimension)
    # Converted out of ``raw`` (a copy): a view would keep the whole record alive as long as a
    # read cache keeps the section.
    vector, child_vectors = matrix[0].astype(np.float32), matrix[1:].astype(np.float32)
    pid, doc_id, headings = strings
    if not children:
        return Section(pid, doc_id, headings, count, vector, [], child_vectors)
    at = _children_at(fields)
    own_size, meta_size, text_size, terms_size = sizes[3:]
    own = json.loads(raw[at : at + own_size])
    at += own_size
    copy = _parent_at(raw, at, meta_size, text_size) if parent else None
    at += meta_size + text_size
    terms = None
    if rule == TERMS_RULE:
        terms = raw[at : at + terms_size].decode().split("\n") if count else []
    return Section(
        pid, doc_id, headings, count, vector, _by_row(own, count), child_vectors, terms, copy
    )


def _vector_type(fields: tuple[int, ...]) -> np.dtype[Any]:
    """A marked record's vector type, by its layout.

    A layout this release does not know (a later release wrote it) is refused, rather than
    read as numbers it does not hold.
    """
    layout = fields[1]
    if layout not in VECTOR_TYPES:
        msg = (
            f"a section record has layout {layout}, which this version of langchain-gated-parent "
            f"does not read (it reads layouts 1 to {LAYOUT}): upgrade the package"
        )
        raise ValueError(msg)
    return VECTOR_TYPES[layout]


def _vectors_at(fields: tuple[int, ...]) -> int:
    """Where a marked record's vectors start: after its strings, at a multiple of 4."""
    head = _FIELDS.size + sum(fields[_OWN_SIZE - 3 : _OWN_SIZE])  # the three strings
    return head + -head % 4


def _children_at(fields: tuple[int, ...]) -> int:
    """Where a marked record's children's metadata starts, after its vectors."""
    dimension, count = fields[2], fields[3]
    return _vectors_at(fields) + _vector_type(fields).itemsize * (1 + count) * dimension


def _decode_1(raw: bytes, *, children: bool, parent: bool) -> Section:
    """A layout-1 record, as releases before layout 2 wrote them (float32 vectors)."""
    header, start, at = _layout(raw)
    dimension = header["dimension"]
    count = header["child_count"]
    meta_size, text_size = header.get("parent", (0, 0))
    offset = at + meta_size + text_size
    rows = 1 + count if children else 1
    matrix = np.frombuffer(raw, dtype="<f4", count=rows * dimension, offset=offset)
    matrix = matrix.reshape(rows, dimension)
    terms = None
    if children and header.get("terms_rule") == TERMS_RULE:
        listed = raw[offset + 4 * rows * dimension :].decode().split("\n") if count else []
        terms = [searchable(t) for t in listed]
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


def _layout(raw: bytes) -> tuple[dict[str, Any], int, int]:
    """A layout-1 record's header, where its children's JSON starts and where that JSON ends.

    The parent's copy, if the record holds one, starts where the children's JSON ends.
    """
    header_size, children_size = _LENGTHS.unpack_from(raw)
    start = _LENGTHS.size + header_size
    return json.loads(raw[_LENGTHS.size : start]), start, start + children_size


def _parent(raw: bytes, header: dict[str, Any], at: int) -> Document | None:
    """The parent's copy in a layout-1 ``raw``, whose bytes start ``at``, as ``header`` sizes."""
    if "parent" not in header:
        return None
    return _parent_at(raw, at, *header["parent"])


def _parent_at(raw: bytes, at: int, meta_size: int, text_size: int) -> Document:
    """The parent's copy in ``raw`` (either layout): its id and metadata, then its text."""
    own = json.loads(raw[at : at + meta_size])
    text = raw[at + meta_size : at + meta_size + text_size].decode("utf-8", "surrogatepass")
    return Document(id=own["id"], page_content=text, metadata=own["metadata"])


def _by_column(children: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The children's own metadata as columns: each value all children share is stored once.

    Children whose keys differ (in name or order) are stored as given (``rows``). A value is
    shared only if every child has it of the same type: ``1``, ``1.0`` and ``True`` stay apart.
    """
    order = list(children[0]) if children else []
    if any(list(own) != order for own in children):
        return {"rows": list(children)}
    same: dict[str, Any] = {}
    columns: dict[str, list[Any]] = {}
    for key in order:
        values = [own[key] for own in children]
        first = values[0]
        if all(type(v) is type(first) and v == first for v in values):
            same[key] = first
        else:
            columns[key] = values
    return {"keys": order, "same": same, "columns": columns}


def _by_row(stored: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The inverse of :func:`_by_column`: each child's own metadata, in its keys' order."""
    if "rows" in stored:
        rows: list[dict[str, Any]] = stored["rows"]
        return rows
    order, same, columns = stored["keys"], stored["same"], stored["columns"]
    if not order:
        return [{} for _ in range(count)]
    values = [columns[k] if k in columns else [same[k]] * count for k in order]
    return [dict(zip(order, row, strict=True)) for row in zip(*values, strict=True)]


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


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
            searchable(" ".join(child_terms(own, text)))
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
