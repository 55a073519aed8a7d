"""``gated-parent query "TEXT" --index DIR``: the ranked children with their fused scores."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from langchain_gated_parent.cli.common import EXIT_FAILURE, EXIT_USAGE, echo, open_index, refused
from langchain_gated_parent.cli.options import add_index_option, alpha, filter_pair, positive_int
from langchain_gated_parent.cli.output import result_record, table
from langchain_gated_parent.index import ConcurrentWriteError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from langchain_gated_parent.cli.common import Subparsers


def where(filters: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """``--filter`` pairs as a Chroma filter: a repeated key matches any of its values."""
    values: dict[str, list[str]] = {}
    for key, value in filters:
        values.setdefault(key, []).append(value)
    clauses = [{k: v[0] if len(v) == 1 else {"$in": v}} for k, v in values.items()]
    if len(clauses) > 1:
        return {"$and": clauses}
    return clauses[0] if clauses else None


def run(args: argparse.Namespace) -> int:
    """Search with the retriever's defaults, overridden by the options given."""
    index = open_index(args.index)
    options = {
        name: getattr(args, name)
        for name in ("k", "alpha", "parent_top_k", "child_per_parent")
        if getattr(args, name) is not None
    }
    found = where(args.filter)
    if found is not None:
        options["filter"] = found
    with refused(EXIT_USAGE, ValueError, TypeError), refused(EXIT_FAILURE, ConcurrentWriteError):
        documents = index.as_retriever().invoke(args.text, **options)
    if args.json:
        echo(json.dumps([result_record(d) for d in documents], indent=2, ensure_ascii=False))
    else:
        echo(table(documents))
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``query`` subcommand."""
    parser = commands.add_parser(
        "query",
        help="search the index",
        description="Search the index: the gate opens the best parents (sections), then the "
        "best children (paragraphs) inside them are ranked by the fused score "
        "alpha * s_p + (1 - alpha) * s_c. Omitted options take the retriever's defaults.",
    )
    parser.add_argument("text", help="the question or keywords")
    add_index_option(parser)
    parser.add_argument("--k", type=positive_int, metavar="N", help="results to return")
    parser.add_argument(
        "--alpha", type=alpha, metavar="A", help="parent weight in [0, 1], or 'auto'"
    )
    parser.add_argument("--parent-top-k", type=positive_int, metavar="N", help="parents opened")
    parser.add_argument(
        "--child-per-parent", type=positive_int, metavar="N", help="children kept per parent"
    )
    parser.add_argument(
        "--filter",
        type=filter_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata filter (repeatable; repeated keys match any value, keys must all match)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of results")
    parser.set_defaults(run=run)
