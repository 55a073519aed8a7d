"""Tenant resolution, the confining filter, API key files and the server settings."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from langchain_gated_parent.server_settings import SETTINGS_ENVIRONMENT_VARIABLE, ServerSettings
from langchain_gated_parent.tenancy import AccessDeniedError, Tenancy, load_api_keys, tenant_filter

if TYPE_CHECKING:
    from pathlib import Path


def test_the_tenant_clause_is_anded_with_the_client_filter() -> None:
    client = {"$or": [{"tenant": "other"}, {"doc_id": {"$ne": "x"}}]}
    assert tenant_filter("tenant", "acme", client) == {
        "$and": [{"tenant": {"$eq": "acme"}}, client]
    }


@pytest.mark.parametrize("empty", [None, {}])
def test_without_a_client_filter_the_tenant_clause_stands_alone(
    empty: dict[str, str] | None,
) -> None:
    assert tenant_filter("tenant", "acme", empty) == {"tenant": {"$eq": "acme"}}


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"secret-a": "acme", "secret-g": "globex"}))
    return path


def test_keys_are_kept_as_digests(key_file: Path) -> None:
    table = load_api_keys(key_file)
    assert sorted(table.values()) == ["acme", "globex"]
    assert "secret-a" not in table
    assert all(len(digest) == 64 for digest in table)


@pytest.mark.parametrize(
    ("headers", "tenant"),
    [
        ({"x-api-key": "secret-a"}, "acme"),
        ({"authorization": "Bearer secret-g"}, "globex"),
        ({"authorization": "bearer secret-a", "x-tenant": "globex"}, "acme"),
    ],
)
def test_a_known_key_names_its_tenant(key_file: Path, headers: dict[str, str], tenant: str) -> None:
    tenancy = Tenancy(key="tenant", header="X-Tenant", api_keys=load_api_keys(key_file))
    assert tenancy.tenant_of(headers) == tenant


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"authorization": "Basic c2VjcmV0LWE="}, 401),
        ({"authorization": "Bearer "}, 401),
        ({"x-api-key": "secret-a "}, 403),
        ({"x-api-key": "SECRET-A"}, 403),
        ({"x-tenant": "acme"}, 401),
    ],
)
def test_missing_or_wrong_keys_are_denied(
    key_file: Path, headers: dict[str, str], status: int
) -> None:
    tenancy = Tenancy(key="tenant", header="X-Tenant", api_keys=load_api_keys(key_file))
    with pytest.raises(AccessDeniedError) as denied:
        tenancy.tenant_of(headers)
    assert denied.value.status == status


def test_keys_without_a_tenant_key_only_authenticate(key_file: Path) -> None:
    tenancy = Tenancy(api_keys=load_api_keys(key_file))
    assert tenancy.tenant_of({"x-api-key": "secret-a"}) is None
    assert tenancy.scope(None, {"doc_id": "x"}) == {"doc_id": "x"}


def test_a_gateway_header_names_the_tenant() -> None:
    tenancy = Tenancy(key="tenant", header="X-Tenant")
    assert tenancy.tenant_of({"x-tenant": "globex"}) == "globex"
    with pytest.raises(AccessDeniedError, match="X-Tenant"):
        tenancy.tenant_of({"x-tenant": ""})


@pytest.mark.parametrize(
    "content", ["[]", "{}", '{"k": 1}', '{"": "acme"}', '{"k": ""}', "not json"]
)
def test_a_bad_key_file_is_refused_by_name(tmp_path: Path, content: str) -> None:
    path = tmp_path / "keys.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"keys\.json"):
        load_api_keys(path)


def test_settings_travel_through_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ServerSettings(
        index=tmp_path, workers=2, max_k=7, tenant_key="t", tenant_header="X-T"
    )
    for name, value in settings.to_environment().items():
        monkeypatch.setenv(name, value)
    assert ServerSettings.from_environment() == settings


def test_missing_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SETTINGS_ENVIRONMENT_VARIABLE, raising=False)
    with pytest.raises(ValueError, match=SETTINGS_ENVIRONMENT_VARIABLE):
        ServerSettings.from_environment()


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_k": 0}, "max_k"),
        ({"workers": 0}, "workers"),
        ({"tenant_key": "tenant"}, "api_keys_file"),
        ({"tenant_header": "X-Tenant"}, "tenant_key"),
        ({"max_kk": 3}, "max_kk"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ServerSettings(**kwargs)  # type: ignore[arg-type]
