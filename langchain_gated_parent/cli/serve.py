"""``gated-parent serve --index DIR``: serve the retriever over HTTP with LangServe."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_gated_parent.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CliError,
    echo,
    open_index,
    refused,
)
from langchain_gated_parent.cli.options import (
    add_index_option,
    add_lock_timeout_option,
    port,
    positive_int,
)

if TYPE_CHECKING:
    import argparse

    from langchain_gated_parent.cli.common import Subparsers
    from langchain_gated_parent.server_settings import ServerSettings


def run(args: argparse.Namespace) -> int:
    """Check the index and the settings, print where it is served, and serve until interrupted."""
    with refused(EXIT_FAILURE, ImportError):  # the message names the pip install command
        from langchain_gated_parent.server import RETRIEVER_PATH, serve  # noqa: PLC0415
    settings = _settings(args)
    open_index(args.index)  # refuses a folder without an index before any worker starts
    _refuse_an_address_in_use(args.host, args.port)
    base = f"http://{args.host}:{args.port}"
    workers = f" with {args.workers} workers" if args.workers > 1 else ""
    echo(f"serving {args.index} at {base}{RETRIEVER_PATH}/{workers} (Ctrl+C stops)")
    echo(f"playground: {base}{RETRIEVER_PATH}/playground/  health: {base}/health")
    serve(settings, host=args.host, port=args.port)
    return 0


def _refuse_an_address_in_use(host: str, port: int) -> None:
    """Refuse an address this process cannot listen on, naming it and the fix.

    Checked before any worker starts: uvicorn would exit 3 after its own error, which with
    several workers does not name the address. The probe binds as uvicorn does (address reuse
    on, so a port left in TIME_WAIT is not refused); a port taken between this check and
    uvicorn's bind still ends with uvicorn's error.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            msg = (
                f"cannot listen on {host}:{port} ({error.strerror}); pass a free port with "
                "--port, or stop the process that listens there"
            )
            raise CliError(msg) from error


def _settings(args: argparse.Namespace) -> ServerSettings:
    """The server settings from the options; a bad combination or key file is a usage error."""
    from pydantic import ValidationError  # noqa: PLC0415

    from langchain_gated_parent.server_settings import ServerSettings  # noqa: PLC0415
    from langchain_gated_parent.tenancy import load_api_keys  # noqa: PLC0415

    try:
        settings = ServerSettings(
            index=args.index,
            workers=args.workers,
            max_k=args.max_k,
            max_parent_top_k=args.max_parent_top_k,
            max_query_chars=args.max_query_chars,
            max_filter_depth=args.max_filter_depth,
            max_batch=args.max_batch,
            max_body_bytes=args.max_body_bytes,
            tenant_key=args.tenant_key,
            tenant_header=args.tenant_header,
            api_keys_file=args.api_keys,
            lock_timeout=args.lock_timeout,
        )
    except ValidationError as error:
        problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in error.errors())
        raise CliError(problems, EXIT_USAGE) from error
    if settings.api_keys_file is not None:
        with refused(EXIT_USAGE, ValueError):  # checked here, not in each worker at start
            load_api_keys(settings.api_keys_file)
    return settings


def add(commands: Subparsers) -> None:
    """Add the ``serve`` subcommand."""
    from langchain_gated_parent.server_settings import ServerSettings  # noqa: PLC0415

    defaults = ServerSettings()
    parser = commands.add_parser(
        "serve",
        help="serve the retriever over HTTP (LangServe)",
        description="Serve the index's retriever with LangServe: /retriever/invoke, /batch, "
        "/stream, /playground/ and /health. A request's config may set any of the retriever's "
        "settings (k, alpha, filter, parent_top_k...) for that request, within the bounds "
        "below. With --tenant-key, each request sees its tenant's documents only. "
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
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="server processes, each a reader of the index (default 1; use up to one per core)",
    )
    bounds = parser.add_argument_group("bounds (a request over one is refused with a 4xx)")
    for flag, name, what in (
        ("--max-k", "max_k", "largest k a request may ask for"),
        ("--max-parent-top-k", "max_parent_top_k", "largest parent_top_k"),
        ("--max-query-chars", "max_query_chars", "longest query, in characters"),
        ("--max-filter-depth", "max_filter_depth", "deepest $and/$or nesting in a filter"),
        ("--max-batch", "max_batch", "most queries in one /batch request"),
        ("--max-body-bytes", "max_body_bytes", "largest request body, in bytes"),
    ):
        default = getattr(defaults, name)
        bounds.add_argument(
            flag, type=positive_int, default=default, metavar="N", help=f"{what} ({default})"
        )
    add_lock_timeout_option(parser, outcome="answer 503")
    access = parser.add_argument_group("tenants and API keys")
    access.add_argument(
        "--tenant-key",
        metavar="KEY",
        help="metadata key holding each document's tenant: confine every search to the "
        "caller's tenant (from its API key, or from --tenant-header)",
    )
    access.add_argument(
        "--tenant-header",
        metavar="NAME",
        help="header carrying the caller's tenant, set by a trusted gateway (without --api-keys)",
    )
    access.add_argument(
        "--api-keys",
        type=Path,
        metavar="FILE",
        help='JSON file {"api key": "tenant", ...}: requests need a key in the X-API-Key header',
    )
    parser.set_defaults(run=run)
