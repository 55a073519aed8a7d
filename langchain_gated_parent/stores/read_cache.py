"""What a process has read of one version of the index, kept decoded for its next queries.

A query across a collection reads the section records of about fifty candidate sections and
the children of about fifteen opened ones; decoding those reads costs more than the searches.
A server asks about the same sections again and again, so decoded reads are kept (least
recently used first out, a bounded number of them), for one version of the index only.

The version is the journal's stamp (:mod:`~langchain_gated_parent.stores.journal`): a writer
moves it before it changes any store and again after. The cache empties itself the first
time a reader sees another stamp (or one marked "writing"), and accepts only what was read
after a quiet stamp of its own version was seen, so an entry never outlives the version it
was read from. Only the readers of this process share it; other processes' writes are seen
through the stamp like any other.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from langchain_gated_parent.stores.journal import Stamp

__all__ = ["ReadCache"]

_V = TypeVar("_V")


class ReadCache(Generic[_V]):
    """Values by key, for the version of the index last seen; at most ``capacity`` of them.

    Thread-safe: the readers of one index share it.
    """

    def __init__(self, capacity: int) -> None:
        """Keep up to ``capacity`` values (0 keeps none)."""
        self.capacity = capacity
        self._entries: OrderedDict[str, _V] = OrderedDict()
        self._version: int | None = None
        self._lock = threading.Lock()

    @property
    def version(self) -> int | None:
        """The stamp's ``seq`` the entries belong to; ``None`` while a write is under way."""
        return self._version

    def observe(self, stamp: Stamp) -> None:
        """Note the stamp just read: a new version (or a write under way) drops every entry."""
        version = stamp.seq if stamp.quiet else None
        with self._lock:
            if version != self._version:
                self._entries.clear()
                self._version = version

    def get(self, keys: Iterable[str]) -> dict[str, _V]:
        """The entries held for these keys (the others are absent), newest use last."""
        found: dict[str, _V] = {}
        with self._lock:
            for key in keys:
                value = self._entries.get(key)
                if value is not None:
                    self._entries.move_to_end(key)
                    found[key] = value
        return found

    def values(self) -> list[_V]:
        """The entries held, oldest use first (to measure them)."""
        with self._lock:
            return list(self._entries.values())

    def put(self, values: Mapping[str, _V], version: int | None) -> None:
        """Keep values read at ``version`` (the version seen before the read), if still current.

        A read that began before the stamp moved belongs to an older version: it is dropped.
        """
        if version is None or not self.capacity:
            return
        with self._lock:
            if version != self._version:
                return
            self._entries.update(values)
            for key in values:
                self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
