"""Where an index keeps its own records (the journal) and how writers take turns (the locks)."""

from langchain_gated_parent.stores.journal import Journal, Stamp
from langchain_gated_parent.stores.lock import (
    DEFAULT_LOCK_TIMEOUT,
    WriterLock,
    WriterLockTimeoutError,
)
from langchain_gated_parent.stores.vector_files import VectorFilesTimeoutError

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "Journal",
    "Stamp",
    "VectorFilesTimeoutError",
    "WriterLock",
    "WriterLockTimeoutError",
]
