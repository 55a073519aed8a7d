"""A batched ``mset`` stores what ``SQLStore.mset`` stores, in one transaction."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest

from langchain_gated_parent.stores.sql_store import DELETE_CHUNK, BatchSQLStore

if TYPE_CHECKING:
    from pathlib import Path


def _stores(url: str) -> tuple[BatchSQLStore, Any]:
    """A batched store and LangChain's own, on one table, in two namespaces."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.storage import SQLStore

    batched = BatchSQLStore(namespace="ns", db_url=url)
    batched.create_schema()
    return batched, SQLStore(namespace="ns", engine=batched.engine)


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_batched_write_stores_what_sqlstore_stores(tmp_path: Path, where: str) -> None:
    url = f"sqlite:///{tmp_path / 'kv.sqlite'}" if where == "file" else "sqlite://"
    batched, plain = _stores(url)
    other = BatchSQLStore(namespace="other", engine=batched.engine)
    other.mset([("a", b"other namespace")])
    batched.mset([])
    many = [(f"k{n}", str(n).encode()) for n in range(DELETE_CHUNK + 7)]
    batched.mset([*many, ("a", b"first"), ("a", b"\x00last")])  # the last value of a key wins
    batched.mset([("k3", b"replaced")])
    wanted = ["a", "k3", f"k{DELETE_CHUNK + 6}", "missing"]
    assert batched.mget(wanted) == [b"\x00last", b"replaced", b"506", None]
    assert plain.mget(wanted) == batched.mget(wanted)
    assert len(list(plain.yield_keys())) == DELETE_CHUNK + 8
    batched.mset(many)  # replaces more keys than one DELETE statement names
    assert len(list(plain.yield_keys())) == DELETE_CHUNK + 8
    assert plain.mget(["k3"]) == [b"3"]
    assert other.mget(["a"]) == [b"other namespace"]


def test_a_failed_batched_write_changes_nothing(tmp_path: Path) -> None:
    batched, _ = _stores(f"sqlite:///{tmp_path / 'kv.sqlite'}")
    batched.mset([("a", b"kept"), ("b", b"kept too")])
    with pytest.raises(Exception, match=r"(?i)bind|type"):
        batched.mset([("a", b"new"), ("b", object())])  # type: ignore[list-item]
    assert batched.mget(["a", "b"]) == [b"kept", b"kept too"]
