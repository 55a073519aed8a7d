"""The index's own records: its config, one manifest per document, and a version stamp.

They live apart from the parents, in a key-value namespace of their own (in the same database
as a SQL docstore, so they share its durability), so the user's docstore holds parents only.

* ``config``: the settings the index was built with and the metadata keys its documents have.
* ``manifest:<doc_id>``: the ids a document owns and whether its last write finished
  (``pending`` while it is written, ``complete`` after; a crash leaves ``pending``).
* ``stamp``: ``seq`` (bumped when a write starts changing the stores and when it ends),
  ``writing`` (true in between), ``config`` (bumped when the config changes) and ``vectors``
  (true once a write has put vectors in the collections). A reader
  compares stamps taken before and after a read to know whether a write overlapped it, and
  re-reads the config only when its counter moved: one key read instead of a full re-read.

Only the holder of the writer lock (:mod:`~langchain_gated_parent.stores.lock`) writes here.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from langchain_gated_parent.stores.keyvalue import fast_keys, fast_mget
from langchain_gated_parent.stores.sections import SectionStore
from langchain_gated_parent.stores.undo import UndoStore

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from langchain_core.documents import Document
    from langchain_core.stores import BaseStore

    from langchain_gated_parent.stores.lock import WriterLock

CONFIG_KEY = "config"
MANIFEST_PREFIX = "manifest:"
STAMP_KEY = "stamp"
JOURNAL_NAMESPACE_SUFFIX = "/gated-parent-journal"
"""The journal's namespace is the docstore's plus this suffix (e.g. ``parents/gated-...``)."""
SECTIONS_NAMESPACE_SUFFIX = "/gated-parent-sections"
"""The section records' namespace (:mod:`~langchain_gated_parent.stores.sections`), likewise."""
UNDO_NAMESPACE_SUFFIX = "/gated-parent-undo"
"""The namespace of replaced documents' saved versions (:mod:`~.undo`), likewise."""
LOCK_FILE = "writer.lock"
LEGACY_CONFIG_KEY = "gp-config"
"""Where format 2 kept its config: in the docstore, beside the parents (refused when found)."""


@dataclass(frozen=True)
class Stamp:
    """The journal's version stamp (see the module docstring)."""

    seq: int = 0
    writing: bool = False
    config: int = 0
    vectors: bool = False
    """Whether any write has stored vectors yet.

    A process whose first read of a local Chroma collection finds it without any data on disk
    keeps failing that collection's reads ("Nothing found on disk") after another process
    writes to it; readers leave the collections alone until this is true.
    """

    @property
    def quiet(self) -> bool:
        """No write was changing the stores when this stamp was read."""
        return not self.writing


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True).encode()


class Journal:
    """Config, manifests and stamp on a byte store (a namespace of their own)."""

    def __init__(self, store: BaseStore[str, bytes]) -> None:
        """Keep records in ``store``; the records go through an encoder, the stamp does not.

        Config and manifests are written through an ``EncoderBackedStore`` (JSON), the same
        write path the docstore uses; the stamp is written to ``store`` directly: it is only
        a hint for readers and never decides what a document holds.
        """
        from langchain_classic.storage import EncoderBackedStore  # noqa: PLC0415

        self._raw = store
        self._read = fast_mget(store)
        self._keys = fast_keys(store)
        self._records: BaseStore[str, Any] = EncoderBackedStore(
            store,
            key_encoder=lambda key: key,
            value_serializer=_dumps,
            value_deserializer=json.loads,
        )

    # ------------------------------------------------------------------ config
    def config(self) -> dict[str, Any] | None:
        """The stored config, ``None`` for an index never written."""
        found: dict[str, Any] | None = self._records.mget([CONFIG_KEY])[0]
        return found

    def put_config(self, config: dict[str, Any], stamp: Stamp) -> Stamp:
        """Store the config and bump the stamp's config counter; returns the new stamp."""
        self._records.mset([(CONFIG_KEY, config)])
        return self.put_stamp(replace(stamp, seq=stamp.seq + 1, config=stamp.config + 1))

    # ------------------------------------------------------------------ manifests
    def manifests(self, doc_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The manifests of those documents the index holds (complete or not)."""
        found = self._records.mget([MANIFEST_PREFIX + d for d in doc_ids])
        return {d: m for d, m in zip(doc_ids, found, strict=True) if m is not None}

    def all_manifests(self) -> dict[str, dict[str, Any]]:
        """Every manifest, by document id."""
        return self.manifests(self.doc_ids())

    def doc_ids(self) -> list[str]:
        """Every document the index holds a manifest for."""
        return [key[len(MANIFEST_PREFIX) :] for key in self._raw.yield_keys(prefix=MANIFEST_PREFIX)]

    def few_doc_ids(self, limit: int) -> list[str] | None:
        """Every document the index holds a manifest for, if at most ``limit``; else ``None``.

        Reads at most ``limit + 1`` keys, whatever the size of the index.
        """
        found = self._keys(MANIFEST_PREFIX, limit + 1)
        return None if len(found) > limit else [key[len(MANIFEST_PREFIX) :] for key in found]

    def put_manifests(self, entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Write manifests, ``(doc_id, manifest)`` pairs, in one call."""
        self._records.mset([(MANIFEST_PREFIX + d, m) for d, m in entries])

    def delete_manifests(self, doc_ids: Sequence[str]) -> None:
        """Forget documents (their stores were emptied first)."""
        self._records.mdelete([MANIFEST_PREFIX + d for d in doc_ids])

    # ------------------------------------------------------------------ stamp
    def stamp(self) -> Stamp:
        """The current stamp (all zero for an index never written)."""
        raw = self._read([STAMP_KEY])[0]
        return Stamp(**json.loads(raw)) if raw is not None else Stamp()

    def put_stamp(self, stamp: Stamp) -> Stamp:
        """Store ``stamp``; returns it."""
        self._raw.mset([(STAMP_KEY, _dumps(asdict(stamp)))])
        return stamp

    def records(self) -> dict[str, Any]:
        """Every record but the stamp, by key (for tests and inspection)."""
        found = [key for key in self._raw.yield_keys() if key != STAMP_KEY]
        return dict(zip(found, self._records.mget(found), strict=True))


@dataclass(frozen=True)
class Placement:
    """Where an index keeps its journal and its writer lock, derived from its stores."""

    journal: Journal
    lock: WriterLock
    sections: SectionStore
    undo: UndoStore


def place(
    docstore: BaseStore[str, Document],
    directory: Path | None,
    *,
    index_name: str,
    sqlite_file: str,
) -> Placement | None:
    """Put the journal beside the docstore and the lock where every writer can see it.

    * A SQL docstore (:func:`~.docstore.sql_docstore`): the journal in its
      database under the namespace ``<docstore namespace>/gated-parent-journal``; the lock is
      a PostgreSQL advisory lock in that database, or else a lock file (in the index folder,
      or beside the SQLite file).
    * Any other docstore with an index folder: the journal in the SQLite file ``sqlite_file``
      of the folder, the lock file in the folder.
    * Neither: ``None`` (the caller keeps the journal in memory, or refuses).
    """
    from pathlib import Path  # noqa: PLC0415

    from langchain_gated_parent.stores.lock import (  # noqa: PLC0415
        FileWriterLock,
        PostgresWriterLock,
    )

    sql = sql_store_of(docstore)
    if sql is not None:
        journal = Journal(_sql_namespace(sql.engine, sql.namespace + JOURNAL_NAMESPACE_SUFFIX))
        sections = SectionStore(
            _sql_namespace(sql.engine, sql.namespace + SECTIONS_NAMESPACE_SUFFIX)
        )
        undo = UndoStore(_sql_namespace(sql.engine, sql.namespace + UNDO_NAMESPACE_SUFFIX))
        lock: WriterLock
        if sql.engine.dialect.name == "postgresql":
            lock = PostgresWriterLock(sql.engine, f"{sql.namespace}:{index_name}")
        elif directory is not None:
            lock = FileWriterLock(directory / LOCK_FILE)
        elif sql.engine.url.database:
            lock = FileWriterLock(Path(f"{sql.engine.url.database}.{LOCK_FILE}"))
        else:
            return None
        return Placement(journal, lock, sections=sections, undo=undo)
    if directory is not None:
        engine = _sqlite_engine(directory / sqlite_file)
        journal = Journal(_sql_namespace(engine, "parents" + JOURNAL_NAMESPACE_SUFFIX))
        sections = SectionStore(_sql_namespace(engine, "parents" + SECTIONS_NAMESPACE_SUFFIX))
        undo = UndoStore(_sql_namespace(engine, "parents" + UNDO_NAMESPACE_SUFFIX))
        return Placement(
            journal, FileWriterLock(directory / LOCK_FILE), sections=sections, undo=undo
        )
    return None


def in_memory() -> Placement:
    """A journal and a lock for an index that lives in this process only."""
    from langchain_core.stores import InMemoryByteStore  # noqa: PLC0415

    from langchain_gated_parent.stores.lock import ProcessWriterLock  # noqa: PLC0415

    return Placement(
        Journal(InMemoryByteStore()),
        ProcessWriterLock(),
        sections=SectionStore(InMemoryByteStore()),
        undo=UndoStore(InMemoryByteStore()),
    )


def sql_store_of(docstore: BaseStore[str, Document]) -> Any:
    """The ``SQLStore`` under a docstore made by ``sql_docstore``, else ``None``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.storage import SQLStore  # noqa: PLC0415

    inner = getattr(docstore, "store", None)
    if isinstance(inner, SQLStore) and inner.engine is not None:
        return inner
    return None


def _sql_namespace(engine: Any, namespace: str) -> BaseStore[str, bytes]:
    from langchain_gated_parent.stores.sql_store import BatchSQLStore  # noqa: PLC0415

    store = BatchSQLStore(namespace=namespace, engine=engine)
    create_table(store)
    return store


SCHEMA_ATTEMPTS = 3


def create_table(store: Any) -> None:
    """``SQLStore.create_schema`` that survives another process creating the table at once.

    Its ``CREATE TABLE`` runs after a check that the table is missing; when several processes
    open a new PostgreSQL database together, all but one fail ("duplicate key value violates
    unique constraint"). A retry finds the table and creates nothing.
    """
    from sqlalchemy.exc import IntegrityError, ProgrammingError  # noqa: PLC0415

    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            store.create_schema()
        except (IntegrityError, ProgrammingError):  # noqa: PERF203 (a bounded retry loop)
            if attempt == SCHEMA_ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
        else:
            return


def _sqlite_engine(path: Path) -> Any:
    from sqlalchemy import create_engine  # noqa: PLC0415

    return create_engine(f"sqlite:///{path}")
