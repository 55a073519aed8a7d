"""Per-request settings through ``config["configurable"]``, and batches that answer as invoke."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.runnables import RunnableConfig, RunnableParallel

from langchain_gated_parent import GatedParentIndex, GatedParentRetriever, keys

CONFIGURABLE = {
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


class CountingEmbeddings(Embeddings):
    """A deterministic fake that counts the model calls the retriever makes."""

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=32)
        self.calls: list[tuple[str, int]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(("embed_documents", len(texts)))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(("embed_query", 1))
        return self.inner.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(("aembed_documents", len(texts)))
        return self.inner.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        self.calls.append(("aembed_query", 1))
        return self.inner.embed_query(text)


def _paper(doc_id: str, topics: list[str]) -> Document:
    body = "\n\n".join(
        f"# {topic}\n\n{topic} is measured first.\n\nThen {topic} is compared across runs."
        for topic in topics
    )
    return Document(page_content=body, metadata={"doc_id": doc_id, keys.FORMAT: "markdown"})


@pytest.fixture(scope="module")
def counting(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[GatedParentIndex, CountingEmbeddings]:
    embeddings = CountingEmbeddings()
    index = GatedParentIndex(embeddings, directory=tmp_path_factory.mktemp("configurable"))
    index.add_documents(
        [_paper("a", ["Latency", "Memory", "Recall"]), _paper("b", ["Cost", "Throughput"])]
    )
    return index, embeddings


@pytest.fixture
def retriever(counting: tuple[GatedParentIndex, CountingEmbeddings]) -> GatedParentRetriever:
    counting[1].calls.clear()
    return counting[0].as_retriever(k=3, parent_top_k=2)


def ids(docs: list[Document]) -> list[str | None]:
    return [d.id for d in docs]


def test_config_specs_declare_the_per_request_settings(retriever: GatedParentRetriever) -> None:
    assert {spec.id for spec in retriever.config_specs} == CONFIGURABLE
    schema = retriever.config_schema(include=["configurable"]).model_json_schema()
    fields = schema["$defs"]["Configurable"]["properties"]
    assert set(fields) == CONFIGURABLE
    assert {"minimum": 0, "maximum": 1, "type": "number"} in fields["alpha"]["anyOf"]
    assert {"minimum": 1, "type": "integer"} in fields["k"]["anyOf"]
    assert all(field["default"] is None for field in fields.values())


def test_two_retrievers_in_one_chain_declare_no_conflict(
    counting: tuple[GatedParentIndex, CountingEmbeddings],
) -> None:
    index = counting[0]
    chain = RunnableParallel(a=index.as_retriever(k=2), b=index.as_retriever(k=5, alpha=0.9))
    assert {spec.id for spec in chain.config_specs} == CONFIGURABLE


@pytest.mark.parametrize("alpha", [0.0, 1.0, 0.25])
def test_configurable_alpha_changes_the_fused_score(
    retriever: GatedParentRetriever, alpha: float
) -> None:
    docs = retriever.invoke("Memory", config={"configurable": {"alpha": alpha}})
    assert docs
    for doc in docs:
        meta = doc.metadata
        assert meta[keys.SCORE] == pytest.approx(
            alpha * meta[keys.PARENT_SCORE] + (1 - alpha) * meta[keys.CHILD_SCORE]
        )
    assert retriever.alpha == "learned"  # the retriever itself is unchanged (the default)


def test_the_learned_ranker_scores_every_child_of_the_opened_parents(
    retriever: GatedParentRetriever,
) -> None:
    explanation = retriever.explain("Memory", alpha="learned")
    assert explanation.alpha != explanation.alpha  # nan: no alpha, the learned ranker
    docs = explanation.documents
    assert docs
    scores = [doc.metadata[keys.SCORE] for doc in docs]
    assert all(0 < s < 1 for s in scores)
    assert scores == sorted(scores, reverse=True)
    # every child of every opened parent was scored (no per-parent cap)
    considered = explanation.considered
    opened = {p.id for p in explanation.parents}
    assert {d.metadata[keys.PARENT_ID] for d in considered} <= opened
    assert len(considered) == sum(p.metadata[keys.CHILD_COUNT] for p in explanation.parents)
    # the gate is the fused score's: it opens the same parents
    assert [p.id for p in explanation.parents] == [
        p.id for p in retriever.explain("Memory").parents
    ]


def test_explain_takes_the_per_call_settings_invoke_takes(retriever: GatedParentRetriever) -> None:
    config: RunnableConfig = {"configurable": {"k": 2, "alpha": 0.25}}
    explained = retriever.explain("Memory", config=config)
    assert explained.alpha == 0.25
    assert [d.id for d in explained.documents] == [
        d.id for d in retriever.invoke("Memory", config=config)
    ]
    assert len(explained.documents) == 2
    assert retriever.explain("Memory", config=config, k=3).documents[2:]  # keywords win


def test_configurable_settings_match_keyword_arguments(retriever: GatedParentRetriever) -> None:
    settings: dict[str, Any] = {
        "k": 2,
        "parent_top_k": 1,
        "child_per_parent": 1,
        "filter": {"doc_id": "b"},
    }
    by_config = retriever.invoke("Cost", config={"configurable": settings})
    assert ids(by_config) == ids(retriever.invoke("Cost", **settings))
    assert {d.metadata[keys.DOC_ID] for d in by_config} == {"b"}
    assert 0 < len(by_config) <= 2


def test_return_parents_through_config(retriever: GatedParentRetriever) -> None:
    docs = retriever.invoke("Recall", config={"configurable": {"return_parents": True}})
    assert docs
    assert all(d.id == d.metadata[keys.PARENT_ID] for d in docs)


def test_explicit_kwargs_win_and_none_keeps_the_field(retriever: GatedParentRetriever) -> None:
    assert len(retriever.invoke("Latency", config={"configurable": {"k": 5}}, k=1)) == 1
    default = retriever.invoke("Latency")
    assert ids(retriever.invoke("Latency", config={"configurable": {"k": None}})) == ids(default)


def test_undeclared_configurable_keys_are_not_arguments(retriever: GatedParentRetriever) -> None:
    docs = retriever.invoke("Latency", config={"configurable": {"temperature": 0.3}})
    assert ids(docs) == ids(retriever.invoke("Latency"))


@pytest.mark.parametrize(
    ("configurable", "fragment"),
    [({"alpha": 3}, "alpha"), ({"k": 0}, "k must be"), ({"filter": {"lang": "en"}}, "'lang'")],
)
def test_out_of_range_configurable_values_are_refused_by_name(
    retriever: GatedParentRetriever, configurable: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        retriever.invoke("Latency", config={"configurable": configurable})


async def test_ainvoke_reads_the_config_too(retriever: GatedParentRetriever) -> None:
    docs = await retriever.ainvoke("Memory", config={"configurable": {"alpha": 1.0, "k": 2}})
    assert len(docs) == 2
    assert all(d.metadata[keys.SCORE] == pytest.approx(d.metadata[keys.PARENT_SCORE]) for d in docs)


def test_batch_embeds_each_query_as_a_query(
    retriever: GatedParentRetriever, counting: tuple[GatedParentIndex, CountingEmbeddings]
) -> None:
    embeddings = counting[1]
    queries = ["Latency", "Cost", "Latency"]
    results = retriever.batch(queries)
    assert sorted(embeddings.calls) == [("embed_query", 1)] * 3  # never embed_documents
    embeddings.calls.clear()
    assert [ids(docs) for docs in results] == [ids(retriever.invoke(q)) for q in queries]


def test_batch_takes_a_config_per_input(retriever: GatedParentRetriever) -> None:
    configs = [{"configurable": {"k": 1}}, {"configurable": {"k": 2, "filter": {"doc_id": "b"}}}]
    first, second = retriever.batch(["Memory", "Memory"], configs)  # type: ignore[arg-type]
    assert len(first) == 1
    assert len(second) == 2
    assert {d.metadata[keys.DOC_ID] for d in second} == {"b"}


def test_batch_reports_a_bad_query_in_its_own_slot(
    retriever: GatedParentRetriever, counting: tuple[GatedParentIndex, CountingEmbeddings]
) -> None:
    results = retriever.batch(["Cost", "  ", "Recall"], return_exceptions=True)
    assert counting[1].calls == [("embed_query", 1)] * 2
    assert isinstance(results[1], ValueError)
    assert "query is empty" in str(results[1])
    assert all(isinstance(r, list) and r for r in (results[0], results[2]))


async def test_abatch_embeds_each_query_as_a_query(
    retriever: GatedParentRetriever, counting: tuple[GatedParentIndex, CountingEmbeddings]
) -> None:
    results = await retriever.abatch(["Cost", "Throughput", "Memory"], {"configurable": {"k": 2}})
    assert counting[1].calls == [("aembed_query", 1)] * 3
    assert [len(docs) for docs in results] == [2, 2, 2]
