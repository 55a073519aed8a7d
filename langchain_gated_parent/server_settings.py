"""What a served index allows: request bounds, tenant separation and API keys, as one model.

The retriever's own fields say how a query is answered; these settings say how much one
request may ask of the server and whose documents it may see. They are server-side only: a
client cannot change them. The defaults protect a server exposed to untrusted clients; raise
them for a trusted batch job.

The model travels to worker processes as JSON in one environment variable
(:data:`SETTINGS_ENVIRONMENT_VARIABLE`), which is how ``uvicorn --factory`` and gunicorn
workers rebuild the same app (see :func:`langchain_gated_parent.server.app_from_environment`).
"""

from __future__ import annotations

import os
from pathlib import Path  # noqa: TC003 (pydantic reads the annotations at run time)

from pydantic import BaseModel, ConfigDict, Field, model_validator

from langchain_gated_parent.stores.lock import DEFAULT_LOCK_TIMEOUT

SETTINGS_ENVIRONMENT_VARIABLE = "GATED_PARENT_SERVER_SETTINGS"
"""Environment variable holding :class:`ServerSettings` as JSON for worker processes."""


class ServerSettings(BaseModel):
    """Bounds and access rules of one served index (see the module docstring).

    Example:
        .. code-block:: python

            settings = ServerSettings(index="./my-index", max_k=20, tenant_key="tenant",
                                      api_keys_file="./api-keys.json")
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: Path | None = None
    """The index folder every worker opens (``create_app`` may be given an index instead)."""
    workers: int = Field(default=1, ge=1)
    """Server processes, each a reader of the index; more use more cores."""
    max_k: int = Field(default=50, ge=1)
    """Largest ``k`` a request may ask for (``config.configurable.k`` or ``kwargs.k``)."""
    max_parent_top_k: int = Field(default=20, ge=1)
    """Largest ``parent_top_k``: each opened parent costs a read of all its children."""
    max_query_chars: int = Field(default=2000, ge=1)
    """Longest query, in characters: a query is embedded and tokenized for BM25 in full."""
    max_filter_depth: int = Field(default=8, ge=1)
    """Deepest nesting of ``$and``/``$or`` in a client's filter (Chroma refuses deep ones)."""
    max_batch: int = Field(default=32, ge=1)
    """Most queries in one ``/batch`` request."""
    max_body_bytes: int = Field(default=65536, ge=1)
    """Largest request body, in bytes; checked before the body is parsed."""
    tenant_key: str | None = None
    """Metadata key naming a document's tenant; set, every search is confined to one tenant."""
    tenant_header: str | None = None
    """Header a trusted gateway sets to the caller's tenant (used when no API keys are set)."""
    api_keys_file: Path | None = None
    """JSON object ``{"api key": "tenant"}``; set, requests need a key (``X-API-Key``)."""
    lock_timeout: float = Field(default=DEFAULT_LOCK_TIMEOUT, ge=0)
    """Seconds a request waits for another process's hold on a local index's vector files
    before it is answered 503. A hold spans one Chroma call (an ingest job's write waits for
    none longer); only a process stuck inside one makes a request wait this long."""
    embedding_threads: int = Field(default=1, ge=1)
    """onnxruntime threads per query embedding. One: concurrent requests and workers share the
    cores without oversubscribing them, and no idle thread pool spins between queries."""

    @model_validator(mode="after")
    def _tenant_needs_a_source(self) -> ServerSettings:
        """A tenant key without API keys or a header would leave the tenant unknown."""
        if self.tenant_key and self.api_keys_file is None and not self.tenant_header:
            msg = (
                f"tenant_key {self.tenant_key!r} needs the tenant of each request: "
                "set api_keys_file (key -> tenant) or tenant_header (set by your gateway)"
            )
            raise ValueError(msg)
        if self.tenant_header and self.api_keys_file is not None:
            msg = (
                f"tenant_header {self.tenant_header!r} and api_keys_file both name the tenant "
                "(the key would win, the header be ignored): set one of them"
            )
            raise ValueError(msg)
        if self.tenant_header and not self.tenant_key:
            msg = (
                f"tenant_header {self.tenant_header!r} needs tenant_key, the metadata key "
                "holding each document's tenant"
            )
            raise ValueError(msg)
        return self

    def to_environment(self) -> dict[str, str]:
        """The environment variable from which :meth:`from_environment` rebuilds these."""
        return {SETTINGS_ENVIRONMENT_VARIABLE: self.model_dump_json()}

    @classmethod
    def from_environment(cls) -> ServerSettings:
        """Read the settings a parent process (``gated-parent serve``) or a recipe exported.

        Raises:
            ValueError: The variable is missing.
        """
        raw = os.environ.get(SETTINGS_ENVIRONMENT_VARIABLE)
        if not raw:
            msg = (
                f"{SETTINGS_ENVIRONMENT_VARIABLE} is not set; export the server settings as "
                f'JSON, e.g. {SETTINGS_ENVIRONMENT_VARIABLE}=\'{{"index": "./my-index"}}\''
            )
            raise ValueError(msg)
        return cls.model_validate_json(raw)
