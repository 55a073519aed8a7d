"""``gated-parent delete DOC_ID... --index DIR``: remove documents from the index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import (
    EXIT_FAILURE,
    WRITE_REFUSALS,
    CliError,
    echo,
    open_index,
    refused,
)
from langchain_gated_parent.cli.options import add_index_option, add_lock_timeout_option

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """Delete each id; fail (after deleting the others) when one was not in the index."""
    index = open_index(args.index, lock_timeout=args.lock_timeout)
    with refused(EXIT_FAILURE, *WRITE_REFUSALS):
        missing = [doc_id for doc_id in args.doc_ids if not index.delete([doc_id])]
    deleted = [doc_id for doc_id in args.doc_ids if doc_id not in missing]
    if deleted:
        echo(f"deleted {len(deleted)} document(s): {', '.join(deleted)}")
    if missing:
        msg = f"not in the index: {', '.join(missing)}"
        raise CliError(msg)
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``delete`` subcommand."""
    parser = commands.add_parser("delete", help="remove documents from the index")
    parser.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    add_index_option(parser)
    add_lock_timeout_option(parser)
    parser.set_defaults(run=run)
