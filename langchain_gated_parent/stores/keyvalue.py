"""Fast key reads of a LangChain byte store, for the reads every query makes."""

from __future__ import annotations

import itertools
import warnings
from typing import TYPE_CHECKING, Any

from langchain_gated_parent.stores.statements import statement_runner

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.stores import BaseStore

__all__ = ["fast_keys", "fast_mget"]


PLACEHOLDERS = {"qmark": "?", "format": "%s", "pyformat": "%s"}
"""Positional placeholders by DB-API ``paramstyle`` (SQLite's, psycopg's)."""
TABLE = "langchain_key_value_stores"
"""LangChain's ``SQLStore`` table: every namespace's keys and values."""
_SELECT = f"SELECT key, value FROM {TABLE} WHERE namespace = {{mark}} AND key IN "  # noqa: S608
_KEYS = (
    f"SELECT key FROM {TABLE} WHERE namespace = {{mark}} "  # noqa: S608
    "AND substr(key, 1, {mark}) = {mark} LIMIT {mark}"
)


def fast_mget(store: BaseStore[str, bytes]) -> Callable[[list[str]], list[bytes | None]]:
    """``store.mget``, as one driver-level SQL statement when the store is LangChain's ``SQLStore``.

    ``SQLStore.mget`` builds an ORM session and compiles a statement per call, ~1 ms on SQLite,
    more than the read itself; a query reads a few keys several times, so these reads send
    plain SQL on the same table instead (:func:`~.statements.statement_runner`).
    """
    driver = _driver(store)
    if driver is None:
        return store.mget
    namespace, mark, run = driver

    def mget(wanted: list[str]) -> list[bytes | None]:
        if not wanted:
            return []
        sql = _SELECT.format(mark=mark) + f"({', '.join([mark] * len(wanted))})"
        rows: dict[str, Any] = dict(run(sql, (namespace, *wanted)))
        return [bytes(rows[k]) if k in rows else None for k in wanted]

    return mget


def fast_keys(store: BaseStore[str, bytes]) -> Callable[[str, int], list[str]]:
    """At most ``limit`` keys starting with ``prefix``: ``store.yield_keys``, cut short.

    ``SQLStore.yield_keys`` loads every row of the namespace as an ORM object before the
    first key; asking whether an index holds a handful of documents must not cost a read of
    all of them, so the statement stops at ``limit``.
    """
    driver = _driver(store)
    if driver is None:
        return lambda prefix, limit: list(itertools.islice(store.yield_keys(prefix=prefix), limit))
    namespace, mark, run = driver
    sql = _KEYS.format(mark=mark)

    def keys(prefix: str, limit: int) -> list[str]:
        return [str(key) for (key,) in run(sql, (namespace, len(prefix), prefix, limit))]

    return keys


def _driver(
    store: BaseStore[str, bytes],
) -> tuple[str, str, Callable[[str, tuple[Any, ...]], Sequence[Any]]] | None:
    """``(namespace, placeholder, run)`` to query ``store``'s table directly, or ``None``.

    ``None`` unless the store is LangChain's ``SQLStore`` on a driver whose placeholders are
    known.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.storage import SQLStore  # noqa: PLC0415

    from sqlalchemy import Engine  # noqa: PLC0415

    if not isinstance(store, SQLStore) or not isinstance(store.engine, Engine):
        return None
    engine = store.engine
    if engine.dialect.paramstyle not in PLACEHOLDERS:
        return None
    return store.namespace, PLACEHOLDERS[engine.dialect.paramstyle], statement_runner(engine)
