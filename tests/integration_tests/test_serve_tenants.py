"""Tenants kept apart over real HTTP: API keys, a gateway header, and hostile client filters."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from langchain_core.documents import Document
from langserve import RemoteRunnable
from langserve.lzstring import LZString

from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings, keys
from langchain_gated_parent.server import RETRIEVER_PATH, create_app, running_server
from langchain_gated_parent.server_settings import ServerSettings

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TENANTS = ("acme", "globex", "initech")
KEYS = {"acme": "key-acme-0001", "globex": "key-globex-0002", "initech": "key-initech-0003"}
QUERY = "RNA extraction protocol timing"
TOPICS = {
    "protocol": "# Protocol\n\nRNA extraction 48 h after transfection with column kits ({t}).\n\n"
    "## Timing\n\nIncubate 12 h, 24 h or 72 h; longer incubation lowers RNA integrity ({t}).",
    "report": "# Report\n\nQuarterly revenue grew by a tenth ({t}).\n\n## Costs\n\n"
    "Reagents for RNA extraction were the largest cost this quarter ({t}).",
}
"""Every paragraph ends with its tenant's mark ``(<tenant>)``, so a leak shows in any answer."""


def foreign_marks(text: str, tenant: str) -> list[str]:
    """Other tenants' marks found in a raw response body (documents, events, logs alike)."""
    return [f"({t})" for t in TENANTS if t != tenant and f"({t})" in text]


def tenant_documents() -> list[Document]:
    """The same topics in every tenant, so an unconfined search returns them all."""
    return [
        Document(
            page_content=text.format(t=tenant),
            metadata={keys.DOC_ID: f"{tenant}-{topic}", "tenant": tenant, "topic": topic},
        )
        for tenant in TENANTS
        for topic, text in TOPICS.items()
    ]


@pytest.fixture(scope="module")
def tenant_index(
    tmp_path_factory: pytest.TempPathFactory, embeddings: MiniLMEmbeddings
) -> GatedParentIndex:
    index = GatedParentIndex(embeddings, directory=tmp_path_factory.mktemp("tenants"))
    index.add_documents(tenant_documents())
    return index


@pytest.fixture(scope="module")
def keyed_url(
    tenant_index: GatedParentIndex, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    key_file = tmp_path_factory.mktemp("keys") / "api-keys.json"
    key_file.write_text(json.dumps({key: tenant for tenant, key in KEYS.items()}))
    settings = ServerSettings(tenant_key="tenant", api_keys_file=key_file)
    with running_server(create_app(tenant_index.as_retriever(k=12), settings)) as url:
        yield url


@pytest.fixture(scope="module")
def open_url(tenant_index: GatedParentIndex) -> Iterator[str]:
    """The same index served without tenants: the control that shows what a filter reaches."""
    with running_server(create_app(tenant_index.as_retriever(k=12))) as url:
        yield url


def post(url: str, endpoint: str, body: dict[str, Any], key: str | None) -> httpx.Response:
    headers = {"X-API-Key": key} if key else {}
    return httpx.post(f"{url}{RETRIEVER_PATH}/{endpoint}", json=body, headers=headers, timeout=60)


def tenants_of(response: httpx.Response) -> list[str]:
    """Every document's tenant in an invoke or batch answer (parents or children)."""
    output = response.json()["output"]
    docs = (
        [d for item in output for d in item] if output and isinstance(output[0], list) else output
    )
    return [d["metadata"]["tenant"] for d in docs]


HOSTILE_FILTERS: list[Any] = [
    {"tenant": "globex"},
    {"tenant": {"$eq": "initech"}},
    {"tenant": {"$ne": "acme"}},
    {"tenant": {"$nin": ["acme"]}},
    {"tenant": {"$in": ["acme", "globex", "initech"]}},
    {"$or": [{"tenant": "globex"}, {"tenant": "acme"}]},
    {"$or": [{"tenant": {"$ne": "acme"}}, {"topic": "report"}]},
    {"$or": [{"doc_id": "globex-report"}, {"doc_id": {"$ne": "nothing"}}]},
    {"$and": [{"$or": [{"tenant": "globex"}, {"topic": "protocol"}]}, {"doc_id": {"$ne": "x"}}]},
    {"$or": [{"$and": [{"tenant": "initech"}, {"topic": "report"}]}, {"topic": "protocol"}]},
    {"doc_id": {"$nin": ["acme-protocol", "acme-report"]}},
    {"doc_id": "globex-protocol"},
    {"topic": {"$ne": "none"}},
    {},
    None,
    # wrong types and malformed operators: refused with a 4xx, never run unconfined
    "tenant = globex",
    ["tenant", "globex"],
    42,
    {"tenant": ["globex"]},
    {"$or": "tenant"},
    {"$or": []},
    {"$and": [{}]},
    {"tenant": {"$ne": None}},
    {"tenant": {"$regex": ".*"}},
    {"$not": {"tenant": "acme"}},
]


def test_hostile_filters_never_reach_another_tenant(keyed_url: str, open_url: str) -> None:
    leaked: list[tuple[Any, str, list[str]]] = []
    answered = refused = reachable_without_guard = 0
    for where in HOSTILE_FILTERS:
        for return_parents in (False, True):
            configurable = {"filter": where, "return_parents": return_parents}
            body = {"input": QUERY, "config": {"configurable": configurable}}
            for endpoint, request in (
                ("invoke", body),
                ("batch", {"inputs": [QUERY, "quarterly revenue"], "config": body["config"]}),
            ):
                response = post(keyed_url, endpoint, request, KEYS["acme"])
                if response.status_code == 200:
                    answered += 1
                    found = tenants_of(response)
                    if any(t != "acme" for t in found) or foreign_marks(response.text, "acme"):
                        leaked.append((where, endpoint, found))
                else:
                    assert 400 <= response.status_code < 500, response.text
                    refused += 1
            control = post(open_url, "invoke", body, None)
            if control.status_code == 200 and set(tenants_of(control)) - {"acme"}:
                reachable_without_guard += 1
    assert leaked == []
    # the test means something: most filters run, and without the guard they reach others
    assert answered >= 40
    assert refused >= 10
    assert reachable_without_guard >= 10


@pytest.mark.parametrize("tenant", TENANTS)
def test_each_key_sees_its_own_tenant_and_all_of_it(keyed_url: str, tenant: str) -> None:
    body = {"input": QUERY, "config": {"configurable": {"return_parents": True}}}
    response = post(keyed_url, "invoke", body, KEYS[tenant])
    assert response.status_code == 200, response.text
    docs = response.json()["output"]
    assert {d["metadata"]["tenant"] for d in docs} == {tenant}
    assert {d["metadata"][keys.DOC_ID] for d in docs} == {f"{tenant}-{t}" for t in TOPICS}


def test_a_client_filter_narrows_inside_the_tenant(keyed_url: str) -> None:
    body = {"input": QUERY, "config": {"configurable": {"filter": {"topic": "report"}}}}
    response = post(keyed_url, "invoke", body, KEYS["globex"])
    assert response.status_code == 200, response.text
    assert {d["metadata"][keys.DOC_ID] for d in response.json()["output"]} == {"globex-report"}


@pytest.mark.filterwarnings("ignore:astream_log is deprecated")  # LangServe's stream_log uses it
@pytest.mark.parametrize("endpoint", ["stream", "stream_log", "stream_events"])
def test_streams_and_event_logs_are_confined(keyed_url: str, endpoint: str) -> None:
    for where in (
        {"tenant": {"$ne": "acme"}},
        {"$or": [{"tenant": "globex"}, {"topic": "report"}]},
    ):
        body = {"input": QUERY, "config": {"configurable": {"filter": where}}}
        response = post(keyed_url, endpoint, body, KEYS["acme"])
        assert response.status_code == 200, response.text
        assert foreign_marks(response.text, "acme") == []
    response = post(keyed_url, endpoint, {"input": QUERY}, KEYS["acme"])
    assert "(acme)" in response.text


def test_a_filter_in_the_config_hash_or_in_kwargs_is_confined(keyed_url: str) -> None:
    """The playground sends its config in the path; ``kwargs``, which LangServe would ignore,
    are refused."""
    config = json.dumps({"configurable": {"filter": {"tenant": {"$in": ["globex", "acme"]}}}})
    path = f"{RETRIEVER_PATH}/c/{LZString.compressToEncodedURIComponent(config)}/invoke"
    headers = {"X-API-Key": KEYS["acme"]}
    hashed = httpx.post(f"{keyed_url}{path}", json={"input": QUERY}, headers=headers, timeout=60)
    assert hashed.status_code == 200, hashed.text
    assert set(tenants_of(hashed)) == {"acme"}
    assert foreign_marks(hashed.text, "acme") == []
    body = {"input": QUERY, "kwargs": {"filter": {"tenant": "globex"}}}
    kwargs = post(keyed_url, "invoke", body, KEYS["acme"])
    assert kwargs.status_code == 422, kwargs.text
    assert "not applied by this server" in kwargs.text
    assert foreign_marks(kwargs.text, "acme") == []


def test_the_stream_is_confined_too(keyed_url: str) -> None:
    remote: RemoteRunnable[str, list[Document]] = RemoteRunnable(
        f"{keyed_url}{RETRIEVER_PATH}/", headers={"X-API-Key": KEYS["initech"]}, timeout=60
    )
    config = {"configurable": {"filter": {"tenant": {"$ne": "initech"}}}}
    assert list(remote.stream(QUERY, config=config)) in ([], [[]])  # type: ignore[arg-type]
    streamed = [doc for chunk in remote.stream(QUERY) for doc in chunk]
    assert streamed
    assert {d.metadata["tenant"] for d in streamed} == {"initech"}


@pytest.mark.parametrize("endpoint", ["invoke", "batch", "stream"])
def test_without_a_key_401_and_with_a_wrong_key_403(keyed_url: str, endpoint: str) -> None:
    body = {"inputs": [QUERY]} if endpoint == "batch" else {"input": QUERY}
    missing = post(keyed_url, endpoint, body, None)
    assert missing.status_code == 401, missing.text
    assert "X-API-Key" in missing.json()["detail"]
    wrong = post(keyed_url, endpoint, body, "key-acme-0001x")
    assert wrong.status_code == 403, wrong.text
    assert "not valid" in wrong.json()["detail"]
    bearer = httpx.post(
        f"{keyed_url}{RETRIEVER_PATH}/{endpoint}",
        json=body,
        headers={"Authorization": f"Bearer {KEYS['acme']}"},
        timeout=60,
    )
    assert bearer.status_code == 200, bearer.text


def test_health_does_not_count_other_tenants_documents(keyed_url: str, open_url: str) -> None:
    assert httpx.get(f"{keyed_url}/health").json() == {"status": "ok"}
    assert httpx.get(f"{open_url}/health").json()["stats"]["documents"] == 6


def test_a_gateway_header_names_the_tenant(tenant_index: GatedParentIndex) -> None:
    settings = ServerSettings(tenant_key="tenant", tenant_header="X-Tenant")
    app = create_app(tenant_index.as_retriever(k=12), settings)
    with running_server(app) as url:
        body = {"input": QUERY, "config": {"configurable": {"filter": {"tenant": "acme"}}}}
        response = httpx.post(
            f"{url}{RETRIEVER_PATH}/invoke", json=body, headers={"X-Tenant": "globex"}, timeout=60
        )
        assert response.status_code == 200, response.text
        assert response.json()["output"] == []  # globex asking for acme's: nothing
        response = httpx.post(
            f"{url}{RETRIEVER_PATH}/invoke",
            json={"input": QUERY},
            headers={"X-Tenant": "globex"},
            timeout=60,
        )
        assert set(tenants_of(response)) == {"globex"}
        missing = httpx.post(f"{url}{RETRIEVER_PATH}/invoke", json={"input": QUERY}, timeout=60)
        assert missing.status_code == 401
        assert "X-Tenant" in missing.json()["detail"]


def test_settings_refuse_a_tenant_key_without_a_source_of_tenants() -> None:
    with pytest.raises(ValueError, match=r"api_keys_file .* or tenant_header"):
        ServerSettings(tenant_key="tenant")


def test_settings_refuse_both_a_tenant_header_and_api_keys(tmp_path: Path) -> None:
    """Keys would win and the header be ignored, silently."""
    with pytest.raises(ValueError, match=r"'X-Tenant' and api_keys_file both name the tenant"):
        ServerSettings(
            tenant_key="tenant", tenant_header="X-Tenant", api_keys_file=tmp_path / "keys.json"
        )


def test_a_bad_api_keys_file_is_refused_by_name(
    tenant_index: GatedParentIndex, tmp_path: Path
) -> None:
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps(["not", "a", "table"]))
    settings = ServerSettings(api_keys_file=key_file)
    with pytest.raises(ValueError, match=r"keys\.json must be a non-empty JSON object"):
        create_app(tenant_index.as_retriever(), settings)
