"""``gated-parent verify --index DIR``: check that the index's stores agree."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import EXIT_FAILURE, CliError, echo, open_index, refused
from langchain_gated_parent.cli.options import add_index_option

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """List every disagreement and exit 1, or say the stores agree."""
    index = open_index(args.index)
    with refused(EXIT_FAILURE, ValueError):  # an index of an older format is refused
        report = index.verify()
    counts = f"{report.documents} documents, {report.parents} parents, {report.children} children"
    if report.ok:
        echo(f"ok: {counts}; the docstore, section records, term index and vectors agree")
        return 0
    for problem in report.problems:
        echo(problem)
    msg = (
        f"{len(report.problems)} problem(s) in {args.index} ({counts}); an unfinished write or a "
        "saved version is mended by `gated-parent recover`; otherwise re-index the documents "
        "named above, or rebuild the index"
    )
    raise CliError(msg)


def add(commands: Subparsers) -> None:
    """Add the ``verify`` subcommand."""
    parser = commands.add_parser(
        "verify",
        help="check that the index's stores agree",
        description="Check that the docstore, the section records, the term index and the "
        "parent and child vectors agree; "
        "exit 1 and list the problems when they do not.",
    )
    add_index_option(parser)
    parser.set_defaults(run=run)
