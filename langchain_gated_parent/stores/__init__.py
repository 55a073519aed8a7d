"""Where an index keeps its own records (the journal) and how writers take turns (the lock)."""

from langchain_gated_parent.stores.journal import Journal, Stamp
from langchain_gated_parent.stores.lock import (
    DEFAULT_LOCK_TIMEOUT,
    WriterLock,
    WriterLockTimeoutError,
)

__all__ = ["DEFAULT_LOCK_TIMEOUT", "Journal", "Stamp", "WriterLock", "WriterLockTimeoutError"]
