"""``gated-parent index PATH... --index DIR``: add files or folders to an index.

A file that cannot be read (a bad PDF, a binary or non-UTF-8 file, malformed JSON) is reported
as one line naming it and the fix; the other files are still indexed, and the exit status is 1.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    PROG,
    echo,
    open_index,
    refused,
)
from langchain_gated_parent.cli.ingest import DEFAULT_BATCH_SIZE, ingest
from langchain_gated_parent.cli.options import (
    add_index_option,
    add_lock_timeout_option,
    positive_int,
)
from langchain_gated_parent.loaders import LoadError, PathError, load_documents
from langchain_gated_parent.structure import StructureWarning

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """Read every file first, then add the readable ones in batches.

    Each file that cannot be read is reported on stderr by name and left out; the rest is
    indexed and the exit status is 1. With no readable file the index is not even opened.
    """
    failed: list[LoadError] = []
    with refused(EXIT_FAILURE, ImportError), refused(EXIT_USAGE, PathError):
        documents = load_documents(args.paths, failed=failed)
    for error in failed:
        echo(f"{PROG}: error: {error}", err=True)
    if documents:
        index = open_index(args.index, create=True, lock_timeout=args.lock_timeout)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", StructureWarning)
            totals = ingest(index, documents, args.batch_size)
        for warning in caught:
            if issubclass(warning.category, StructureWarning):
                echo(f"{PROG}: warning: {warning.message}", err=True)
            else:
                warnings.warn_explicit(
                    warning.message, warning.category, warning.filename, warning.lineno
                )
        echo(totals.summary())
    return EXIT_FAILURE if failed else 0


def add(commands: Subparsers) -> None:
    """Add the ``index`` subcommand."""
    parser = commands.add_parser(
        "index",
        help="add files or folders to an index",
        description="Add Markdown (.md), HTML (.html), text (.txt), structured JSON "
        "(.json, .jsonl: one document per line) and PDF (.pdf, with the [pdf] extra) files, or "
        "folders of them (recursively), to the index; unchanged documents are skipped, changed "
        "ones replaced (only their new texts are embedded).",
        epilog="A file that cannot be read (an encrypted, image-only or corrupt PDF, a binary "
        "file...) is reported by name with the fix and left out; the other files are still "
        "indexed and the exit status is 1.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="file or folder")
    add_index_option(parser)
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"documents per write (default {DEFAULT_BATCH_SIZE})",
    )
    add_lock_timeout_option(parser)
    parser.set_defaults(run=run)
