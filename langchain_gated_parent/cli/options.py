"""Option types shared by the commands: each refuses a bad value with one line naming it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TypeAlias

from langchain_gated_parent.stores.lock import DEFAULT_LOCK_TIMEOUT

MAX_PORT = 65535
FilterValue: TypeAlias = str | int | float | bool
"""A metadata value a ``--filter`` may match: the scalar types Chroma stores."""


def positive_int(value: str) -> int:
    """An integer >= 1."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        msg = f"expected an integer >= 1, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return number


def filter_pair(value: str) -> tuple[str, FilterValue]:
    """``KEY=VALUE`` (a string) or ``KEY:=JSON`` (a number, boolean or string) for ``--filter``.

    A value is never guessed from its look: a document id such as ``2003.13032`` is a string,
    while a metadata value stored as a number (a PDF's ``total_pages``) only matches a number.
    """
    key, sep, wanted = value.partition("=")
    typed = key.endswith(":")
    key = key.removesuffix(":").strip()
    if not sep or not key:
        msg = (
            "expected KEY=VALUE or KEY:=JSON (e.g. doc_id=P-GAPDH-01, total_pages:=41), "
            f"got {value!r}"
        )
        raise argparse.ArgumentTypeError(msg)
    if not typed:
        return key, wanted
    try:
        parsed = json.loads(wanted)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, FilterValue):
        msg = (
            f"expected one JSON number, true, false or quoted string after {key}:=, got "
            f"{wanted!r}; for a plain string write {key}={wanted}, for several values repeat "
            "--filter"
        )
        raise argparse.ArgumentTypeError(msg)
    return key, parsed


def port(value: str) -> int:
    """A TCP port number."""
    number = positive_int(value)
    if number > MAX_PORT:
        msg = f"expected a port in 1..{MAX_PORT}, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return number


def seconds(value: str) -> float:
    """A duration in seconds, >= 0."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0:
        msg = f"expected a number of seconds >= 0, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return number


def add_lock_timeout_option(
    parser: argparse.ArgumentParser, outcome: str = "fail naming it"
) -> None:
    """``--lock-timeout SECONDS``: how long a call waits for another process writing the index.

    ``outcome`` says what the command does then.
    """
    parser.add_argument(
        "--lock-timeout",
        type=seconds,
        default=DEFAULT_LOCK_TIMEOUT,
        metavar="SECONDS",
        help=f"wait this long for another process writing the index, then {outcome} "
        f"(default {DEFAULT_LOCK_TIMEOUT:g})",
    )


def add_index_option(parser: argparse.ArgumentParser, default: Path | None = None) -> None:
    """``--index DIR``: required, or with a default folder."""
    if default is None:
        parser.add_argument(
            "--index", type=Path, required=True, metavar="DIR", help="the index folder"
        )
    else:
        parser.add_argument(
            "--index",
            type=Path,
            default=default,
            metavar="DIR",
            help=f"the index folder (default: ./{default})",
        )
