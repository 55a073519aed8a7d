"""The gated index: a docstore of parents beside Chroma collections of parent and child vectors.

One object owns the three stores and keeps them consistent.

Write order (why a crash never leaves an orphan): for each batch of documents the index first
records a *pending* manifest entry naming every id the documents had and will have, then deletes
stale children, stale parent vectors and stale parents (children first), then writes parents to
the docstore, parent vectors and child vectors (parents first), and last marks the entries
*complete*. At every instant a visible child has a visible parent.

Every write holds the index's writer lock (:mod:`~langchain_gated_parent.stores.lock`) from start
to end, so writers in other processes or on other machines wait their turn. A writer that finds
an entry still pending (a writer died mid-write) rolls it back first, inside the lock, by deleting
the ids it names: the document is absent, and re-running the same ingest converges to the state
of an uninterrupted run. Opening an index never changes it; readers skip documents whose write
is unfinished, and see what writers commit through the journal's version stamp
(:mod:`~langchain_gated_parent.stores.journal`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.records import ChildRows, ParentHits
from langchain_gated_parent.splitters import (
    ParagraphSplitter,
    SectionSplitter,
    child_id,
    split_document,
)
from langchain_gated_parent.stores import journal as journals
from langchain_gated_parent.stores.chroma import (
    ChromaVectors,
    filter_keys,
    is_durable,
    validate_filter,
)
from langchain_gated_parent.stores.docstore import memory_docstore, sqlite_docstore
from langchain_gated_parent.stores.lock import DEFAULT_LOCK_TIMEOUT, log_stale, opening
from langchain_gated_parent.stores.sparse import SparseRow, open_sparse

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings
    from langchain_core.stores import BaseStore
    from numpy.typing import NDArray

    from langchain_gated_parent.retriever import GatedParentRetriever
    from langchain_gated_parent.stores.journal import Journal, Placement
    from langchain_gated_parent.stores.sparse import SparseIndex

logger = logging.getLogger(__name__)

QUIET_READ_ATTEMPTS = 4
"""Reads of a gate's children that a write overlapped before only finished documents are kept."""

ParentRepresentation = Literal["centroid", "text"]
PARENT_REPRESENTATIONS: tuple[str, ...] = ("centroid", "text")
DEFAULT_PARENT_REPRESENTATION: ParentRepresentation = "centroid"

CHROMA_FOLDER = "chroma"
DOCSTORE_FILE = "docstore.sqlite"
OPEN_LOCK_FILE = "open.lock"
FORMAT_VERSION = 3
"""3: config and manifests in a journal of their own, not in the docstore (2 and 1 kept them
there; such an index is migrated by its next write or ``recover``). 2: children are stored
without their text (cut from the parent's); 1 is read the same way."""
_RESERVED = frozenset(
    {
        keys.DOC_ID,
        keys.PARENT_ID,
        keys.CHUNK_ID,
        keys.SECTION_ID,
        keys.SECTION_PATH,
        keys.LEVEL,
        keys.START_INDEX,
        keys.END_INDEX,
        keys.TOKENS,
        keys.FORMAT,
        keys.CHILD_COUNT,
        keys.HEADINGS,
    }
)


@dataclass(frozen=True)
class IndexReport:
    """What one ``add_documents`` call did."""

    documents: int
    parents: int
    children: int
    unchanged: int = 0
    """Documents skipped because the same text was already indexed with the same settings."""


@dataclass(frozen=True)
class VerifyReport:
    """The result of :meth:`GatedParentIndex.verify`: ``ok`` when the three stores agree."""

    documents: int
    parents: int
    children: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no disagreement was found."""
        return not self.problems


def _default_embeddings() -> Embeddings:
    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415 (loads ONNX)

    return MiniLMEmbeddings()


def model_name_of(embeddings: Embeddings) -> str:
    """A stable name for an embeddings object, recorded in the index to refuse a mismatch."""
    for attr in ("model_name", "model"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(embeddings).__name__


def _user_metadata(document: Document) -> dict[str, Any]:
    """Document-level metadata copied onto parents and children so filters match both."""
    return {
        k: v
        for k, v in document.metadata.items()
        if k not in _RESERVED and isinstance(v, (str, int, float, bool))
    }


def _content_hash(document: Document) -> str:
    payload = json.dumps(
        [document.page_content, sorted(_user_metadata(document).items())], ensure_ascii=False
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _normalize_rows(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def heading_context(metadata: dict[str, Any], text: str) -> str:
    """The text a parent is embedded as (``"text"`` representation): heading path, then text.

    Children are embedded as their own text only: on QASPER, prefixing the heading path to
    each paragraph lowered paragraph nDCG@10 (the shared prefix pulls a section's paragraphs
    together and blurs the one that answers). The section signal enters through the parent
    score instead.
    """
    path = metadata.get(keys.SECTION_PATH) or []
    title = metadata.get(keys.TITLE)
    head = " > ".join([*([title] if title else []), *path])
    return f"{head}\n\n{text}" if head else text


@dataclass
class _Prepared:
    """A document split and embedded, ready to write."""

    doc_id: str
    digest: str
    parents: list[Document]
    children: list[Document]
    child_vectors: NDArray[np.float32]
    parent_vectors: NDArray[np.float32]


class GatedParentIndex:
    r"""Parents in a docstore, parent and child vectors in Chroma, kept consistent.

    Setup:
        .. code-block:: bash

            pip install langchain-gated-parent

    Key init args:
        embeddings: any LangChain ``Embeddings``; default: the bundled offline MiniLM.
        directory: a folder for a persistent index (Chroma + SQLite docstore inside).
        client: a chromadb client (``EphemeralClient``, ``HttpClient``...) instead of a folder.
        docstore: any ``BaseStore[str, Document]`` for parents (default SQLite in the folder,
            or in memory with an ``EphemeralClient``). A persistent or remote ``client`` needs
            a persistent docstore: a ``directory`` or :func:`sql_docstore`.
        parent_representation: ``"centroid"`` (normalized mean of the parent's child vectors)
            or ``"text"`` (heading path + parent text, embedded).
        lock_timeout: seconds a write waits for another process's write to the same index to
            end before it raises ``WriterLockTimeoutError`` naming that writer (default 600).

    Writers and readers in other processes: every write (``add_documents``, ``delete``,
    ``recover``) holds a writer lock for its whole duration (a lock file in the folder, or an
    advisory lock in a PostgreSQL docstore's database), and first rolls back what a writer that
    died left unfinished. Opening an index only reads it; readers skip documents being written
    and pick up new settings and metadata keys from the journal's version stamp.

    Instantiate:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_gated_parent import GatedParentIndex

            index = GatedParentIndex(directory="./my-index")
            index.add_documents([Document(page_content="# Methods\\n\\n48 h before RNA extraction",
                                          metadata={"doc_id": "P-1"})])
            retriever = index.as_retriever(k=4)
    """

    def __init__(  # noqa: PLR0913 (every argument is a documented, independent knob)
        self,
        embeddings: Embeddings | None = None,
        *,
        directory: str | Path | None = None,
        client: ClientAPI | None = None,
        docstore: BaseStore[str, Document] | None = None,
        name: str = "gated-parent",
        parent_representation: ParentRepresentation | None = None,
        parent_splitter: SectionSplitter | None = None,
        child_splitter: ParagraphSplitter | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    ) -> None:
        """Open (or create) an index; see the class docstring for the arguments."""
        if (
            parent_representation is not None
            and parent_representation not in PARENT_REPRESENTATIONS
        ):
            msg = (
                f"parent_representation must be one of {', '.join(PARENT_REPRESENTATIONS)}, "
                f"got {parent_representation!r}"
            )
            raise ValueError(msg)
        self.directory = Path(directory) if directory is not None else None
        self.embeddings = embeddings if embeddings is not None else _default_embeddings()
        self.name = name
        self.lock_timeout = lock_timeout
        self.parent_splitter = parent_splitter or SectionSplitter()
        self.child_splitter = child_splitter or ParagraphSplitter()
        self._write_lock = threading.RLock()
        self._write_depth = 0
        self._explicit = {
            "parent_splitter": parent_splitter is not None,
            "child_splitter": child_splitter is not None,
            "parent_representation": parent_representation is not None,
        }
        if self.directory is None:
            self._open_stores(client, docstore, parent_representation)
        else:
            _prepare_directory(self.directory)
            with opening(self.directory / OPEN_LOCK_FILE, lock_timeout):
                self._open_stores(client, docstore, parent_representation)

    def _open_stores(
        self,
        client: ClientAPI | None,
        docstore: BaseStore[str, Document] | None,
        parent_representation: str | None,
    ) -> None:
        """Connect the vector client, the docstore and the journal; read the config."""
        import chromadb  # noqa: PLC0415 (heavy import, only when an index is opened)

        client_given = client is not None
        if client is None:
            client = (
                chromadb.PersistentClient(path=str(self.directory / CHROMA_FOLDER))
                if self.directory is not None
                else chromadb.EphemeralClient()
            )
        if docstore is None:
            if self.directory is not None:
                docstore = sqlite_docstore(self.directory / DOCSTORE_FILE)
            else:
                _refuse_volatile_docstore(client)
                docstore = memory_docstore()
        self.vectors = ChromaVectors(
            client,
            self.name,
            folder=self.directory / CHROMA_FOLDER
            if self.directory is not None and not client_given
            else None,
        )
        self.docstore = docstore
        placement = _place(docstore, self.directory, client, self.name)
        self.journal: Journal = placement.journal
        self.writer_lock = placement.lock
        self.sparse: SparseIndex | None = open_sparse(docstore, self.name)
        self._stamp = self.journal.stamp()
        self._config_version = self._stamp.config
        self._synced_seq = self._stamp.seq
        self._vectors_seen = self._stamp.vectors
        self._legacy = False
        self.config = self._load_or_create_config(parent_representation)
        self.parent_representation: ParentRepresentation = self.config["parent_representation"]

    @property
    def client(self) -> ClientAPI:
        """The chromadb client holding the vectors."""
        return self.vectors.client

    @property
    def parents(self) -> Collection:
        """The Chroma collection of parent vectors."""
        return self.vectors.parents

    @property
    def children(self) -> Collection:
        """The Chroma collection of child vectors."""
        return self.vectors.children

    @staticmethod
    def exists(directory: str | Path) -> bool:
        """Whether ``directory`` holds a persistent index (opening one creates it)."""
        folder = Path(directory)
        return (folder / CHROMA_FOLDER).is_dir() and (folder / DOCSTORE_FILE).is_file()

    # ------------------------------------------------------------------ configuration
    def _settings(self, parent_representation: str) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "embedding_model": model_name_of(self.embeddings),
            "parent_representation": parent_representation,
            "parent_splitter": splitter_settings(self.parent_splitter),
            "child_splitter": splitter_settings(self.child_splitter),
        }

    def _load_or_create_config(self, parent_representation: str | None) -> dict[str, Any]:
        """Refuse to mix embeddings or settings; the settings the index is (to be) built with.

        Settings the caller did not pass are taken from the stored record, so reopening an
        index needs only its directory and embeddings. Nothing is written here: a new index's
        config is stored by its first write, under the writer lock.
        """
        wanted = self._settings(parent_representation or DEFAULT_PARENT_REPRESENTATION)
        stored = self.journal.config()
        if stored is None:
            stored = self._legacy_config()
            self._legacy = stored is not None
        if stored is None:
            wanted["dimension"] = len(self.embeddings.embed_query("dimension probe"))
            wanted["metadata_keys"] = []
            return wanted
        config: dict[str, Any] = stored
        if config["embedding_model"] != wanted["embedding_model"]:
            # Only the refusal pays for a probe: reopening with the right model embeds nothing.
            self._refuse_embeddings(config, len(self.embeddings.embed_query("dimension probe")))
        for part in ("parent_splitter", "child_splitter", "parent_representation"):
            if config[part] != wanted[part] and self._explicit[part]:
                msg = (
                    f"this index was built with {part}={config[part]!r}, not {wanted[part]!r}; "
                    "omit the argument to use the index's own settings, or build a new index"
                )
                raise ValueError(msg)
        self.parent_splitter = SectionSplitter(**config["parent_splitter"])
        self.child_splitter = ParagraphSplitter(**config["child_splitter"])
        return config

    def _legacy_config(self) -> dict[str, Any] | None:
        """The config of an index of format 2 or older, which kept it in the docstore."""
        found = self.docstore.mget([journals.LEGACY_CONFIG_KEY])[0]
        if found is None:
            return None
        legacy: dict[str, Any] = json.loads(found.page_content)
        return legacy

    def refresh(self) -> None:
        """Pick up what another process committed: settings, metadata keys, vectors.

        One key read (the journal's stamp) when nothing changed. The config is re-read when
        its counter moved. A local Chroma folder opened by this index is reopened when another
        process wrote since: Chroma (1.5) keeps a process's view of a local collection's
        vector index, so without this a long-lived reader would not find records another
        process added, and a filter matching them fails ("Error finding id").
        """
        stamp = self.journal.stamp()
        if stamp.config != self._config_version:
            self.config = self._load_or_create_config(None)
            self.parent_representation = self.config["parent_representation"]
            self._config_version = stamp.config
        # Not while this process writes (its view is current, and a second view of the folder
        # must never write): the writing thread holds the lock, another thread skips.
        if (
            stamp.seq != self._synced_seq
            and self.vectors.folder is not None
            and self._write_lock.acquire(blocking=False)
        ):
            try:
                self.vectors.reopen()
                self._synced_seq = stamp.seq
            finally:
                self._write_lock.release()

    def _refuse_legacy(self) -> None:
        if self._legacy:
            where = self.directory if self.directory is not None else "the index"
            msg = (
                f"{where} was written by an older langchain-gated-parent (format 2: its records "
                "are in the docstore); upgrade it once with `gated-parent recover "
                f"{where}` (or index.recover()), which moves them under the writer lock"
            )
            raise ValueError(msg)

    def _refuse_embeddings(self, config: dict[str, Any], dimension: int) -> None:
        msg = (
            f"this index was built with embeddings {config['embedding_model']!r} "
            f"({config['dimension']}-d), not {model_name_of(self.embeddings)!r} ({dimension}-d); "
            "open it with the same embeddings, or build a new index in another directory"
        )
        raise ValueError(msg)

    def check_dimension(self, vector: Sequence[float]) -> None:
        """Refuse vectors of another length than the index's (same model name, other model)."""
        if len(vector) != self.config["dimension"]:
            self._refuse_embeddings(self.config, len(vector))

    # ------------------------------------------------------------------ writing
    def add_documents(self, documents: Sequence[Document]) -> IndexReport:
        """Split, embed and store documents; a document with a known id replaces the old one.

        Raises:
            TypeError: ``documents`` is not a sequence of Documents (e.g. one Document).
            ValueError: two documents in the batch share an id, a document's ids belong to
                another document of the index, a document is empty or whitespace only, or a
                document cannot be split. Nothing is written in that case.
        """
        _refuse_non_documents(documents)
        splits = [
            split_document(
                d, parent_splitter=self.parent_splitter, child_splitter=self.child_splitter
            )
            for d in documents
        ]
        _refuse_duplicates([s.doc_id for s in splits])
        _refuse_empty(splits)
        digests = [_content_hash(d) for d in documents]
        parents = children = 0
        with self._writing():
            manifests = self._manifests([s.doc_id for s in splits])
            todo = [
                (doc, split, digest)
                for doc, split, digest in zip(documents, splits, digests, strict=True)
                if (manifests.get(split.doc_id) or {}).get("hash") != digest
                or manifests[split.doc_id].get("status") != "complete"
            ]
            self._refuse_foreign_ids([s for _, s, _ in todo])
            self._remember_metadata_keys(documents)
            for batch in _write_batches(todo):
                prepared = self._embed(batch)
                self._write(prepared, manifests)
                parents += sum(len(p.parents) for p in prepared)
                children += sum(len(p.children) for p in prepared)
        return IndexReport(
            documents=len(todo),
            parents=parents,
            children=children,
            unchanged=len(documents) - len(todo),
        )

    def _embed(self, items: Sequence[tuple[Document, Any, str]]) -> list[_Prepared]:
        """Embed every child of a write batch in one call (the embeddings batch it)."""
        prepared: list[_Prepared] = []
        child_texts: list[str] = []
        for doc, split, digest in items:
            user = _user_metadata(doc)
            counts = Counter(c.metadata[keys.PARENT_ID] for c in split.children)
            headings = _headings(split.parents, split.children)
            parents = [
                _with_user(
                    p,
                    {
                        **user,
                        keys.CHILD_COUNT: counts[p.metadata[keys.PARENT_ID]],
                        keys.HEADINGS: headings[p.metadata[keys.PARENT_ID]],
                    },
                )
                for p in split.parents
            ]
            children = [_with_user(c, user) for c in split.children]
            child_texts.extend(c.page_content for c in children)
            prepared.append(
                _Prepared(
                    split.doc_id,
                    digest,
                    parents,
                    children,
                    np.empty((0, 0), np.float32),
                    np.empty((0, 0), np.float32),
                )
            )
        vectors = self._embed_texts(child_texts)
        text_parents: list[Document] = []
        offset = 0
        for item in prepared:
            item.child_vectors = vectors[offset : offset + len(item.children)]
            offset += len(item.children)
            if self.parent_representation == "text":
                text_parents.extend(item.parents)
            else:
                item.parent_vectors = _centroids(item, self.embeddings)
        if text_parents:
            parent_vectors = self._embed_texts(
                [heading_context(p.metadata, p.page_content) for p in text_parents]
            )
            offset = 0
            for item in prepared:
                item.parent_vectors = parent_vectors[offset : offset + len(item.parents)]
                offset += len(item.parents)
        return prepared

    def _embed_texts(self, texts: list[str]) -> NDArray[np.float32]:
        """Embed texts as an L2-normalized ``(len(texts), dimension)`` matrix."""
        if not texts:
            return np.empty((0, self.config["dimension"]), np.float32)
        matrix = np.asarray(self.embeddings.embed_documents(texts), dtype=np.float32)
        self.check_dimension(matrix[0])
        return _normalize_rows(matrix.reshape(len(texts), -1))

    def _write(self, prepared: list[_Prepared], manifests: dict[str, dict[str, Any]]) -> None:
        """Journalled write: pending manifest, deletes, parents, children, complete manifest."""
        if not prepared:
            return
        with self._changing():
            self._write_changes(prepared, manifests)

    def _write_changes(
        self, prepared: list[_Prepared], manifests: dict[str, dict[str, Any]]
    ) -> None:
        old = {p.doc_id: manifests.get(p.doc_id) or {} for p in prepared}
        pending = []
        for p in prepared:
            new_parents = [d.metadata[keys.PARENT_ID] for d in p.parents]
            new_children = [d.metadata[keys.CHUNK_ID] for d in p.children]
            pending.append(
                (
                    p.doc_id,
                    {
                        "status": "pending",
                        "parents": sorted(set(new_parents) | set(old[p.doc_id].get("parents", []))),
                        "children": sorted(
                            set(new_children) | set(old[p.doc_id].get("children", []))
                        ),
                    },
                )
            )
        self._put_manifests(pending)
        stale_children = [
            c
            for p in prepared
            for c in old[p.doc_id].get("children", [])
            if c not in {d.metadata[keys.CHUNK_ID] for d in p.children}
        ]
        stale_parents = [
            c
            for p in prepared
            for c in old[p.doc_id].get("parents", [])
            if c not in {d.metadata[keys.PARENT_ID] for d in p.parents}
        ]
        self._delete_ids(stale_children, stale_parents)
        parents = [d for p in prepared for d in p.parents]
        self.docstore.mset([(d.metadata[keys.PARENT_ID], d) for d in parents])
        if self.sparse is not None:
            self.sparse.upsert([_sparse_row(d) for d in parents])
        self.vectors.upsert_parents(
            [d.metadata[keys.PARENT_ID] for d in parents],
            np.concatenate([p.parent_vectors for p in prepared]),
            [d.metadata for d in parents],
        )
        children = [d for p in prepared for d in p.children]
        if children:
            self.vectors.upsert_children(
                [d.metadata[keys.CHUNK_ID] for d in children],
                np.concatenate([p.child_vectors for p in prepared]),
                [_own(d.metadata) for d in children],
                [d.metadata[keys.PARENT_ID] for d in children],
            )
        self._put_manifests(
            [
                (
                    p.doc_id,
                    {
                        "status": "complete",
                        "hash": p.digest,
                        "parents": [d.metadata[keys.PARENT_ID] for d in p.parents],
                        "children": [d.metadata[keys.CHUNK_ID] for d in p.children],
                    },
                )
                for p in prepared
            ]
        )

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Remove documents from all three stores; returns how many were present."""
        doc_ids = list(doc_ids)
        with self._writing():
            return self._delete(doc_ids)

    def _delete(self, doc_ids: Sequence[str]) -> int:
        """Delete under the writer lock, each document journalled as pending first."""
        manifests = self._manifests(doc_ids)
        present = [d for d in doc_ids if d in manifests]
        for doc_id in present:
            entry = manifests[doc_id]
            with self._changing():
                self._put_manifests([(doc_id, {**entry, "status": "pending"})])
                self._delete_ids(entry.get("children", []), entry.get("parents", []))
                self.journal.delete_manifests([doc_id])
        return len(present)

    def _delete_ids(self, child_ids: Sequence[str], parent_ids: Sequence[str]) -> None:
        """Children first, then parent vectors, then parents: no child outlives its parent."""
        self.vectors.delete(child_ids, parent_ids)
        self.docstore.mdelete(list(parent_ids))
        if self.sparse is not None:
            self.sparse.delete(list(parent_ids))

    def recover(self) -> list[str]:
        """Roll back documents whose last write did not finish; returns their ids.

        Every write does this first, under the writer lock; call it (or ``gated-parent
        recover``) to clean up after a writer died without waiting for the next write. It
        also moves the records of an index of format 2 into the journal.
        """
        with self._writing() as recovered:
            return recovered

    @contextmanager
    def _writing(self) -> Iterator[list[str]]:
        """Hold the writer lock; on first entry recover, migrate and store a new config.

        Re-entrant within one thread (a write calls another); other threads and processes
        wait up to ``lock_timeout`` seconds.

        Yields:
            The documents rolled back on entry (empty when nested or nothing was pending).
        """
        with self._write_lock:
            if self._write_depth:
                self._write_depth += 1
                try:
                    yield []
                finally:
                    self._write_depth -= 1
                return
            log_stale(self.writer_lock, self.writer_lock.acquire(self.lock_timeout))
            self._write_depth = 1
            try:
                self.refresh()
                self._stamp = self.journal.stamp()
                if self._legacy:
                    self._migrate_legacy()
                if self.journal.config() is None:
                    self._put_config()
                recovered = self._rollback_unfinished()
                if self._stamp.writing:  # a writer died between its last change and its stamp
                    self._advance(replace(self._stamp, writing=False))
                yield recovered
            finally:
                # After an exception inside a change the stamp stays "writing": readers keep
                # checking documents until the next write has rolled that one back.
                self._write_depth = 0
                self.writer_lock.release()

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Mark the stamp as writing while the stores change (readers then check documents)."""
        self._advance(replace(self._stamp, seq=self._stamp.seq + 1, writing=True))
        yield
        self._advance(replace(self._stamp, seq=self._stamp.seq + 1, writing=False, vectors=True))

    def _put_config(self) -> None:
        self._stamp = self.journal.put_config(self.config, self._stamp)
        self._config_version = self._stamp.config
        self._synced_seq = self._stamp.seq

    def _advance(self, stamp: journals.Stamp) -> None:
        """Store this writer's new stamp; its own changes need no re-sync of its vector view."""
        self._stamp = self.journal.put_stamp(stamp)
        self._synced_seq = self._stamp.seq

    def _rollback_unfinished(self) -> list[str]:
        pending = [d for d, m in self.journal.all_manifests().items() if m["status"] != "complete"]
        if pending:
            logger.warning(
                "rolling back %d interrupted document write(s): %s",
                len(pending),
                ", ".join(pending),
            )
            self._delete(pending)
        return pending

    def _migrate_legacy(self) -> None:
        """Move a format-2 index's config and manifests from the docstore to the journal."""
        legacy_keys = list(self.docstore.yield_keys(prefix=journals.LEGACY_MANIFEST_PREFIX))
        found = self.docstore.mget(legacy_keys)
        self.journal.put_manifests(
            [
                (key[len(journals.LEGACY_MANIFEST_PREFIX) :], json.loads(doc.page_content))
                for key, doc in zip(legacy_keys, found, strict=True)
                if doc is not None
            ]
        )
        config = self._legacy_config() or self.config
        self.config = {**config, "format_version": FORMAT_VERSION}
        self._put_config()
        self._advance(replace(self._stamp, vectors=True))
        self.docstore.mdelete([*legacy_keys, journals.LEGACY_CONFIG_KEY])
        self._legacy = False
        logger.warning(
            "moved the records of %d document(s) out of the docstore (format 2 -> %d)",
            len(legacy_keys),
            FORMAT_VERSION,
        )

    # ------------------------------------------------------------------ manifest
    def _manifests(self, doc_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return self.journal.manifests(doc_ids)

    def _put_manifests(self, entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.journal.put_manifests(entries)

    def _refuse_foreign_ids(self, splits: Sequence[Any]) -> None:
        """Ids never collide across documents: refuse ids owned by another document."""
        owner = {d.metadata[keys.PARENT_ID]: s.doc_id for s in splits for d in s.parents}
        if not owner or not self._has_vectors():
            return
        for pid, other in self.vectors.parent_owners(list(owner)).items():
            if other != owner[pid]:
                msg = (
                    f"parent id {pid!r} of document {owner[pid]!r} already belongs to document "
                    f"{other!r}; give sections ids unique within the index (e.g. prefix them "
                    "with the document id)"
                )
                raise ValueError(msg)

    def _remember_metadata_keys(self, documents: Sequence[Document]) -> None:
        """Record which metadata keys exist, so a filter on an unknown key can be refused."""
        known = set(self.config.get("metadata_keys", []))
        new = known | {k for d in documents for k in _user_metadata(d)} | {keys.DOC_ID}
        if new != known:
            self.config["metadata_keys"] = sorted(new)
            self._put_config()

    # ------------------------------------------------------------------ reading
    def search_parents(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> ParentHits:
        """The gate's search: the ``n`` parents most similar to the query vector."""
        if n < 1 or not self._has_vectors():
            return ParentHits([], [], [])
        return self.vectors.search_parents(vector, n, where)

    def search_sparse(
        self, query: str, n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The gate's term search: the ``n`` best ``(parent_id, score)`` of the sparse index.

        A filter on ``doc_id`` alone is applied in the search; any other filter is applied by
        :meth:`parents_by_id` afterwards, so over-fetch for it. Empty without a sparse index.
        """
        if self.sparse is None or n < 1:
            return []
        return self.sparse.search(query, n, _doc_ids_of(where))

    def search_children(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``n`` children nearest the query vector, as ``(child_id, score in [0, 1])``.

        Only a ``doc_id`` filter is applied here (children store no user metadata); the
        parents they point to are filtered by :meth:`parents_by_id`.
        """
        if n < 1 or not self._has_vectors():
            return []
        doc_ids = _doc_ids_of(where)
        child_where = None if doc_ids is None else {keys.DOC_ID: {"$in": doc_ids}}
        return self.vectors.search_children(vector, n, child_where)

    def parents_by_id(
        self, parent_ids: Sequence[str], where: dict[str, Any] | None = None
    ) -> ParentHits:
        """Parents found by another search than the vector one, with their metadata.

        Those that fail ``where`` are left out; scores are not known here (all 0).
        """
        if not parent_ids:
            return ParentHits([], [], [])
        return self.vectors.parents_by_id(list(parent_ids), where)

    def children_of(self, child_counts: Mapping[str, int]) -> ChildRows:
        """Every child of the given parents (id → child count), with vectors, for exact scoring.

        Children are fetched by id (:func:`~langchain_gated_parent.splitters.child_id`), a
        primary-key lookup, not a metadata filter over the whole collection. Their text is cut
        from their parent's (a child's span lies inside its parent's) and the document's own
        metadata comes from the parent too, so neither is stored once per child; a child whose
        parent was deleted since the search is dropped.

        A write that overlaps the read could mix two versions of a document (a new parent's
        text cut at an old child's offsets) or show part of one. The journal's stamp, read
        before and after, tells: if a write overlapped, the read is retried, and after
        ``QUIET_READ_ATTEMPTS`` overlapped reads only documents whose manifest was complete
        and unchanged from before to after the read are kept.
        """
        ids = [child_id(pid, n) for pid, count in child_counts.items() for n in range(1, count + 1)]
        if not ids:
            return ChildRows([], [], [], np.empty((0, 0), np.float32))
        rows = ChildRows([], [], [], np.empty((0, 0), np.float32))
        for attempt in range(1, QUIET_READ_ATTEMPTS):
            before = self.journal.stamp()
            rows = self._read_children(ids, child_counts)
            if before.quiet and self.journal.stamp() == before:
                return rows
            time.sleep(0.02 * attempt)
        docs = sorted({str(p.metadata.get(keys.DOC_ID)) for p in rows.parents.values()})
        before_read = self.journal.manifests(docs)
        rows = self._read_children(ids, child_counts)
        after_read = self.journal.manifests(docs)
        keep = {
            d
            for d, m in before_read.items()
            if m["status"] == "complete" and after_read.get(d) == m
        }
        return _only_documents(rows, keep)

    def _read_children(self, ids: list[str], child_counts: Mapping[str, int]) -> ChildRows:
        found_ids, own_metadatas, vectors = self.vectors.children_rows(
            ids, self.config["dimension"]
        )
        found = zip(child_counts, self.get_parents(list(child_counts)), strict=True)
        parents = {pid: parent for pid, parent in found if parent is not None}
        texts: list[str] = []
        metadatas: list[dict[str, Any]] = []
        keep: list[int] = []
        for row, own in enumerate(own_metadatas):
            parent = parents.get(own[keys.PARENT_ID])
            if parent is None:
                continue
            offset = int(parent.metadata[keys.START_INDEX])
            start, end = int(own[keys.START_INDEX]), int(own[keys.END_INDEX])
            texts.append(parent.page_content[start - offset : end - offset])
            metadatas.append({**_user_of(parent.metadata), **own})
            keep.append(row)
        return ChildRows([found_ids[row] for row in keep], texts, metadatas, vectors[keep], parents)

    def _has_vectors(self) -> bool:
        """Whether a write has stored vectors (until then, readers leave Chroma alone)."""
        if not self._vectors_seen:
            self._vectors_seen = self.journal.stamp().vectors
        return self._vectors_seen

    def get_parents(self, parent_ids: Sequence[str]) -> list[Document | None]:
        """Parents from the docstore, ``None`` for an id it does not hold."""
        return self.docstore.mget(list(parent_ids))

    def check_filter(self, where: dict[str, Any] | None) -> None:
        """Refuse a malformed filter, or one on a metadata key no document of the index has.

        Checked before any search, so a typo is an error that names the key rather than an
        empty result, and a server can answer 4xx before it starts streaming. Keys another
        process added since this index was opened are known (see :meth:`refresh`).
        """
        self.refresh()
        self._refuse_legacy()
        if where:
            validate_filter(where)
        known = set(self.config.get("metadata_keys", [])) | {
            keys.DOC_ID,
            keys.PARENT_ID,
            keys.TITLE,
            keys.SOURCE,
        }
        unknown = sorted(filter_keys(where or {}) - known)
        if unknown:
            msg = (
                f"filter key(s) {', '.join(map(repr, unknown))} are not metadata of this index; "
                f"known keys: {', '.join(sorted(known))}"
            )
            raise ValueError(msg)

    # ------------------------------------------------------------------ inspection
    def verify(self) -> VerifyReport:
        """Check that the docstore, the parent vectors and the child vectors agree exactly."""
        self.refresh()
        self._refuse_legacy()
        problems: list[str] = []
        manifests = self.journal.all_manifests()
        stored_parents = set(self.docstore.yield_keys())
        vectors = self._has_vectors()
        parent_vectors = self.vectors.parent_ids() if vectors else set()
        child_parent = self.vectors.child_parents() if vectors else {}
        expected_parents = {p for m in manifests.values() for p in m.get("parents", [])}
        expected_children = {c for m in manifests.values() for c in m.get("children", [])}
        checks = [
            ("parent in docstore without a vector", stored_parents - parent_vectors),
            ("parent vector without a docstore entry", parent_vectors - stored_parents),
            ("parent not in any manifest", stored_parents - expected_parents),
            ("manifest parent missing", expected_parents - stored_parents),
            ("child not in any manifest", set(child_parent) - expected_children),
            ("manifest child missing", expected_children - set(child_parent)),
            (
                "orphan child (parent missing)",
                {c for c, p in child_parent.items() if p not in stored_parents},
            ),
            (
                "unfinished write",
                {d for d, m in manifests.items() if m.get("status") != "complete"},
            ),
        ]
        for label, ids in checks:
            problems.extend(f"{label}: {i}" for i in sorted(ids))
        return VerifyReport(len(manifests), len(stored_parents), len(child_parent), problems)

    def stats(self) -> dict[str, Any]:
        """Counts, size on disk and the embedding model, for ``gated-parent stats``."""
        self.refresh()
        self._refuse_legacy()
        parents, children = self.vectors.counts() if self._has_vectors() else (0, 0)
        return {
            "documents": len(self.journal.doc_ids()),
            "parents": parents,
            "children": children,
            "bytes_on_disk": self.disk_bytes(),
            "embedding_model": self.config["embedding_model"],
            "dimension": self.config["dimension"],
            "parent_representation": self.parent_representation,
        }

    def disk_bytes(self) -> int | None:
        """Bytes the index directory takes (``None`` for an index with no directory)."""
        if self.directory is None:
            return None
        return sum(f.stat().st_size for f in self.directory.rglob("*") if f.is_file())

    vector_store_provider = "Chroma"
    """The vector store, as tracing names it (``ls_vector_store_provider``)."""

    @property
    def embedding_model(self) -> str:
        """The embedding model's name, as tracing names it (``ls_embedding_provider``)."""
        return model_name_of(self.embeddings)

    def as_retriever(self, **kwargs: Any) -> GatedParentRetriever:
        """A :class:`GatedParentRetriever` over this index, as ``VectorStore.as_retriever`` makes.

        ``search_kwargs={"k": 3}`` (or ``k=3``) sets its knobs; ``tags`` and ``metadata`` pass
        through; ``search_type`` may only be ``"similarity"``; anything else is refused by name
        (see :meth:`GatedParentRetriever.from_store`).
        """
        from langchain_gated_parent.retriever import GatedParentRetriever  # noqa: PLC0415

        return GatedParentRetriever.from_store(self, **kwargs)


def splitter_settings(splitter: SectionSplitter | ParagraphSplitter) -> dict[str, Any]:
    """The keyword arguments that rebuild ``splitter`` (recorded in the index)."""
    if isinstance(splitter, SectionSplitter):
        return {
            "parent_chunk_level": splitter.parent_chunk_level.value,
            "max_parent_tokens": splitter.max_parent_tokens,
        }
    return {
        "child_chunk_level": splitter.child_chunk_level.value,
        "min_child_tokens": splitter.min_child_tokens,
        "max_child_tokens": splitter.max_child_tokens,
        "child_overlap_tokens": splitter.child_overlap_tokens,
    }


def _prepare_directory(directory: Path) -> None:
    """Create the index folder, or say why it cannot be used."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        msg = (
            f"cannot use index directory {str(directory)!r}: {error.strerror or error}; "
            "choose a writable folder"
        )
        raise ValueError(msg) from error


def _refuse_non_documents(documents: object) -> None:
    """A single Document or a string iterates into nonsense: refuse it by name."""
    if isinstance(documents, (Document, str, bytes)) or not isinstance(documents, Sequence):
        msg = (
            f"add_documents takes a list of Documents, got {type(documents).__name__}; "
            "wrap a single document in a list: add_documents([document])"
        )
        raise TypeError(msg)
    for position, document in enumerate(documents):
        if not isinstance(document, Document):
            msg = (
                f"documents[{position}] is a {type(document).__name__}, not a Document; "
                "wrap text as Document(page_content=text, metadata={'doc_id': ...})"
            )
            raise TypeError(msg)


def _refuse_empty(splits: Sequence[Any]) -> None:
    """A document without text would be recorded as indexed while holding nothing."""
    for split in splits:
        if not split.parents:
            msg = (
                f"document {split.doc_id!r} has no text to index (empty or whitespace only); "
                f"leave it out, or remove its indexed version with delete([{split.doc_id!r}])"
            )
            raise ValueError(msg)


WRITE_BATCH_CHILDREN = 1024
"""Documents are embedded and written in batches of about this many children.

It bounds memory (the embedding model answers with Python lists of floats, ~10 KB per vector)
whatever the size of one ``add_documents`` call; each batch is journalled on its own.
"""


def _write_batches(
    todo: Sequence[tuple[Document, Any, str]],
) -> Iterator[list[tuple[Document, Any, str]]]:
    """Group documents, in order, into batches of at least ``WRITE_BATCH_CHILDREN`` children."""
    batch: list[tuple[Document, Any, str]] = []
    size = 0
    for item in todo:
        batch.append(item)
        size += len(item[1].children)
        if size >= WRITE_BATCH_CHILDREN:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _refuse_duplicates(doc_ids: Sequence[str]) -> None:
    seen: set[str] = set()
    for doc_id in doc_ids:
        if doc_id in seen:
            msg = (
                f"document id {doc_id!r} appears twice in one batch; give each document a "
                "unique 'doc_id' in its metadata, or add the versions in separate calls"
            )
            raise ValueError(msg)
        seen.add(doc_id)


def _headings(parents: Sequence[Document], children: Sequence[Document]) -> dict[str, str]:
    """Each parent's distinct heading titles: its own path, then its subsections' titles."""
    titles: dict[str, dict[str, None]] = {
        p.metadata[keys.PARENT_ID]: dict.fromkeys(p.metadata.get(keys.SECTION_PATH) or [])
        for p in parents
    }
    for child in children:
        titles[child.metadata[keys.PARENT_ID]].update(
            dict.fromkeys(child.metadata.get(keys.SECTION_PATH) or [])
        )
    return {pid: " ".join(found) for pid, found in titles.items()}


def _own(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A child's own metadata: the document's metadata is stored once, with each parent."""
    return {k: v for k, v in metadata.items() if k in _RESERVED}


def _user_of(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The document's metadata, as its parents carry it."""
    return {k: v for k, v in metadata.items() if k not in _RESERVED}


def _with_user(document: Document, user: dict[str, Any]) -> Document:
    return Document(page_content=document.page_content, metadata={**user, **document.metadata})


def _centroids(item: _Prepared, embeddings: Embeddings) -> NDArray[np.float32]:
    """Normalized mean of each parent's child vectors (a childless parent embeds its text)."""
    rows: list[NDArray[np.float32]] = []
    for parent in item.parents:
        pid = parent.metadata[keys.PARENT_ID]
        mask = [c.metadata[keys.PARENT_ID] == pid for c in item.children]
        if any(mask):
            rows.append(item.child_vectors[np.asarray(mask)].mean(axis=0))
        else:
            rows.append(
                np.asarray(
                    embeddings.embed_query(heading_context(parent.metadata, parent.page_content)),
                    dtype=np.float32,
                )
            )
    if not rows:
        return np.empty((0, item.child_vectors.shape[1]), np.float32)
    return _normalize_rows(np.stack(rows))


def _only_documents(rows: ChildRows, doc_ids: set[str]) -> ChildRows:
    """The rows (and parents) of the given documents only."""
    keep = [n for n, meta in enumerate(rows.metadatas) if meta.get(keys.DOC_ID) in doc_ids]
    return ChildRows(
        [rows.ids[n] for n in keep],
        [rows.texts[n] for n in keep],
        [rows.metadatas[n] for n in keep],
        rows.vectors[keep],
        {p: d for p, d in rows.parents.items() if d.metadata.get(keys.DOC_ID) in doc_ids},
    )


def _refuse_volatile_docstore(client: ClientAPI) -> None:
    """A durable vector store beside an in-memory docstore loses every parent on exit."""
    kind = is_durable(client)
    if kind is not None:
        msg = (
            f"a {kind} chromadb client needs a persistent docstore, or its vectors outlive "
            "their parents: pass directory=... (a SQLite docstore in that folder) or "
            "docstore=sql_docstore(url)"
        )
        raise ValueError(msg)


def _place(
    docstore: BaseStore[str, Document], directory: Path | None, client: ClientAPI, name: str
) -> Placement:
    """Where the journal and the writer lock live (see :func:`journals.place`)."""
    placement = journals.place(docstore, directory, index_name=name, sqlite_file=DOCSTORE_FILE)
    if placement is not None:
        return placement
    if is_durable(client) is not None:
        msg = (
            f"with a {type(docstore).__name__} docstore the index has nowhere durable to keep "
            "its own records and writer lock: pass directory=... (they go into that folder) "
            "or use docstore=sql_docstore(url)"
        )
        raise ValueError(msg)
    return journals.in_memory()


def _sparse_row(parent: Document) -> SparseRow:
    meta = parent.metadata
    return SparseRow(
        parent_id=meta[keys.PARENT_ID],
        doc_id=str(meta[keys.DOC_ID]),
        text=heading_context(meta, parent.page_content),
    )


def _doc_ids_of(where: dict[str, Any] | None) -> list[str] | None:
    """The documents a filter on ``doc_id`` alone allows (``None``: no such filter)."""
    if not where or set(where) != {keys.DOC_ID}:
        return None
    value = where[keys.DOC_ID]
    if isinstance(value, dict) and set(value) == {"$eq"}:
        value = value["$eq"]
    if isinstance(value, dict) and set(value) == {"$in"}:
        return [str(v) for v in value["$in"]]
    if isinstance(value, (str, int)):
        return [str(value)]
    return None
