"""``gated-parent recover --index DIR``: roll back writes a dead writer left unfinished."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import (
    EXIT_FAILURE,
    WRITE_REFUSALS,
    echo,
    open_index,
    refused,
)
from langchain_gated_parent.cli.options import add_index_option, add_lock_timeout_option

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """Take the writer lock, roll back unfinished documents, say which."""
    index = open_index(args.index, lock_timeout=args.lock_timeout)
    with refused(EXIT_FAILURE, *WRITE_REFUSALS):
        rolled_back = index.recover()
    if rolled_back:
        echo(
            f"rolled back {len(rolled_back)} unfinished document write(s): "
            f"{', '.join(rolled_back)}; each is as it was before that write (a replaced "
            "document has its previous version back, a new one is absent): index them again "
            "to write them"
        )
    else:
        echo("nothing to recover: every document's last write finished")
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``recover`` subcommand."""
    parser = commands.add_parser(
        "recover",
        help="roll back writes a crashed writer left unfinished",
        description="Take the index's writer lock (waiting for a live writer), roll back every "
        "document whose last write did not finish: a replaced document gets its previous "
        "version back, a new one is removed. Every write does this first; this command does "
        "it now.",
    )
    add_index_option(parser)
    add_lock_timeout_option(parser)
    parser.set_defaults(run=run)
