"""LangChain's ``SQLStore``, writing a batch of keys in one statement (the index's SQL stores).

Imported when a SQL store is made (it loads SQLAlchemy and langchain-community).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from langchain_gated_parent.stores.keyvalue import PLACEHOLDERS, TABLE

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.storage import SQLStore

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["BatchSQLStore"]

DELETE_CHUNK = 500
"""Keys per ``DELETE`` statement, under SQLite's smallest limit on bound values (999)."""


class BatchSQLStore(SQLStore):
    """``SQLStore`` whose ``mset`` sends its rows to the driver with one ``executemany``.

    ``SQLStore.mset`` deletes the keys, then adds one ORM object per value: a write of a
    thousand parents spent more in the ORM than in the database. This deletes and inserts the
    same rows in one transaction of the engine's, so a reader sees all of a write or none of
    it, as before. The table, its rows and every other method are ``SQLStore``'s.
    """

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        """Write (or replace) these keys; the last value given for a key wins."""
        engine = self.engine
        if not isinstance(engine, Engine) or engine.dialect.paramstyle not in PLACEHOLDERS:
            super().mset(key_value_pairs)
            return
        mark = PLACEHOLDERS[engine.dialect.paramstyle]
        values = dict(key_value_pairs)
        if not values:
            return
        keys = list(values)
        with engine.begin() as conn:
            for start in range(0, len(keys), DELETE_CHUNK):
                chunk = keys[start : start + DELETE_CHUNK]
                conn.exec_driver_sql(
                    f"DELETE FROM {TABLE} WHERE namespace = {mark} "  # noqa: S608
                    f"AND key IN ({', '.join([mark] * len(chunk))})",
                    (self.namespace, *chunk),
                )
            conn.exec_driver_sql(
                f"INSERT INTO {TABLE} (namespace, key, value) VALUES ({mark}, {mark}, {mark})",  # noqa: S608
                [(self.namespace, key, value) for key, value in values.items()],
            )
