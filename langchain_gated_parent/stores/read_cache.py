"""What a process has read of one version of the index, kept decoded for its next queries.

A query across a collection reads the section records of about fifty candidate sections and
the children of about fifteen opened ones; decoding those reads costs more than the searches.
A server asks about the same sections again and again, so decoded reads are kept (least
recently used first out, a bounded number or weight of them), for one version of the index
only.

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
    from collections.abc import Callable, Iterable, Mapping

    from langchain_gated_parent.stores.journal import Stamp

__all__ = ["ReadCache"]

_V = TypeVar("_V")


class ReadCache(Generic[_V]):
    """Values by key, for the version of the index last seen; at most ``capacity`` of them.

    With ``weigh``, ``capacity`` bounds the values' total weight instead (their bytes, say):
    for values whose size grows with the collection. Thread-safe: the readers of one index
    share it.
    """

    def __init__(self, capacity: int, weigh: Callable[[_V], int] | None = None) -> None:
        """Keep up to ``capacity`` values, or values weighing that much (0 keeps none)."""
        self.capacity = capacity
        self._weigh = weigh
        self._entries: OrderedDict[str, tuple[_V, int]] = OrderedDict()
        self._weight = 0
        self._version: int | None = None
        self._lock = threading.Lock()

    @property
    def version(self) -> int | None:
        """The stamp's ``seq`` the entries belong to; ``None`` while a write is under way."""
        return self._version

    @property
    def weight(self) -> int:
        """The entries' total weight (their number, without ``weigh``)."""
        return self._weight

    def observe(self, stamp: Stamp) -> None:
        """Note the stamp just read: a new version (or a write under way) drops every entry."""
        version = stamp.seq if stamp.quiet else None
        with self._lock:
            if version != self._version:
                self._entries.clear()
                self._weight = 0
                self._version = version

    def get(self, keys: Iterable[str]) -> dict[str, _V]:
        """The entries held for these keys (the others are absent), newest use last."""
        found: dict[str, _V] = {}
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    found[key] = entry[0]
        return found

    def values(self) -> list[_V]:
        """The entries held, oldest use first (to measure them)."""
        with self._lock:
            return [value for value, _ in self._entries.values()]

    def put(self, values: Mapping[str, _V], version: int | None) -> None:
        """Keep values read at ``version`` (the version seen before the read), if still current.

        A read that began before the stamp moved belongs to an older version: it is dropped.
        The least recently used entries go first when the cache is over its capacity.
        """
        if version is None or not self.capacity:
            return
        with self._lock:
            if version != self._version:
                return
            for key, value in values.items():
                weight = 1 if self._weigh is None else self._weigh(value)
                old = self._entries.pop(key, None)
                self._weight += weight - (0 if old is None else old[1])
                self._entries[key] = (value, weight)
            while self._weight > self.capacity:
                _, (_, weight) = self._entries.popitem(last=False)
                self._weight -= weight
