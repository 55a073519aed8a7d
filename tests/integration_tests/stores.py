"""Where an index under test lives, and how to look at all of it: shared by tests and workers.

A :class:`StoreSpec` names the three stores of a :class:`GatedParentIndex` (a local folder, a
Chroma server, a PostgreSQL docstore) as plain JSON, so a test can hand the same index to a
worker process. :func:`snapshot` reads every record of the three stores, so two indexes can be
compared exactly.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_gated_parent.formats import INDEX_NAME
from langchain_gated_parent.index import GatedParentIndex
from langchain_gated_parent.stores.docstore import sql_docstore
from langchain_gated_parent.stores.journal import (
    JOURNAL_NAMESPACE_SUFFIX,
    SECTIONS_NAMESPACE_SUFFIX,
    UNDO_NAMESPACE_SUFFIX,
)
from langchain_gated_parent.stores.sparse import open_sparse

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_core.embeddings import Embeddings

POSTGRES_ENV = "GATED_PARENT_POSTGRES_URL"
"""The environment variable naming the PostgreSQL database the scale-out suite uses."""

FAKE_SIZE = 32
_HTTP_CLIENTS: list[Any] = []


def http_client(host: str, port: int) -> Any:
    """A ``chromadb.HttpClient``, remembered so :func:`close_http_clients` can close it."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.HttpClient(
        host=host, port=port, settings=Settings(anonymized_telemetry=False)
    )
    _HTTP_CLIENTS.append(client)
    return client


def close_http_clients() -> None:
    """Close every client of :func:`http_client` and their HTTP sessions.

    chromadb 1.5 shares one httpx session per server among its clients and never closes it;
    its pooled sockets would warn (``ResourceWarning``) whenever they are collected, possibly
    in a later test. Closing every client releases the shared system, so the next client
    starts a fresh one.
    """
    sessions = {
        id(session): session
        for client in _HTTP_CLIENTS
        if (session := getattr(getattr(client, "_server", None), "_session", None)) is not None
    }
    while _HTTP_CLIENTS:
        _HTTP_CLIENTS.pop().close()
    for session in sessions.values():
        session.close()


def fake_embeddings() -> Embeddings:
    """A deterministic FAKE embedding (hash-seeded random vectors), labelled as such.

    Crash and concurrency semantics do not depend on the model; the fake is fast and gives
    the same vector for the same text in every process.
    """
    return DeterministicFakeEmbedding(size=FAKE_SIZE)


def embeddings_named(name: str) -> Embeddings:
    """``"fake"`` (see :func:`fake_embeddings`) or ``"minilm"`` (the real offline model)."""
    if name == "fake":
        return fake_embeddings()
    from langchain_gated_parent import MiniLMEmbeddings

    return MiniLMEmbeddings()


@dataclass(frozen=True)
class StoreSpec:
    """The stores of one index under test.

    Attributes:
        directory: The index folder (Chroma files unless ``chroma_port``; the SQLite docstore
            unless ``postgres_url``).
        name: Collection name prefix, unique per test when stores are shared (a server).
        chroma_host: Host of a Chroma server, with ``chroma_port``.
        chroma_port: Port of a Chroma server; ``None`` for a local persistent Chroma.
        postgres_url: A SQLAlchemy URL for the parent docstore; ``None`` for SQLite.
        namespace: The docstore namespace (unique per test on a shared database).
    """

    directory: str
    name: str = "gated-parent"
    chroma_host: str = "127.0.0.1"
    chroma_port: int | None = None
    postgres_url: str | None = None
    namespace: str = "parents"

    def to_json(self) -> str:
        """The spec as one JSON line."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StoreSpec:
        """Undo :meth:`to_json`."""
        return cls(**json.loads(text))

    def open(self, embeddings: Embeddings, **options: Any) -> GatedParentIndex:
        """Open (or create) the index these stores hold (opening recovers nothing).

        ``options`` go to :class:`GatedParentIndex` (e.g. ``lock_timeout``).
        """
        client = None
        if self.chroma_port is not None:
            client = http_client(self.chroma_host, self.chroma_port)
        docstore = sql_docstore(self.postgres_url, self.namespace) if self.postgres_url else None
        return GatedParentIndex(
            embeddings,
            directory=self.directory,
            client=client,
            docstore=docstore,
            name=self.name,
            **options,
        )

    def drop(self) -> None:
        """Remove what this spec put on shared servers (collections, docstore rows)."""
        if self.chroma_port is not None:
            client = http_client(self.chroma_host, self.chroma_port)
            for suffix in ("parents", "children"):
                with suppress(Exception):
                    client.delete_collection(f"{self.name}-{suffix}")
        if self.postgres_url:
            for namespace in (
                self.namespace,
                self.namespace + JOURNAL_NAMESPACE_SUFFIX,
                self.namespace + SECTIONS_NAMESPACE_SUFFIX,
                self.namespace + UNDO_NAMESPACE_SUFFIX,
            ):
                store = sql_docstore(self.postgres_url, namespace)
                store.mdelete(list(store.yield_keys()))
            sparse = open_sparse(sql_docstore(self.postgres_url, self.namespace), self.name)
            if sparse is not None:
                sparse.delete(sorted(sparse.parent_ids()))


def snapshot(index: GatedParentIndex) -> dict[str, Any]:
    """Every record of the index's stores, sorted by id, for exact comparison.

    Returns:
        ``docstore``: key -> (page_content, metadata) for every parent; ``sparse``: the sparse
        index's rows (``None`` without one); ``sections``: parent id -> its section record's
        fields (vectors as lists); ``journal``: key ->
        record for the config and every manifest; ``undo``: the documents with a saved
        version; ``parents`` / ``children``: ids, metadatas, documents and an ``embeddings``
        matrix in id order.
    """
    docstore_keys = sorted(index.docstore.yield_keys())
    values = index.docstore.mget(docstore_keys)
    docstore = {
        key: (value.page_content, value.metadata)
        for key, value in zip(docstore_keys, values, strict=True)
        if value is not None
    }

    def collection(which: Any) -> dict[str, Any]:
        got = which.get(include=["embeddings", "metadatas", "documents"])
        order = np.argsort(np.asarray(got["ids"], dtype=object)) if got["ids"] else []
        vectors = np.asarray(got["embeddings"], dtype=np.float32)
        return {
            "ids": [got["ids"][i] for i in order],
            "metadatas": [got["metadatas"][i] for i in order],
            "documents": [(got["documents"] or [None] * len(order))[i] for i in order],
            "embeddings": vectors[list(order)] if len(order) else vectors.reshape(0, 0),
        }

    records = index.section_store.get(sorted(index.section_store.parent_ids()))
    sections = {
        pid: (
            r.doc_id,
            r.headings,
            r.children,
            np.vstack([r.vector[None, :], r.child_vectors]).round(5).tolist(),
            None if r.parent is None else (r.parent.page_content, r.parent.metadata),
        )
        for pid, r in records.items()
    }
    return {
        "docstore": docstore,
        "sparse": index.sparse.rows() if index.sparse is not None else None,
        "sections": sections,
        "journal": _unnamed(index.journal.records()),
        "undo": sorted(index.undo.doc_ids()),
        "parents": collection(index.parents),
        "children": collection(index.children),
    }


def _unnamed(records: dict[str, Any]) -> dict[str, Any]:
    """The journal's records without the index's name: stores of the same content, on a shared
    Chroma server, are told apart by their names."""
    config = records.get("config")
    if isinstance(config, dict):
        records = {**records, "config": {k: v for k, v in config.items() if k != INDEX_NAME}}
    return records


def assert_same_state(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    """Assert two :func:`snapshot` results hold exactly the same records (vectors allclose)."""
    assert sorted(actual["docstore"]) == sorted(expected["docstore"])
    for key, value in expected["docstore"].items():
        assert actual["docstore"][key] == value, key
    assert actual["sparse"] == expected["sparse"], "the sparse index differs"
    assert actual["sections"] == expected["sections"], "the section records differ"
    assert actual["journal"] == expected["journal"]
    assert actual["undo"] == expected["undo"], "the saved versions differ"
    for part in ("parents", "children"):
        got, want = actual[part], expected[part]
        assert got["ids"] == want["ids"], part
        assert got["metadatas"] == want["metadatas"], part
        assert got["documents"] == want["documents"], part
        assert got["embeddings"].shape == want["embeddings"].shape, part
        assert np.allclose(got["embeddings"], want["embeddings"], atol=1e-6), part


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_healthy(url: str, server: subprocess.Popen[str], timeout: float) -> None:
    """Wait for a ``gated-parent serve`` process to answer ``/health``; fail if it exits."""
    deadline = time.monotonic() + timeout
    while True:
        assert server.poll() is None, server.communicate()[0]
        assert time.monotonic() < deadline, f"the server at {url} did not start in {timeout:g} s"
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.5)


@contextmanager
def chroma_server(path: Path, *, timeout: float = 60.0) -> Iterator[int]:
    """Run ``chroma run`` on 127.0.0.1 at a free port until the block ends; yields the port.

    The server is waited for through its heartbeat and always stopped (terminate, then kill).
    """
    # The `chroma` script installed beside this interpreter (a venv need not be activated).
    chroma = Path(sys.executable).parent / "chroma"
    command = str(chroma) if chroma.exists() else "chroma"
    port = free_port()
    log = (path / "chroma-server.log").open("wb")
    server = subprocess.Popen(
        [command, "run", "--path", str(path / "data"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if server.poll() is not None:
                msg = (
                    f"chroma run exited with {server.returncode}; see {path / 'chroma-server.log'}"
                )
                raise RuntimeError(msg)
            try:
                try:
                    http_client("127.0.0.1", port).heartbeat()
                finally:
                    close_http_clients()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.25)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)
        log.close()
