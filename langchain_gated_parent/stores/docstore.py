"""Where parents are kept: any LangChain ``BaseStore[str, Document]``, and the ones the index makes.

A folder index keeps its parents in SQLite inside the folder; a scaled-out one in any SQL
database (:func:`sql_docstore`); an index on an ephemeral client in memory.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from langchain_gated_parent.stores import journal as journals

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_core.documents import Document
    from langchain_core.stores import BaseStore


def sqlite_docstore(path: Path, namespace: str = "parents") -> BaseStore[str, Document]:
    """A persistent docstore: LangChain's ``SQLStore`` on SQLite, holding Documents."""
    return sql_docstore(f"sqlite:///{path}", namespace)


def sql_docstore(url: str, namespace: str = "parents") -> BaseStore[str, Document]:
    """A Document store on any SQLAlchemy URL (``sqlite:///…``, ``postgresql+psycopg://…``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_classic.storage import create_kv_docstore  # noqa: PLC0415
        from langchain_community.storage import SQLStore  # noqa: PLC0415

    store = SQLStore(namespace=namespace, db_url=url)
    journals.create_table(store)
    return create_kv_docstore(store)


def memory_docstore() -> BaseStore[str, Document]:
    """Parents in this process's memory, for an index that lives no longer than it."""
    from langchain_core.stores import InMemoryStore  # noqa: PLC0415

    return InMemoryStore()
