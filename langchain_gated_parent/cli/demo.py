"""``gated-parent demo``: index the bundled demo corpus and show what the gate does."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_gated_parent import keys
from langchain_gated_parent.cli.common import PROG, echo, open_index
from langchain_gated_parent.cli.ingest import DEFAULT_BATCH_SIZE, ingest
from langchain_gated_parent.cli.options import add_index_option, positive_int
from langchain_gated_parent.cli.output import location, table
from langchain_gated_parent.demo import DEMO_QUERIES, demo_documents

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers

DEFAULT_DEMO_INDEX = Path("demo-index")


def run(args: argparse.Namespace) -> int:
    """Index the demo corpus, then for each demo question print the gate and the results."""
    index = open_index(args.index, create=True)
    echo(f"demo index: {args.index}")
    echo(ingest(index, demo_documents(), DEFAULT_BATCH_SIZE).summary())
    retriever = index.as_retriever(k=args.k)
    for demo in DEMO_QUERIES:
        explanation = retriever.explain(demo.question, filter=demo.filter)
        echo(f"\nquestion: {demo.question}")
        if demo.filter is not None:
            echo(f"  filter: {', '.join(f'{k}={v}' for k, v in demo.filter.items())}")
        echo(f"  answer in: {demo.doc_id} > {' > '.join(demo.section_path)}")
        learned = math.isnan(explanation.alpha)
        ranker = "learned ranker" if learned else f"alpha {explanation.alpha:.2f}"
        echo(f"  gate opened ({ranker}):")
        for parent in explanation.parents:
            meta = parent.metadata
            echo(f"    {meta[keys.GATE_RANK]}. s_p {meta[keys.PARENT_SCORE]:.3f}  {location(meta)}")
        echo(table(explanation.documents, indent="  "))
    echo(f'\ntry your own: {PROG} query "..." --index {args.index}')
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``demo`` subcommand."""
    parser = commands.add_parser(
        "demo",
        help="index the bundled demo corpus and run example questions",
        description="Index five QASPER papers and a structured methods note (bundled with the "
        "package) and show, for a few questions, what the gate opened and the ranked children.",
    )
    add_index_option(parser, DEFAULT_DEMO_INDEX)
    parser.add_argument(
        "--k", type=positive_int, default=3, metavar="N", help="results per question (default 3)"
    )
    parser.set_defaults(run=run)
