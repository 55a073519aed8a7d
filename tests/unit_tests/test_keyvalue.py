"""Fast key reads answer as the store's own ``mget`` does, and see every committed write."""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.stores import InMemoryByteStore

from langchain_gated_parent.stores.keyvalue import fast_keys, fast_mget

if TYPE_CHECKING:
    from pathlib import Path


def _sql_store(url: str, namespace: str = "ns") -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.storage import SQLStore

    store = SQLStore(namespace=namespace, db_url=url)
    store.create_schema()
    return store


@pytest.mark.parametrize("where", ["file", "memory"])
def test_fast_reads_answer_as_mget_and_see_later_writes(tmp_path: Path, where: str) -> None:
    url = f"sqlite:///{tmp_path / 'kv.sqlite'}" if where == "file" else "sqlite://"
    store = _sql_store(url)
    _sql_store(url, namespace="other").mset([("a", b"not this namespace")])
    read = fast_mget(store)
    assert read([]) == []
    assert read(["a", "b"]) == [None, None]
    store.mset([("a", b"\x00A"), ("b", b"B")])  # a write after this thread's first read
    assert read(["b", "missing", "a"]) == store.mget(["b", "missing", "a"])
    assert read(["b", "missing", "a"]) == [b"B", None, b"\x00A"]
    store.mdelete(["a"])
    assert read(["a", "b"]) == [None, b"B"]


def test_fast_reads_of_a_file_work_from_many_threads(tmp_path: Path) -> None:
    store = _sql_store(f"sqlite:///{tmp_path / 'kv.sqlite'}")
    store.mset([(f"k{n}", str(n).encode()) for n in range(50)])
    read = fast_mget(store)
    wanted = [f"k{n}" for n in range(50)]
    results: list[list[bytes | None]] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            results.extend(read(wanted) for _ in range(20))
        except BaseException as error:  # noqa: BLE001 (reported by the assertion below)
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 80
    assert all(result == [str(n).encode() for n in range(50)] for result in results)


@pytest.mark.parametrize("where", ["file", "memory", "in-memory store"])
def test_fast_keys_lists_at_most_the_limit_of_one_prefix(tmp_path: Path, where: str) -> None:
    if where == "in-memory store":
        store: Any = InMemoryByteStore()
    else:
        url = f"sqlite:///{tmp_path / 'kv.sqlite'}" if where == "file" else "sqlite://"
        store = _sql_store(url)
        _sql_store(url, namespace="other").mset([("m/x", b"not this namespace")])
    store.mset([(f"m/{n}", b"") for n in range(5)] + [("n/0", b""), ("m", b"")])
    keys = fast_keys(store)
    assert sorted(keys("m/", 10)) == [f"m/{n}" for n in range(5)]
    assert len(keys("m/", 3)) == 3
    assert set(keys("m/", 3)) <= {f"m/{n}" for n in range(5)}
    assert keys("z/", 3) == []
