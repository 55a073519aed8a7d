"""What every ``gated-parent`` command shares: exit codes, errors, output, opening an index."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

from langchain_gated_parent.index import GatedParentIndex
from langchain_gated_parent.stores.lock import DEFAULT_LOCK_TIMEOUT, WriterLockTimeoutError
from langchain_gated_parent.stores.vector_files import VectorFilesTimeoutError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    Subparsers = argparse._SubParsersAction["Parser"]  # noqa: SLF001

PROG = "gated-parent"
EXIT_FAILURE = 1
"""Exit status when the work fails: a missing index, a bad file, stores that disagree."""
EXIT_USAGE = 2
"""Exit status for a usage mistake or an option value the library refuses (argparse's code)."""
EXIT_INTERRUPTED = 130
"""Exit status after Ctrl+C: 128 + SIGINT, as the shell reports a process the signal ended."""
EXIT_BROKEN_PIPE = 141
"""Exit status when the reader of stdout closed it early (``| head``): 128 + SIGPIPE, likewise."""
WRITE_REFUSALS = (ValueError, WriterLockTimeoutError, VectorFilesTimeoutError)
"""What a write reports as one line: bad input, or another process holding the index too long."""


class CliError(Exception):
    """A failure the user can fix: printed as one line on stderr, never as a traceback."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        """Keep the exit status beside the message; see ``EXIT_FAILURE`` and ``EXIT_USAGE``."""
        super().__init__(message)
        self.status = status


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one error line (no usage block), as every other error."""

    def error(self, message: str) -> NoReturn:
        """Raise the mistake as a :class:`CliError` with the usage exit status."""
        msg = f"{message} (see '{self.prog} --help')"
        raise CliError(msg, EXIT_USAGE)


def echo(text: str = "", *, err: bool = False) -> None:
    """Write a line to stdout (results, summaries) or stderr (errors): the CLI's only output."""
    (sys.stderr if err else sys.stdout).write(f"{text}\n")


@contextmanager
def refused(status: int, *errors: type[Exception]) -> Iterator[None]:
    """Report the library's refusals (their messages name the value and the fix) as CliError."""
    try:
        yield
    except errors as error:
        raise CliError(str(error), status) from error


def open_index(
    directory: Path, *, create: bool = False, lock_timeout: float = DEFAULT_LOCK_TIMEOUT
) -> GatedParentIndex:
    """Open the index in ``directory``; unless ``create``, refuse a folder that has none.

    Opening a folder creates an empty index in it, so the read-only commands check first: a
    mistyped ``--index`` must fail, not leave a new empty index behind. ``lock_timeout`` is how
    long a write waits for another process's write to end, and any call for another process's
    hold on the vector files.
    """
    if not create and not GatedParentIndex.exists(directory):
        msg = f"no index in {directory}; build one with '{PROG} index PATH... --index {directory}'"
        raise CliError(msg)
    with refused(EXIT_FAILURE, ValueError):
        return GatedParentIndex(directory=directory, lock_timeout=lock_timeout)
