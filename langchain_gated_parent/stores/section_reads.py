"""What a query reads of an index's sections: its candidates' headers and its opened sections.

Both are read by key from the section records (:mod:`~.sections`; the docstore too for
records written before they held their parent), kept decoded for the index's current version
(:mod:`~.read_cache`), and read consistently: a write
by another process can land between two reads of one query, and the journal's stamp, read
before and after, tells when it did.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

import numpy as np

from langchain_gated_parent import keys
from langchain_gated_parent.prepare import document_metadata
from langchain_gated_parent.records import ChildRows, Section
from langchain_gated_parent.stores.read_cache import ReadCache
from langchain_gated_parent.stores.sections import child_texts

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.documents import Document

    from langchain_gated_parent.stores.journal import Journal, Stamp
    from langchain_gated_parent.stores.sections import SectionStore

__all__ = [
    "DEFAULT_CACHED_SECTIONS",
    "EXACT_DOCUMENTS",
    "SectionReads",
    "check_cached_sections",
]

QUIET_READ_ATTEMPTS = 4
"""Reads of a gate's children that a write overlapped before only finished documents are kept."""
EXACT_DOCUMENTS = 8
"""An index of at most this many documents, or a ``doc_id`` filter on at most this many, is
scored exactly (see :meth:`SectionReads.of_documents`)."""
DEFAULT_CACHED_SECTIONS = 8192
"""Opened sections a process keeps decoded: about 5 KB a child, so at QASPER's section sizes
about 21 KB each (the parent, its children's texts, metadata, vectors and terms), 175 MB at
most; a count, so an index of longer sections keeps more. Sized to
hold what a server's questions open: one pass over QASPER dev's 888 questions opens 7,042
distinct sections of 1,169 papers, and a cache that holds fewer has dropped them by the time
they are asked about again (BENCHMARKS.md, "A process that has read its sections")."""
HEADERS_PER_SECTION = 4
"""Candidates' headers kept per opened section (about 2.2 KB each, 70 MB at most by default):
a query reads three candidates for each section it opens."""


class Observer(Protocol):
    """Something else kept for one version of the index (the term search's postings)."""

    def observe(self, stamp: Stamp) -> None:
        """The index's version just seen: another one drops what was kept."""
        ...


def check_cached_sections(cached_sections: object) -> None:
    """Refuse a cache size that is not a whole number >= 0, naming the value and the fix."""
    if type(cached_sections) is not int or cached_sections < 0:
        msg = (
            f"cached_sections must be an integer >= 0, got {cached_sections!r}; pass e.g. "
            f"cached_sections={DEFAULT_CACHED_SECTIONS}, or 0 to keep no reads between queries"
        )
        raise ValueError(msg)


class SectionReads:
    """The section reads of one index, with what this process keeps of them."""

    def __init__(
        self,
        journal: Journal,
        records: SectionStore,
        read_parents: Callable[[list[str]], list[Document | None]],
        *,
        cached_sections: int,
        observers: Sequence[Observer] = (),
    ) -> None:
        """Read ``records`` and parents (``read_parents``) at the versions ``journal`` stamps.

        ``observers`` are told each version seen, as the kept headers and sections are.
        """
        self._journal = journal
        self._records = records
        self._read_parents = read_parents
        self._headers: ReadCache[Section] = ReadCache(HEADERS_PER_SECTION * cached_sections)
        self._opened: ReadCache[ChildRows] = ReadCache(cached_sections)
        self._few: ReadCache[list[str] | None] = ReadCache(1)
        self._observers = list(observers)
        self._seen: Stamp | None = None

    def observe(self, stamp: Stamp) -> None:
        """The index's version just seen: what was kept of another one is dropped."""
        self._seen = stamp
        self._headers.observe(stamp)
        self._opened.observe(stamp)
        self._few.observe(stamp)
        for observer in self._observers:
            observer.observe(stamp)

    def headers(self, parent_ids: Sequence[str]) -> dict[str, Section]:
        """The candidates' record headers (no children), by parent id, in the order given.

        Headers read since the index's version was last seen are kept: they only rank
        candidates, so a header read while a write began is as good as one read a moment
        earlier.
        """
        ids = list(dict.fromkeys(parent_ids))
        version = self._headers.version
        cached = self._headers.get(ids)
        read = self._records.get([p for p in ids if p not in cached], children=False)
        self._headers.put(read, version)
        return {p: cached[p] if p in cached else read[p] for p in ids if p in cached or p in read}

    def few_documents(self) -> list[str] | None:
        """Every document of the index if it holds at most :data:`EXACT_DOCUMENTS`, else ``None``.

        Known once per version of the index (a read of at most nine keys).
        """
        version = self._few.version
        kept = self._few.get([""])
        if "" in kept:
            return kept[""]
        few = self._journal.few_doc_ids(EXACT_DOCUMENTS)
        self._few.put({"": few}, version)
        return few

    def of_documents(self, doc_ids: Sequence[str]) -> dict[str, Section]:
        """Every section record of these documents (those whose last write finished).

        Without the parents' copies: the gate scores the records, and opens the sections it
        picks by :meth:`children_of`.
        """
        manifests = self._journal.manifests(doc_ids)
        wanted = [
            pid
            for m in manifests.values()
            if m.get("status") == "complete"
            for pid in m.get("parents", [])
        ]
        return self._records.get(list(dict.fromkeys(wanted)), parent=False)

    def of_parents(self, parent_ids: Sequence[str]) -> dict[str, Section]:
        """The section records of these parents, of documents whose last write finished."""
        found = self._records.get(list(dict.fromkeys(parent_ids)), parent=False)
        manifests = self._journal.manifests(list({s.doc_id for s in found.values()}))
        return {
            pid: section
            for pid, section in found.items()
            if (manifests.get(section.doc_id) or {}).get("status") == "complete"
            and pid in manifests[section.doc_id].get("parents", [])
        }

    def children_of(self, parent_ids: Sequence[str]) -> ChildRows:
        """Every child of the given parents, with vectors, for exact scoring.

        One read of the parents' section records (each holds its children's vectors, spans and
        terms, and the parent itself). A child's text is cut from its parent's (a child's span
        lies inside its parent's) and the document's own metadata comes from the parent too,
        so neither is stored once per child; a parent deleted since the search is dropped.

        A write that overlaps the read could mix two versions of a document (a new parent's
        text cut at an old child's offsets) or show part of one. The journal's stamp, read
        before and after, tells: if a write overlapped, the read is retried, and after
        ``QUIET_READ_ATTEMPTS`` overlapped reads only documents whose manifest was complete
        and unchanged from before to after the read are kept. A read no write overlapped is
        kept for the next queries.
        """
        ids = list(dict.fromkeys(parent_ids))
        rows = ChildRows([], [], [], np.empty((0, 0), np.float32))
        if not ids:
            return rows
        # The stamp this index saw last (a query's filter check reads one), if quiet, serves as
        # the first "before": a stamp read any time before the read will do, since the stamp read
        # after it decides. A query that reads records then reads one stamp here, not two.
        tries: list[Stamp | None] = [None] * (QUIET_READ_ATTEMPTS - 1)
        if self._seen is not None and self._seen.quiet:
            tries.insert(0, self._seen)
        for attempt, seen in enumerate(tries, 1):
            before = self._journal.stamp() if seen is None else seen
            self.observe(before)
            cached = self._opened.get(ids) if before.quiet else {}
            missing = [p for p in ids if p not in cached]
            read = self._read(missing)
            opened = cached | read
            rows = _joined([opened[p] for p in ids if p in opened])
            # All from the cache, after a stamp read just now: no write can have overlapped.
            just_read = seen is None and not missing
            if before.quiet and (just_read or self._journal.stamp() == before):
                self._opened.put(read, before.seq)
                return rows
            if seen is None:  # a write overlapped the read, not merely one before it
                time.sleep(0.02 * attempt)
        docs = sorted({str(p.metadata.get(keys.DOC_ID)) for p in rows.parents.values()})
        before_read = self._journal.manifests(docs)
        rows = _joined(list(self._read(ids).values()))
        after_read = self._journal.manifests(docs)
        keep = {
            d
            for d, m in before_read.items()
            if m["status"] == "complete" and after_read.get(d) == m
        }
        return _only_documents(rows, keep)

    def _read(self, parent_ids: list[str]) -> dict[str, ChildRows]:
        """Each opened parent's children (and the parent), by parent id; absent ones left out.

        The parent comes with its record; only records written before they carried it have
        their parents read from the docstore.
        """
        if not parent_ids:
            return {}
        records = self._records.get(parent_ids)
        older = [p for p, record in records.items() if record.parent is None]
        parents = dict(zip(older, self._read_parents(older), strict=True)) if older else {}
        opened: dict[str, ChildRows] = {}
        for pid, record in records.items():
            parent = parents.get(pid) if record.parent is None else record.parent
            if parent is None:
                continue
            shared = document_metadata(parent.metadata)
            opened[pid] = ChildRows(
                [str(own[keys.CHUNK_ID]) for own in record.children],
                child_texts(parent, record.children),
                [{**shared, **own} for own in record.children],
                record.child_vectors,
                {pid: parent},
                record.child_terms,
            )
        return opened


def _joined(opened: Sequence[ChildRows]) -> ChildRows:
    """The children of several opened parents as one set of rows, in the order given."""
    return ChildRows(
        [i for rows in opened for i in rows.ids],
        [t for rows in opened for t in rows.texts],
        [m for rows in opened for m in rows.metadatas],
        np.vstack([rows.vectors for rows in opened]) if opened else np.empty((0, 0), np.float32),
        {p: d for rows in opened for p, d in rows.parents.items()},
        [t for rows in opened for t in rows.bm25_terms],
        np.concatenate([rows.bm25_lengths for rows in opened]) if opened else np.empty(0),
    )


def _only_documents(rows: ChildRows, doc_ids: set[str]) -> ChildRows:
    """The rows (and parents) of the given documents only."""
    keep = [n for n, meta in enumerate(rows.metadatas) if meta.get(keys.DOC_ID) in doc_ids]
    terms = rows.bm25_terms
    return ChildRows(
        [rows.ids[n] for n in keep],
        [rows.texts[n] for n in keep],
        [rows.metadatas[n] for n in keep],
        rows.vectors[keep],
        {p: d for p, d in rows.parents.items() if d.metadata.get(keys.DOC_ID) in doc_ids},
        [terms[n] for n in keep],
        rows.bm25_lengths[keep],
    )
