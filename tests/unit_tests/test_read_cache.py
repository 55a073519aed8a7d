"""The read cache keeps what was read of one version of the index, and nothing longer."""

from __future__ import annotations

import pytest

from langchain_gated_parent.stores.journal import Stamp
from langchain_gated_parent.stores.read_cache import ReadCache
from langchain_gated_parent.stores.section_reads import (
    DEFAULT_CACHED_SECTIONS,
    check_cached_sections,
)


def test_a_read_is_kept_for_the_version_seen_before_it() -> None:
    cache: ReadCache[str] = ReadCache(4)
    cache.observe(Stamp(seq=2))
    cache.put({"a": "A"}, version=2)
    assert cache.get(["a", "b"]) == {"a": "A"}


def test_another_version_or_a_write_under_way_drops_every_entry() -> None:
    cache: ReadCache[str] = ReadCache(4)
    cache.observe(Stamp(seq=2))
    cache.put({"a": "A"}, version=2)
    cache.observe(Stamp(seq=2))
    assert cache.get(["a"]) == {"a": "A"}
    cache.observe(Stamp(seq=3, writing=True))
    assert cache.get(["a"]) == {}
    assert cache.version is None
    cache.put({"a": "A"}, version=None)  # read while a write was under way: never kept
    assert cache.get(["a"]) == {}
    cache.observe(Stamp(seq=4))
    assert cache.get(["a"]) == {}


def test_a_read_begun_before_the_version_moved_is_not_kept() -> None:
    cache: ReadCache[str] = ReadCache(4)
    cache.observe(Stamp(seq=2))
    began = cache.version
    cache.observe(Stamp(seq=4))  # another thread saw a write finish meanwhile
    cache.put({"a": "old"}, version=began)
    assert cache.get(["a"]) == {}


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: ReadCache[int] = ReadCache(2)
    cache.observe(Stamp(seq=1))
    cache.put({"a": 1, "b": 2}, version=1)
    cache.get(["a"])
    cache.put({"c": 3}, version=1)
    assert cache.get(["a", "b", "c"]) == {"a": 1, "c": 3}


def test_capacity_zero_keeps_nothing() -> None:
    cache: ReadCache[int] = ReadCache(0)
    cache.observe(Stamp(seq=1))
    cache.put({"a": 1}, version=1)
    assert cache.get(["a"]) == {}


@pytest.mark.parametrize("size", [-1, 2.5, "64", True])
def test_a_cache_size_that_is_not_a_count_is_refused_with_the_fix(size: object) -> None:
    with pytest.raises(ValueError, match=r"cached_sections must be an integer >= 0") as refused:
        check_cached_sections(size)
    assert f"cached_sections={DEFAULT_CACHED_SECTIONS}" in str(refused.value)


def test_a_weighed_cache_bounds_the_total_weight_least_recently_used_out() -> None:
    cache: ReadCache[str] = ReadCache(10, weigh=len)
    cache.observe(Stamp(seq=1))
    cache.put({"a": "aaaa", "b": "bbbb"}, version=1)
    assert cache.weight == 8
    cache.get(["a"])
    cache.put({"c": "ccc"}, version=1)  # 11 > 10: "b", used least recently, goes
    assert cache.get(["a", "b", "c"]) == {"a": "aaaa", "c": "ccc"}
    assert cache.weight == 7
    cache.put({"a": "a"}, version=1)  # replacing a value replaces its weight
    assert cache.weight == 4
    cache.put({"d": "d" * 11}, version=1)  # heavier than the whole capacity: nothing stays
    assert cache.get(["a", "c", "d"]) == {}
    assert cache.weight == 0
    cache.put({"e": "ee"}, version=1)
    cache.observe(Stamp(seq=2))
    assert cache.weight == 0
