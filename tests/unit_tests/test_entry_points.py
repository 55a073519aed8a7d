"""Every entry point answers alike, and the retriever needs nothing of its store but the protocol.

``batch``/``abatch`` must give what ``invoke`` gives, for any ``Embeddings``: an asymmetric model
(E5, nomic, Cohere) embeds a query differently from a passage, so a batch that embedded its
queries as documents would search with other vectors. The async driver must run storage calls
in a thread that sees the caller's context variables (tracing callbacks live there).
"""

from __future__ import annotations

import ast
import contextvars
import inspect
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_gated_parent import GatedParentIndex, GatedParentRetriever, keys, retriever
from langchain_gated_parent.records import ChildRows, SearchStore, Section

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

pytestmark = pytest.mark.disable_socket

QUERIES = ["Latency of the cache", "Memory use", "Cost per query", "Memory use"]


class AsymmetricFakeEmbeddings(Embeddings):
    """A fake asymmetric model: queries and passages get different prefixes, as E5's do.

    ``embed_query(t)`` is the vector of ``"query: " + t`` and ``embed_documents([t])[0]`` the
    vector of ``"passage: " + t``, so the two never agree.
    """

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=24)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(f"query: {text}")


def _paper(doc_id: str, topics: list[str]) -> Document:
    body = "\n\n".join(
        f"# {topic}\n\n{topic} is measured first.\n\nThen {topic} is compared across runs."
        for topic in topics
    )
    return Document(page_content=body, metadata={"doc_id": doc_id})


@pytest.fixture(scope="module")
def asymmetric(tmp_path_factory: pytest.TempPathFactory) -> GatedParentRetriever:
    embeddings = AsymmetricFakeEmbeddings()
    assert embeddings.embed_query("x") != embeddings.embed_documents(["x"])[0]
    index = GatedParentIndex(embeddings, directory=tmp_path_factory.mktemp("asymmetric"))
    index.add_documents(
        [_paper("a", ["Latency", "Memory", "Recall"]), _paper("b", ["Cost", "Throughput"])]
    )
    return index.as_retriever(k=4, parent_top_k=2)


def answers(docs: list[Document]) -> list[tuple[str | None, float]]:
    return [(d.id, d.metadata[keys.SCORE]) for d in docs]


def test_batch_answers_as_invoke_with_an_asymmetric_model(
    asymmetric: GatedParentRetriever,
) -> None:
    expected = [answers(asymmetric.invoke(q)) for q in QUERIES]
    assert [answers(docs) for docs in asymmetric.batch(QUERIES)] == expected
    configs: list[Any] = [{"configurable": {"k": 2}}] * len(QUERIES)
    assert [answers(docs) for docs in asymmetric.batch(QUERIES, configs)] == [
        answers(asymmetric.invoke(q, k=2)) for q in QUERIES
    ]


async def test_abatch_answers_as_ainvoke_with_an_asymmetric_model(
    asymmetric: GatedParentRetriever,
) -> None:
    expected = [answers(await asymmetric.ainvoke(q)) for q in QUERIES]
    assert expected == [answers(asymmetric.invoke(q)) for q in QUERIES]
    assert [answers(docs) for docs in await asymmetric.abatch(QUERIES)] == expected


TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="unset")


def record_calls(
    monkeypatch: pytest.MonkeyPatch, store: object, names: Sequence[str], observe: Callable[[], str]
) -> list[tuple[str, str]]:
    """Each later call of these methods of ``store``, by name, with what ``observe`` saw in it."""
    seen: list[tuple[str, str]] = []

    def recorded(name: str) -> Any:
        method = getattr(store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            seen.append((name, observe()))
            return method(*args, **kwargs)

        return call

    for name in names:
        monkeypatch.setattr(store, name, recorded(name))
    return seen


async def test_async_storage_calls_see_the_callers_context(
    asymmetric: GatedParentRetriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ("document_sections", "search_sparse", "search_children", "children_of")
    seen = record_calls(monkeypatch, asymmetric.index, names, TRACE.get)
    TRACE.set("run-42")
    assert await asymmetric.ainvoke("Memory use")
    # An index of a few documents is scored exactly: no vector search.
    assert sorted(seen) == [
        ("children_of", "run-42"),
        ("document_sections", "run-42"),
        ("search_sparse", "run-42"),
    ]


class FakeStore:
    """A fake in-memory store: the protocol's methods over a handful of numpy rows.

    It is no index (no persistence, no journal, brute-force search): it shows that the retriever
    needs only :class:`~langchain_gated_parent.records.SearchStore`.
    """

    vector_store_provider = "FakeStore"
    searches_in_process = True

    def __init__(self, documents: Sequence[Document]) -> None:
        self.embeddings = DeterministicFakeEmbedding(size=8)
        self.children: list[tuple[str, str, dict[str, Any]]] = []
        parents: dict[str, list[int]] = {}
        for n, doc in enumerate(documents):
            pid = f"P-{doc.metadata['section']}"
            cid = f"C-{doc.metadata['section']}-{n}"
            meta = {
                keys.PARENT_ID: pid,
                keys.DOC_ID: "doc",
                keys.START_INDEX: n * 100,
                keys.END_INDEX: n * 100 + len(doc.page_content),
                keys.SECTION_PATH: [doc.metadata["section"]],
            }
            parents.setdefault(pid, []).append(len(self.children))
            self.children.append((cid, doc.page_content, meta))
        vectors = np.asarray(self.embeddings.embed_documents([c[1] for c in self.children]))
        self.vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        self.parents = parents

    @property
    def embedding_model(self) -> str:
        return "fake-8"

    def check_dimension(self, vector: Sequence[float]) -> None:
        assert len(vector) == self.vectors.shape[1]

    def check_filter(self, where: dict[str, Any] | None) -> None:
        assert where is None

    def searches_apply(self, where: dict[str, Any] | None) -> bool:
        return where is None

    def search_parents(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        del where
        query = np.asarray(vector) / np.linalg.norm(vector)
        scores = {pid: float(self._centroid(pid) @ query) for pid in self.parents}
        best = sorted(scores, key=lambda pid: -scores[pid])[:n]
        return [(p, max(scores[p], 0.0)) for p in best]

    def _centroid(self, pid: str) -> Any:
        mean = self.vectors[self.parents[pid]].mean(axis=0)
        return mean / np.linalg.norm(mean)

    def search_sparse(
        self, query: str, n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        del query, n, where
        return []  # no term index: the gate runs on the two vector searches

    def search_children(
        self, vector: Sequence[float], n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        del where
        scores = self.vectors @ (np.asarray(vector) / np.linalg.norm(vector))
        best = np.argsort(-scores)[:n]
        return [(self.children[r][0], max(float(scores[r]), 0.0)) for r in best]

    def sections(
        self,
        parent_ids: Sequence[str],
        where: dict[str, Any] | None = None,
        *,
        unchecked: Sequence[str] = (),
    ) -> dict[str, Section]:
        del where, unchecked
        return {
            pid: Section(
                parent_id=pid,
                doc_id="doc",
                headings=pid[2:],
                child_count=len(self.parents[pid]),
                vector=self._centroid(pid).astype(np.float32),
                children=[self.children[r][2] for r in self.parents[pid]],
                child_vectors=self.vectors[self.parents[pid]].astype(np.float32),
            )
            for pid in parent_ids
        }

    def document_sections(self, where: dict[str, Any] | None) -> dict[str, Section] | None:
        del where
        return None  # no documents to read whole: the gate always searches

    def children_of(self, parent_ids: Sequence[str]) -> ChildRows:
        rows = [row for pid in parent_ids for row in self.parents[pid]]
        return ChildRows(
            [self.children[r][0] for r in rows],
            [self.children[r][1] for r in rows],
            [self.children[r][2] for r in rows],
            self.vectors[rows].astype(np.float32),
            {pid: Document(page_content="", id=pid) for pid in parent_ids},
        )


@pytest.fixture
def fake_store() -> FakeStore:
    texts = [
        ("intro", "What the cache is."),
        ("cache", "The cache keeps 2 GB."),
        ("cache", "It evicts the oldest entry."),
    ]
    return FakeStore([Document(page_content=t, metadata={"section": s}) for s, t in texts])


def test_the_retriever_searches_any_store_of_the_protocol(fake_store: FakeStore) -> None:
    assert isinstance(fake_store, SearchStore)
    found = GatedParentRetriever.from_store(fake_store, k=2, parent_top_k=2).invoke("cache size")
    assert 1 <= len(found) <= 2
    assert all(d.metadata[keys.PARENT_ID] in fake_store.parents for d in found)


@pytest.mark.parametrize(("child_weight", "vector_index_searches"), [(0.25, 0), (0.0, 1)])
def test_the_child_search_stands_in_for_the_parent_vector_search(
    fake_store: FakeStore,
    monkeypatch: pytest.MonkeyPatch,
    child_weight: float,
    vector_index_searches: int,
) -> None:
    searched: list[int] = []
    search = fake_store.search_parents

    def counted(vector: Sequence[float], n: int, where: dict[str, Any] | None = None) -> Any:
        searched.append(n)
        return search(vector, n, where)

    monkeypatch.setattr(fake_store, "search_parents", counted)
    retriever = GatedParentRetriever.from_store(
        fake_store, k=2, title_weight=0.0, sparse_weight=0.0, child_weight=child_weight
    )
    explained = retriever.explain("cache size")
    assert len(searched) == vector_index_searches
    query = np.asarray(fake_store.embeddings.embed_query("cache size"))
    query /= np.linalg.norm(query)
    expected = {}
    for pid, rows in fake_store.parents.items():  # exact cosines: the centroid's, the best child's
        dense = max(float(fake_store._centroid(pid) @ query), 0.0)
        child = max(max(float(fake_store.vectors[r] @ query), 0.0) for r in rows)
        expected[pid] = (1 - child_weight) * dense + child_weight * child
    opened = {p.id: p.metadata[keys.PARENT_SCORE] for p in explained.parents}
    assert opened == pytest.approx({pid: expected[pid] for pid in opened})
    assert all("dense" in p.metadata[keys.GATE_SOURCES] for p in explained.parents)


@pytest.mark.parametrize("in_process", [True, False])
def test_searches_in_this_process_run_in_turn_on_the_callers_thread(
    fake_store: FakeStore, monkeypatch: pytest.MonkeyPatch, *, in_process: bool
) -> None:
    names = ("search_sparse", "search_children")
    seen = record_calls(monkeypatch, fake_store, names, lambda: threading.current_thread().name)
    monkeypatch.setattr(fake_store, "searches_in_process", in_process)
    assert GatedParentRetriever.from_store(fake_store, k=2).invoke("cache size")
    threads = dict(seen)
    caller = threading.current_thread().name
    assert threads["search_children"] == caller
    # Searches that wait on servers overlap: the term search runs on a worker thread.
    assert (threads["search_sparse"] == caller) is in_process


def test_tracing_names_the_stores_provider_and_model(fake_store: FakeStore) -> None:
    ls_params = GatedParentRetriever.from_store(fake_store)._get_ls_params()
    assert ls_params["ls_vector_store_provider"] == "FakeStore"
    assert ls_params["ls_embedding_provider"] == "fake-8"


STORED_KEYS = {"HEADINGS", "CHILD_COUNT", "DOC_ID", "START_INDEX", "END_INDEX", "SECTION_PATH"}
"""Keys the stores write; the records read them, the retriever never does."""


def test_the_retriever_reads_no_store_detail() -> None:
    source = inspect.getsource(retriever)
    assert "chroma" not in source.casefold()
    used = {
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "keys"
    }
    assert used
    assert not used & STORED_KEYS
