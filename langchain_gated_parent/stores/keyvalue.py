"""Fast key reads of a LangChain byte store, for the reads every query makes."""

from __future__ import annotations

import sqlite3
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.stores import BaseStore

__all__ = ["fast_mget"]


_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
"""Positional placeholders by DB-API ``paramstyle`` (SQLite's, psycopg's)."""
_SELECT = "SELECT key, value FROM langchain_key_value_stores WHERE namespace = {mark} AND key IN "


def fast_mget(store: BaseStore[str, bytes]) -> Callable[[list[str]], list[bytes | None]]:
    """``store.mget``, as one driver-level SQL statement when the store is LangChain's ``SQLStore``.

    ``SQLStore.mget`` builds an ORM session and compiles a statement per call, ~1 ms on SQLite,
    more than the read itself; a query reads a few keys several times, so these reads send
    plain SQL on the same table instead: through the engine's connection pool, or, for a
    SQLite file, on a connection of the reading thread's own (:class:`_SQLiteConnections`).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.storage import SQLStore  # noqa: PLC0415

    from sqlalchemy import Engine  # noqa: PLC0415

    if not isinstance(store, SQLStore) or not isinstance(store.engine, Engine):
        return store.mget
    engine, namespace = store.engine, store.namespace
    database = engine.url.database
    plain_file = not engine.url.query and database not in (None, "", ":memory:")
    run: Callable[[str, tuple[str, ...]], Sequence[Any]]
    if engine.dialect.name == "sqlite" and plain_file:  # its path, as SQLAlchemy resolves it
        mark, run = "?", _SQLiteConnections(str(Path(str(database)).resolve())).run
    elif engine.dialect.paramstyle in _MARKS:
        mark = _MARKS[engine.dialect.paramstyle]

        def run(sql: str, parameters: tuple[str, ...]) -> Sequence[Any]:
            with engine.connect() as conn:
                return conn.exec_driver_sql(sql, parameters).all()

    else:
        return store.mget

    def mget(wanted: list[str]) -> list[bytes | None]:
        if not wanted:
            return []
        sql = _SELECT.format(mark=mark) + f"({', '.join([mark] * len(wanted))})"
        rows: dict[str, Any] = dict(run(sql, (namespace, *wanted)))
        return [bytes(rows[k]) if k in rows else None for k in wanted]

    return mget


class _SQLiteConnections:
    """Statements on a SQLite file, each thread on a connection of its own.

    Checking a connection out of SQLAlchemy's pool costs four times the read of a few keys
    (about 100 µs against 25). Each connection is in autocommit mode, as the pool's are for a
    read: every statement reads the last committed state, and no transaction stays open
    between reads to hold back a writer. A thread's connection closes when the thread ends or
    when this object is dropped (with the index that made it).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._local = threading.local()

    def run(self, sql: str, parameters: tuple[str, ...]) -> list[Any]:
        """The rows of one statement, on this thread's connection."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self._path, isolation_level=None)
            self._local.connection = connection
        return connection.execute(sql, parameters).fetchall()
