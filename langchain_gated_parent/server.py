"""Serve a gated index over HTTP with LangServe: invoke, batch, stream, schemas and playground.

The served runnable is the retriever (typed to refuse an empty query), so a client's
``config`` reaches it unchanged: ``{"configurable": {"alpha": 0.2, "k": 3}}`` changes one
request, not the server (see ``GatedParentRetriever.config_specs``).

A request the retriever refuses is the client's mistake, so it is answered with a 4xx naming
the value, never a 500, and the server keeps serving:

* a value out of its range (``alpha`` 3, ``k`` 0) or of the wrong type fails LangServe's
  validation against the config schema: 422 with FastAPI's list of errors;
* an empty query fails the input schema: 422;
* a filter on a key no document of the index has, or with an operator Chroma does not know,
  is refused before the run starts: 422 with ``{"detail": message}``;
* any other ``ValueError``/``TypeError`` from the run: 422 with ``{"detail": message}``.

Checking before the run matters for ``/stream``: once a stream has started, LangServe can only
send an "Internal Server Error" event.

Example:
    .. code-block:: bash

        pip install "langchain-gated-parent[serve]"
        gated-parent serve --index ./my-index --port 8000

    .. code-block:: python

        from langserve import RemoteRunnable

        retriever = RemoteRunnable("http://127.0.0.1:8000/retriever/")
        retriever.invoke("48 h RNA extraction", config={"configurable": {"alpha": 0.2}})
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import AfterValidator

from langchain_gated_parent.index import GatedParentIndex
from langchain_gated_parent.retriever import GatedParentRetriever
from langchain_gated_parent.stores.chroma import ConcurrentWriteError

try:
    import uvicorn
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from langserve import add_routes
    from sse_starlette.sse import AppStatus
except ImportError as error:  # pragma: no cover - depends on the installed extras
    _msg = (
        f"serving needs the 'serve' extra ({error.name} is missing): "
        'pip install "langchain-gated-parent[serve]"'
    )
    raise ImportError(_msg) from error

if TYPE_CHECKING:
    from collections.abc import Iterator

logger = logging.getLogger(__name__)

RETRIEVER_PATH = "/retriever"
"""Where the retriever's LangServe routes live (``/retriever/invoke``, ``/retriever/batch``...)."""
DEFAULT_HOST = "127.0.0.1"
"""Loopback: the server is reachable from this machine only unless a host is given."""
DEFAULT_PORT = 8000
_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0


def _non_empty(query: str) -> str:
    if not query.strip():
        msg = "the query is empty; send the question text as 'input'"
        raise ValueError(msg)
    return query


Query = Annotated[str, AfterValidator(_non_empty)]
"""The served input type: LangServe validates it before the run, so ``/stream`` gets a 422 too."""


def _refused(_request: Request, error: Exception) -> JSONResponse:
    """A ``ValueError``/``TypeError`` from the run is a bad request: 422 with its message."""
    logger.info("refused a request: %s", error)
    return JSONResponse(status_code=422, content={"detail": str(error)})


def _busy(_request: Request, error: Exception) -> JSONResponse:
    """A read that kept colliding with another process's writes: 503, retry shortly."""
    logger.warning("a query collided with writes: %s", error)
    return JSONResponse(
        status_code=503, content={"detail": str(error)}, headers={"Retry-After": "1"}
    )


Source = GatedParentRetriever | GatedParentIndex | str | os.PathLike[str]
"""What to serve: a retriever (its fields are the defaults), an index, or an index's folder."""


def _retriever(source: Source) -> GatedParentRetriever:
    if isinstance(source, GatedParentRetriever):
        return source
    if isinstance(source, GatedParentIndex):
        return source.as_retriever()
    return GatedParentIndex(directory=Path(source)).as_retriever()


def create_app(source: Source) -> FastAPI:
    """Build the FastAPI app serving a :class:`GatedParentRetriever`.

    Routes: ``/retriever/invoke``, ``/retriever/batch``, ``/retriever/stream`` (and LangServe's
    ``stream_log``, ``stream_events``, ``input_schema``, ``config_schema``, ``playground/``),
    and ``/health``, which returns ``{"status": "ok", "stats": index.stats()}``.

    Args:
        source: A retriever, whose fields (``k``, ``alpha``...) are the defaults a request's
            ``config["configurable"]`` overrides; or an index, or its folder (opened, or
            created empty, as ``GatedParentIndex(directory=...)`` does), with default settings.

    Returns:
        The app; run it with ``uvicorn.run(app)`` or :func:`serve`.
    """
    retriever = _retriever(source)
    index = cast("GatedParentIndex", retriever.index)  # the retriever reads it as a SearchStore
    app = FastAPI(
        title="langchain-gated-parent",
        description="Section parents gate paragraph children; results carry fused scores.",
    )
    app.add_exception_handler(ValueError, _refused)
    app.add_exception_handler(ConcurrentWriteError, _busy)
    app.add_exception_handler(TypeError, _refused)

    def check_filter(config: dict[str, Any], _request: Request) -> dict[str, Any]:
        # Before the run starts, so /stream answers 422 instead of breaking off its stream.
        where = (config.get("configurable") or {}).get("filter")
        index.check_filter(where)
        return config

    add_routes(
        app,
        retriever.with_types(input_type=Query),
        path=RETRIEVER_PATH,
        per_req_config_modifier=check_filter,
    )

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Liveness and what is being served: counts, size and embedding model."""
        return {"status": "ok", "stats": index.stats()}

    return app


def serve(source: Source, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Run :func:`create_app` with uvicorn until interrupted (``gated-parent serve``).

    Args:
        source: A retriever, an index, or an index's folder, as for :func:`create_app`.
        host: Interface to listen on; the loopback default keeps the index private.
        port: TCP port.
    """
    uvicorn.run(create_app(source), host=host, port=port, log_level="info")


@contextmanager
def running_server(app: FastAPI, host: str = DEFAULT_HOST, port: int = 0) -> Iterator[str]:
    """Run ``app`` on a background thread for a ``with`` block; yields its base URL.

    For tests, notebooks and examples: the socket is bound before the thread starts (port 0
    picks a free one, without a race), and the server stops when the block ends.

    Args:
        app: The app to serve.
        host: Interface to listen on.
        port: TCP port; 0 picks a free one.

    Yields:
        ``http://HOST:PORT``.

    Raises:
        RuntimeError: The server did not start within 30 s.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    # sse-starlette keeps one exit event per process, bound to the first server's event loop;
    # a server on a new thread (a new loop) must start without it or its streams fail.
    AppStatus.should_exit_event = None
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                msg = f"the server on {host}:{sock.getsockname()[1]} did not start"
                raise RuntimeError(msg)
            time.sleep(0.05)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(_STOP_TIMEOUT)
        sock.close()
