"""The LangServe app on a real uvicorn server on 127.0.0.1: clients, per-request config, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from langchain_core.documents import Document
from langserve import RemoteRunnable

from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings, keys
from langchain_gated_parent.server import RETRIEVER_PATH, create_app, running_server
from tests.integration_tests.stores import free_port, wait_until_healthy

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

QUERY = "48 h RNA extraction"
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def base_url(index_dir: Path, embeddings: MiniLMEmbeddings) -> Iterator[str]:
    index = GatedParentIndex(embeddings, directory=index_dir)
    with running_server(create_app(index.as_retriever(k=4))) as url:
        yield url


@pytest.fixture
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=TIMEOUT) as http:
        yield http


@pytest.fixture
def remote(base_url: str) -> RemoteRunnable[str, list[Document]]:
    return RemoteRunnable(f"{base_url}{RETRIEVER_PATH}/", timeout=TIMEOUT)


def check_results(docs: list[Any], alpha: float | None = None) -> None:
    """Scored documents: the fused formula for a numeric alpha, else (None, the default) the
    learned ranker's."""
    assert docs
    for doc in docs:
        assert isinstance(doc, Document)
        meta = doc.metadata
        if alpha is None:
            assert 0 < meta[keys.SCORE] < 1
        else:
            assert meta[keys.SCORE] == pytest.approx(
                alpha * meta[keys.PARENT_SCORE] + (1 - alpha) * meta[keys.CHILD_SCORE]
            )
        assert isinstance(meta[keys.SECTION_PATH], list)


def test_remote_invoke_returns_scored_documents(
    remote: RemoteRunnable[str, list[Document]],
) -> None:
    docs = remote.invoke(QUERY)
    check_results(docs)
    assert len(docs) == 4
    assert "C-S-methods-2" in [d.metadata[keys.CHUNK_ID] for d in docs[:3]]


def test_remote_batch_and_stream(remote: RemoteRunnable[str, list[Document]]) -> None:
    first, second = remote.batch([QUERY, "How is logging configured?"])
    check_results(first)
    check_results(second)
    assert second[0].metadata[keys.DOC_ID] == "manual"
    chunks = list(remote.stream(QUERY, config={"configurable": {"k": 2}}))
    streamed = [doc for chunk in chunks for doc in chunk]
    check_results(streamed)
    assert [d.id for d in streamed] == [d.id for d in first[:2]]


async def test_remote_ainvoke_and_astream(remote: RemoteRunnable[str, list[Document]]) -> None:
    check_results(await remote.ainvoke(QUERY))
    chunks = [chunk async for chunk in remote.astream(QUERY)]
    check_results([doc for chunk in chunks for doc in chunk])


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_per_request_alpha_follows_the_formula(
    remote: RemoteRunnable[str, list[Document]], alpha: float
) -> None:
    docs = remote.invoke(QUERY, config={"configurable": {"alpha": alpha, "k": 6}})
    check_results(docs, alpha)
    expected = keys.PARENT_SCORE if alpha == 1.0 else keys.CHILD_SCORE
    assert all(d.metadata[keys.SCORE] == pytest.approx(d.metadata[expected]) for d in docs)
    assert len(docs) == 6


def test_per_request_filter_and_return_parents(
    remote: RemoteRunnable[str, list[Document]],
) -> None:
    config = {"configurable": {"filter": {"doc_id": "P-RIVAL-02"}, "return_parents": True}}
    docs = remote.invoke(QUERY, config=config)  # type: ignore[arg-type]
    assert docs
    assert {d.metadata[keys.DOC_ID] for d in docs} == {"P-RIVAL-02"}
    assert all(d.id == d.metadata[keys.PARENT_ID] for d in docs)


KNOBS = {
    "k",
    "alpha",
    "parent_top_k",
    "child_per_parent",
    "gate_margin",
    "fill",
    "lexical_weight",
    "title_weight",
    "sparse_weight",
    "child_weight",
    "return_parents",
    "dedupe",
    "near_duplicate",
    "filter",
}
PER_KNOB: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("k", {"k": 2}, {}),
    ("alpha", {"alpha": 0.0}, {}),
    ("alpha", {"alpha": "auto"}, {}),
    ("alpha", {"alpha": 0.4}, {}),
    ("parent_top_k", {"parent_top_k": 1}, {}),
    ("child_per_parent", {"child_per_parent": 1}, {}),
    ("gate_margin", {"gate_margin": 0.2}, {}),
    ("fill", {"parent_top_k": 1, "k": 6, "fill": False}, {"parent_top_k": 1, "k": 6}),
    # The learned ranker (the default) reads BM25 at its own share: lexical_weight moves a fused
    # score.
    ("lexical_weight", {"alpha": 0.4, "lexical_weight": 1.0}, {"alpha": 0.4}),
    ("title_weight", {"title_weight": 1.0}, {}),
    ("sparse_weight", {"sparse_weight": 1.0}, {}),
    ("child_weight", {"child_weight": 1.0}, {}),
    ("return_parents", {"return_parents": True}, {}),
    (
        "dedupe",
        {"title_weight": 0.0, "near_duplicate": 0.0, "dedupe": False},
        {"title_weight": 0.0, "near_duplicate": 0.0},
    ),
    ("near_duplicate", {"near_duplicate": 0.0}, {}),
    ("filter", {"filter": {"doc_id": "P-RIVAL-02"}}, {}),
]
"""For each knob: a request setting it, and the same request without it (results differ).

``fill`` and ``dedupe`` show only when they have work: a single opened parent to fill from, and
``near_duplicate=0`` (every later child is a near duplicate) for dedupe to drop.
"""


def answers(docs: list[Document]) -> list[tuple[str | None, float]]:
    return [(d.id, round(d.metadata[keys.SCORE], 9)) for d in docs]


def test_the_cases_set_every_knob() -> None:
    assert {knob for knob, _, _ in PER_KNOB} == KNOBS


@pytest.mark.parametrize(
    ("knob", "setting", "without"),
    PER_KNOB,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PER_KNOB)],
)
def test_a_client_sets_each_knob_per_request(
    remote: RemoteRunnable[str, list[Document]],
    index: GatedParentIndex,
    knob: str,
    setting: dict[str, Any],
    without: dict[str, Any],
) -> None:
    local = index.as_retriever(k=4)  # the served retriever's own settings
    expected = answers(local.invoke(QUERY, **setting))
    assert expected != answers(local.invoke(QUERY, **without)), f"{knob} changes nothing here"
    served = remote.invoke(QUERY, config={"configurable": setting})
    assert answers(served) == expected
    batched = remote.batch([QUERY, QUERY], config={"configurable": setting})
    assert [answers(docs) for docs in batched] == [expected, expected]


def test_plain_http_invoke_and_batch(client: httpx.Client) -> None:
    body = {"input": QUERY, "config": {"configurable": {"k": 2, "alpha": 0.0}}}
    response = client.post(f"{RETRIEVER_PATH}/invoke", json=body)
    assert response.status_code == 200, response.text
    output = response.json()["output"]
    assert len(output) == 2
    meta = output[0]["metadata"]
    assert meta[keys.SCORE] == pytest.approx(meta[keys.CHILD_SCORE])
    response = client.post(f"{RETRIEVER_PATH}/batch", json={"inputs": [QUERY, "siRNA"]})
    assert response.status_code == 200, response.text
    assert [len(docs) for docs in response.json()["output"]] == [4, 4]


def test_plain_http_stream_sends_data_then_end(client: httpx.Client) -> None:
    response = client.post(f"{RETRIEVER_PATH}/stream", json={"input": QUERY})
    assert response.status_code == 200, response.text
    events = [
        line.split(":", 1)[1].strip()
        for line in response.text.splitlines()
        if line.startswith("event:")
    ]
    assert "data" in events
    assert events[-1] == "end"


BAD_REQUESTS = [
    pytest.param({"input": QUERY, "config": {"configurable": {"alpha": 3}}}, "alpha", id="alpha-3"),
    pytest.param({"input": QUERY, "config": {"configurable": {"k": 0}}}, '"k"', id="k-0"),
    pytest.param(
        {"input": QUERY, "config": {"configurable": {"filter": {"lang": "en"}}}},
        "'lang' are not metadata",
        id="unknown-filter-key",
    ),
    pytest.param(
        {"input": QUERY, "config": {"configurable": {"filter": {"doc_id": {"$near": "x"}}}}},
        "$near",
        id="unknown-filter-operator",
    ),
    pytest.param({"input": "   "}, "query is empty", id="empty-query"),
    pytest.param({"question": QUERY}, '"input"', id="no-input"),
    pytest.param({"input": 42}, "string", id="input-not-a-string"),
]


@pytest.mark.parametrize("endpoint", ["invoke", "stream"])
@pytest.mark.parametrize(("body", "named"), BAD_REQUESTS)
def test_bad_requests_are_4xx_naming_the_problem_and_the_server_goes_on(
    client: httpx.Client, endpoint: str, body: dict[str, Any], named: str
) -> None:
    response = client.post(f"{RETRIEVER_PATH}/{endpoint}", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert named in json.dumps(response.json()["detail"])
    after = client.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUERY})
    assert after.status_code == 200


def test_a_bad_input_in_a_batch_is_a_4xx(client: httpx.Client) -> None:
    response = client.post(f"{RETRIEVER_PATH}/batch", json={"inputs": [QUERY, ""]})
    assert response.status_code == 422
    assert "query is empty" in response.json()["detail"]


def test_malformed_json_is_a_4xx(client: httpx.Client) -> None:
    response = client.post(
        f"{RETRIEVER_PATH}/invoke",
        content=b'{"input": ',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422


def test_remote_client_sees_the_refusal(remote: RemoteRunnable[str, list[Document]]) -> None:
    with pytest.raises(httpx.HTTPStatusError, match="422") as raised:
        remote.invoke(QUERY, config={"configurable": {"alpha": 3}})
    assert "alpha" in raised.value.response.text
    check_results(remote.invoke(QUERY))


def test_health_reports_the_index(client: httpx.Client) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok"
    assert health["stats"]["documents"] == 3
    assert health["stats"]["embedding_model"]


def test_schemas_and_playground_are_served(client: httpx.Client) -> None:
    config = client.get(f"{RETRIEVER_PATH}/config_schema").json()
    assert set(config["$defs"]["Configurable"]["properties"]) == KNOBS
    assert client.get(f"{RETRIEVER_PATH}/input_schema").json()["type"] == "string"
    assert client.get(f"{RETRIEVER_PATH}/playground/").status_code == 200


def test_cli_serve_runs_on_loopback(index_dir: Path) -> None:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "langchain_gated_parent.cli",
        "serve",
        "--index",
        str(index_dir),
    ]
    server = subprocess.Popen(
        [*command, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, server, 120)
        remote: RemoteRunnable[str, list[Document]] = RemoteRunnable(
            f"{url}{RETRIEVER_PATH}/", timeout=TIMEOUT
        )
        docs = remote.invoke(QUERY)
        check_results(docs)
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert f"http://127.0.0.1:{port}{RETRIEVER_PATH}/" in output
