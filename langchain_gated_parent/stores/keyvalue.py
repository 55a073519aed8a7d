"""Fast key reads of a LangChain byte store, for the reads every query makes."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_core.stores import BaseStore

__all__ = ["fast_mget"]


_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
"""Positional placeholders by DB-API ``paramstyle`` (SQLite's, psycopg's)."""


def fast_mget(store: BaseStore[str, bytes]) -> Callable[[list[str]], list[bytes | None]]:
    """``store.mget``, as one driver-level SQL statement when the store is LangChain's ``SQLStore``.

    ``SQLStore.mget`` builds an ORM session and compiles a statement per call, ~1 ms on SQLite,
    more than the read itself; a query reads a few keys several times, so these reads send
    plain SQL on the same table and connection pool instead.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.storage import SQLStore  # noqa: PLC0415

    from sqlalchemy import Engine  # noqa: PLC0415

    if not isinstance(store, SQLStore) or not isinstance(store.engine, Engine):
        return store.mget
    mark = _MARKS.get(store.engine.dialect.paramstyle)
    if mark is None:
        return store.mget
    engine, namespace = store.engine, store.namespace

    def mget(wanted: list[str]) -> list[bytes | None]:
        if not wanted:
            return []
        sql = (
            "SELECT key, value FROM langchain_key_value_stores "  # noqa: S608 (placeholders only)
            f"WHERE namespace = {mark} AND key IN ({', '.join([mark] * len(wanted))})"
        )
        with engine.connect() as conn:
            rows: dict[str, bytes] = dict(conn.exec_driver_sql(sql, (namespace, *wanted)).all())
        return [bytes(rows[k]) if k in rows else None for k in wanted]

    return mget
