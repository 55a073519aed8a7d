"""``gated-parent stats --index DIR``: counts, size on disk and model of the index."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import EXIT_FAILURE, echo, open_index, refused
from langchain_gated_parent.cli.options import add_index_option

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """Print the stats as aligned lines, or as JSON."""
    index = open_index(args.index)
    with refused(EXIT_FAILURE, ValueError):  # an index of an older format is refused
        stats = index.stats()
    if args.json:
        echo(json.dumps(stats, indent=2))
        return 0
    label = max(len(key) for key in stats) + 2
    for key, value in stats.items():
        shown = f"{value / 1e6:.1f} MB ({value} bytes)" if key == "bytes_on_disk" else value
        echo(f"{key.replace('_', ' '):<{label}}{shown}")
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``stats`` subcommand."""
    parser = commands.add_parser("stats", help="counts, size and model of the index")
    add_index_option(parser)
    parser.add_argument("--json", action="store_true", help="print the stats as JSON")
    parser.set_defaults(run=run)
