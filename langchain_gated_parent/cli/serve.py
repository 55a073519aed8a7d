"""``gated-parent serve --index DIR``: serve the retriever over HTTP with LangServe."""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import EXIT_FAILURE, echo, open_index, refused
from langchain_gated_parent.cli.options import add_index_option, port

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers


def run(args: argparse.Namespace) -> int:
    """Open the index, print where it is served, and serve until interrupted."""
    index = open_index(args.index)
    with refused(EXIT_FAILURE, ImportError):  # the message names the pip install command
        from langchain_gated_parent.server import RETRIEVER_PATH, serve  # noqa: PLC0415

    base = f"http://{args.host}:{args.port}"
    echo(f"serving {args.index} at {base}{RETRIEVER_PATH}/ (Ctrl+C stops)")
    echo(f"playground: {base}{RETRIEVER_PATH}/playground/  health: {base}/health")
    serve(index, host=args.host, port=args.port)
    return 0


def add(commands: Subparsers) -> None:
    """Add the ``serve`` subcommand."""
    parser = commands.add_parser(
        "serve",
        help="serve the retriever over HTTP (LangServe)",
        description="Serve the index's retriever with LangServe: /retriever/invoke, /batch, "
        "/stream, /playground/ and /health. A request's config may set alpha, k, "
        "parent_top_k, child_per_parent, return_parents and filter for that request. "
        'Needs pip install "langchain-gated-parent[serve]".',
    )
    add_index_option(parser)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: this machine only)",
    )
    parser.add_argument(
        "--port", type=port, default=8000, metavar="N", help="TCP port (default 8000)"
    )
    parser.set_defaults(run=run)
