"""Serve a gated index over HTTP with LangServe: invoke, batch, stream, schemas and playground.

The served runnable is the retriever (typed to refuse an empty or overlong query), so a client's
``config`` reaches it: ``{"configurable": {"alpha": 0.2, "k": 3}}`` changes one request, not
the server (see ``GatedParentRetriever.config_specs``). What a request may ask for, and whose
documents it may see, is the server's to decide (:class:`ServerSettings`):

* bounds: ``k`` and ``parent_top_k`` (in ``config.configurable`` or ``kwargs``), query length,
  queries per ``/batch`` and body size; exceeding one is a 413 or 422 whose ``detail`` names
  the setting, its limit and the value sent;
* tenants: with ``tenant_key``, every search is confined to the caller's tenant (from its API
  key, or from a header a gateway sets) by a filter the client's own can only narrow
  (:mod:`langchain_gated_parent.tenancy`); with ``api_keys_file``, a request without a key is
  a 401 and one with an unknown key a 403.

A request the retriever refuses is the client's mistake, so it is answered with a 4xx naming
the value, never a 500, and the server keeps serving:

* a value out of its range (``alpha`` 3, ``k`` 0) or of the wrong type fails LangServe's
  validation against the config schema: 422 with FastAPI's list of errors;
* an empty query fails the input schema: 422;
* a filter on a key no document of the index has, or with an operator Chroma does not know,
  is refused before the run starts: 422 with ``{"detail": message}``;
* any other ``ValueError``/``TypeError`` from the run, or a query Chroma refuses: 422 with
  ``{"detail": message}``.

Checking before the run matters for ``/stream``: once a stream has started, LangServe can only
send an "Internal Server Error" event.

Example:
    .. code-block:: bash

        pip install "langchain-gated-parent[serve]"
        gated-parent serve --index ./my-index --port 8000 --workers 2

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

from chromadb.errors import InvalidArgumentError
from pydantic import AfterValidator

from langchain_gated_parent.embeddings import MiniLMEmbeddings
from langchain_gated_parent.index import GatedParentIndex
from langchain_gated_parent.retriever import GatedParentRetriever
from langchain_gated_parent.server_settings import ServerSettings
from langchain_gated_parent.stores.chroma import ConcurrentWriteError
from langchain_gated_parent.stores.vector_files import VectorFilesTimeoutError
from langchain_gated_parent.tenancy import AccessDeniedError, Tenancy, load_api_keys

try:
    import uvicorn
    from fastapi import FastAPI, HTTPException, Request
    from fastapi.concurrency import run_in_threadpool
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
    from collections.abc import Callable, Iterator

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

RETRIEVER_PATH = "/retriever"
"""Where the retriever's LangServe routes live (``/retriever/invoke``, ``/retriever/batch``...)."""
DEFAULT_HOST = "127.0.0.1"
"""Loopback: the server is reachable from this machine only unless a host is given."""
DEFAULT_PORT = 8000
APP_FACTORY = "langchain_gated_parent.server:app_from_environment"
"""Import string of the app factory each worker process calls (``uvicorn --factory``)."""
_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0
_STREAMING = ("/stream", "/stream_log", "/stream_events")
"""Endpoints that answer before the run ends, so a filter must be known good beforehand."""
_BOUNDED_COUNTS = {"k": "max_k", "parent_top_k": "max_parent_top_k"}
"""Per-request settings whose cost grows with their value, and the setting bounding each."""


def _query_type(max_chars: int) -> Any:
    """The served input type: LangServe validates it before the run, so ``/stream`` gets a 422."""

    def check(query: str) -> str:
        if not query.strip():
            msg = "the query is empty; send the question text as 'input'"
            raise ValueError(msg)
        if len(query) > max_chars:
            msg = (
                f"the query is {len(query)} characters long; this server's max_query_chars "
                f"is {max_chars}: send a shorter question"
            )
            raise ValueError(msg)
        return query

    return Annotated[str, AfterValidator(check)]


def _refused(_request: Request, error: Exception) -> JSONResponse:
    """A ``ValueError``/``TypeError`` from the run is a bad request: 422 with its message."""
    logger.info("refused a request: %s", error)
    return JSONResponse(status_code=422, content={"detail": str(error)})


def _busy(_request: Request, error: Exception) -> JSONResponse:
    """A read that collided with, or waited too long on, other processes' writes: 503, retry."""
    logger.warning("a query collided with writes: %s", error)
    return JSONResponse(
        status_code=503, content={"detail": str(error)}, headers={"Retry-After": "1"}
    )


class _BodyLimit:
    """Refuse a request body over ``max_bytes`` with a 413 before it is read in full.

    A plain ASGI middleware (not Starlette's ``BaseHTTPMiddleware``, which adds a task and a
    stream per request): the declared ``Content-Length`` is checked first, and the bytes
    actually received are counted, so a chunked body cannot slip past.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, size: int | str) -> JSONResponse:
        detail = (
            f"the request body is {size} bytes; this server's max_body_bytes is "
            f"{self.max_bytes}: send fewer or shorter queries"
        )
        return JSONResponse(status_code=413, content={"detail": detail})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(int(declared))(scope, receive, send)
            return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise _BodyTooLargeError
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLargeError:
            if started:
                raise
            await self._too_large(f"more than {self.max_bytes}")(scope, receive, send)


class _BodyTooLargeError(Exception):
    """Raised from inside the app when the streamed body passes the limit."""


def _check_counts(values: dict[str, Any], where: str, settings: ServerSettings) -> None:
    for name, setting in _BOUNDED_COUNTS.items():
        value = values.get(name)
        limit = getattr(settings, setting)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            detail = (
                f"{where}.{name} = {value} is above this server's {setting} ({limit}); "
                f"ask for at most {limit}"
            )
            raise HTTPException(422, detail)


def _check_filter_depth(where: Any, limit: int) -> None:
    """Refuse a filter whose ``$and``/``$or`` nest deeper than ``limit``.

    Iterative, so no nesting depth a client sends can exhaust the stack here.
    """
    pending = [(where, 1)]
    while pending:
        clause, depth = pending.pop()
        if not isinstance(clause, dict):
            continue
        for key, value in clause.items():
            if key in {"$and", "$or"} and isinstance(value, list):
                if depth > limit:
                    detail = (
                        f"the filter nests $and/$or more than {limit} levels deep; this "
                        f"server's max_filter_depth is {limit}: flatten it"
                    )
                    raise HTTPException(422, detail)
                pending.extend((item, depth + 1) for item in value)


def _chroma_accepts(index: GatedParentIndex, where: dict[str, Any]) -> None:
    """Let Chroma parse the filter, with a one-row read, before a stream starts.

    Some values pass the Python-side check (``{"$in": [null]}``, ``{"$eq": [1]}``) and are
    refused only by Chroma itself, which a started stream could only break off on.
    """
    try:
        with index.vectors.reading():
            index.parents.get(where=where, limit=1, include=[])
    except InvalidArgumentError as error:
        detail = f"the filter {where!r} is not one Chroma accepts: {error}"
        raise HTTPException(422, detail) from error


def _request_guard(
    index: GatedParentIndex, settings: ServerSettings, tenancy: Tenancy
) -> Callable[[dict[str, Any], Request], Any]:
    """LangServe's per-request config hook: credentials, bounds, then the tenant's filter.

    It runs before the run starts, on every run endpoint (invoke, batch, the streams, with or
    without a config hash in the path), so ``/stream`` is refused with a 4xx too. The body was
    parsed by LangServe already; ``request.json()`` returns that parse, not a new one.
    """

    async def guard(config: dict[str, Any], request: Request) -> dict[str, Any]:
        try:
            tenant = tenancy.tenant_of(request.headers)
        except AccessDeniedError as denied:
            headers = {"WWW-Authenticate": "ApiKey"} if denied.status == 401 else None  # noqa: PLR2004
            raise HTTPException(denied.status, str(denied), headers=headers) from denied
        body = await request.json()
        inputs = body.get("inputs") if isinstance(body, dict) else None
        if isinstance(inputs, list) and len(inputs) > settings.max_batch:
            detail = (
                f"the batch has {len(inputs)} queries; this server's max_batch is "
                f"{settings.max_batch}: split it into smaller batches"
            )
            raise HTTPException(413, detail)
        kwargs = body.get("kwargs") if isinstance(body, dict) else None
        if kwargs:  # LangServe drops them: the run would ignore what the client asked for
            detail = (
                f"kwargs {kwargs!r} are not applied by this server (LangServe passes on only the "
                "input and the config); send them in the config's configurable settings"
            )
            raise HTTPException(422, detail)
        configurable = dict(config.get("configurable") or {})
        _check_counts(configurable, "configurable", settings)
        client_filter = configurable.get("filter")
        _check_filter_depth(client_filter, settings.max_filter_depth)
        # Before the run starts, so /stream answers 422 instead of breaking off its stream.
        index.check_filter(client_filter)
        where = tenancy.scope(tenant, client_filter)
        if where and request.url.path.endswith(_STREAMING):
            await run_in_threadpool(_chroma_accepts, index, where)
        if tenant is not None:
            configurable["filter"] = where
            return {**config, "configurable": configurable}
        return config

    return guard


Source = GatedParentRetriever | GatedParentIndex | str | os.PathLike[str]
"""What to serve: a retriever (its fields are the defaults), an index, or an index's folder."""


def _retriever(source: Source, settings: ServerSettings) -> GatedParentRetriever:
    if isinstance(source, GatedParentRetriever):
        return source
    if isinstance(source, GatedParentIndex):
        return source.as_retriever()
    embeddings = MiniLMEmbeddings(intra_op_num_threads=settings.embedding_threads)
    index = GatedParentIndex(embeddings, directory=Path(source), lock_timeout=settings.lock_timeout)
    return index.as_retriever()


def create_app(source: Source, settings: ServerSettings | None = None) -> FastAPI:
    """Build the FastAPI app serving a :class:`GatedParentRetriever`.

    Routes: ``/retriever/invoke``, ``/retriever/batch``, ``/retriever/stream`` (and LangServe's
    ``stream_log``, ``stream_events``, ``input_schema``, ``config_schema``, ``playground/``),
    and ``/health``, which returns ``{"status": "ok", "stats": index.stats()}`` (without the
    stats when tenants are separated or keys required: they count every tenant's documents).

    Args:
        source: A retriever, whose fields (``k``, ``alpha``...) are the defaults a request's
            ``config["configurable"]`` overrides; or an index, or its folder (opened, or
            created empty, as ``GatedParentIndex(directory=...)`` does), with default settings.
        settings: Bounds, tenants and API keys; default: :class:`ServerSettings`' defaults,
            no tenants, no keys. Its ``index`` is not used here (``source`` is served).

    Returns:
        The app; run it with ``uvicorn.run(app)`` or :func:`serve`.
    """
    settings = settings or ServerSettings()
    retriever = _retriever(source, settings)
    index = cast("GatedParentIndex", retriever.index)  # the retriever reads it as a SearchStore
    tenancy = Tenancy(
        key=settings.tenant_key,
        header=settings.tenant_header,
        api_keys=load_api_keys(settings.api_keys_file) if settings.api_keys_file else None,
    )
    app = FastAPI(
        title="langchain-gated-parent",
        description="Section parents gate paragraph children; results carry fused scores.",
    )
    app.add_exception_handler(ValueError, _refused)
    app.add_exception_handler(ConcurrentWriteError, _busy)
    app.add_exception_handler(VectorFilesTimeoutError, _busy)
    app.add_exception_handler(TypeError, _refused)
    app.add_exception_handler(InvalidArgumentError, _refused)  # what Chroma itself refuses
    app.add_middleware(_BodyLimit, max_bytes=settings.max_body_bytes)
    add_routes(
        app,
        retriever.with_types(input_type=_query_type(settings.max_query_chars)),
        path=RETRIEVER_PATH,
        per_req_config_modifier=_request_guard(index, settings, tenancy),
    )
    private = tenancy.api_keys is not None or tenancy.key is not None

    @app.get("/health")
    def health() -> dict[str, Any]:
        """Liveness and what is being served: counts, size and embedding model."""
        return {"status": "ok"} if private else {"status": "ok", "stats": index.stats()}

    return app


def app_from_environment() -> FastAPI:
    """The app of the :class:`ServerSettings` in the environment: the workers' factory.

    ``gated-parent serve --workers N`` exports the settings and starts N uvicorn workers, each
    calling this; to run it under uvicorn or gunicorn yourself, see the README ("Serving").

    Raises:
        ValueError: The settings are missing, invalid, or name no index.
    """
    settings = ServerSettings.from_environment()
    if settings.index is None:
        msg = "the server settings name no index: set 'index' to the index folder"
        raise ValueError(msg)
    return create_app(settings.index, settings)


def serve(settings: ServerSettings, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve ``settings.index`` with ``settings.workers`` uvicorn processes until interrupted.

    With one worker the app runs in this process; with more, uvicorn starts that many worker
    processes, each opening the index as a reader (:func:`app_from_environment`).

    Args:
        settings: The index folder, the worker count, bounds, tenants and keys.
        host: Interface to listen on; the loopback default keeps the index private.
        port: TCP port.
    """
    if settings.index is None:
        msg = "the server settings name no index: set 'index' to the index folder"
        raise ValueError(msg)
    if settings.workers == 1:
        uvicorn.run(create_app(settings.index, settings), host=host, port=port, log_level="info")
        return
    os.environ.update(settings.to_environment())
    uvicorn.run(
        APP_FACTORY,
        factory=True,
        workers=settings.workers,
        host=host,
        port=port,
        log_level="info",
    )


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
