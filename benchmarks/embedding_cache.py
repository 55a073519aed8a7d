"""An ``Embeddings`` wrapper that caches document vectors on disk in SQLite.

Rows are keyed by ``(model name, sha256(text))`` and hold float32 vectors. Only
:meth:`CachedEmbeddings.embed_documents` is cached; :meth:`CachedEmbeddings.embed_query` always
runs the model, so query latency is measured live. Vectors are always returned after a float32
round trip, so a cold run and a warm run see bit-identical vectors.

Usage:
    .. code-block:: python

        from langchain_gated_parent.embeddings import MiniLMEmbeddings
        from benchmarks.embedding_cache import CachedEmbeddings

        emb = CachedEmbeddings(MiniLMEmbeddings(), Path(".bench-cache/embeddings.sqlite"))
        emb.embed_documents(["a", "b"])  # embeds and stores
        emb.embed_documents(["a", "b"])  # read from disk
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm

from langchain_gated_parent.settings import model_name_of

if TYPE_CHECKING:
    from pathlib import Path

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, sha256)
) WITHOUT ROWID
"""
_LOOKUP_CHUNK = 500
"""Keys per ``SELECT ... IN (...)`` (SQLite's default variable limit is well above this)."""


class CachedEmbeddings(Embeddings):
    """Cache ``embed_documents`` of another ``Embeddings`` in SQLite; never cache queries.

    Args:
        underlying: The embeddings to call on cache misses and for every query.
        path: The SQLite file (created with its parent directory).
        batch_size: Texts per call to ``underlying.embed_documents`` on misses.
        progress: Show a tqdm bar when at least ``progress_min`` texts miss the cache.
        progress_min: The smallest miss count that gets a progress bar.
    """

    def __init__(
        self,
        underlying: Embeddings,
        path: Path,
        *,
        batch_size: int = 256,
        progress: bool = True,
        progress_min: int = 64,
    ) -> None:
        """Open (or create) the cache file."""
        self.underlying = underlying
        self.model_name = model_name_of(underlying)
        self.path = path
        self.batch_size = batch_size
        self.progress = progress
        self.progress_min = progress_min
        self.hits = 0
        self.misses = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(path), timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(_SCHEMA)
        self._conn.commit()

    def close(self) -> None:
        """Close the SQLite connection."""
        self._conn.close()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Return document vectors, embedding only the texts not yet cached."""
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found = self._lookup(set(keys))
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key not in found and key not in todo:
                todo[key] = text
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            self._embed_missing(todo, found)
        return [found[key].tolist() for key in keys]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query live (never cached)."""
        return self.underlying.embed_query(text)

    def _lookup(self, keys: set[str]) -> dict[str, np.ndarray]:
        ordered = sorted(keys)
        found: dict[str, np.ndarray] = {}
        for i in range(0, len(ordered), _LOOKUP_CHUNK):
            chunk = ordered[i : i + _LOOKUP_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                f"SELECT sha256, vector FROM embeddings WHERE model = ? AND sha256 IN ({marks})",  # noqa: S608
                [self.model_name, *chunk],
            )
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _embed_missing(self, todo: dict[str, str], found: dict[str, np.ndarray]) -> None:
        items = list(todo.items())
        bar = tqdm(
            total=len(items),
            desc=f"embedding ({self.model_name})",
            unit="text",
            disable=not self.progress or len(items) < self.progress_min,
            leave=False,
        )
        try:
            for i in range(0, len(items), self.batch_size):
                batch = items[i : i + self.batch_size]
                vectors = self.underlying.embed_documents([text for _, text in batch])
                rows = []
                for (key, _), vector in zip(batch, vectors, strict=True):
                    arr = np.asarray(vector, dtype=np.float32)
                    found[key] = arr
                    rows.append((self.model_name, key, arr.tobytes()))
                self._conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (model, sha256, vector) VALUES (?, ?, ?)",
                    rows,
                )
                self._conn.commit()
                bar.update(len(batch))
        finally:
            bar.close()
