"""A local Chroma folder's vector files: one process writes them while no other reads them.

Chroma (1.5) saves a collection's HNSW graph by rewriting its files in place, and a process
loads them when it first searches the collection, or applies (and saves) the writes it finds
in Chroma's log that no process has applied yet. Two processes on one folder (a server and an
ingest job) could then load a half-written graph, or save the same graph at once: Chroma
crashed the reading process with a segmentation fault (BENCHMARKS.md, "The same answers in
every process"). Chroma takes no lock across processes, so the index takes this one: shared
around every read, exclusive around every write and around the first read of a fresh view
(the one that may apply the log).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import TYPE_CHECKING

from langchain_gated_parent.stores.lock import flock_within

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

LOCK_FILE = "gated-parent-vectors.lock"
"""The lock's file, in the Chroma folder it guards."""
PAUSE_SECONDS = 0.001
"""Pause before trying a held lock again. Short: a hold spans one Chroma call, and a waiting
writer must catch a moment between readers' holds (``flock`` queues no one); a try costs
about a microsecond."""


class VectorFilesTimeoutError(TimeoutError):
    """Another process held the vector files' lock longer than the index's ``lock_timeout``."""


class VectorFilesLock:
    """``flock`` on a file in the Chroma folder, a new open file per hold.

    A new open file per hold, because ``flock`` counts one per open file: threads of one
    process sharing a file would convert each other's locks instead of waiting. Chroma's own
    locks order the threads within a process. The kernel releases a dead holder's lock; a
    holder stuck in a call that never returns makes the others give up after ``timeout``.
    """

    def __init__(self, folder: Path, timeout: float) -> None:
        """Guard the Chroma folder ``folder``, waiting up to ``timeout`` seconds for a hold.

        The lock file is created at the first hold.
        """
        self.path = folder / LOCK_FILE
        self.timeout = timeout

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held while this process reads: other readers go on, a writer waits."""
        with self._held(fcntl.LOCK_SH):
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held while this process may write the files: every other process waits."""
        with self._held(fcntl.LOCK_EX):
            yield

    @contextlib.contextmanager
    def _held(self, mode: int) -> Iterator[None]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._take(fd, mode)
            yield
        finally:
            os.close(fd)  # closing the file releases its lock

    def _take(self, fd: int, mode: int) -> None:
        """Lock ``fd``, trying again every :data:`PAUSE_SECONDS` until the timeout."""
        if not flock_within(fd, mode, self.timeout, PAUSE_SECONDS):
            msg = (
                f"another process held {self.path} for over {self.timeout:g} s (a call on this "
                "index's vector files that has not returned), so this call did not run: retry "
                f"it, find the holder (e.g. `fuser {self.path}`), or raise the index's "
                "lock_timeout"
            )
            raise VectorFilesTimeoutError(msg)
