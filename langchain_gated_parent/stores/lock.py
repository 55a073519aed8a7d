"""The writer lock: one writer at a time per index, across processes and machines.

Every write (add, delete, recover) holds it from its first read of the journal to its last
store write, so two writers never interleave and recovery never rolls back a live writer's
work. Three kinds, chosen by where the index keeps its records:

* :class:`FileWriterLock`: a lock file in the index folder (``fcntl.flock``). The kernel
  releases it when its holder dies, even by ``kill -9``; the file names the holder (pid, host,
  start time) for the error a waiting writer gives. Local file systems only (``flock`` is not
  reliable over NFS).
* :class:`PostgresWriterLock`: a session-level advisory lock in the docstore's PostgreSQL
  database, on a connection of its own, so writers on different machines exclude each other.
  PostgreSQL releases it when the holder's session ends (a killed process closes its socket).
* :class:`ProcessWriterLock`: a lock within one process, for an index held in memory.

A second writer waits up to a timeout, then raises :class:`WriterLockTimeoutError` naming the
holder and since when.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from sqlalchemy.engine import Connection, Engine

logger = logging.getLogger(__name__)

DEFAULT_LOCK_TIMEOUT = 600.0
"""Seconds a writer waits for another writer to finish before it gives up (10 minutes)."""
POLL_SECONDS = 0.05
"""First pause between attempts to take a lock held by another writer (doubles up to 1 s)."""


class WriterLockTimeoutError(TimeoutError):
    """Another writer held the index's writer lock for longer than the timeout."""


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a writer lock."""

    pid: int
    host: str
    since: float
    """Seconds since the epoch when the lock was taken."""

    @classmethod
    def me(cls) -> Holder:
        """This process, now."""
        return cls(os.getpid(), socket.gethostname(), time.time())

    def describe(self) -> str:
        """``process 123 on host-a since 2026-12-01 21:40:03 UTC (12 s ago)``."""
        when = datetime.fromtimestamp(self.since, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        age = max(time.time() - self.since, 0.0)
        return f"process {self.pid} on {self.host} since {when} ({age:.0f} s ago)"


class WriterLock(Protocol):
    """What the index needs of a writer lock."""

    where: str
    """Where the lock lives, for messages (a path or a database)."""

    def acquire(self, timeout: float) -> Holder | None:
        """Take the lock, waiting up to ``timeout`` seconds.

        Returns:
            The previous holder when it died holding the lock (its work may be unfinished),
            else ``None``.

        Raises:
            WriterLockTimeoutError: Another writer still holds it after ``timeout`` seconds.
        """
        ...

    def release(self) -> None:
        """Give the lock back."""
        ...


def _timeout_error(where: str, timeout: float, holder: Holder | None) -> WriterLockTimeoutError:
    who = holder.describe() if holder is not None else "another writer"
    msg = (
        f"the index is being written by {who}; gave up after waiting {timeout:g} s for its "
        f"writer lock ({where}). Retry when that write ends, or raise lock_timeout"
    )
    return WriterLockTimeoutError(msg)


def _wait(deadline: float, pause: float, where: str, holder: Callable[[], Holder | None]) -> float:
    """Sleep before the next attempt; returns the next pause (doubling, at most 1 s).

    The first wait is logged with the holder's name, so a writer that seems stuck says why.
    """
    if pause == POLL_SECONDS:
        found = holder()
        logger.info(
            "waiting up to %.0f s for the writer lock %s, held by %s",
            deadline - time.monotonic(),
            where,
            found.describe() if found is not None else "another writer",
        )
    time.sleep(max(min(pause, deadline - time.monotonic()), 0.0))
    return min(pause * 2, 1.0)


class FileWriterLock:
    """A lock file taken with ``fcntl.flock``; it records its holder as one JSON line."""

    def __init__(self, path: Path) -> None:
        """Use the lock file at ``path`` (created at the first write)."""
        self.path = path
        self.where = str(path)
        self._file: IO[str] | None = None

    def acquire(self, timeout: float) -> Holder | None:
        """Take the lock (see :meth:`WriterLock.acquire`)."""
        handle = self.path.open("a+", encoding="utf-8")
        deadline = time.monotonic() + timeout
        pause = POLL_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = self._holder(handle)
                    handle.close()
                    raise _timeout_error(self.where, timeout, holder) from None
                pause = _wait(deadline, pause, self.where, lambda: self._holder(handle))
        # A holder still named in the file died holding the lock: release() clears it.
        previous = self._holder(handle)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(asdict(Holder.me())) + "\n")
        handle.flush()
        self._file = handle
        return previous

    def release(self) -> None:
        """Clear the holder record and unlock."""
        if self._file is None:
            return
        handle, self._file = self._file, None
        with contextlib.closing(handle):
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)

    @staticmethod
    def _holder(handle: IO[str]) -> Holder | None:
        handle.seek(0)
        try:
            return Holder(**json.loads(handle.readline()))
        except (ValueError, TypeError):
            return None


def flock_within(fd: int, mode: int, timeout: float, pause: float) -> bool:
    """Take ``flock(fd, mode)``, trying every ``pause`` seconds; False once ``timeout`` passed.

    ``flock`` itself cannot give up after a while: a blocking call waits for ever.
    """
    deadline = None
    while not _flocked(fd, mode):
        now = time.monotonic()
        deadline = now + timeout if deadline is None else deadline
        if now >= deadline:
            return False
        time.sleep(min(pause, deadline - now))
    return True


def _flocked(fd: int, mode: int) -> bool:
    """Take the lock if no other holder's conflicts with it; False if one does."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def opening(path: Path, timeout: float) -> Iterator[None]:
    """Hold a short exclusive lock on ``path`` while an index folder's stores are opened.

    Two processes creating the same new folder index at once would both run Chroma's and the
    docstore's schema creation, and one fails ("table ... already exists"); opening an existing
    index takes a moment. This lock (not the writer lock, which a long write holds) makes
    those moments take turns.
    """
    with path.open("a+", encoding="utf-8") as handle:
        if not flock_within(handle.fileno(), fcntl.LOCK_EX, timeout, POLL_SECONDS):
            msg = f"gave up after waiting {timeout:g} s to open the index ({path} is held)"
            raise WriterLockTimeoutError(msg)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class PostgresWriterLock:
    """A PostgreSQL advisory lock keyed by the index's name, on a dedicated connection.

    The holder sets its connection's ``application_name`` to its pid and host, so a waiting
    writer can name it (from ``pg_stat_activity``) with the time it took the lock.
    """

    APPLICATION = "gated-parent writer"
    CLASS_ID = 0x6750  # "gP": the first half of the lock's key, the same for every index

    def __init__(self, engine: Engine, name: str) -> None:
        """Lock the index called ``name`` (its docstore namespace) in ``engine``'s database."""
        self.engine = engine
        digest = hashlib.sha256(name.encode()).digest()
        self.key = int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
        self.where = f"PostgreSQL advisory lock ({self.CLASS_ID}, {self.key}) for {name!r}"
        self._connection: Connection | None = None

    def acquire(self, timeout: float) -> Holder | None:
        """Take the lock (see :meth:`WriterLock.acquire`); a dead holder's lock is already gone."""
        connection = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            self._take(connection, timeout)
        except BaseException:
            connection.close()
            raise
        self._connection = connection
        return None

    def _take(self, connection: Connection, timeout: float) -> None:
        from sqlalchemy import text  # noqa: PLC0415 (a SQL docstore has loaded it already)

        deadline = time.monotonic() + timeout
        pause = POLL_SECONDS
        args = {"a": self.CLASS_ID, "b": self.key}
        try_lock = text("SELECT pg_try_advisory_lock(:a, :b)")
        while not connection.execute(try_lock, args).scalar_one():
            if time.monotonic() >= deadline:
                raise _timeout_error(self.where, timeout, self._holder(connection))
            pause = _wait(deadline, pause, self.where, lambda: self._holder(connection))
        me = Holder.me()
        name = f"{self.APPLICATION} {me.pid}@{me.host}"[:63]
        connection.execute(text("SELECT set_config('application_name', :n, false)"), {"n": name})

    def release(self) -> None:
        """Unlock and close the lock's connection."""
        if self._connection is None:
            return
        from sqlalchemy import text  # noqa: PLC0415

        connection, self._connection = self._connection, None
        with contextlib.closing(connection):
            connection.execute(
                text("SELECT pg_advisory_unlock(:a, :b)"), {"a": self.CLASS_ID, "b": self.key}
            )

    def _holder(self, connection: Connection) -> Holder | None:
        from sqlalchemy import text  # noqa: PLC0415

        row = connection.execute(
            text(
                "SELECT a.application_name, a.query_start, a.client_addr FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                "AND l.granted AND l.classid = :a AND l.objid = :b AND l.objsubid = 2"
            ),
            {"a": self.CLASS_ID, "b": self.key},
        ).first()
        if row is None:
            return None
        name, started, address = row
        pid, _, host = str(name).removeprefix(self.APPLICATION).strip().partition("@")
        return Holder(
            int(pid) if pid.isdigit() else -1,
            host or str(address or "?"),
            started.timestamp() if started is not None else time.time(),
        )


class ProcessWriterLock:
    """A lock within this process: the index lives in memory, no other process can see it."""

    where = "this process"

    def __init__(self) -> None:
        """A fresh, free lock."""
        self._lock = threading.Lock()
        self._holder: Holder | None = None

    def acquire(self, timeout: float) -> Holder | None:
        """Take the lock (see :meth:`WriterLock.acquire`)."""
        if not self._lock.acquire(timeout=timeout):
            raise _timeout_error(self.where, timeout, self._holder)
        self._holder = Holder.me()
        return None

    def release(self) -> None:
        """Give the lock back."""
        self._holder = None
        self._lock.release()


def log_stale(lock: WriterLock, previous: Holder | None) -> None:
    """Say that a writer died holding the lock (its unfinished work is recovered next)."""
    if previous is not None:
        logger.warning(
            "the writer lock %s was left by %s, which ended without releasing it; "
            "its unfinished writes are rolled back",
            lock.where,
            previous.describe(),
        )
