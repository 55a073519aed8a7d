"""The ``gated-parent`` parser: one subcommand per module of this package, and ``main``."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING

from langchain_gated_parent.cli import (
    delete,
    demo,
    index,
    query,
    recover,
    sections,
    serve,
    stats,
    verify,
)
from langchain_gated_parent.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    PROG,
    CliError,
    Parser,
    echo,
)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from langchain_gated_parent.cli.common import Subparsers

SUBCOMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    index.add,
    sections.add,
    query.add,
    delete.add,
    stats.add,
    verify.add,
    recover.add,
    demo.add,
    serve.add,
)
"""Each function adds one subcommand to the subparsers and sets its ``run`` handler.

A new subcommand is one more module with ``add(commands)`` and ``run(args) -> int`` (the exit
status; failures the user can fix raise :class:`~langchain_gated_parent.cli.common.CliError`).
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``gated-parent`` argument parser with every subcommand of :data:`SUBCOMMANDS`."""
    parser = Parser(
        prog=PROG,
        description="Small-to-big retrieval: section parents gate paragraph children.",
        epilog="exit status: 0 ok, 1 failure, 2 usage or bad option value",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress of the library (stderr)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gated-parent``; returns the exit status (the console script exits with it).

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.

    Returns:
        0 on success, 1 when the work failed, 2 for a usage mistake or bad option value, 130
        after Ctrl+C, 141 when the reader of stdout closed it early.
    """
    try:
        status = _run(argv)
        sys.stdout.flush()  # a closed pipe fails here, not in Python's own flush at exit
    except BrokenPipeError:
        return _reader_gone()
    return status


def _run(argv: Sequence[str] | None) -> int:
    """Parse and run one command; its failures become one error line and an exit status."""
    try:
        args = build_parser().parse_args(argv)
        logging.basicConfig(
            level=logging.INFO if args.verbose else logging.WARNING,
            format=f"{PROG}: %(levelname)s: %(name)s: %(message)s",
            stream=sys.stderr,
        )
        status: int = args.run(args)
    except CliError as error:
        echo(f"{PROG}: error: {error}", err=True)
        return error.status
    except KeyboardInterrupt:
        echo(f"{PROG}: interrupted", err=True)
        return EXIT_INTERRUPTED
    return status


def _reader_gone() -> int:
    """Stop quietly when stdout's reader has closed it (``| head``), as ``cat`` and ``grep`` do.

    stdout then points at the null device, so the output still buffered cannot fail again when
    Python flushes it at exit.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE
