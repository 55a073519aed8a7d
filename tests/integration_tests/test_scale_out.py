"""Scale-out: the persistence, update, concurrency and crash checks on shared servers.

The ``backend`` fixture gives each test fresh stores on:

* ``chroma-server``: a real ``chroma run`` server the module starts on 127.0.0.1 (a free port,
  waited for through its heartbeat, stopped at the end), reached through
  ``chromadb.HttpClient``; parents in SQLite.
* ``postgres``: parents in PostgreSQL through ``SQLStore``
  (:func:`langchain_gated_parent.stores.docstore.sql_docstore`) at ``GATED_PARENT_POSTGRES_URL``;
  vectors in a local Chroma. Without the variable the tests SKIP, saying how to enable them;
  under ``CI=true`` they FAIL instead, so CI cannot pass without running them.

Each test uses its own collection names and docstore namespace, and removes them afterwards.
"""

from __future__ import annotations

import gc
import os
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from langchain_gated_parent import GatedParentIndex
from tests.integration_tests.crash_worker import Zygote, corpus
from tests.integration_tests.stores import (
    POSTGRES_ENV,
    StoreSpec,
    assert_same_state,
    chroma_server,
    close_http_clients,
    fake_embeddings,
    snapshot,
)
from tests.integration_tests.test_concurrency import check_concurrent_use
from tests.integration_tests.test_crash import check_after_kill, run_reference
from tests.integration_tests.test_persistence import (
    check_a_key_a_replacement_drops_stops_matching,
    check_an_older_index_gets_parent_ids,
    check_every_write_is_saved_in_the_vector_graph,
    check_reopens_with_the_same_answers,
    check_replace_and_delete,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from langchain_gated_parent import MiniLMEmbeddings

pytestmark = [
    pytest.mark.slow,
    # chromadb 1.5's HTTP client and SQLStore's engines leave pooled sockets and connections to
    # the garbage collector; the fixtures collect them at teardown, inside this module.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

ENABLE_POSTGRES = (
    f"set {POSTGRES_ENV}=postgresql+psycopg://USER@127.0.0.1:PORT/DB to run the PostgreSQL "
    "scale-out tests (a throwaway server: `source .ci/postgres.sh && postgres_up` exports it)"
)
CRASH_POINTS = [
    ("docstore.mset", 3, "after"),
    ("children.upsert", 1, "after"),
    ("parents.upsert", 4, "before"),  # while version 2 replaces: version 1 comes back
    ("children.delete", 2, "after"),
]
"""A few of ``test_crash``'s kill points, repeated on each backend."""


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as port:
        yield port
    gc.collect()


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV, "")
    if url:
        return url
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{POSTGRES_ENV} is not set under CI=true; {ENABLE_POSTGRES}")
    pytest.skip(ENABLE_POSTGRES)


@pytest.fixture(params=["chroma-server", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], StoreSpec]]:
    """A factory of fresh store specs on the backend (each cleaned up at teardown)."""
    made: list[StoreSpec] = []
    if request.param == "postgres":
        url = postgres_url()

        def new() -> StoreSpec:
            tag = uuid.uuid4().hex[:10]
            made.append(
                StoreSpec(directory=str(tmp_path / tag), postgres_url=url, namespace=f"gp-{tag}")
            )
            return made[-1]
    else:
        port: int = request.getfixturevalue("chroma_port")

        def new() -> StoreSpec:
            tag = uuid.uuid4().hex[:10]
            made.append(
                StoreSpec(directory=str(tmp_path / tag), name=f"gp-{tag}", chroma_port=port)
            )
            return made[-1]

    try:
        yield new
    finally:
        for spec in made:
            spec.drop()
        close_http_clients()
        gc.collect()


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    with Zygote() as worker:
        yield worker


def test_reopens_with_the_same_answers(
    backend: Callable[[], StoreSpec], embeddings: MiniLMEmbeddings
) -> None:
    from .conftest import corpus

    spec = backend()
    index = spec.open(embeddings)
    index.add_documents(corpus())
    check_reopens_with_the_same_answers(index, spec)


def test_replace_and_delete(backend: Callable[[], StoreSpec], embeddings: MiniLMEmbeddings) -> None:
    check_replace_and_delete(backend().open(embeddings))


def test_concurrent_use(backend: Callable[[], StoreSpec]) -> None:
    check_concurrent_use(backend().open(fake_embeddings()))


def test_searches_that_wait_on_a_server_overlap(
    backend: Callable[[], StoreSpec], tmp_path: Path
) -> None:
    # A Chroma server, or a term index in PostgreSQL: the retriever runs the searches at once.
    assert not backend().open(fake_embeddings()).searches_in_process
    assert GatedParentIndex(fake_embeddings(), directory=tmp_path / "local").searches_in_process


def test_only_a_local_chroma_folder_takes_the_file_lock(
    backend: Callable[[], StoreSpec], tmp_path: Path
) -> None:
    # A server orders its own files' writes; the PostgreSQL backend's vectors are a local folder.
    index = backend().open(fake_embeddings())
    assert (index.vectors.files is None) == (not index.vectors.in_process)
    local = GatedParentIndex(fake_embeddings(), directory=tmp_path / "local")
    assert local.vectors.files is not None


def test_crashes_converge(backend: Callable[[], StoreSpec], zygote: Zygote, tmp_path: Path) -> None:
    reference = run_reference(zygote, backend(), tmp_path)
    for point in CRASH_POINTS:
        spec = backend()
        reply = zygote.request(op="ingest", spec=spec.to_json(), kill=list(point))
        assert reply["status"] == "killed", (point, reply)
        check_after_kill(zygote, spec, reference, tmp_path, point)


def test_a_second_index_in_one_docstore_is_refused(backend: Callable[[], StoreSpec]) -> None:
    """Two names on one docstore (the default namespace) wrote over each other's documents."""
    spec = backend()
    first = spec.open(fake_embeddings())
    first.add_documents(corpus(1)[:2])
    before = snapshot(first)
    other = replace(spec, name=f"{spec.name}-other")
    with pytest.raises(ValueError, match="the docstore holds index") as refused:
        other.open(fake_embeddings())
    assert f"not '{other.name}'" in str(refused.value)
    assert f"name='{spec.name}'" in str(refused.value)
    assert_same_state(snapshot(spec.open(fake_embeddings())), before)
    names = {c.name for c in first.client.list_collections()}
    assert not any(n.startswith(other.name) for n in names)  # refused before making any


def test_a_key_a_replacement_drops_stops_matching(backend: Callable[[], StoreSpec]) -> None:
    spec = backend()
    check_a_key_a_replacement_drops_stops_matching(lambda: spec.open(fake_embeddings()))


def test_an_older_index_gets_parent_ids(backend: Callable[[], StoreSpec]) -> None:
    spec = backend()
    check_an_older_index_gets_parent_ids(lambda: spec.open(fake_embeddings()))


def test_every_write_is_saved_in_the_vector_graph(backend: Callable[[], StoreSpec]) -> None:
    spec = backend()
    check_every_write_is_saved_in_the_vector_graph(lambda: spec.open(fake_embeddings()))
