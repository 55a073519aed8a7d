"""The journal and the writer locks, without an index (a lock file, an in-memory byte store)."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import TYPE_CHECKING

import pytest
from langchain_core.stores import InMemoryByteStore

import langchain_gated_parent.stores
from langchain_gated_parent.stores.journal import Journal, Stamp
from langchain_gated_parent.stores.lock import (
    FileWriterLock,
    Holder,
    ProcessWriterLock,
    WriterLockTimeoutError,
)

if TYPE_CHECKING:
    from pathlib import Path


def test_stores_all() -> None:
    assert sorted(langchain_gated_parent.stores.__all__) == [
        "DEFAULT_LOCK_TIMEOUT",
        "Journal",
        "Stamp",
        "VectorFilesTimeoutError",
        "WriterLock",
        "WriterLockTimeoutError",
    ]


def test_a_new_journal_is_empty() -> None:
    journal = Journal(InMemoryByteStore())
    assert journal.config() is None
    assert journal.stamp() == Stamp()
    assert journal.all_manifests() == {}
    assert journal.records() == {}


def test_config_bumps_the_stamp_and_manifests_round_trip() -> None:
    journal = Journal(InMemoryByteStore())
    stamp = journal.put_config({"dimension": 3}, Stamp(seq=4, writing=True))
    assert stamp == Stamp(seq=5, writing=True, config=1)
    assert journal.stamp() == stamp
    journal.put_manifests([("a", {"status": "pending"}), ("b", {"status": "complete"})])
    assert journal.manifests(["a", "c"]) == {"a": {"status": "pending"}}
    assert sorted(journal.doc_ids()) == ["a", "b"]
    journal.delete_manifests(["a"])
    assert journal.records() == {"config": {"dimension": 3}, "manifest:b": {"status": "complete"}}


def test_few_doc_ids_lists_the_documents_only_when_they_are_few() -> None:
    journal = Journal(InMemoryByteStore())
    assert journal.few_doc_ids(2) == []
    journal.put_manifests([("a", {}), ("b", {})])
    journal.put_config({"dimension": 3}, Stamp())
    assert sorted(journal.few_doc_ids(2) or []) == ["a", "b"]
    journal.put_manifests([("c", {})])
    assert journal.few_doc_ids(2) is None


def test_a_second_file_lock_times_out_naming_the_holder(tmp_path: Path) -> None:
    first, second = FileWriterLock(tmp_path / "w.lock"), FileWriterLock(tmp_path / "w.lock")
    assert first.acquire(1.0) is None
    started = time.monotonic()
    with pytest.raises(WriterLockTimeoutError) as refused:
        second.acquire(0.2)
    assert time.monotonic() - started >= 0.2
    message = str(refused.value)
    assert f"process {os.getpid()} on {socket.gethostname()} since " in message
    assert "gave up after waiting 0.2 s" in message
    first.release()
    assert (tmp_path / "w.lock").read_text() == ""  # released: no holder named
    assert second.acquire(0.2) is None
    second.release()


def test_a_lock_file_left_by_a_dead_holder_names_it(tmp_path: Path) -> None:
    dead = Holder(pid=999_999, host="elsewhere", since=time.time() - 60)
    (tmp_path / "w.lock").write_text(json.dumps(dead.__dict__) + "\n")
    lock = FileWriterLock(tmp_path / "w.lock")
    assert lock.acquire(0.2) == dead
    assert json.loads((tmp_path / "w.lock").read_text())["pid"] == os.getpid()
    lock.release()


def test_holder_description() -> None:
    text = Holder(pid=12, host="h", since=0.0).describe()
    assert text.startswith("process 12 on h since 1970-01-01 00:00:00 UTC (")


def test_process_lock_times_out() -> None:
    lock = ProcessWriterLock()
    lock.acquire(0.1)
    with pytest.raises(WriterLockTimeoutError, match=f"process {os.getpid()}"):
        lock.acquire(0.05)
    lock.release()
    lock.acquire(0.05)
    lock.release()
