"""The index's vectors in Chroma: one collection of parent vectors, one of child vectors.

Everything that knows Chroma's API lives here: metadata converted to and from what Chroma
stores, writes and deletes batched to the client's maximum, reads retried while they race
another process's delete, a local folder's view reopened when another process wrote, and a
local folder's files locked across processes while they are read or written.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import sys
import time
import weakref
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from langchain_gated_parent import keys
from langchain_gated_parent.stores.vector_files import VectorFilesLock

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from chromadb.api import ClientAPI
    from chromadb.api.collection_configuration import (
        CreateCollectionConfiguration,
        UpdateCollectionConfiguration,
    )
    from chromadb.api.models.Collection import Collection
    from langchain_core.embeddings import Embeddings
    from numpy.typing import NDArray

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
READ_ATTEMPTS = 7
"""Attempts of a Chroma read that races a delete (see :func:`read_racing`): about 1.3 s in all."""
LIST_PAGE = 10_000
"""Vectors listed per read when every child is listed (``verify``): a local Chroma reads a
page's metadata in one SQL statement, which SQLite refuses past 32,766 values (at 1,169 QASPER
papers, all 61,319 children in one read failed with "too many SQL variables")."""


_VERSION_SEEN: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
"""For each chromadb client system of this process (by its server object), the version of the
index (the journal's ``seq``) its view of the vectors is known to hold. chromadb gives every
client of one folder in a process the same system, so an index opened after another on the
same folder shares that one's view, however old."""


def folder_client(folder: str, like: ClientAPI | None = None) -> tuple[ClientAPI, bool]:
    """A chromadb client on a local folder, and whether this process had a view of it already.

    chromadb keeps one client system per folder in a process (in a private registry of
    chromadb 1.x), and a new client shares it. ``like``: a client whose settings, tenant and
    database the new one takes (one a caller gave, reopened).
    """
    import chromadb  # noqa: PLC0415 (heavy import, only when an index is opened)
    from chromadb.api.shared_system_client import SharedSystemClient  # noqa: PLC0415

    had_view = folder in SharedSystemClient._identifier_to_system  # noqa: SLF001
    if like is None:
        return chromadb.PersistentClient(path=folder), had_view
    client = chromadb.PersistentClient(
        path=folder,
        settings=copy.copy(like.get_settings()),  # PersistentClient sets fields of the one given
        tenant=like.tenant,
        database=like.database,
    )
    return client, had_view


class ConcurrentWriteError(RuntimeError):
    """A read kept colliding with another process's writes; retrying the query later works."""


_IDS = frozenset({keys.PARENT_ID, keys.DOC_ID})
"""The package's keys a vector keeps: filters name them, and ``child_parents`` reads one."""


def to_chroma(metadata: Mapping[str, Any]) -> dict[str, str | int | float | bool]:
    """Vector metadata: what a filter can name, the parent and document ids and the user's scalars.

    Nothing else goes in (the package's other keys, lists, ``None``): each key costs a row
    and an index entry per vector, and no query reads them (the gate scores from section
    records, the docstore keeps every parent's full metadata).
    """
    return {
        key: value
        for key, value in metadata.items()
        if (key in _IDS or key not in keys.RESERVED) and isinstance(value, keys.USER_VALUE_TYPES)
    }


def from_chroma(metadata: Mapping[str, Any] | None, **ids: str) -> dict[str, Any]:
    """A child's metadata as format 3 kept it in Chroma: the section path a list, its id back in."""
    out = {**(metadata or {}), **ids}
    path = out.get(keys.SECTION_PATH)
    if isinstance(path, str):
        out[keys.SECTION_PATH] = json.loads(path)
    return out


def read_racing(read: Callable[[], _T]) -> _T:
    """Run a Chroma read, retrying the transient error Chroma gives when it races a delete.

    Chroma (1.5) can fail a read with ``InternalError: ... Error finding id`` when a record
    its vector index matched is deleted before it is fetched: on a server beside a deleting
    writer, and in a local folder when another process deleted records this process's copy of
    the vector index still holds. A later attempt sees the delete; the pauses double from
    10 ms. If every attempt fails the read is refused with :class:`ConcurrentWriteError`.
    Other errors are raised at once.
    """
    from chromadb.errors import InternalError  # noqa: PLC0415 (chromadb loads with the index)

    for attempt in range(READ_ATTEMPTS):
        try:
            return read()
        except InternalError as error:  # noqa: PERF203 (a bounded retry loop)
            if "Error finding id" not in str(error):
                raise
            logger.debug("a read raced a delete (attempt %d), retrying: %s", attempt + 1, error)
            last = error
            time.sleep(0.01 * 2**attempt)
    msg = (
        f"the index kept changing under this read ({READ_ATTEMPTS} attempts: Chroma reported "
        "a record deleted by another process's write); retry the query"
    )
    raise ConcurrentWriteError(msg) from last


SPACE = "cosine"
"""The distance both collections use: scores are cosine similarities (see ``scoring``)."""
SYNC_THRESHOLD = 1
"""Vectors a collection takes before Chroma saves its HNSW graph again: 1, after every write.

At Chroma's default (1000) the last writes' vectors wait in Chroma's log, and every process
that opens the index inserts them into its own copy of the graph, which comes out differently
each time: two processes (a server's workers, or one process before and after a restart) then
give different answers to the same question on the same index, and each pays for the inserts
when it opens. A configuration given with the client that names its own ``sync_threshold``
is kept (BENCHMARKS.md, "The same answers in every process")."""
CHILD_SEARCH_EF = 40
"""Candidates Chroma's HNSW search over the child vectors keeps while it walks the graph (its
``ef_search``; Chroma's default is 100, which the parent vectors keep; it keeps at least the
number of results asked).

The child-vector search only proposes candidate sections, which the gate then scores exactly
from their records, so a slightly less exact walk costs little: on QASPER train, with the
child search asking ``n`` children instead of ``2n`` too, the defaults' nDCG@10 came out 1.3%
lower across the collection and the rest within 0.3%, and the query, the one vector-index
search a query across the collection makes, took 0.3 ms less at 1,169 papers (BENCHMARKS.md,
"This release's runs"). The parent vectors keep Chroma's walk: a gate of dense parent search alone
lost 7.5% of its nDCG@10 on dev at 40. A configuration given with the client that names its
own ``ef_search`` is kept."""


@dataclass(frozen=True)
class ChromaSource:
    """What the index takes from the ``client`` it is given."""

    client: ClientAPI
    collection: str | None = None
    """A ``langchain_chroma.Chroma``'s collection name: the prefix of the index's collections."""
    metadata: Mapping[str, Any] | None = None
    """That collection's metadata, given to the index's collections too."""
    configuration: Mapping[str, Any] | None = None
    """That collection's configuration (HNSW settings), given to the index's collections too."""
    embeddings: Embeddings | None = None
    """That vector store's embeddings, used when the index is given none."""


def chroma_source(client: object) -> ChromaSource:
    """A chromadb client, or a ``langchain_chroma.Chroma``'s client and collection settings.

    Raises:
        TypeError: ``client`` is neither.
        ValueError: the Chroma's collection asks for another distance than cosine.
    """
    from chromadb.api import ClientAPI  # noqa: PLC0415 (chromadb loads with the index)

    if isinstance(client, ClientAPI):
        return ChromaSource(client)
    langchain_chroma = sys.modules.get("langchain_chroma")  # a Chroma given: already imported
    if langchain_chroma is not None and isinstance(client, langchain_chroma.Chroma):
        metadata = dict(client._collection_metadata or {})  # noqa: SLF001 (no public accessor)
        configuration = dict(client._collection_configuration or {})  # noqa: SLF001
        spaces = {
            metadata.pop("hnsw:space", SPACE),
            dict(configuration.get("hnsw") or {}).get("space", SPACE),
        }
        if spaces != {SPACE}:
            msg = (
                f"the Chroma's collection {client._collection_name!r} uses the "  # noqa: SLF001
                f"{' / '.join(sorted(spaces - {SPACE}))} distance, and the gated index scores by "
                f"cosine similarity; create the Chroma without a space, or with "
                f"collection_configuration={{'hnsw': {{'space': 'cosine'}}}}"
            )
            raise ValueError(msg)
        return ChromaSource(
            client._client,  # noqa: SLF001 (langchain_chroma keeps its client there)
            client._collection_name,  # noqa: SLF001
            metadata or None,
            configuration or None,
            client.embeddings,
        )
    msg = (
        f"client must be a chromadb client (chromadb.PersistentClient(path), "
        f"chromadb.HttpClient(host, port), chromadb.EphemeralClient()) or a "
        f"langchain_chroma.Chroma, got {type(client).__module__}.{type(client).__qualname__}"
    )
    raise TypeError(msg)


def is_durable(client: ClientAPI) -> str | None:
    """``"persistent"`` or ``"remote"`` for a client whose vectors outlive the process."""
    settings = client.get_settings()
    if settings.is_persistent:
        return "persistent"
    if "fastapi" in str(settings.chroma_api_impl).lower():
        return "remote"
    return None


def validate_filter(where: dict[str, Any]) -> None:
    """Refuse a malformed Chroma ``where`` filter: Chroma's own check, naming the filter.

    Chroma's message names the operand it refused but not the filter it sits in.
    """
    from chromadb.api.types import validate_where  # noqa: PLC0415 (heavy import)

    try:
        validate_where(where)
    except ValueError as error:
        msg = (
            f"filter {where!r} is malformed: {error}; write it in Chroma's where syntax "
            '(e.g. {"doc_id": {"$in": ["a", "b"]}}; an empty $in matches nothing: skip '
            "the search instead)"
        )
        raise ValueError(msg) from error


def filter_keys(where: Mapping[str, Any]) -> set[str]:
    """Metadata keys a Chroma ``where`` filter refers to (through ``$and``/``$or``)."""
    found: set[str] = set()
    for key, value in where.items():
        if key in {"$and", "$or"}:
            for clause in value:
                found |= filter_keys(clause)
        else:
            found.add(key)
    return found


IN_PROCESS_APIS = frozenset(
    {"chromadb.api.rust.RustBindingsAPI", "chromadb.api.segment.SegmentAPI"}
)
"""chromadb's implementations that search in the calling process (any other, such as
``HttpClient``'s, waits on a server)."""


class ChromaVectors:
    """The parent and child vector collections of one index, named ``{name}-parents/children``.

    Args:
        source: the chromadb client holding the collections, and their settings.
        name: the index's name, the prefix of its two collections.
        lock_timeout: seconds a call waits for another process's hold on the vector files
            (:class:`~.vector_files.VectorFilesLock`) before it raises.
    """

    def __init__(
        self,
        source: ChromaSource,
        name: str,
        *,
        lock_timeout: float,
    ) -> None:
        """Open (or create) the two collections."""
        self.client = source.client
        self.name = name
        self.in_process = self.client.get_settings().chroma_api_impl in IN_PROCESS_APIS
        configuration = dict(source.configuration or {})
        hnsw = {
            "sync_threshold": SYNC_THRESHOLD,
            **dict(configuration.get("hnsw") or {}),
            "space": SPACE,
        }
        child_hnsw = {"ef_search": CHILD_SEARCH_EF, **hnsw}
        self._settings = {
            "parents": {"sync_threshold": hnsw["sync_threshold"]},
            "children": {key: child_hnsw[key] for key in ("sync_threshold", "ef_search")},
        }
        """The HNSW settings each collection is given, and given again at a write if it has
        others (see :meth:`adopt_settings`)."""
        self._configurations = {
            part: cast("CreateCollectionConfiguration", {**configuration, "hnsw": settings})
            for part, settings in (("parents", hnsw), ("children", child_hnsw))
        }
        self._metadata = dict(source.metadata) if source.metadata else None
        settings = self.client.get_settings()
        local = self.in_process and settings.is_persistent
        self.folder: str | None = settings.persist_directory if local else None
        """The local folder of the vectors, whichever client opened it: this process's view of
        it is reopened (:meth:`reopen`) when another process wrote."""
        self.files = (
            VectorFilesLock(Path(settings.persist_directory), lock_timeout) if local else None
        )
        """Locked around every call when the vectors are files this process reads itself."""
        self._open_collections()

    def _open_collections(self) -> None:
        self._fresh = True
        self.parents: Collection = self.client.get_or_create_collection(
            f"{self.name}-parents",
            configuration=self._configurations["parents"],
            metadata=self._metadata,
            embedding_function=None,
        )
        self.children: Collection = self.client.get_or_create_collection(
            f"{self.name}-children",
            configuration=self._configurations["children"],
            metadata=self._metadata,
            embedding_function=None,
        )

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold while reading the collections: no other process writes their files meanwhile.

        The first read of a fresh view holds the exclusive lock and applies, for both
        collections, the writes Chroma's log holds that no process applied (Chroma applies
        them at a view's first call, and may save the graph then), so no two processes save
        a graph at once; later reads share the lock.
        """
        if self.files is None:
            yield
            return
        if self._fresh:
            with self.files.exclusive():
                self.parents.count()
                self.children.count()
                self._fresh = False
        with self.files.shared():
            yield

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold while writing the collections: no other process reads or writes their files."""
        if self.files is None:
            yield
            return
        with self.files.exclusive():
            yield

    def adopt_settings(self) -> list[str]:
        """Give collections created with other HNSW settings this index's; the ones changed.

        Collections created by releases before :data:`SYNC_THRESHOLD` or
        :data:`CHILD_SEARCH_EF` kept Chroma's defaults, and Chroma keeps a collection's
        settings from its creation: a write changes them (under the writer lock; an open does
        not write). Settings without an HNSW section (an index Chroma does not build as HNSW)
        are left as they are.
        """
        changed: list[str] = []
        for part, collection in (("parents", self.parents), ("children", self.children)):
            hnsw = (collection.configuration_json or {}).get("hnsw")
            if hnsw is None:
                continue
            differ = {k: v for k, v in self._settings[part].items() if hnsw.get(k) != v}
            if differ:
                with self.writing():
                    collection.modify(
                        configuration=cast("UpdateCollectionConfiguration", {"hnsw": differ})
                    )
                changed.extend(f"{k} of the {part}" for k in differ)
        return changed

    @property
    def version_seen(self) -> int | None:
        """The index version this view of the vectors is known to hold; ``None`` if unknown.

        Shared by every index of this process using the same client system (see
        :data:`_VERSION_SEEN`): one that opened the folder before may have read it long ago.
        """
        return _VERSION_SEEN.get(self._server())

    @version_seen.setter
    def version_seen(self, seq: int) -> None:
        _VERSION_SEEN[self._server()] = seq

    def _server(self) -> Any:
        """The object behind this client's calls: one per chromadb system.

        A private field of chromadb 1.x clients; a client without it stands for itself.
        """
        return getattr(self.client, "_server", self.client)

    def reopen(self) -> None:
        """A fresh client on the folder's Chroma (a new view of its vector index).

        Dropped from chromadb's registry of client systems, the folder's system is loaded anew
        by the next client, with the settings of the one it replaces. Objects still using the
        old system (a client the caller gave keeps it) work on until they are released.
        """
        from chromadb.api.shared_system_client import SharedSystemClient  # noqa: PLC0415

        assert self.folder is not None  # noqa: S101 (only a local folder's view)
        SharedSystemClient._identifier_to_system.pop(self.folder, None)  # noqa: SLF001
        self.client, _ = folder_client(self.folder, like=self.client)
        self._open_collections()

    # ------------------------------------------------------------------ writing
    def upsert_parents(
        self,
        ids: list[str],
        vectors: NDArray[np.float32],
        metadatas: list[dict[str, Any]],
        *,
        clear: Sequence[str] = (),
    ) -> None:
        """Store parent vectors with their metadata (converted by :func:`to_chroma`).

        Chroma's upsert keeps the keys a vector stored before had and the new metadata lacks:
        ``clear`` names keys to remove then (a key given ``None`` is removed, or not stored).
        """
        removed: dict[str, None] = dict.fromkeys(clear)
        self._upsert(self.parents, ids, vectors, [{**removed, **to_chroma(m)} for m in metadatas])

    def upsert_children(
        self, ids: list[str], vectors: NDArray[np.float32], metadatas: list[dict[str, Any]]
    ) -> None:
        """Store child vectors without text: a child's text is a slice of its parent's."""
        self._upsert(self.children, ids, vectors, [to_chroma(m) for m in metadatas])

    def _upsert(
        self,
        collection: Collection,
        ids: list[str],
        vectors: NDArray[np.float32],
        metadatas: Sequence[Mapping[str, str | int | float | bool | None]],
    ) -> None:
        """Write in batches no larger than the client's maximum (Chroma raises beyond it)."""
        size = self.client.get_max_batch_size()
        for start in range(0, len(ids), size):
            end = start + size
            with self.writing():
                collection.upsert(
                    ids=ids[start:end],
                    embeddings=vectors[start:end],
                    metadatas=metadatas[start:end],  # type: ignore[arg-type]
                )

    def delete(self, child_ids: Sequence[str], parent_ids: Sequence[str]) -> None:
        """Children first, then parents: no child vector outlives its parent's."""
        size = self.client.get_max_batch_size()
        with self.writing():
            for start in range(0, len(child_ids), size):
                self.children.delete(ids=list(child_ids[start : start + size]))
            for start in range(0, len(parent_ids), size):
                self.parents.delete(ids=list(parent_ids[start : start + size]))

    def name_parents(self) -> int:
        """Give every stored parent vector its own ``parent_id``; returns how many there are.

        For parent vectors written before they carried it (see :mod:`..formats`).
        """
        parent_ids = sorted(self.parent_ids())
        size = self.client.get_max_batch_size()
        for start in range(0, len(parent_ids), size):
            batch = parent_ids[start : start + size]
            with self.writing():
                self.parents.update(ids=batch, metadatas=[{keys.PARENT_ID: p} for p in batch])
        return len(parent_ids)

    # ------------------------------------------------------------------ reading
    def parent_owners(self, parent_ids: list[str]) -> dict[str, Any]:
        """The document each stored parent vector belongs to (absent ids are left out)."""
        with self.reading():
            found = self.parents.get(ids=parent_ids, include=["metadatas"])
        return {
            pid: (meta or {}).get(keys.DOC_ID)
            for pid, meta in zip(found["ids"], found["metadatas"] or [], strict=True)
        }

    def vectors_of(
        self, parent_ids: list[str], child_ids: list[str]
    ) -> tuple[dict[str, NDArray[np.float32]], dict[str, NDArray[np.float32]]]:
        """The stored vectors of these parents and children, by id (absent ones left out).

        As they were written, in float32: a replaced document's saved version takes them from
        here, since its section records keep float16 copies.
        """
        return self._stored_vectors(self.parents, parent_ids), self._stored_vectors(
            self.children, child_ids
        )

    def _stored_vectors(
        self, collection: Collection, ids: list[str]
    ) -> dict[str, NDArray[np.float32]]:
        """Read in batches no larger than the client's maximum, as :meth:`_upsert` writes."""
        found: dict[str, NDArray[np.float32]] = {}
        size = self.client.get_max_batch_size()
        for start in range(0, len(ids), size):
            batch = ids[start : start + size]
            with self.reading():
                got = read_racing(partial(collection.get, ids=batch, include=["embeddings"]))
            vectors = np.asarray(got["embeddings"], dtype=np.float32)
            found.update(zip(got["ids"], vectors, strict=True))
        return found

    def search_parents(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None
    ) -> list[tuple[str, float]]:
        """The ``n`` parent vectors nearest the query, as ``(parent_id, similarity)``.

        Distances only: what the gate needs of a parent besides is in its section record.
        """
        with self.reading():
            return _nearest(self.parents, vector, n, where)

    def search_children(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None
    ) -> list[tuple[str, float]]:
        """The ``n`` child vectors nearest the query, as ``(child_id, similarity)``.

        Distances only: a child's id names its parent, so no metadata row is read.
        """
        with self.reading():
            return _nearest(self.children, vector, n, where)

    def allowed_parents(self, parent_ids: list[str], where: dict[str, Any]) -> set[str]:
        """Those of the stored parents that pass ``where`` (a filter on user metadata)."""
        with self.reading():
            result = read_racing(lambda: self.parents.get(ids=parent_ids, where=where, include=[]))
        return set(result["ids"])

    def parent_ids(self) -> set[str]:
        """Every stored parent vector's id."""
        with self.reading():
            return set(self.parents.get(include=[])["ids"])

    def child_parents(self) -> dict[str, Any]:
        """Every stored child vector's id, to the parent id it names (read a page at a time)."""
        found: dict[str, Any] = {}
        offset = 0
        while True:
            with self.reading():
                page = self.children.get(include=["metadatas"], limit=LIST_PAGE, offset=offset)
            found.update(
                (cid, (meta or {}).get(keys.PARENT_ID))
                for cid, meta in zip(page["ids"], page["metadatas"] or [], strict=True)
            )
            if len(page["ids"]) < LIST_PAGE:
                return found
            offset += LIST_PAGE

    def counts(self) -> tuple[int, int]:
        """How many parent and child vectors are stored."""
        with self.reading():
            return self.parents.count(), self.children.count()


def _nearest(
    collection: Collection, vector: Sequence[float], n: int, where: dict[str, Any] | None
) -> list[tuple[str, float]]:
    """One vector query of ``collection``: ids and similarities only, best first."""
    from langchain_gated_parent.scoring import similarity_from_distance  # noqa: PLC0415

    result = read_racing(
        lambda: collection.query(
            query_embeddings=np.asarray([vector], dtype=np.float32),
            n_results=n,
            where=where,
            include=["distances"],
        )
    )
    scores = similarity_from_distance((result["distances"] or [[]])[0]).tolist()
    return list(zip(result["ids"][0], scores, strict=True))
