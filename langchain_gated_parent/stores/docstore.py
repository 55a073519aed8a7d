"""Where parents are kept: any LangChain ``BaseStore[str, Document]``, and the ones the index makes.

A folder index keeps its parents in SQLite inside the folder; a scaled-out one in any SQL
database (:func:`sql_docstore`); an index on an ephemeral client in memory.
"""

from __future__ import annotations

import json
import warnings
from typing import TYPE_CHECKING

from langchain_gated_parent.stores import journal as journals
from langchain_gated_parent.stores.keyvalue import fast_mget

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from langchain_core.documents import Document
    from langchain_core.stores import BaseStore


def sqlite_docstore(path: Path, namespace: str = "parents") -> BaseStore[str, Document]:
    """A persistent docstore: LangChain's ``SQLStore`` on SQLite, holding Documents."""
    return sql_docstore(f"sqlite:///{path}", namespace)


def sql_docstore(url: str, namespace: str = "parents") -> BaseStore[str, Document]:
    """A Document store on any SQLAlchemy URL (``sqlite:///…``, ``postgresql+psycopg://…``).

    LangChain's ``SQLStore`` table and rows, written in batches (:mod:`~.sql_store`).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_classic.storage import create_kv_docstore  # noqa: PLC0415

    from langchain_gated_parent.stores.sql_store import BatchSQLStore  # noqa: PLC0415

    store = BatchSQLStore(namespace=namespace, db_url=url)
    journals.create_table(store)
    return create_kv_docstore(store)


def memory_docstore() -> BaseStore[str, Document]:
    """Parents in this process's memory, for an index that lives no longer than it."""
    from langchain_core.stores import InMemoryStore  # noqa: PLC0415

    return InMemoryStore()


def fast_docstore_mget(
    docstore: BaseStore[str, Document],
) -> Callable[[list[str]], list[Document | None]]:
    """``docstore.mget``, reading a :func:`sql_docstore`'s rows in one Core statement.

    A query reads a few parents; through ``SQLStore``'s ORM session that costs more than the
    read (see :func:`~.keyvalue.fast_mget`). Any other docstore is read through its ``mget``.
    """
    from langchain_classic.storage import EncoderBackedStore  # noqa: PLC0415

    if journals.sql_store_of(docstore) is None or not isinstance(docstore, EncoderBackedStore):
        return docstore.mget
    read, encode, load = (
        fast_mget(docstore.store),
        docstore.key_encoder,
        docstore.value_deserializer,
    )

    def mget(parent_ids: list[str]) -> list[Document | None]:
        found = read([encode(pid) for pid in parent_ids])
        return [None if raw is None else _plain_document(raw) or load(raw) for raw in found]

    return mget


_DOCUMENT_PATH = ["langchain", "schema", "document", "Document"]


def _plain_document(raw: bytes) -> Document | None:
    """A stored Document whose metadata is plain JSON, built without LangChain's reviver.

    ``create_kv_docstore`` stores ``dumps(document)``; reviving it checks every nested value
    against the allowed classes, which costs more than the rest of a query's parent read. A
    record with one serialized object in it (the Document) has nothing else to revive; any
    other (``None`` here) goes through the docstore's own deserializer.
    """
    from langchain_core.documents import Document  # noqa: PLC0415

    if raw.count(b'"lc":') != 1:
        return None
    parsed = json.loads(raw)
    if parsed.get("type") != "constructor" or parsed.get("id") != _DOCUMENT_PATH:
        return None
    return Document(**parsed["kwargs"])
