"""Plain SQL statements on an SQLAlchemy engine's database, at the cost of the read itself.

The reads every query makes (a few keys, a term's postings) take tens of microseconds in
SQLite; checking a connection out of SQLAlchemy's pool and running a statement through it
costs several times that (about 100 µs against 25 for a few keys). On a SQLite file these
statements run on a connection of the reading thread's own instead.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["statement_runner"]


def statement_runner(engine: Any) -> Callable[[str, tuple[Any, ...]], Sequence[Any]]:
    """``run(sql, parameters)``: the rows of one driver-level statement on ``engine``'s database.

    On a plain SQLite file (no URL options), on the calling thread's own connection
    (:class:`_ThreadConnections`); on any other database, through the engine's pool.
    """
    database = engine.url.database
    plain_file = not engine.url.query and database not in (None, "", ":memory:")
    if engine.dialect.name == "sqlite" and plain_file:  # its path, as SQLAlchemy resolves it
        return _ThreadConnections(str(Path(str(database)).resolve())).run

    def run(sql: str, parameters: tuple[Any, ...]) -> Sequence[Any]:
        with engine.connect() as conn:
            rows: Sequence[Any] = conn.exec_driver_sql(sql, parameters).all()
        return rows

    return run


class _ThreadConnections:
    """Statements on a SQLite file, each thread on a connection of its own.

    Each connection is in autocommit mode, as the pool's are for a read: every statement reads
    the last committed state, and no transaction stays open between reads to hold back a
    writer. A thread's connection closes when the thread ends or when this object is dropped
    (with the index that made it).
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._local = threading.local()

    def run(self, sql: str, parameters: tuple[Any, ...]) -> list[Any]:
        """The rows of one statement, on this thread's connection."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self._path, isolation_level=None)
            self._local.connection = connection
        return connection.execute(sql, parameters).fetchall()
