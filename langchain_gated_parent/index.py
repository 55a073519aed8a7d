"""The gated index: a docstore of parents beside Chroma collections of parent and child vectors.

One object owns the stores and keeps them consistent: the docstore, the two collections, and
in the docstore's database the sparse index and the section records.

Write order (why a crash never leaves an orphan): for each batch of documents the index first
records a *pending* manifest entry naming every id the documents had and will have, then deletes
stale children, stale parent vectors and stale parents (children first), then writes parents to
the docstore (with their sparse rows and section records), parent vectors and child vectors
(parents first), and last marks the entries *complete*. At every instant a visible child has a
visible parent.

A write that replaces a document first saves its stored version (:mod:`~.stores.undo`), and
drops it once the entry is complete. Every write holds the index's writer lock
(:mod:`~langchain_gated_parent.stores.lock`) from start to end, so writers in other processes or
on other machines wait their turn. A writer that finds an entry still pending (a writer died
mid-write) rolls it back first, inside the lock: it deletes the ids the entry names and writes
the saved version back, if any. The document is as it was before the write (its previous
version, or absent), and re-running the same ingest converges to the state of an uninterrupted
run. Opening an index never changes it; readers skip documents whose write
is unfinished, and see what writers commit through the journal's version stamp
(:mod:`~langchain_gated_parent.stores.journal`).
"""

from __future__ import annotations

import functools
import json
import logging
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from contextvars import copy_context
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import numpy as np
from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor

from langchain_gated_parent import keys
from langchain_gated_parent.formats import (
    FORMAT_VERSION,
    INDEX_NAME,
    PARENT_IDS_ON_VECTORS,
    READ_AS_IS,
    UPGRADABLE,
    add_section_records,
    check_format,
    refuse_parent_filter_until_named,
    refuse_until_upgraded,
)
from langchain_gated_parent.known_vectors import BatchEmbedding
from langchain_gated_parent.pages import PAGES_RECORD, MergedPages, merge_pages
from langchain_gated_parent.prepare import (
    Item,
    Prepared,
    attach,
    content_hash,
    heading_context,
    lay_out,
    normalized,
    own_metadata,
    refuse_duplicates,
    refuse_empty,
    refuse_non_documents,
    refuse_unstorable,
    user_metadata,
    write_batches,
)
from langchain_gated_parent.settings import (
    DEFAULT_PARENT_REPRESENTATION,
    SPLITTERS,
    ParentRepresentation,
    check_parent_representation,
    differences,
    index_settings,
    model_name_of,
    recorded,
)
from langchain_gated_parent.splitters import (
    ParagraphSplitter,
    SectionSplitter,
    split_document,
)
from langchain_gated_parent.stores import journal as journals
from langchain_gated_parent.stores.chroma import (
    ChromaSource,
    ChromaVectors,
    chroma_source,
    filter_keys,
    folder_client,
    is_durable,
    validate_filter,
)
from langchain_gated_parent.stores.docstore import (
    fast_docstore_mget,
    memory_docstore,
    sqlite_docstore,
)
from langchain_gated_parent.stores.lock import DEFAULT_LOCK_TIMEOUT, log_stale, opening
from langchain_gated_parent.stores.postings import DEFAULT_POSTINGS_BYTES
from langchain_gated_parent.stores.section_reads import (
    DEFAULT_CACHED_SECTIONS,
    EXACT_DOCUMENTS,
    SectionReads,
    check_cached_sections,
)
from langchain_gated_parent.stores.sections import LAYOUT, child_texts, section_of
from langchain_gated_parent.stores.sparse import SparseRow, open_sparse
from langchain_gated_parent.stores.undo import SavedVersion
from langchain_gated_parent.structure import warn_flat_structure

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
    from concurrent.futures import Executor

    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from langchain_chroma import Chroma
    from langchain_core.embeddings import Embeddings
    from langchain_core.stores import BaseStore
    from numpy.typing import NDArray

    from langchain_gated_parent.prepare import EmbeddingWork
    from langchain_gated_parent.records import ChildRows, Section
    from langchain_gated_parent.retriever import GatedParentRetriever
    from langchain_gated_parent.splitters import ParentChildSplit
    from langchain_gated_parent.stores.journal import Journal, Placement
    from langchain_gated_parent.stores.sparse import SparseIndex

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_NAME = "gated-parent"
"""The index's name when neither ``name`` nor a ``langchain_chroma.Chroma`` gives one."""
CHROMA_FOLDER = "chroma"
DOCSTORE_FILE = "docstore.sqlite"
OPEN_LOCK_FILE = "open.lock"
SPLIT_THREADS = 2
"""Documents split at once: tiktoken counts tokens outside the GIL, so on two cores a second
thread splits the 281 QASPER dev papers in ~0.8 of the time (the rest of a split is Python)."""


@dataclass(frozen=True)
class IndexReport:
    """What one ``add_documents`` call did."""

    documents: int
    parents: int
    children: int
    unchanged: int = 0
    """Documents skipped because the same text was already indexed with the same settings."""
    reused: int = 0
    """Texts of changed documents that were the same in the version replaced: their vectors
    were kept, not embedded again."""


@dataclass(frozen=True)
class VerifyReport:
    """The result of :meth:`GatedParentIndex.verify`: ``ok`` when the stores agree."""

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


class GatedParentIndex:
    r"""Parents in a docstore, parent and child vectors in Chroma, kept consistent.

    Setup:
        .. code-block:: bash

            pip install langchain-gated-parent

    Key init args:
        embeddings: any LangChain ``Embeddings``; default: the bundled offline MiniLM.
        directory: a folder for a persistent index (Chroma + SQLite docstore inside).
        client: a chromadb client (``EphemeralClient``, ``HttpClient``...) or a
            ``langchain_chroma.Chroma`` (its client, and its collection's name, metadata,
            configuration and embeddings), instead of a folder. Anything else is refused.
        name: prefix of the index's two collections (default: the Chroma's collection name,
            else ``"gated-parent"``).
        docstore: any ``BaseStore[str, Document]`` for parents (default SQLite in the folder,
            or in memory with an ``EphemeralClient``). A persistent or remote ``client`` needs
            a persistent docstore: a ``directory`` or :func:`sql_docstore`.
        parent_representation: ``"centroid"`` (normalized mean of the parent's child vectors)
            or ``"text"`` (heading path + parent text, embedded).
        lock_timeout: seconds a write waits for another process's write to the same index to
            end before it raises ``WriterLockTimeoutError`` naming that writer (default 600);
            also how long any call waits for another process's hold on a local folder's
            vector files before it raises ``VectorFilesTimeoutError`` (a hold spans one
            Chroma call: only a call that never returns makes another wait that long).
        cached_sections: how many opened sections (with their children) this process keeps
            decoded between queries, for the index's current version only (default 8192;
            ``HEADERS_PER_SECTION`` times as many candidates' headers, and up to
            ``DEFAULT_POSTINGS_BYTES`` of query terms' postings; 0 keeps none). An opened
            section takes about 5 KB a child: lower this for long sections. See
            :mod:`~langchain_gated_parent.stores.section_reads`.

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
        client: ClientAPI | Chroma | None = None,
        docstore: BaseStore[str, Document] | None = None,
        name: str | None = None,
        parent_representation: ParentRepresentation | None = None,
        parent_splitter: SectionSplitter | None = None,
        child_splitter: ParagraphSplitter | None = None,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        cached_sections: int = DEFAULT_CACHED_SECTIONS,
    ) -> None:
        """Open (or create) an index; see the class docstring for the arguments."""
        check_parent_representation(parent_representation)
        check_cached_sections(cached_sections)
        source = chroma_source(client) if client is not None else None
        self.directory = Path(directory) if directory is not None else None
        if embeddings is None and source is not None:
            embeddings = source.embeddings
        self.embeddings = embeddings if embeddings is not None else _default_embeddings()
        self.name = name or (source and source.collection) or DEFAULT_NAME
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
            self._open_stores(source, docstore, parent_representation, cached_sections)
        else:
            _prepare_directory(self.directory)
            with opening(self.directory / OPEN_LOCK_FILE, lock_timeout):
                self._open_stores(source, docstore, parent_representation, cached_sections)

    def _open_stores(
        self,
        source: ChromaSource | None,
        docstore: BaseStore[str, Document] | None,
        parent_representation: str | None,
        cached_sections: int,
    ) -> None:
        """Connect the vector client, the docstore and the journal; read the config."""
        import chromadb  # noqa: PLC0415 (heavy import, only when an index is opened)

        # A client the caller gave may hold a view of its folder as old as the client: unknown.
        had_view = source is not None
        if source is None and self.directory is not None:
            client, had_view = folder_client(str(self.directory / CHROMA_FOLDER))
            source = ChromaSource(client)
        elif source is None:
            source = ChromaSource(chromadb.EphemeralClient())
        client = source.client
        if docstore is None:
            if self.directory is not None:
                docstore = sqlite_docstore(self.directory / DOCSTORE_FILE)
            else:
                _refuse_volatile_docstore(client)
                docstore = memory_docstore()
        self.docstore = docstore
        self._read_parents = fast_docstore_mget(docstore)
        placement = _place(docstore, self.directory, client, self.name)
        self.journal: Journal = placement.journal
        self._stamp = self.journal.stamp()
        self._config_version = self._stamp.config
        # Before the collections are made: another index's docstore, or other settings, refused.
        self.config = self._load_or_create_config(parent_representation)
        self.parent_representation: ParentRepresentation = self.config["parent_representation"]
        self.vectors = ChromaVectors(source, self.name, lock_timeout=self.lock_timeout)
        self.writer_lock = placement.lock
        self.section_store = placement.sections
        self.undo = placement.undo
        self.sparse: SparseIndex | None = open_sparse(
            docstore, self.name, postings_bytes=DEFAULT_POSTINGS_BYTES if cached_sections else 0
        )
        self.reads = SectionReads(
            self.journal,
            self.section_store,
            self._read_parents,
            cached_sections=cached_sections,
            observers=[self.sparse] if self.sparse is not None else [],
        )
        if (
            had_view
            and self.vectors.folder is not None
            and self.vectors.version_seen != self._stamp.seq
        ):
            self.vectors.reopen()  # this process's view of the folder may be older than it
        self.vectors.version_seen = self._stamp.seq
        self._vectors_seen = self._stamp.vectors

    @property
    def client(self) -> ClientAPI:
        """The chromadb client holding the vectors."""
        return self.vectors.client

    @property
    def parents(self) -> Collection:
        """The Chroma collection of parent vectors.

        With other processes on the folder, call it inside ``index.vectors.reading()``.
        """
        return self.vectors.parents

    @property
    def children(self) -> Collection:
        """The Chroma collection of child vectors.

        With other processes on the folder, call it inside ``index.vectors.reading()``.
        """
        return self.vectors.children

    @staticmethod
    def exists(directory: str | Path) -> bool:
        """Whether ``directory`` holds a persistent index (opening one creates it)."""
        folder = Path(directory)
        return (folder / CHROMA_FOLDER).is_dir() and (folder / DOCSTORE_FILE).is_file()

    # ------------------------------------------------------------------ configuration
    def _load_or_create_config(self, parent_representation: str | None) -> dict[str, Any]:
        """Refuse to mix embeddings or settings; the settings the index is (to be) built with.

        Settings the caller did not pass are taken from the stored record, so reopening an
        index needs only its directory and embeddings. Nothing is written here, and nothing is
        embedded: a new index's config is stored by its first write, under the writer lock,
        and its vector dimension is learned from that write's vectors.
        """
        wanted = {
            "format_version": FORMAT_VERSION,
            **index_settings(
                self.embeddings,
                parent_representation or DEFAULT_PARENT_REPRESENTATION,
                self.parent_splitter,
                self.child_splitter,
            ),
        }
        stored = self.journal.config()
        if stored is None:
            legacy = self._legacy_config()
            if legacy is not None:
                check_format(legacy)
        if stored is None:
            return {
                **wanted,
                INDEX_NAME: self.name,
                "dimension": None,
                "metadata_keys": [],
                PARENT_IDS_ON_VECTORS: True,
            }
        check_format(stored)
        self._refuse_another_index(stored)
        config = recorded(stored)
        if config["embedding_model"] != wanted["embedding_model"]:
            # Only the refusal pays for a probe: reopening with the right model embeds nothing.
            self._refuse_embeddings(config, len(self.embeddings.embed_query("dimension probe")))
        found = [
            difference
            for part in (*SPLITTERS, "parent_representation")
            if self._explicit[part]
            for difference in differences(config, wanted, part)
        ]
        if found:
            msg = (
                f"this index was built with other settings: {'; '.join(found)}; omit the "
                "argument to use the index's own settings, or build a new index"
            )
            raise ValueError(msg)
        self.parent_splitter = SectionSplitter.from_settings(config["parent_splitter"])
        self.child_splitter = ParagraphSplitter.from_settings(config["child_splitter"])
        return config

    def _refuse_another_index(self, stored: dict[str, Any]) -> None:
        """Refuse a docstore that holds the records of an index of another name."""
        owner = stored.get(INDEX_NAME)
        if owner is not None and owner != self.name:
            msg = (
                f"the docstore holds index {owner!r}, not {self.name!r}: two indexes in one "
                "docstore overwrite each other's documents; give this one a docstore of its "
                f"own (sql_docstore(url, namespace={self.name!r}), or another directory), or "
                f"open that index with name={owner!r}"
            )
            raise ValueError(msg)

    def _legacy_config(self) -> dict[str, Any] | None:
        """The config of an index of format 2 or older, which kept it in the docstore (refused)."""
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
        process added, and a filter matching them fails ("Error finding id"). That view is
        shared by every index this process opens on the folder, so opening one reopens it
        too unless it is known to be current.
        """
        stamp = self.journal.stamp()
        self.reads.observe(stamp)
        if stamp.config != self._config_version:
            self.config = self._load_or_create_config(None)
            self.parent_representation = self.config["parent_representation"]
            self._config_version = stamp.config
        # Not while this process writes (its view is current, and a second view of the folder
        # must never write): the writing thread holds the lock, another thread skips.
        if (
            stamp.seq != self.vectors.version_seen
            and self.vectors.folder is not None
            and self._write_lock.acquire(blocking=False)
        ):
            try:
                self.vectors.reopen()
                self.vectors.version_seen = stamp.seq
            finally:
                self._write_lock.release()

    def _refuse_embeddings(self, config: dict[str, Any], dimension: int) -> None:
        built = f" ({config['dimension']}-d)" if config["dimension"] is not None else ""
        msg = (
            f"this index was built with embeddings {config['embedding_model']!r}{built}, "
            f"not {model_name_of(self.embeddings)!r} ({dimension}-d); "
            "open it with the same embeddings, or build a new index in another directory"
        )
        raise ValueError(msg)

    def check_dimension(self, vector: Sequence[float]) -> None:
        """Refuse vectors of another length than the index's (same model name, other model).

        An index that has stored nothing yet has no dimension: its first write sets it.
        """
        dimension = self.config["dimension"]
        if dimension is not None and len(vector) != dimension:
            self._refuse_embeddings(self.config, len(vector))

    # ------------------------------------------------------------------ writing
    def add_documents(self, documents: Sequence[Document]) -> IndexReport:
        """Split, embed and store documents; a document with a known id replaces the old one.

        An unchanged document is skipped; a changed one embeds only the texts its stored
        version did not have (:mod:`~.known_vectors`; ``IndexReport.reused`` counts the rest).

        Raises:
            TypeError: ``documents`` is not a sequence of Documents (e.g. one Document).
            ValueError: two documents in the batch share an id, a document's ids belong to
                another document of the index, a document is empty or whitespace only, a
                document's text or metadata holds what the stores cannot (a lone surrogate; a
                datetime or a numpy number in metadata), a
                document cannot be split, or the embeddings' vectors are not of the index's
                dimension. Nothing is written in that case.

        A write that fails after it began changing the stores (one went away) is rolled back
        before it raises; if the rollback fails too, the next write does it.
        """
        refuse_non_documents(documents)
        parents = children = reused = 0
        with self._writing():
            merged, splits = self._merge_and_split(documents)
            documents = merged.documents
            todo, manifests = self._plan(documents, splits)
            for batch in write_batches(todo):
                prepared, work = lay_out(batch, self.parent_representation)
                saved = self._replaced_versions(batch, manifests)
                embedding = self._embedding(work, saved)
                self._attach(
                    prepared,
                    embedding,
                    self._embed_documents(embedding.new_texts),
                    [self.embeddings.embed_query(text) for text in embedding.new_queries],
                )
                _keep_pages(prepared, merged)
                self._write(prepared, manifests, saved)
                parents += sum(len(p.parents) for p in prepared)
                children += sum(len(p.children) for p in prepared)
                reused += embedding.reused
        return IndexReport(len(todo), parents, children, len(documents) - len(todo), reused)

    async def aadd_documents(self, documents: Sequence[Document]) -> IndexReport:
        """:meth:`add_documents` with the embeddings' native async calls.

        The storage steps run on one worker thread of their own (through langchain-core's
        ``run_in_executor``, in a copy of the caller's context, so tracing callbacks see
        them), which takes the writer lock first and releases it last: the lock is held
        across the whole write, embedding included, as in the sync call.

        Raises:
            TypeError: see :meth:`add_documents`.
            ValueError: see :meth:`add_documents`.
        """
        refuse_non_documents(documents)
        parents = children = reused = 0
        with ThreadPoolExecutor(1, thread_name_prefix="gated-parent-write") as storage:
            async with self._awriting(storage):
                merged, splits = await _run(storage, self._merge_and_split, documents)
                documents = merged.documents
                todo, manifests = await _run(storage, self._plan, documents, splits)
                for batch in write_batches(todo):
                    prepared, work = lay_out(batch, self.parent_representation)
                    saved = await _run(storage, self._replaced_versions, batch, manifests)
                    embedding = self._embedding(work, saved)
                    self._attach(
                        prepared,
                        embedding,
                        await self._aembed_documents(embedding.new_texts),
                        [await self.embeddings.aembed_query(t) for t in embedding.new_queries],
                    )
                    _keep_pages(prepared, merged)
                    await _run(storage, self._write, prepared, manifests, saved)
                    parents += sum(len(p.parents) for p in prepared)
                    children += sum(len(p.children) for p in prepared)
                    reused += embedding.reused
        return IndexReport(len(todo), parents, children, len(documents) - len(todo), reused)

    def _merge_and_split(
        self, documents: Sequence[Document]
    ) -> tuple[MergedPages, list[ParentChildSplit]]:
        """Merge pages of one source (with those indexed), split, refuse what cannot be written.

        Under the writer lock: the pages already indexed must not change before this write.
        """
        merged = merge_pages(documents, self._indexed_pages)
        split_one = functools.partial(
            split_document,
            parent_splitter=self.parent_splitter,
            child_splitter=self.child_splitter,
        )
        with ThreadPoolExecutor(SPLIT_THREADS, thread_name_prefix="gated-parent-split") as pool:
            splits = list(pool.map(split_one, merged.documents))
        refuse_duplicates([s.doc_id for s in splits])
        refuse_empty(splits)
        refuse_unstorable(merged.documents, [s.doc_id for s in splits])
        for document, split in zip(merged.documents, splits, strict=True):
            warn_flat_structure(
                split.doc_id,
                (p.metadata[keys.LEVEL] for p in split.parents),
                sum(len(p.page_content) for p in split.parents),
                document.metadata.get(keys.SOURCE),
            )
        return merged, splits

    def _plan(
        self, documents: Sequence[Document], splits: Sequence[ParentChildSplit]
    ) -> tuple[list[Item], dict[str, dict[str, Any]]]:
        """The documents that changed (under the writer lock), and the index's manifests."""
        digests = [content_hash(d) for d in documents]
        manifests = self._manifests([s.doc_id for s in splits])
        todo = [
            (doc, split, digest)
            for doc, split, digest in zip(documents, splits, digests, strict=True)
            if (manifests.get(split.doc_id) or {}).get("hash") != digest
            or manifests[split.doc_id].get("status") != "complete"
        ]
        self._refuse_foreign_ids([s for _, s, _ in todo])
        first_write = bool(todo) and self.config["dimension"] is None
        if self._remember_metadata_keys(documents) and not first_write:
            self._put_config()  # a first write stores its keys with the dimension it learns
        return todo, manifests

    def _replaced_versions(
        self, batch: Sequence[Item], manifests: Mapping[str, dict[str, Any]]
    ) -> list[tuple[str, SavedVersion]]:
        """The stored versions a batch replaces (those complete), saved before it writes."""
        ids = [split.doc_id for _, split, _ in batch]
        return self._saved_versions(
            {d: manifests[d] for d in ids if (manifests.get(d) or {}).get("status") == "complete"}
        )

    def _embedding(
        self, work: EmbeddingWork, saved: Sequence[tuple[str, SavedVersion]]
    ) -> BatchEmbedding:
        """What a batch must embed, knowing the vectors of the versions it replaces."""
        return BatchEmbedding.of(work, [v for _, v in saved], self.parent_representation)

    def _attach(
        self,
        prepared: list[Prepared],
        embedding: BatchEmbedding,
        texts: list[list[float]],
        queries: list[list[float]],
    ) -> None:
        """Give each document its vectors: those just embedded and those known."""
        children, parents, query_vectors = embedding.vectors(texts, queries)
        attach(prepared, self._matrix(children), self._matrix(parents), query_vectors)

    def _embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embeddings.embed_documents(texts) if texts else []

    async def _aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self.embeddings.aembed_documents(texts) if texts else []

    def _matrix(self, vectors: list[list[float]]) -> NDArray[np.float32]:
        """Embeddings as a normalized matrix, refused if not of the index's dimension."""
        if vectors:
            self.check_dimension(vectors[0])
        return normalized(vectors, len(vectors))

    def _write(
        self,
        prepared: list[Prepared],
        manifests: dict[str, dict[str, Any]],
        saved: list[tuple[str, SavedVersion]],
    ) -> None:
        """Journalled write: pending manifest, deletes, parents, children, complete manifest.

        ``saved``: the versions it replaces (:meth:`_replaced_versions`), for its undo record.
        """
        if not prepared:
            return
        self._learn_dimension(prepared)
        with self._changing():
            self._write_changes(prepared, manifests, saved)

    def _learn_dimension(self, prepared: Sequence[Prepared]) -> None:
        """Check every vector's length; the first write of an index records it as its dimension."""
        widths = {
            matrix.shape[1]
            for item in prepared
            for matrix in (item.child_vectors, item.parent_vectors)
            if len(matrix)
        }
        for width in sorted(widths):
            self.check_dimension([0.0] * width)
        if len(widths) > 1:
            msg = (
                f"the embeddings gave vectors of {' and '.join(map(str, sorted(widths)))} "
                "dimensions in one write (embed_query and embed_documents differ); use "
                "embeddings whose vectors all have one length"
            )
            raise ValueError(msg)
        if self.config["dimension"] is None and widths:
            self.config["dimension"] = widths.pop()
            self._put_config()

    def _write_changes(
        self,
        prepared: list[Prepared],
        manifests: dict[str, dict[str, Any]],
        saved: list[tuple[str, SavedVersion]],
    ) -> None:
        """The write itself, under :meth:`_changing`.

        ``saved`` are the versions it replaces, for its undo record (a rollback's restore, its
        manifest pending, replaces none: it keeps the version saved for it).
        """
        old = {p.doc_id: manifests.get(p.doc_id) or {} for p in prepared}
        self.undo.save(saved)
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
        self.section_store.put([s for p in prepared for s in _sections_of(p)])
        self.vectors.upsert_parents(
            [d.metadata[keys.PARENT_ID] for d in parents],
            np.concatenate([p.parent_vectors for p in prepared]),
            [d.metadata for d in parents],
            # A replaced document may have lost a metadata key its stored vectors still hold.
            clear=self.config["metadata_keys"] if any(old.values()) else (),
        )
        children = [d for p in prepared for d in p.children]
        if children:
            self.vectors.upsert_children(
                [d.metadata[keys.CHUNK_ID] for d in children],
                np.concatenate([p.child_vectors for p in prepared if p.children]),
                [own_metadata(d.metadata) for d in children],
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
                        **({PAGES_RECORD: p.pages} if p.pages is not None else {}),
                    },
                )
                for p in prepared
            ]
        )
        self.undo.forget([p.doc_id for p in prepared if old[p.doc_id]])

    def _saved_versions(
        self, manifests: Mapping[str, dict[str, Any]]
    ) -> list[tuple[str, SavedVersion]]:
        """Documents as stored now: each one's manifest and section records, with their parents.

        Read together, however many documents a write replaces: one read of the records, of
        the docstore and of each vector collection. A record written before records held their
        parent gets the docstore's copy. The vectors are the vector store's (float32; a record
        keeps float16 copies), so a rollback writes back the very vectors it replaced; a vector
        missing there keeps the record's.
        """
        if not manifests:
            return []
        records = self.section_store.get([p for m in manifests.values() for p in m["parents"]])
        lacking = [pid for pid, r in records.items() if r.parent is None or r.child_terms is None]
        for pid, parent in zip(lacking, self._read_parents(lacking), strict=True):
            record = records.pop(pid)
            if parent is not None:
                records[pid] = section_of(
                    parent, record.vector, record.children, record.child_vectors
                )
        stored_parents, stored_children = self.vectors.vectors_of(
            list(records), [str(own[keys.CHUNK_ID]) for r in records.values() for own in r.children]
        )
        return [
            (
                doc_id,
                SavedVersion(
                    manifest,
                    [
                        _with_vectors(records[pid], stored_parents, stored_children)
                        for pid in manifest["parents"]
                        if pid in records
                    ],
                ),
            )
            for doc_id, manifest in manifests.items()
        ]

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Remove documents from every store; returns how many were present.

        Raises:
            TypeError: ``doc_ids`` is one string (it would be read as its characters).
        """
        doc_ids = _id_list(doc_ids)
        with self._writing():
            return self._delete(doc_ids)

    async def adelete(self, doc_ids: Iterable[str]) -> int:
        """:meth:`delete` on a worker thread (langchain-core's ``run_in_executor``).

        A delete embeds nothing: the whole of it, writer lock included, runs on that thread.
        """
        return await run_in_executor(None, self.delete, _id_list(doc_ids))

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
        self.section_store.delete(list(parent_ids))
        self.docstore.mdelete(list(parent_ids))
        if self.sparse is not None:
            self.sparse.delete(list(parent_ids))

    def recover(self) -> list[str]:
        """Roll back documents whose last write did not finish; returns their ids.

        A replaced document gets its previous version back; a new one is removed. Versions
        saved by a write that finished (its process died before dropping them) are dropped.
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
                if self.journal.config() is None:
                    self._put_config()
                recovered = self._recover()
                self._upgrade()
                try:
                    yield recovered
                except Exception:
                    self._undo_failed_write()
                    raise
            finally:
                self._write_depth = 0
                self.writer_lock.release()

    def _recover(self) -> list[str]:
        """Roll back unfinished document writes and close a stamp left "writing"."""
        recovered = self._rollback_unfinished()
        if self._stamp.writing:  # a writer stopped between its last change and its stamp
            # Its last change may have been the first to store vectors: any document left
            # complete says so (its vectors were written before its manifest).
            stored = self._stamp.vectors or bool(self.journal.doc_ids())
            self._advance(replace(self._stamp, writing=False, vectors=stored))
        return recovered

    def _undo_failed_write(self) -> None:
        """Roll back what a write that raised had changed, before it lets go of the lock.

        Otherwise a replaced document would stay missing until the next write. If the stores
        fail again (one is unreachable), the stamp stays "writing": readers keep checking
        documents, and the next write rolls back.
        """
        try:
            self._recover()
        except Exception:
            logger.exception(
                "could not roll back the failed write; the next write will, or run recover() "
                "(gated-parent recover) once the stores answer again"
            )

    def _upgrade(self) -> None:
        """Bring an index written by an older version to this one (see :mod:`.formats`)."""
        if self.config.get("format_version") == UPGRADABLE:
            with self._changing():
                added = add_section_records(self.docstore, self.vectors, self.section_store)
            self.config["format_version"] = FORMAT_VERSION
            self._put_config()
            logger.warning(
                "upgraded the index from format %d to %d (%d section records written)",
                UPGRADABLE,
                FORMAT_VERSION,
                added,
            )
        elif self.config.get("format_version") in READ_AS_IS:
            self.config["format_version"] = FORMAT_VERSION
            self._put_config()
            logger.info(
                "marked the index format %d: section records written from now on have layout "
                "%d and hold their parent (those written before are read as they are)",
                FORMAT_VERSION,
                LAYOUT,
            )
        adopted = self.vectors.adopt_settings()
        if adopted:
            logger.info("the vector collections now have this index's %s", " and ".join(adopted))
        if self.config.get(INDEX_NAME) is None:  # an index written before names were kept
            self.config[INDEX_NAME] = self.name
            self._put_config()
        if not self.config.get(PARENT_IDS_ON_VECTORS):
            named = self.vectors.name_parents() if self._has_vectors() else 0
            self.config[PARENT_IDS_ON_VECTORS] = True
            self._put_config()
            if named:
                logger.warning("gave %d parent vectors their parent_id (a filter names it)", named)

    @asynccontextmanager
    async def _awriting(self, storage: Executor) -> AsyncIterator[list[str]]:
        """:meth:`_writing` entered and left on ``storage``, one thread that holds the lock."""
        writing = self._writing()
        recovered = await _run(storage, writing.__enter__)
        try:
            yield recovered
        except BaseException as error:
            if not await _run(storage, writing.__exit__, type(error), error, error.__traceback__):
                raise
        else:
            await _run(storage, writing.__exit__, None, None, None)

    @contextmanager
    def _changing(self) -> Iterator[None]:
        """Mark the stamp as writing while the stores change (readers then check documents)."""
        self._advance(replace(self._stamp, seq=self._stamp.seq + 1, writing=True))
        yield
        self._advance(replace(self._stamp, seq=self._stamp.seq + 1, writing=False, vectors=True))

    def _put_config(self) -> None:
        self._stamp = self.journal.put_config(self.config, self._stamp)
        self._config_version = self._stamp.config
        self.vectors.version_seen = self._stamp.seq

    def _advance(self, stamp: journals.Stamp) -> None:
        """Store this writer's new stamp; its own changes need no re-sync of its vector view.

        Its own reads of the old version are dropped (its next search may not refresh first).
        """
        self._stamp = self.journal.put_stamp(stamp)
        self.vectors.version_seen = self._stamp.seq
        self.reads.observe(self._stamp)

    def _rollback_unfinished(self) -> list[str]:
        """Put each document whose write did not finish back as it was before that write.

        A replaced document gets its saved version back (written as a replace, so a crash
        during the restore leaves it pending, to be restored again); a new one, or one being
        deleted, is removed. Versions saved by writes that finished are dropped.
        """
        manifests = self.journal.all_manifests()
        pending = [d for d, m in manifests.items() if m["status"] != "complete"]
        if pending:
            saved = self.undo.get(pending)
            logger.warning(
                "rolling back %d interrupted document write(s): %s (%d back to their "
                "previous version)",
                len(pending),
                ", ".join(pending),
                len(saved),
            )
            self._delete([d for d in pending if d not in saved])
            if saved:  # one journalled write, as the interrupted batch was
                with self._changing():
                    self._write_changes(
                        [_prepared_of(d, v) for d, v in saved.items()], manifests, []
                    )
        self.undo.forget(self.undo.doc_ids())
        return pending

    # ------------------------------------------------------------------ manifest
    def _manifests(self, doc_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return self.journal.manifests(doc_ids)

    def _put_manifests(self, entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.journal.put_manifests(entries)

    def _indexed_pages(self, doc_ids: list[str]) -> dict[str, dict[str, str]]:
        """The page texts recorded for documents merged from pages (see ``merge_pages``)."""
        return {
            doc_id: entry[PAGES_RECORD]
            for doc_id, entry in self._manifests(doc_ids).items()
            if entry.get("status") == "complete" and PAGES_RECORD in entry
        }

    def _refuse_foreign_ids(self, splits: Sequence[Any]) -> None:
        """Ids never collide across documents: refuse ids owned by another document.

        Another document of this batch, or one stored.
        """
        owner: dict[str, str] = {}
        for split in splits:
            for parent in split.parents:
                pid = parent.metadata[keys.PARENT_ID]
                if owner.setdefault(pid, split.doc_id) != split.doc_id:
                    _refuse_taken_id(pid, split.doc_id, owner[pid])
        if not owner or not self._has_vectors():
            return
        for pid, other in self.vectors.parent_owners(list(owner)).items():
            if other != owner[pid]:
                _refuse_taken_id(pid, owner[pid], other)

    def _remember_metadata_keys(self, documents: Sequence[Document]) -> bool:
        """Note which metadata keys exist, so a filter on an unknown key can be refused.

        Returns:
            Whether the config gained keys (the caller stores it).
        """
        known = set(self.config.get("metadata_keys", []))
        new = known | {k for d in documents for k in user_metadata(d)} | {keys.DOC_ID}
        self.config["metadata_keys"] = sorted(new)
        return new != known

    # ------------------------------------------------------------------ reading
    def search_parents(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The gate's dense search: the ``n`` parents nearest the query, ``(parent_id, score)``."""
        if n < 1 or not self._has_vectors():
            return []
        return self.vectors.search_parents(vector, n, where)

    def searches_apply(self, where: dict[str, Any] | None) -> bool:
        """Whether the term and child-vector searches apply ``where`` themselves.

        They apply a filter on ``doc_id`` alone; any other only the dense parent search (the
        vector store) and :meth:`sections` apply.
        """
        return not where or _doc_ids_of(where) is not None

    def search_sparse(
        self, query: str, n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The gate's term search: the ``n`` best ``(parent_id, score)`` of the sparse index.

        A filter on ``doc_id`` alone is applied in the search; any other filter is applied by
        :meth:`sections` afterwards, so over-fetch for it. Empty without a sparse index.
        """
        if self.sparse is None or n < 1:
            return []
        return self.sparse.search(query, n, _doc_ids_of(where))

    def search_children(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``n`` children nearest the query vector, as ``(child_id, score in [0, 1])``.

        Only a ``doc_id`` filter is applied here (children store no user metadata); the
        parents they point to are filtered by :meth:`sections`.
        """
        if n < 1 or not self._has_vectors():
            return []
        doc_ids = _doc_ids_of(where)
        child_where = None if doc_ids is None else {keys.DOC_ID: {"$in": doc_ids}}
        return self.vectors.search_children(vector, n, child_where)

    def sections(
        self,
        parent_ids: Sequence[str],
        where: dict[str, Any] | None = None,
        *,
        unchecked: Sequence[str] = (),
    ) -> dict[str, Section]:
        """The section records of the gate's candidates, by parent id, in the order given.

        ``unchecked`` are the ids found by a search that could not apply ``where`` (the term
        and child searches apply a ``doc_id`` filter only, so any other filter is checked here,
        in the vector store): those failing it are left out.
        """
        found = self.reads.headers(parent_ids)
        if where and unchecked and _doc_ids_of(where) is None:
            failing = set(unchecked) - self.vectors.allowed_parents(list(unchecked), where)
            found = {p: s for p, s in found.items() if p not in failing}
        return found

    def document_sections(self, where: dict[str, Any] | None) -> dict[str, Section] | None:
        """Every section of a few documents, to score exactly; ``None`` to search instead.

        The documents a ``doc_id`` filter names, if at most :data:`EXACT_DOCUMENTS`; with no
        filter, every document of an index that holds at most that many. The gate then scores
        all their sections and children exactly, from their records, instead of searching the
        vector index: a few dozen dot products cost less than an ANN search, and an exact
        score finds every stored vector (an HNSW graph of near-identical vectors can leave one
        that no query returns). A filter on ``parent_id`` alone gets the sections it names,
        however many (parent vectors written before this release do not carry their id).
        ``None`` for any other filter or a larger index. Documents whose last write did not
        finish are left out.
        """
        parent_ids = _ids_of(where, keys.PARENT_ID)
        if parent_ids is not None:
            return self.reads.of_parents(parent_ids)
        doc_ids = self.reads.few_documents() if where is None else _doc_ids_of(where)
        if doc_ids is None or len(doc_ids) > EXACT_DOCUMENTS:
            return None
        return self.reads.of_documents(doc_ids)

    def children_of(self, parent_ids: Sequence[str]) -> ChildRows:
        """Every child of the given parents, with vectors, texts and terms, for exact scoring.

        Read consistently with any write another process makes meanwhile, and kept for the
        index's current version (see :meth:`.SectionReads.children_of`).
        """
        return self.reads.children_of(parent_ids)

    def _has_vectors(self) -> bool:
        """Whether a write has stored vectors (until then, readers leave Chroma alone).

        When another process's first write is seen, this index syncs with it before reading:
        that write's config carries the dimension learned from its vectors, and a local
        folder's Chroma view opened before it has no vector segments to read.
        """
        if not self._vectors_seen and self.journal.stamp().vectors:
            self.refresh()
            self._vectors_seen = self.config["dimension"] is not None
        return self._vectors_seen

    def get_parents(self, parent_ids: Sequence[str]) -> list[Document | None]:
        """Parents from the docstore, ``None`` for an id it does not hold."""
        return self._read_parents(list(parent_ids))

    def check_filter(self, where: dict[str, Any] | None) -> None:
        """Refuse a malformed filter, or one on a metadata key no document of the index has.

        Checked before any search, so a typo is an error that names the key rather than an
        empty result, and a server can answer 4xx before it starts streaming. Keys another
        process added since this index was opened are known (see :meth:`refresh`).
        """
        self.refresh()
        refuse_until_upgraded(self.config)
        if where:
            validate_filter(where)
        named = filter_keys(where or {})
        if keys.PARENT_ID in named and _ids_of(where, keys.PARENT_ID) is None:
            refuse_parent_filter_until_named(self.config)
        known = set(self.config.get("metadata_keys", [])) | {
            keys.DOC_ID,
            keys.PARENT_ID,
            keys.TITLE,
            keys.SOURCE,
        }
        operators = sorted(k for k in named if k.startswith("$"))
        if operators:  # Chroma reads an unknown operator where a key goes as a key
            msg = (
                f"filter {where!r}: {', '.join(map(repr, operators))} is no operator; a filter's "
                "keys are metadata keys, $and or $or (operators such as $in go inside a key's "
                'value: {"doc_id": {"$in": [...]}})'
            )
            raise ValueError(msg)
        unknown = sorted(named - known)
        if unknown:
            msg = (
                f"filter key(s) {', '.join(map(repr, unknown))} are not metadata of this index; "
                f"known keys: {', '.join(sorted(known))}"
            )
            raise ValueError(msg)

    # ------------------------------------------------------------------ inspection
    def verify(self) -> VerifyReport:
        """Check that the docstore, section records, term index and vectors agree exactly."""
        self.refresh()
        problems: list[str] = []
        manifests = self.journal.all_manifests()
        stored_parents = set(self.docstore.yield_keys())
        vectors = self._has_vectors()
        parent_vectors = self.vectors.parent_ids() if vectors else set()
        child_parent = self.vectors.child_parents() if vectors else {}
        expected_parents = {p for m in manifests.values() for p in m.get("parents", [])}
        expected_children = {c for m in manifests.values() for c in m.get("children", [])}
        records = self.section_store.parent_ids()
        indexed = stored_parents if self.sparse is None else self.sparse.parent_ids()
        unfinished = {d for d, m in manifests.items() if m.get("status") != "complete"}
        checks = [
            ("parent without a section record", stored_parents - records),
            ("section record without a parent", records - stored_parents),
            (
                "section record's copy of its parent unlike the docstore's",
                self.section_store.copies_out_of_step(
                    sorted(records & stored_parents), self._read_parents
                ),
            ),
            ("parent without a term-index row", stored_parents - indexed),
            ("term-index row without a parent", indexed - stored_parents),
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
            ("unfinished write", unfinished),
            # A crash between a write's last step and dropping its saved versions leaves them.
            ("saved version of a finished write", set(self.undo.doc_ids()) - unfinished),
            (
                "stored postings out of step with the term index",
                set() if self.sparse is None else set(self.sparse.out_of_step_terms()),
            ),
        ]
        for label, ids in checks:
            problems.extend(f"{label}: {i}" for i in sorted(ids))
        return VerifyReport(len(manifests), len(stored_parents), len(child_parent), problems)

    def stats(self) -> dict[str, Any]:
        """Counts, size on disk and the embedding model, for ``gated-parent stats``."""
        self.refresh()
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
    def searches_in_process(self) -> bool:
        """Whether the gate's searches all run in this process (a local Chroma, SQLite terms)."""
        return self.vectors.in_process and (self.sparse is None or self.sparse.in_process)

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


def _keep_pages(prepared: Sequence[Prepared], merged: MergedPages) -> None:
    """Give each document merged from pages its page texts, for its manifest."""
    for item in prepared:
        item.pages = merged.pages.get(item.doc_id)


def _prepare_directory(directory: Path) -> None:
    """Create the index folder, or say why it cannot be used."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        # A file of its own: processes opening the folder at once must not remove each other's.
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-probe-"):
            pass
    except OSError as error:
        msg = (
            f"cannot use index directory {str(directory)!r}: {error.strerror or error}; "
            "choose a writable folder"
        )
        raise ValueError(msg) from error


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


async def _run(storage: Executor, function: Callable[..., _T], *args: Any) -> _T:
    """Run a storage step on ``storage`` in a copy of the caller's context (tracing sees it)."""
    return await run_in_executor(storage, copy_context().run, function, *args)


def _prepared_of(doc_id: str, version: SavedVersion) -> Prepared:
    """A saved version, laid out to be written again (its children in the manifest's order)."""
    sections = version.sections
    parents = [s.parent for s in sections if s.parent is not None]  # each has (_saved_versions)
    children = [
        Document(page_content=text, metadata=own)
        for s, parent in zip(sections, parents, strict=True)
        for own, text in zip(s.children, child_texts(parent, s.children), strict=True)
    ]
    place = {cid: n for n, cid in enumerate(version.manifest["children"])}
    order = sorted(range(len(children)), key=lambda n: place[children[n].metadata[keys.CHUNK_ID]])
    return Prepared(
        doc_id=doc_id,
        digest=version.manifest["hash"],
        parents=parents,
        children=[children[n] for n in order],
        child_vectors=np.concatenate([s.child_vectors for s in sections])[order],
        parent_vectors=np.stack([s.vector for s in sections]),
        pages=version.manifest.get(PAGES_RECORD),
    )


def _with_vectors(
    record: Section,
    parents: Mapping[str, NDArray[np.float32]],
    children: Mapping[str, NDArray[np.float32]],
) -> Section:
    """``record`` with the vector store's vectors wherever it has them (``_saved_versions``)."""
    rows = [
        children.get(str(own[keys.CHUNK_ID]), row)
        for own, row in zip(record.children, record.child_vectors, strict=True)
    ]
    return replace(
        record,
        vector=parents.get(record.parent_id, record.vector),
        child_vectors=np.array(rows, dtype=np.float32).reshape(record.child_vectors.shape),
    )


def _sections_of(item: Prepared) -> list[Section]:
    """The section records of one prepared document (see :mod:`.stores.sections`)."""
    rows_of: dict[str, list[int]] = {}
    for row, child in enumerate(item.children):
        rows_of.setdefault(child.metadata[keys.PARENT_ID], []).append(row)
    out = []
    for row, parent in enumerate(item.parents):
        mine = rows_of.get(parent.metadata[keys.PARENT_ID], [])
        out.append(
            section_of(
                parent,
                item.parent_vectors[row],
                [own_metadata(item.children[n].metadata) for n in mine],
                item.child_vectors[mine],
            )
        )
    return out


def _sparse_row(parent: Document) -> SparseRow:
    meta = parent.metadata
    return SparseRow(
        parent_id=meta[keys.PARENT_ID],
        doc_id=str(meta[keys.DOC_ID]),
        text=heading_context(meta, parent.page_content),
    )


def _refuse_taken_id(parent_id: str, doc_id: str, owner: str) -> NoReturn:
    msg = (
        f"parent id {parent_id!r} of document {doc_id!r} already belongs to document {owner!r}; "
        "give sections ids unique within the index (e.g. prefix them with the document id)"
    )
    raise ValueError(msg)


def _id_list(doc_ids: Iterable[str]) -> list[str]:
    """The document ids to delete, refusing a lone string (iterated, it gives characters)."""
    if isinstance(doc_ids, (str, bytes)):
        msg = (
            f"delete takes a list of document ids, got the string {doc_ids!r}; "
            f"use delete([{doc_ids!r}])"
        )
        raise TypeError(msg)
    return list(doc_ids)


def _doc_ids_of(where: dict[str, Any] | None) -> list[str] | None:
    """The documents a filter on ``doc_id`` alone allows (``None``: no such filter)."""
    return _ids_of(where, keys.DOC_ID)


def _ids_of(where: dict[str, Any] | None, key: str) -> list[str] | None:
    """The ids a filter on ``key`` alone allows (``None``: no such filter).

    Only ids Chroma would accept (strings, integers) count: any other value leaves the filter
    to the vector store, which refuses it with its own error.
    """
    if not where or set(where) != {key}:
        return None
    value = where[key]
    if isinstance(value, dict) and set(value) == {"$eq"}:
        value = value["$eq"]
    values = value["$in"] if isinstance(value, dict) and set(value) == {"$in"} else [value]
    if not isinstance(values, list) or not all(_is_id(v) for v in values):
        return None
    return [str(v) for v in values]


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
