"""Request bounds over real HTTP: each one refused with a 4xx naming it, then a normal answer."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings
from langchain_gated_parent.server import RETRIEVER_PATH, create_app, running_server
from langchain_gated_parent.server_settings import ServerSettings

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

QUERY = "48 h RNA extraction"
LIMITS = ServerSettings(
    max_k=5, max_parent_top_k=4, max_query_chars=200, max_batch=3, max_body_bytes=4096
)


@pytest.fixture(scope="module")
def client(index_dir: Path, embeddings: MiniLMEmbeddings) -> Iterator[httpx.Client]:
    index = GatedParentIndex(embeddings, directory=index_dir)
    with (
        running_server(create_app(index.as_retriever(k=4), LIMITS)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        yield http


def body(**configurable: Any) -> dict[str, Any]:
    return {"input": QUERY, "config": {"configurable": configurable}}


def nested(depth: int) -> dict[str, Any]:
    """``{"$and": [{"$and": [...]}, ...]}`` nested ``depth`` levels deep."""
    where: dict[str, Any] = {"doc_id": "P-GAPDH-01"}
    for _ in range(depth):
        where = {"$and": [where, {"doc_id": {"$ne": "x"}}]}
    return where


OVER_THE_BOUNDS = [
    pytest.param("invoke", body(k=6), 422, ["max_k", "5", "configurable.k = 6"], id="config-k"),
    pytest.param(
        "invoke", body(k=1_000_000), 422, ["max_k", "configurable.k = 1000000"], id="config-k-huge"
    ),
    pytest.param(
        "invoke",
        {"input": QUERY, "kwargs": {"k": 2}},
        422,
        ["kwargs {'k': 2} are not applied", "config's configurable settings"],
        id="kwargs-k",
    ),
    pytest.param(
        "invoke",
        body(parent_top_k=1000),
        422,
        ["max_parent_top_k", "4", "parent_top_k = 1000"],
        id="parent-top-k",
    ),
    pytest.param(
        "invoke", {"input": "x" * 201}, 422, ["max_query_chars", "200", "201"], id="query-length"
    ),
    pytest.param(
        "batch",
        {"inputs": [QUERY] * 4},
        413,
        ["max_batch", "3", "4 queries"],
        id="batch-size",
    ),
    pytest.param(
        "batch",
        {"inputs": [QUERY, "y" * 300]},
        422,
        ["max_query_chars", "300"],
        id="query-length-in-batch",
    ),
    pytest.param(
        "invoke",
        body(filter=nested(9)),
        422,
        ["max_filter_depth is 8", "more than 8 levels"],
        id="filter-depth",
    ),
    pytest.param(
        "stream", body(filter=nested(100)), 422, ["max_filter_depth"], id="stream-filter-depth"
    ),
    pytest.param("stream", body(k=6), 422, ["max_k", "configurable.k = 6"], id="stream-k"),
    pytest.param(
        "stream", {"input": "z" * 250}, 422, ["max_query_chars", "250"], id="stream-query"
    ),
]


def assert_still_serving(client: httpx.Client) -> None:
    after = client.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUERY})
    assert after.status_code == 200, after.text
    assert len(after.json()["output"]) == 4


@pytest.mark.parametrize(("endpoint", "request_body", "status", "named"), OVER_THE_BOUNDS)
def test_a_request_over_a_bound_is_refused_naming_the_limit_and_the_value(
    client: httpx.Client,
    endpoint: str,
    request_body: dict[str, Any],
    status: int,
    named: list[str],
) -> None:
    response = client.post(f"{RETRIEVER_PATH}/{endpoint}", json=request_body)
    assert response.status_code == status, response.text
    detail = json.dumps(response.json()["detail"])
    for part in named:
        assert part in detail
    assert_still_serving(client)


def test_a_body_over_the_limit_is_a_413(client: httpx.Client) -> None:
    big = json.dumps({"input": QUERY, "config": {"metadata": {"pad": "p" * 5000}}}).encode()
    response = client.post(
        f"{RETRIEVER_PATH}/invoke", content=big, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert "max_body_bytes" in response.json()["detail"]
    assert str(len(big)) in response.json()["detail"]
    assert_still_serving(client)


def test_a_chunked_body_over_the_limit_is_a_413(client: httpx.Client) -> None:
    """Without a Content-Length the bytes are counted as they arrive."""

    def chunks() -> Iterator[bytes]:
        yield b'{"input": "'
        for _ in range(10):
            yield b"w" * 1000
        yield b'"}'

    response = client.post(
        f"{RETRIEVER_PATH}/invoke", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert "max_body_bytes is 4096" in response.json()["detail"]
    assert_still_serving(client)


def test_requests_at_the_bounds_are_answered(client: httpx.Client) -> None:
    at_depth = client.post(f"{RETRIEVER_PATH}/invoke", json=body(filter=nested(8)))
    assert at_depth.status_code == 200, at_depth.text
    assert {d["metadata"]["doc_id"] for d in at_depth.json()["output"]} == {"P-GAPDH-01"}
    response = client.post(
        f"{RETRIEVER_PATH}/invoke",
        json={"input": "q" * 190 + " RNA", "config": {"configurable": {"k": 5, "parent_top_k": 4}}},
    )
    assert response.status_code == 200, response.text
    assert len(response.json()["output"]) == 5
    batch = client.post(f"{RETRIEVER_PATH}/batch", json={"inputs": [QUERY] * 3})
    assert batch.status_code == 200, batch.text
    assert [len(docs) for docs in batch.json()["output"]] == [4, 4, 4]


def test_the_default_bounds_protect_a_server(index_dir: Path, embeddings: MiniLMEmbeddings) -> None:
    """Without settings, a million results or a megabyte query are refused all the same."""
    index = GatedParentIndex(embeddings, directory=index_dir)
    defaults = ServerSettings()
    with (
        running_server(create_app(index.as_retriever())) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        huge_k = http.post(f"{RETRIEVER_PATH}/invoke", json=body(k=1_000_000))
        assert huge_k.status_code == 422
        assert f"max_k ({defaults.max_k})" in huge_k.text
        long_query = http.post(f"{RETRIEVER_PATH}/invoke", json={"input": "x" * 1_000_000})
        assert long_query.status_code == 413
        big_batch = http.post(
            f"{RETRIEVER_PATH}/batch", json={"inputs": [QUERY] * (defaults.max_batch + 1)}
        )
        assert big_batch.status_code == 413
        assert http.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUERY}).status_code == 200


def test_a_filter_chroma_refuses_is_a_422_not_a_500(
    index_dir: Path, embeddings: MiniLMEmbeddings
) -> None:
    """With the depth bound raised past what Chroma accepts, Chroma's refusal is still a 4xx."""
    index = GatedParentIndex(embeddings, directory=index_dir)
    app = create_app(index.as_retriever(), ServerSettings(max_filter_depth=1000))
    with running_server(app) as url, httpx.Client(base_url=url, timeout=60) as http:
        deep = http.post(f"{RETRIEVER_PATH}/invoke", json=body(filter=nested(150)))
        assert deep.status_code == 422, deep.text
        assert "where" in deep.json()["detail"]
        assert http.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUERY}).status_code == 200


@pytest.mark.parametrize("endpoint", ["invoke", "stream", "stream_events"])
@pytest.mark.parametrize(
    "where",
    [
        {"doc_id": {"$eq": [1]}},
        {"doc_id": {"$in": [None]}},
        {"doc_id": {"$gt": True}},
        {"doc_id": {"$in": [[1]]}},
    ],
)
def test_values_only_chroma_refuses_are_a_422_before_any_stream(
    client: httpx.Client, endpoint: str, where: dict[str, Any]
) -> None:
    response = client.post(f"{RETRIEVER_PATH}/{endpoint}", json=body(filter=where))
    assert response.status_code == 422, response.text
    assert "where" in response.json()["detail"].lower()
    assert_still_serving(client)
