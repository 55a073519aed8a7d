"""The version a write replaces, kept until the write finishes, so a rollback can restore it.

A replaced document keeps most of its ids (a section's id depends on its place, not its text),
so its new version is written over the old one. A write that dies in between leaves records of
both, and deleting what the pending manifest names would lose the old version too. Before it
changes anything, a write therefore saves each replaced document's stored version here: its
manifest and its section records, which hold all a document is made of (parents, vectors,
children's metadata). A rollback writes that version back; the write removes it once its
manifest is complete.

One value per document, in a namespace of its own beside the journal: a 4-byte size, the
manifest's JSON, then each record as a 4-byte size and its bytes (:func:`~.sections.encode`,
in layout 2: the vectors in float32, as the vector store holds them, so a rollback writes
back the very vectors it replaced).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_gated_parent.stores.keyvalue import fast_mget
from langchain_gated_parent.stores.sections import decode, encode

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.stores import BaseStore

    from langchain_gated_parent.records import Section

__all__ = ["SavedVersion", "UndoStore"]

_SIZE = struct.Struct("<I")
FLOAT32_LAYOUT = 2
"""The record layout a saved version keeps (see the module docstring)."""


@dataclass(frozen=True)
class SavedVersion:
    """A document as it was stored before a write began replacing it."""

    manifest: dict[str, Any]
    """Its complete manifest (ids, content hash, pages)."""
    sections: list[Section]
    """Its section records, each with its parent, in the manifest's order."""


class UndoStore:
    """Saved versions in a byte store, keyed by document id."""

    def __init__(self, store: BaseStore[str, bytes]) -> None:
        """Keep saved versions in ``store`` (a namespace of their own)."""
        self._store = store
        self._mget = fast_mget(store)

    def save(self, versions: Sequence[tuple[str, SavedVersion]]) -> None:
        """Keep these versions, ``(doc_id, version)`` pairs, in one call."""
        if versions:
            self._store.mset([(doc_id, _encode(version)) for doc_id, version in versions])

    def get(self, doc_ids: Sequence[str]) -> dict[str, SavedVersion]:
        """The saved versions of those documents that have one."""
        found = self._mget(list(doc_ids))
        return {d: _decode(raw) for d, raw in zip(doc_ids, found, strict=True) if raw is not None}

    def forget(self, doc_ids: Sequence[str]) -> None:
        """Drop these documents' saved versions (their writes finished or were rolled back)."""
        if doc_ids:
            self._store.mdelete(list(doc_ids))

    def doc_ids(self) -> list[str]:
        """Every document with a saved version (none, but after a crash)."""
        return list(self._store.yield_keys())


def _encode(version: SavedVersion) -> bytes:
    parts = [json.dumps(version.manifest, ensure_ascii=False).encode()]
    parts += [encode(section, layout=FLOAT32_LAYOUT) for section in version.sections]
    return b"".join(_SIZE.pack(len(part)) + part for part in parts)


def _decode(raw: bytes) -> SavedVersion:
    parts, at = [], 0
    while at < len(raw):
        (size,) = _SIZE.unpack_from(raw, at)
        at += _SIZE.size
        parts.append(raw[at : at + size])
        at += size
    return SavedVersion(json.loads(parts[0]), [decode(part) for part in parts[1:]])
