"""``gated-parent index PATH... --index DIR``: add files or folders to an index."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
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

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """Read every file first (a bad one fails the command by name), then add them in batches."""
    with refused(EXIT_FAILURE, LoadError), refused(EXIT_USAGE, PathError):
        documents = load_documents(args.paths)
    index = open_index(args.index, create=True, lock_timeout=args.lock_timeout)
    echo(ingest(index, documents, args.batch_size).summary())
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``index`` subcommand."""
    parser = commands.add_parser(
        "index",
        help="add files or folders to an index",
        description="Add Markdown (.md), HTML (.html), text (.txt) and structured JSON "
        "(.json, .jsonl: one document per line) files, or folders of them (recursively), to "
        "the index; unchanged documents are skipped, changed ones replaced.",
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
