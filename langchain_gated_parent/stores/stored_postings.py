"""Each term's postings, written with the rows they come from, beside the FTS5 table.

FTS5 keeps a term's occurrences, one per word in the text, and reading them through its
``fts5vocab`` view walks every one: a common word's first read in a process cost about what a
whole FTS5 query does. So each write also stores, for each term of the rows it adds, those rows
and how often the term occurs in each, packed as two arrays in one table row per term and write
(a *batch*). A term's first read is then one statement for a few blobs.

Written in the same transaction as the FTS5 rows, so a crash leaves both or neither. Rows are
never rewritten: a deleted row's postings stay until a merge drops them, and a reader drops
them by the row table (:mod:`~.postings`). Row ids are never reused (the write counts them
here), so a stale posting cannot name a new row. Batches are merged as they come, the newest
into the one before while it is at least half its size, so a term has a few batches however
many writes there were. An index written before stored postings gets them at its next write,
built from the FTS5 rows it holds; until then its terms are read from FTS5.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from numpy.typing import NDArray

__all__ = ["MAX_ROW_ID", "StoredPostings"]

ROW_DTYPE = "<u4"
COUNT_DTYPE = "<u4"
"""A posting takes 8 bytes: a row id and the term's occurrences in the row."""
MAX_ROW_ID = 2**32 - 1
"""The last row id a posting can hold."""
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
    def next_rows(self, conn: Any, fts: str, count: int) -> list[int]:
        """Ids for ``count`` new rows, never given before; the postings are made whole first.

        ``fts`` is the FTS5 table: an index written before stored postings has its rows
        tokenized here, once, so that from now on every row has its postings stored.
        """
        state = dict(conn.exec_driver_sql(f"SELECT key, value FROM {self.state}").all())  # noqa: S608
        if COMPLETE not in state:
            state[NEXT_ROW] = self._build(conn, fts)
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
        if not postings:
            return
        (last,) = conn.exec_driver_sql(f"SELECT coalesce(max(batch), 0) FROM {self.batches}").one()  # noqa: S608
        self._write(conn, int(last) + 1, postings)
        self._merge(conn, live)

    def _build(self, conn: Any, fts: str) -> int:
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
            self._write(
                conn, batch, _postings_of([(int(r), str(b)) for r, b in rows], self._tokenizer)
            )
            after = int(rows[-1][0])

    def _write(self, conn: Any, batch: int, postings: dict[str, tuple[Any, Any]]) -> None:
        conn.exec_driver_sql(
            f"INSERT INTO {self.postings} (term, batch, rows, counts) VALUES (?, ?, ?, ?)",  # noqa: S608
            [
                (
                    term,
                    batch,
                    rows.astype(ROW_DTYPE).tobytes(),
                    counts.astype(COUNT_DTYPE).tobytes(),
                )
                for term, (rows, counts) in postings.items()
            ],
        )
        size = sum(len(rows) for rows, _ in postings.values())
        conn.exec_driver_sql(
            f"INSERT INTO {self.batches} (batch, postings) VALUES (?, ?)",  # noqa: S608
            (batch, size),
        )

    def _merge(self, conn: Any, live: Callable[[], Any]) -> None:
        """Merge the newest batch into the one before while it is at least half that one's size.

        Sizes then halve from the oldest batch to the newest, so a term has at most about
        log2(writes) batches, and each posting is rewritten about as often.
        """
        batches = conn.exec_driver_sql(
            f"SELECT batch, postings FROM {self.batches} ORDER BY batch"  # noqa: S608
        ).all()
        alive: NDArray[np.bool_] | None = None
        while len(batches) > 1 and 2 * batches[-1][1] >= batches[-2][1]:
            (older, _), (newer, _) = batches[-2], batches[-1]
            if alive is None:
                alive = live()
            merged: dict[str, list[tuple[bytes, bytes]]] = {}
            for term, rows, counts in conn.exec_driver_sql(
                f"SELECT term, rows, counts FROM {self.postings} WHERE batch IN (?, ?) "  # noqa: S608
                "ORDER BY term, batch",
                (older, newer),
            ):
                merged.setdefault(term, []).append((rows, counts))
            for table in (self.postings, self.batches):
                conn.exec_driver_sql(
                    f"DELETE FROM {table} WHERE batch IN (?, ?)",  # noqa: S608
                    (older, newer),
                )
            kept = {}
            for term, parts in merged.items():
                rows = np.frombuffer(b"".join(r for r, _ in parts), ROW_DTYPE)
                counts = np.frombuffer(b"".join(c for _, c in parts), COUNT_DTYPE)
                keep = _alive(rows, alive)
                if keep.any():
                    kept[term] = (rows[keep], counts[keep])
            self._write(conn, older, kept)
            batches[-2:] = [(older, sum(len(r) for r, _ in kept.values()))]

    # ------------------------------------------------------------------ reading
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


def _alive(rows: NDArray[Any], alive: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Which of ``rows`` are ids of rows that exist (``alive``: by row id)."""
    inside = rows < len(alive)
    keep = np.zeros(len(rows), dtype=bool)
    keep[inside] = alive[rows[inside]]
    return keep


def _postings_of(
    rows: Sequence[tuple[int, str]], tokenizer: str
) -> dict[str, tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Each term of the texts, with the row ids it occurs in and how often, as FTS5 counts.

    Tokenized by FTS5 itself (an in-memory table with the same tokenizer), so the terms and
    counts are the ones its own index holds.
    """
    if not rows:
        return {}
    db = sqlite3.connect(":memory:")
    try:
        db.execute(f"CREATE VIRTUAL TABLE s USING fts5(body, content='', tokenize = '{tokenizer}')")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(s, 'instance')")
        db.executemany("INSERT INTO s (rowid, body) VALUES (?, ?)", rows)
        grouped: dict[str, tuple[list[int], list[int]]] = {}
        for term, row, count in db.execute("SELECT term, doc, count(*) FROM v GROUP BY term, doc"):
            ids, counts = grouped.setdefault(term, ([], []))
            ids.append(row)
            counts.append(count)
    finally:
        db.close()
    return {
        term: (np.asarray(ids, dtype=np.int64), np.asarray(counts, dtype=np.int64))
        for term, (ids, counts) in grouped.items()
    }
