"""The sparse index: full-text search over parents, inside the docstore's own database.

Dense parent vectors miss a section whose question turns on a rare word (a dataset name, an
acronym); a term index over the whole collection finds it. It lives in the database that
already holds the parents, so it needs no store of its own, is written by the same journalled
writes under the same writer lock (a crash leaves a pending manifest, and rolling that back
deletes these rows too), and is never rebuilt when a process opens the index:

* SQLite (a folder index): an FTS5 table ranked by its ``bm25()`` (which returns *negative*
  scores, lower is better: they are negated here). A search across the whole collection
  computes that ranking from postings kept in memory (:mod:`~.postings`).
* PostgreSQL (the SQL docstore): a ``tsvector`` column with a GIN index, ranked by
  ``ts_rank`` with length normalisation.

Scores are returned raw (higher is better); the retriever puts them on a common scale with the
dense scores (:func:`~langchain_gated_parent.scoring.max_scaled`).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from langchain_gated_parent.lexical import tokenize
from langchain_gated_parent.stores.postings import FTS5_TOKENIZER, CachedPostings
from langchain_gated_parent.stores.stored_postings import StoredPostings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.documents import Document
    from langchain_core.stores import BaseStore
    from numpy.typing import NDArray

    from langchain_gated_parent.stores.journal import Stamp

__all__ = ["SparseIndex", "SparseRow", "open_sparse", "query_terms"]

SCHEMA_ATTEMPTS = 3
MAX_QUERY_TERMS = 32
"""Longer questions keep their first 32 distinct terms (a term costs one posting-list walk)."""


@dataclass(frozen=True)
class SparseRow:
    """One parent as the sparse index sees it."""

    parent_id: str
    doc_id: str
    text: str
    """What is matched: the document title, the heading path and the section's text."""


class SparseIndex(Protocol):
    """A term index over parents: written with them, searched by the gate."""

    in_process: bool
    """Whether a search runs in the calling process (rather than waiting on a server)."""

    def upsert(self, rows: Sequence[SparseRow]) -> None:
        """Index (or re-index) these parents."""
        ...

    def delete(self, parent_ids: Sequence[str]) -> None:
        """Forget these parents (unknown ids are ignored)."""
        ...

    def search(
        self, query: str, n: int, doc_ids: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``n`` best ``(parent_id, score)``, best first, scores > 0; ``doc_ids`` filters.

        Equal scores go by parent id, whatever order the rows were written in.
        """
        ...

    def count(self) -> int:
        """How many parents are indexed."""
        ...

    def observe(self, stamp: Stamp) -> None:
        """The index's version a reader just saw (what was kept of another one is dropped)."""
        ...

    def rows(self) -> list[tuple[str, str, str]]:
        """Every ``(parent_id, doc_id, indexed text)``, by parent id (to check consistency)."""
        ...

    def parent_ids(self) -> set[str]:
        """Every parent with a row (for :meth:`~..index.GatedParentIndex.verify`)."""
        ...

    def out_of_step_terms(self) -> list[str]:
        """Terms whose stored postings differ from the term index's own (for ``verify``)."""
        ...


def query_terms(query: str) -> list[str]:
    """The distinct terms of a question (the package's tokenizer: stop words dropped)."""
    return list(dict.fromkeys(tokenize(query)))[:MAX_QUERY_TERMS]


def _table_suffix(namespace: str) -> str:
    safe = re.sub(r"[^a-z0-9]", "_", namespace.lower())[:24]
    return f"{safe}_{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"  # noqa: S324 (a name)


class SqliteSparseIndex:
    """FTS5 over parents, in the folder index's SQLite file.

    Two tables: ``<name>_ids`` maps parent ids to integer row ids (a primary key, so deletes
    are lookups), and the FTS5 table holds the text under that row id. Each write also stores
    its terms' postings (:mod:`~.stored_postings`), from which a term's postings are read into
    memory (up to ``postings_bytes``; 0: every search asks FTS5); an ``fts5vocab`` view of the
    FTS5 table (no data of its own) lists them for an index written before they were stored.
    """

    in_process = True

    def __init__(self, engine: Any, namespace: str, *, postings_bytes: int = 0) -> None:
        """Create the tables if missing."""
        from sqlalchemy import text  # noqa: PLC0415

        self._engine = engine
        suffix = _table_suffix(namespace)
        self._ids = f"sparse_ids_{suffix}"
        self._fts = f"sparse_fts_{suffix}"
        self._vocab = vocab = f"sparse_terms_{suffix}"
        self._stored = StoredPostings(suffix, tokenizer=FTS5_TOKENIZER)
        self._postings = CachedPostings(
            engine,
            fts=self._fts,
            ids=self._ids,
            vocab=vocab,
            stored=self._stored,
            budget=postings_bytes,
        )
        with engine.begin() as conn:
            conn.execute(
                text(
                    f"CREATE TABLE IF NOT EXISTS {self._ids} "
                    "(id INTEGER PRIMARY KEY, parent_id TEXT UNIQUE NOT NULL, doc_id TEXT NOT NULL)"
                )
            )
            conn.execute(
                text(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._fts} USING fts5"
                    f"(body, tokenize = '{FTS5_TOKENIZER}')"
                )
            )
            conn.execute(
                text(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS {vocab} "
                    f"USING fts5vocab({self._fts}, 'instance')"
                )
            )
            for statement in self._stored.schema():
                conn.execute(text(statement))

    def upsert(self, rows: Sequence[SparseRow]) -> None:
        """Replace each parent's row (delete, then insert under a new row id, in one transaction).

        The new rows' postings are stored in the same transaction.
        """
        if not rows:
            return
        with self._engine.begin() as conn:
            self._delete(conn, [r.parent_id for r in rows])
            rowids = self._stored.next_rows(conn, self._fts, len(rows), lambda: self._live(conn))
            conn.exec_driver_sql(
                f"INSERT INTO {self._ids} (id, parent_id, doc_id) VALUES (?, ?, ?)",  # noqa: S608
                [(i, r.parent_id, r.doc_id) for i, r in zip(rowids, rows, strict=True)],
            )
            written = [(i, r.text) for i, r in zip(rowids, rows, strict=True)]
            conn.exec_driver_sql(
                f"INSERT INTO {self._fts} (rowid, body) VALUES (?, ?)",  # noqa: S608
                written,
            )
            self._stored.add(conn, written, lambda: self._live(conn))

    def delete(self, parent_ids: Sequence[str]) -> None:
        """Delete the rows of these parents."""
        if not parent_ids:
            return
        with self._engine.begin() as conn:
            self._delete(conn, parent_ids)

    def _live(self, conn: Any) -> NDArray[np.bool_]:
        """Whether each row id is a row's, by row id."""
        ids = np.fromiter(
            (i for (i,) in conn.exec_driver_sql(f"SELECT id FROM {self._ids}")),  # noqa: S608
            dtype=np.int64,
        )
        alive = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype=bool)
        alive[ids] = True
        return alive

    def _delete(self, conn: Any, parent_ids: Sequence[str]) -> None:
        from sqlalchemy import bindparam, text  # noqa: PLC0415

        ids = text(f"SELECT id FROM {self._ids} WHERE parent_id IN :p").bindparams(  # noqa: S608
            bindparam("p", expanding=True)
        )
        rowids = [r[0] for r in conn.execute(ids, {"p": list(parent_ids)})]
        if not rowids:
            return
        for table in (self._fts, self._ids):
            column = "rowid" if table == self._fts else "id"
            conn.execute(
                text(f"DELETE FROM {table} WHERE {column} IN :r").bindparams(  # noqa: S608
                    bindparam("r", expanding=True)
                ),
                {"r": rowids},
            )

    def search(
        self, query: str, n: int, doc_ids: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """FTS5 ``bm25()`` over any of the question's terms (negated: higher is better).

        Across the collection it is computed from the postings kept in memory; with a filter
        (a few documents' rows), or while a write is under way, FTS5 ranks. Equal scores go
        by parent id on every path, as in PostgreSQL, not by the order rows were written. Sent
        as driver SQL (no statement compiled per query): the gate runs this on every query, and
        compiling cost a quarter of it.
        """
        terms = query_terms(query)
        if not terms or n < 1:
            return []
        if doc_ids is None and self._postings.ready:
            return self._postings.search(terms, n)
        match = " OR ".join(f'"{t}"' for t in terms)
        fts, ids = self._fts, self._ids
        if doc_ids is None:
            # Rank inside FTS5, then look up the ids of the best n and one more only, not of
            # every match: only a tie at the cut needs every match's id.
            best = self._ranked(
                f"SELECT d.parent_id, -h.r FROM (SELECT rowid AS id, bm25({fts}) AS r "  # noqa: S608
                f"FROM {fts} WHERE {fts} MATCH ? ORDER BY r LIMIT ?) h JOIN {ids} d ON d.id = h.id",
                (match, n + 1),
            )
            if len(best) <= n or best[n][1] != best[n - 1][1]:
                return best[:n]
        documents = "" if doc_ids is None else f"AND d.doc_id IN ({', '.join('?' * len(doc_ids))}) "
        return self._ranked(
            f"SELECT d.parent_id, -bm25({fts}) FROM {fts} JOIN {ids} d ON d.id = {fts}.rowid "  # noqa: S608
            f"WHERE {fts} MATCH ? {documents}ORDER BY bm25({fts}), d.parent_id LIMIT ?",
            (match, *(doc_ids or ()), n),
        )

    def _ranked(self, sql: str, values: tuple[Any, ...]) -> list[tuple[str, float]]:
        """A term search's ``(parent_id, score)`` rows, best first, ties by parent id."""
        with self._engine.connect() as conn:
            rows = conn.exec_driver_sql(sql, values).all()
        return sorted(((str(p), float(s)) for p, s in rows), key=lambda row: (-row[1], row[0]))

    def count(self) -> int:
        """Rows in the index."""
        from sqlalchemy import text  # noqa: PLC0415

        with self._engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {self._ids}")).scalar_one())  # noqa: S608

    def observe(self, stamp: Stamp) -> None:
        """Drop the postings kept of another version."""
        self._postings.observe(stamp)

    def rows(self) -> list[tuple[str, str, str]]:
        """Every row with its text, by parent id."""
        from sqlalchemy import text  # noqa: PLC0415

        sql = text(
            f"SELECT d.parent_id, d.doc_id, f.body FROM {self._ids} d "  # noqa: S608
            f"JOIN {self._fts} f ON f.rowid = d.id ORDER BY d.parent_id"
        )
        with self._engine.connect() as conn:
            return [(str(p), str(d), str(b)) for p, d, b in conn.execute(sql)]

    def parent_ids(self) -> set[str]:
        """Every parent with a row."""
        from sqlalchemy import text  # noqa: PLC0415

        with self._engine.connect() as conn:
            return {str(p) for (p,) in conn.execute(text(f"SELECT parent_id FROM {self._ids}"))}  # noqa: S608

    def out_of_step_terms(self) -> list[str]:
        """Terms whose stored postings (of rows that exist) differ from FTS5's own index."""
        with self._engine.connect() as conn:
            return self._stored.out_of_step(conn, self._vocab, self._live(conn))


class PostgresSparseIndex:
    """PostgreSQL full-text search over parents: a ``tsvector`` column with a GIN index."""

    in_process = False

    def __init__(self, engine: Any, namespace: str) -> None:
        """Create the table and its index if missing."""
        from sqlalchemy import text  # noqa: PLC0415
        from sqlalchemy.exc import IntegrityError, ProgrammingError  # noqa: PLC0415

        self._engine = engine
        self._table = f"gated_sparse_{_table_suffix(namespace)}"
        statements = (
            (
                f"CREATE TABLE IF NOT EXISTS {self._table} (parent_id TEXT PRIMARY KEY, "
                "doc_id TEXT NOT NULL, body TSVECTOR NOT NULL)"
            ),
            f"CREATE INDEX IF NOT EXISTS {self._table}_body ON {self._table} USING GIN (body)",
            f"CREATE INDEX IF NOT EXISTS {self._table}_doc ON {self._table} (doc_id)",
        )
        # Processes opening a new database together race on CREATE ... IF NOT EXISTS (the
        # catalog's unique constraint fails for all but one): a retry finds the table.
        for attempt in range(1, SCHEMA_ATTEMPTS + 1):
            try:
                with engine.begin() as conn:
                    for statement in statements:
                        conn.execute(text(statement))
            except (IntegrityError, ProgrammingError):  # noqa: PERF203 (a bounded retry)
                if attempt == SCHEMA_ATTEMPTS:
                    raise
                time.sleep(0.05 * attempt)
            else:
                return

    def upsert(self, rows: Sequence[SparseRow]) -> None:
        """Insert or replace each parent's row."""
        from sqlalchemy import text  # noqa: PLC0415

        if not rows:
            return
        with self._engine.begin() as conn:
            conn.execute(
                text(
                    f"INSERT INTO {self._table} (parent_id, doc_id, body) "  # noqa: S608
                    "VALUES (:p, :d, to_tsvector('english', :b)) ON CONFLICT (parent_id) DO "
                    "UPDATE SET doc_id = EXCLUDED.doc_id, body = EXCLUDED.body"
                ),
                [{"p": r.parent_id, "d": r.doc_id, "b": r.text} for r in rows],
            )

    def delete(self, parent_ids: Sequence[str]) -> None:
        """Delete the rows of these parents."""
        from sqlalchemy import bindparam, text  # noqa: PLC0415

        if not parent_ids:
            return
        with self._engine.begin() as conn:
            conn.execute(
                text(f"DELETE FROM {self._table} WHERE parent_id IN :p").bindparams(  # noqa: S608
                    bindparam("p", expanding=True)
                ),
                {"p": list(parent_ids)},
            )

    def search(
        self, query: str, n: int, doc_ids: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """``ts_rank`` (normalised by log length) over any of the question's terms."""
        from sqlalchemy import bindparam, text  # noqa: PLC0415

        terms = query_terms(query)
        if not terms or n < 1:
            return []
        values: dict[str, Any] = {"q": " | ".join(terms), "n": n}
        where = ""
        if doc_ids is not None:
            where = "AND doc_id IN :docs"
            values["docs"] = list(doc_ids)
        sql = text(
            "SELECT parent_id, ts_rank(body, q, 1) AS score "  # noqa: S608
            f"FROM {self._table}, to_tsquery('english', :q) q WHERE body @@ q {where} "
            "ORDER BY score DESC, parent_id LIMIT :n"
        )
        if doc_ids is not None:
            sql = sql.bindparams(bindparam("docs", expanding=True))
        with self._engine.connect() as conn:
            return [(str(p), float(s)) for p, s in conn.execute(sql, values)]

    def count(self) -> int:
        """Rows in the index."""
        from sqlalchemy import text  # noqa: PLC0415

        with self._engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {self._table}")).scalar_one())  # noqa: S608

    def observe(self, stamp: Stamp) -> None:
        """Nothing is kept between searches: PostgreSQL ranks each one."""

    def out_of_step_terms(self) -> list[str]:
        """None: PostgreSQL stores no postings of its own beside its index."""
        return []

    def rows(self) -> list[tuple[str, str, str]]:
        """Every row with its ``tsvector`` as text, by parent id."""
        from sqlalchemy import text  # noqa: PLC0415

        sql = text(f"SELECT parent_id, doc_id, body::text FROM {self._table} ORDER BY parent_id")  # noqa: S608
        with self._engine.connect() as conn:
            return [(str(p), str(d), str(b)) for p, d, b in conn.execute(sql)]

    def parent_ids(self) -> set[str]:
        """Every parent with a row."""
        from sqlalchemy import text  # noqa: PLC0415

        with self._engine.connect() as conn:
            return {str(p) for (p,) in conn.execute(text(f"SELECT parent_id FROM {self._table}"))}  # noqa: S608


def open_sparse(
    docstore: BaseStore[str, Document], index_name: str, *, postings_bytes: int = 0
) -> SparseIndex | None:
    """The sparse index in the docstore's database, or ``None`` if it has none.

    A SQL docstore (SQLite file or PostgreSQL) holds it; any other docstore (in memory, a
    custom store) has no database to put it in, and the gate then runs without it.
    ``postings_bytes``: how much of its terms' postings a SQLite index keeps in memory.
    """
    from langchain_gated_parent.stores.journal import sql_store_of  # noqa: PLC0415

    sql = sql_store_of(docstore)
    if sql is None:
        return None
    namespace = f"{sql.namespace}:{index_name}"
    dialect = sql.engine.dialect.name
    if dialect == "postgresql":
        return PostgresSparseIndex(sql.engine, namespace)
    if dialect == "sqlite" and sql.engine.url.database not in (None, "", ":memory:"):
        return SqliteSparseIndex(sql.engine, namespace, postings_bytes=postings_bytes)
    return None
