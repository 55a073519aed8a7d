"""Keep tenants apart: who is calling (API key or gateway header) and the filter they get.

A served search is confined with a filter the client cannot widen: the tenant's clause and the
client's own filter joined by ``$and``, so whatever the client writes (``$or``, ``$ne``, a
clause on the tenant key itself) can only narrow the tenant's documents, never add another's.

API keys are held as SHA-256 digests: the plain keys stay in their file, and a lookup compares
digests, not the secret itself, character by character.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

API_KEY_HEADER = "X-API-Key"
"""Header carrying the caller's key (``Authorization: Bearer KEY`` works too)."""


class AccessDeniedError(Exception):
    """The request has no valid credentials: ``status`` is 401 (none sent) or 403 (wrong)."""

    def __init__(self, status: int, message: str) -> None:
        """Keep the HTTP status to answer with."""
        super().__init__(message)
        self.status = status


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_api_keys(path: Path) -> dict[str, str]:
    """Read ``{"api key": "tenant"}`` from a JSON file; keyed by digest (see module docstring).

    Raises:
        ValueError: The file is not a JSON object of non-empty strings.
    """
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        msg = f"cannot read the API keys file {path}: {error}"
        raise ValueError(msg) from error
    valid = isinstance(table, dict) and all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in table.items()
    )
    if not valid or not table:
        msg = (
            f"the API keys file {path} must be a non-empty JSON object of "
            '"api key": "tenant" strings, e.g. {"k3y-for-acme": "acme"}'
        )
        raise ValueError(msg)
    return {_digest(key): tenant for key, tenant in table.items()}


def _sent_key(headers: Mapping[str, str]) -> str | None:
    key = headers.get(API_KEY_HEADER.lower())
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


@dataclass(frozen=True)
class Tenancy:
    """How a request's tenant is found, and the metadata key that holds a document's tenant.

    With ``api_keys`` (digest -> tenant) a request must send a known key and its tenant is the
    key's; otherwise, with ``header``, the tenant is that header's value (set it only behind a
    gateway that overwrites it). With ``key`` unset, keys only authenticate.
    """

    key: str | None = None
    header: str | None = None
    api_keys: Mapping[str, str] | None = None

    def tenant_of(self, headers: Mapping[str, str]) -> str | None:
        """The caller's tenant (``None`` when tenants are not separated).

        Args:
            headers: The request headers, with lower-case names (as Starlette gives them).

        Raises:
            AccessDeniedError: 401 without a key (or tenant header), 403 with an unknown key.
        """
        tenant: str | None = None
        if self.api_keys is not None:
            sent = _sent_key(headers)
            if sent is None:
                msg = f"this server needs an API key: send it in the {API_KEY_HEADER} header"
                raise AccessDeniedError(401, msg)
            tenant = self.api_keys.get(_digest(sent))
            if tenant is None:
                msg = f"the API key sent in {API_KEY_HEADER} is not valid on this server"
                raise AccessDeniedError(403, msg)
        elif self.header is not None:
            tenant = headers.get(self.header.lower()) or None
            if tenant is None:
                msg = f"this server separates tenants: send the {self.header} header"
                raise AccessDeniedError(401, msg)
        return tenant if self.key else None

    def scope(
        self, tenant: str | None, client_filter: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """The filter to search with: the client's, confined to ``tenant`` when there is one."""
        if tenant is None or self.key is None:
            return client_filter
        return tenant_filter(self.key, tenant, client_filter)


def tenant_filter(key: str, tenant: str, client_filter: dict[str, Any] | None) -> dict[str, Any]:
    """``{"$and": [{key: {"$eq": tenant}}, client_filter]}``, or the tenant clause alone.

    Example:
        >>> tenant_filter("tenant", "acme", {"doc_id": "P-1"})
        {'$and': [{'tenant': {'$eq': 'acme'}}, {'doc_id': 'P-1'}]}
    """
    own = {key: {"$eq": tenant}}
    return {"$and": [own, client_filter]} if client_filter else own
