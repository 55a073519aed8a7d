"""Each term's postings, written with the rows they come from, beside the FTS5 table.

FTS5 keeps a term's occurrences, one per word in the text, and reading them through its
``fts5vocab`` view walks every one: a common word's first read in a process cost about what a
whole FTS5 query does. So each write also stores, for each term of the rows it adds, those rows
and how often the term occurs in each, packed as two arrays in one table row per term and write
(a *batch*). A term's first read is then one statement for a few blobs.

Written in the same transaction as the FTS5 rows, so a crash leaves both or neither. Rows are
never rewritten: a deleted row's postings stay until a merge drops them, and a reader drops
them by the row table (:mod:`~.postings`). Row ids are never reused (the write counts them
here), so a stale posting cannot name a new row. Batches are merged as they come, four of one
size class into one, so a term has a few batches however many writes there were. An index
written before stored postings gets them at its next write, built from the FTS5 rows it
holds; until then its terms are read from FTS5.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from numpy.typing import NDArray

__all__ = ["MAX_ROW_ID", "StoredPostings"]

ROW_DTYPE = "<u4"
COUNT_DTYPE = "<u4"
"""A posting takes 8 bytes: a row id and the term's occurrences in the row."""
ITEM_BYTES = 4
"""Bytes of one row id and of one count (a term's two blobs are cut at the same offsets)."""
MAX_ROW_ID = 2**32 - 1
"""The last row id a posting can hold."""
FANOUT = 4
"""Batches of one size class merged into one (see :meth:`StoredPostings._merge`)."""
BUILD_ROWS = 1024
"""Rows tokenized at once when an index written before stored postings gets them."""
COMPLETE = "complete"
NEXT_ROW = "next_row"
"""State keys: the postings cover every row; the id the next row gets."""


class StoredPostings:
    """The stored postings of one FTS5 table: written with its rows, read a term at a time."""

    def __init__(self, suffix: str, *, tokenizer: str) -> None:
        """Name the tables after the sparse index's (``suffix``); ``tokenizer`` is FTS5's."""
        self.postings = f"sparse_postings_{suffix}"
        self.batches = f"sparse_batches_{suffix}"
        self.state = f"sparse_state_{suffix}"
        self._tokenizer = tokenizer

    def schema(self) -> list[str]:
        """The statements that create the tables, if missing."""
        create = "CREATE TABLE IF NOT EXISTS"
        return [
            (
                f"{create} {self.postings} (term TEXT NOT NULL, batch INTEGER NOT NULL, "
                "rows BLOB NOT NULL, counts BLOB NOT NULL, PRIMARY KEY (term, batch)) WITHOUT ROWID"
            ),
            f"{create} {self.batches} (batch INTEGER PRIMARY KEY, postings INTEGER NOT NULL)",
            f"{create} {self.state} (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
        ]

    # ------------------------------------------------------------------ writing (one transaction)
    def next_rows(self, conn: Any, fts: str, count: int, live: Callable[[], Any]) -> list[int]:
        """Ids for ``count`` new rows, never given before; the postings are made whole first.

        ``fts`` is the FTS5 table: an index written before stored postings has its rows
        tokenized here, once, so that from now on every row has its postings stored. ``live``
        gives the ids of the rows that exist (see :meth:`add`).
        """
        state = dict(conn.exec_driver_sql(f"SELECT key, value FROM {self.state}").all())  # noqa: S608
        if COMPLETE not in state:
            state[NEXT_ROW] = self._build(conn, fts, live)
        first = int(state[NEXT_ROW])
        if first + count - 1 > MAX_ROW_ID:
            msg = (
                f"the sparse index has given {first - 1} row ids and its postings hold at most "
                f"{MAX_ROW_ID}; rebuild the index into a new directory"
            )
            raise ValueError(msg)
        conn.exec_driver_sql(
            f"INSERT OR REPLACE INTO {self.state} (key, value) VALUES (?, ?), (?, ?)",  # noqa: S608
            (COMPLETE, 1, NEXT_ROW, first + count),
        )
        return list(range(first, first + count))

    def add(self, conn: Any, rows: Sequence[tuple[int, str]], live: Callable[[], Any]) -> None:
        """Store the postings of new rows ``(row id, text)`` as a batch, then merge batches.

        ``live`` gives the ids of the rows that exist (a merge drops the others' postings).
        """
        postings = _postings_of(rows, self._tokenizer)
        if not postings.terms:
            return
        (last,) = conn.exec_driver_sql(f"SELECT coalesce(max(batch), 0) FROM {self.batches}").one()  # noqa: S608
        self._write(conn, int(last) + 1, postings)
        self._merge(conn, live)

    def _build(self, conn: Any, fts: str, live: Callable[[], Any]) -> int:
        """Postings for every row the FTS5 table holds; returns the id the next row gets."""
        (top,) = conn.exec_driver_sql(f"SELECT coalesce(max(rowid), 0) FROM {fts}").one()  # noqa: S608
        conn.exec_driver_sql(f"DELETE FROM {self.postings}")  # noqa: S608
        conn.exec_driver_sql(f"DELETE FROM {self.batches}")  # noqa: S608
        after, batch = 0, 0
        while True:
            rows = conn.exec_driver_sql(
                f"SELECT rowid, body FROM {fts} WHERE rowid > ? ORDER BY rowid LIMIT ?",  # noqa: S608
                (after, BUILD_ROWS),
            ).all()
            if not rows:
                return int(top) + 1
            batch += 1
            texts = [(int(row), str(body)) for row, body in rows]
            self._write(conn, batch, _postings_of(texts, self._tokenizer))
            self._merge(conn, live)
            after = int(rows[-1][0])

    def _write(self, conn: Any, batch: int, postings: _Packed) -> None:
        conn.exec_driver_sql(
            f"INSERT INTO {self.postings} (term, batch, rows, counts) VALUES (?, ?, ?, ?)",  # noqa: S608
            [(term, batch, rows, counts) for term, rows, counts in postings.blobs()],
        )
        conn.exec_driver_sql(
            f"INSERT INTO {self.batches} (batch, postings) VALUES (?, ?)",  # noqa: S608
            (batch, len(postings.rows)),
        )

    def _merge(self, conn: Any, live: Callable[[], Any]) -> None:
        """Merge the newest :data:`FANOUT` batches into one while they are of one size class.

        A size class is a power of :data:`FANOUT`, so a term has at most ``FANOUT - 1`` batches
        per class (a few in all), and each posting is rewritten once per class it climbs.
        """
        batches = conn.exec_driver_sql(
            f"SELECT batch, postings FROM {self.batches} ORDER BY batch"  # noqa: S608
        ).all()
        alive: NDArray[np.bool_] | None = None
        while len(batches) >= FANOUT and _size_class(batches[-FANOUT][1]) <= _size_class(
            batches[-1][1]
        ):
            merging = [batch for batch, _ in batches[-FANOUT:]]
            if alive is None:
                alive = live()
            marks = ", ".join("?" * FANOUT)
            found = conn.exec_driver_sql(
                f"SELECT term, rows, counts FROM {self.postings} WHERE batch IN ({marks}) "  # noqa: S608
                "ORDER BY term, batch",
                tuple(merging),
            ).all()
            for table in (self.postings, self.batches):
                conn.exec_driver_sql(
                    f"DELETE FROM {table} WHERE batch IN ({marks})",  # noqa: S608
                    tuple(merging),
                )
            merged = _Packed.of_blobs(found).only(alive)
            self._write(conn, merging[0], merged)
            batches[-FANOUT:] = [(merging[0], len(merged.rows))]

    # ------------------------------------------------------------------ reading
    def out_of_step(self, conn: Any, vocab: str, alive: NDArray[np.bool_]) -> list[str]:
        """Terms whose stored postings of the rows that exist differ from FTS5's own index.

        ``vocab`` is the FTS5 table's ``fts5vocab`` instance view, ``alive`` marks the rows
        that exist. Empty until the postings are complete (nothing is read from them before).
        """
        if not self.complete(lambda sql, values: conn.exec_driver_sql(sql, values).all()):
            return []
        stored = _Packed.of_blobs(
            conn.exec_driver_sql(
                f"SELECT term, rows, counts FROM {self.postings} ORDER BY term, batch"  # noqa: S608
            ).all()
        ).only(alive)
        listed = _Packed.of_vocabulary(
            conn.exec_driver_sql(
                f"SELECT term, group_concat(doc) FROM {vocab} GROUP BY term"  # noqa: S608
            ).all()
        )
        kept, indexed = stored.by_term(), listed.by_term()
        return sorted(
            term
            for term in kept.keys() | indexed.keys()
            if term not in kept or term not in indexed or kept[term] != indexed[term]
        )

    def complete(self, run: Callable[[str, tuple[Any, ...]], Sequence[Any]]) -> bool:
        """Whether every row's postings are stored (false for an index not written since)."""
        return bool(run(f"SELECT 1 FROM {self.state} WHERE key = ?", (COMPLETE,)))  # noqa: S608

    def read(
        self, run: Callable[[str, tuple[Any, ...]], Sequence[Any]], term: str
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """The rows ``term`` occurs in (deleted ones too), and how often in each."""
        found = run(f"SELECT rows, counts FROM {self.postings} WHERE term = ?", (term,))  # noqa: S608
        rows = np.frombuffer(b"".join(r for r, _ in found), ROW_DTYPE).astype(np.int64)
        counts = np.frombuffer(b"".join(c for _, c in found), COUNT_DTYPE).astype(np.float64)
        return rows, counts


def vocabulary_postings(
    run: Callable[[str, tuple[Any, ...]], Sequence[Any]], vocab: str, term: str
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The rows ``term`` occurs in, and how often, from FTS5's ``fts5vocab`` instance view.

    For an index whose postings are not stored yet. A common word occurs tens of thousands of
    times ("model": 46,224 at 1,169 QASPER papers); SQLite's GROUP BY over its rows sorts every
    occurrence, and a Python row per occurrence costs more still, so the row ids come back as
    one string, counted in numpy: 8-9 ms for "model" against 19 ms grouped in SQL (44 ms
    through SQLAlchemy's rows).
    """
    ((joined,),) = run(f"SELECT group_concat(doc) FROM {vocab} WHERE term = ?", (term,))  # noqa: S608
    postings = _Packed.of_vocabulary([(term, joined)] if joined else [])
    return postings.rows.astype(np.int64), postings.counts.astype(np.float64)


def _size_class(postings: int) -> int:
    """The power of :data:`FANOUT` below a batch's size."""
    return int(math.log(max(postings, 1), FANOUT))


@dataclass(frozen=True)
class _Packed:
    """Postings of many terms as three arrays: term after term, each term's rows in order."""

    terms: list[str]
    rows: NDArray[np.integer[Any]]
    counts: NDArray[np.integer[Any]]
    sizes: NDArray[np.int64]
    """How many rows each term has."""

    @classmethod
    def of_blobs(cls, found: Sequence[tuple[str, bytes, bytes]]) -> _Packed:
        """Stored rows ``(term, rows, counts)``, ordered by term: one entry per term."""
        terms: list[str] = []
        sizes: list[int] = []
        for term, rows, _ in found:
            if terms and terms[-1] == term:
                sizes[-1] += len(rows) // ITEM_BYTES
            else:
                terms.append(term)
                sizes.append(len(rows) // ITEM_BYTES)
        return cls(
            terms,
            np.frombuffer(b"".join(rows for _, rows, _ in found), ROW_DTYPE),
            np.frombuffer(b"".join(counts for _, _, counts in found), COUNT_DTYPE),
            np.asarray(sizes, dtype=np.int64),
        )

    def only(self, alive: NDArray[np.bool_]) -> _Packed:
        """The postings of the rows ``alive`` marks (by row id); terms left with none dropped."""
        inside = self.rows < len(alive)
        keep = np.zeros(len(self.rows), dtype=bool)
        keep[inside] = alive[self.rows[inside]]
        term_of = np.repeat(np.arange(len(self.terms)), self.sizes)
        sizes = np.bincount(term_of[keep], minlength=len(self.terms))
        return _Packed(
            [t for t, n in zip(self.terms, sizes.tolist(), strict=True) if n],
            self.rows[keep],
            self.counts[keep],
            sizes[sizes > 0],
        )

    @classmethod
    def of_vocabulary(cls, grouped: Sequence[tuple[str, str]]) -> _Packed:
        """``(term, row ids joined by commas)`` from an ``fts5vocab`` instance view, by term.

        One row id per occurrence: the view lists a term's occurrences in row order, one per
        word, so each row's occurrences of a term are one run, counted in numpy.
        """
        if not grouped:
            empty = np.empty(0, dtype=np.int64)
            return cls([], empty, empty, empty)
        terms = [term for term, _ in grouped]
        sizes = [docs.count(",") + 1 for _, docs in grouped]
        occurrences = np.fromstring(",".join(docs for _, docs in grouped), dtype=np.int64, sep=",")
        term_starts = np.cumsum([0, *sizes[:-1]])
        first = np.ones(len(occurrences), dtype=bool)  # the first occurrence of a (term, row)
        first[1:] = occurrences[1:] != occurrences[:-1]
        first[term_starts] = True
        starts = np.flatnonzero(first)
        return cls(
            terms,
            occurrences[starts],
            np.diff(starts, append=len(occurrences)),
            np.add.reduceat(first.astype(np.int64), term_starts),
        )

    def by_term(self) -> dict[str, dict[int, int]]:
        """Each term's ``{row id: occurrences}`` (to compare two sets of postings)."""
        ends = np.cumsum(self.sizes).tolist()
        rows, counts = self.rows.tolist(), self.counts.tolist()
        return {
            term: dict(zip(rows[a:b], counts[a:b], strict=True))
            for term, a, b in zip(self.terms, [0, *ends][:-1], ends, strict=True)
        }

    def blobs(self) -> list[tuple[str, bytes, bytes]]:
        """Each term with its rows and counts as stored."""
        rows = self.rows.astype(ROW_DTYPE).tobytes()
        counts = self.counts.astype(COUNT_DTYPE).tobytes()
        ends = (ITEM_BYTES * np.cumsum(self.sizes)).tolist()
        starts = [0, *ends][:-1]
        return [
            (term, rows[a:b], counts[a:b])
            for term, a, b in zip(self.terms, starts, ends, strict=True)
        ]


def _postings_of(rows: Sequence[tuple[int, str]], tokenizer: str) -> _Packed:
    """Each term of the texts, with the row ids it occurs in and how often, as FTS5 counts.

    Tokenized by FTS5 itself (an in-memory table with the same tokenizer), so the terms and
    counts are the ones its own index holds.
    """
    db = sqlite3.connect(":memory:")
    try:
        db.execute(f"CREATE VIRTUAL TABLE s USING fts5(body, content='', tokenize = '{tokenizer}')")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(s, 'instance')")
        db.executemany("INSERT INTO s (rowid, body) VALUES (?, ?)", rows)
        grouped = db.execute("SELECT term, group_concat(doc) FROM v GROUP BY term")
        return _Packed.of_vocabulary(grouped.fetchall())
    finally:
        db.close()
