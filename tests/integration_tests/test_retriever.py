"""The retriever end to end on a persistent Chroma with the real offline embeddings."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_gated_parent import GatedParentIndex, GatedParentRetriever, keys
from tests.integration_tests.rw_worker import documents as rw_documents

from .conftest import GAPDH

if TYPE_CHECKING:
    from pathlib import Path


def test_contract_example_end_to_end(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(k=4)
    unfiltered = retriever.invoke("48 h RNA extraction")
    assert "C-S-methods-2" in [d.metadata[keys.CHUNK_ID] for d in unfiltered[:3]]
    docs = retriever.invoke("48 h RNA extraction", filter={"doc_id": "P-GAPDH-01"})
    top = docs[0]
    assert top.page_content == "48 h before RNA extraction"
    assert top.metadata[keys.CHUNK_ID] == "C-S-methods-2"
    assert top.metadata[keys.PARENT_ID] == "P-S-methods"
    assert top.metadata[keys.DOC_ID] == "P-GAPDH-01"
    # the fused score's contract holds for a numeric alpha (the default ranks by the learned one)
    docs = index.as_retriever(k=4, alpha=0.4).invoke(
        "48 h RNA extraction", filter={"doc_id": "P-GAPDH-01"}
    )
    assert docs[0].metadata[keys.CHUNK_ID] == "C-S-methods-2"
    for doc in docs:
        meta = doc.metadata
        assert {keys.CHUNK_ID, keys.PARENT_ID, keys.SCORE, keys.GATE_RANK} <= set(meta)
        assert meta[keys.SCORE] == pytest.approx(
            0.4 * meta[keys.PARENT_SCORE] + 0.6 * meta[keys.CHILD_SCORE]
        )
    scores = [d.metadata[keys.SCORE] for d in docs]
    assert scores == sorted(scores, reverse=True)


def test_results_are_deterministic(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(k=6, parent_top_k=3)
    first = retriever.invoke("how long before extraction")
    second = retriever.invoke("how long before extraction")
    assert [(d.id, d.metadata[keys.SCORE]) for d in first] == [
        (d.id, d.metadata[keys.SCORE]) for d in second
    ]


def test_a_results_own_keys_can_change_without_changing_a_later_result(
    index: GatedParentIndex,
) -> None:
    # Each result's metadata is a dict of its own; its lists are the read cache's (README,
    # "How the gate and the fusion work").
    retriever = index.as_retriever(k=6)
    query = "how long before extraction"

    def results() -> list[Document]:
        explanation = retriever.explain(query)
        parents = retriever.invoke(query, return_parents=True)
        return [*explanation.documents, *explanation.considered, *explanation.parents, *parents]

    first = results()
    expected = [dict(d.metadata) for d in first]
    for doc in first:
        doc.metadata.pop(keys.PARENT_ID)
        doc.metadata[keys.SCORE] = -1.0
        doc.metadata["added by a caller"] = True
    assert [d.metadata for d in results()] == expected


def test_the_gate_keeps_closed_parents_closed(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(k=50, parent_top_k=1, fill=False)
    explanation = retriever.explain("siRNA knockdown of GAPDH")
    opened = {p.id for p in explanation.parents}
    assert len(opened) == 1
    assert {d.metadata[keys.PARENT_ID] for d in explanation.documents} <= opened
    assert {d.metadata[keys.PARENT_ID] for d in explanation.considered} <= opened


def test_fill_opens_parents_in_gate_order_until_k_children(index: GatedParentIndex) -> None:
    hard = index.as_retriever(k=6, parent_top_k=1, fill=False).explain("GAPDH knockdown")
    filled = index.as_retriever(k=6, parent_top_k=1).explain("GAPDH knockdown")
    assert len(filled.documents) == 6 > len(hard.documents)
    assert filled.parents[0].id == hard.parents[0].id
    scores = [p.metadata[keys.PARENT_SCORE] for p in filled.parents]
    assert scores == sorted(scores, reverse=True)


def test_child_per_parent_caps_each_parent(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(k=50, parent_top_k=5, child_per_parent=1, alpha=0.4)
    docs = retriever.invoke("RNA extraction")
    parents = [d.metadata[keys.PARENT_ID] for d in docs]
    assert len(parents) == len(set(parents))


def test_filter_restricts_both_searches(index: GatedParentIndex) -> None:
    docs = index.as_retriever(k=10).invoke("RNA extraction", filter={"doc_id": "P-RIVAL-02"})
    assert docs
    assert {d.metadata[keys.DOC_ID] for d in docs} == {"P-RIVAL-02"}
    assert index.as_retriever().invoke("RNA", filter={"doc_id": "no-such-doc"}) == []


def test_a_metadata_filter_finds_a_matching_document_no_search_ranks_near(
    fresh_index: GatedParentIndex,
) -> None:
    """The child and term searches apply a doc_id filter only: a document matching another
    filter must still be reached when neither brings it (here, it shares no word with the
    question and its paragraph is about something else)."""
    odd = Document(
        page_content="# Bicycles\n\nA short note on bicycle gears and chains.",
        metadata={"doc_id": "note", "topic": "bicycles"},
    )
    fresh_index.add_documents([*rw_documents(range(12)), odd])
    question = "Which paragraph of which section in the document?"
    found = fresh_index.as_retriever(k=5).invoke(question, filter={"topic": "bicycles"})
    assert [d.metadata["doc_id"] for d in found] == ["note"]
    either = {"$or": [{"topic": "bicycles"}, {"doc_id": "doc-3"}]}
    found = fresh_index.as_retriever(k=40).invoke(question, filter=either)
    assert {d.metadata["doc_id"] for d in found} == {"note", "doc-3"}


def test_per_call_alpha_changes_scores_as_the_formula_says(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(k=3)
    for alpha in (0.0, 0.7, 1.0):
        for doc in retriever.invoke("GAPDH mRNA", alpha=alpha):
            meta = doc.metadata
            want = alpha * meta[keys.PARENT_SCORE] + (1 - alpha) * meta[keys.CHILD_SCORE]
            assert meta[keys.SCORE] == pytest.approx(want)


def test_return_parents_gives_deduplicated_parents(index: GatedParentIndex) -> None:
    parents = index.as_retriever(k=3, return_parents=True).invoke("GAPDH knockdown results")
    ids = [p.id for p in parents]
    assert len(ids) == len(set(ids))
    assert all(p.id and p.id.startswith("P-") for p in parents)
    assert all(keys.SCORE in p.metadata for p in parents)


async def test_async_matches_sync(index: GatedParentIndex) -> None:
    retriever = index.as_retriever(k=5)
    sync = retriever.invoke("lactate production")
    asynchronous = await retriever.ainvoke("lactate production")
    assert [d.id for d in sync] == [d.id for d in asynchronous]


def test_empty_index_returns_nothing(fresh_index: GatedParentIndex) -> None:
    assert fresh_index.as_retriever().invoke("anything") == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 1.5}, "alpha must be in"),
        ({"k": 0}, "k must be an integer >= 1"),
        ({"parent_top_k": 0}, "parent_top_k must be an integer >= 1"),
        ({"filter": {"paper": "x"}}, "not metadata of this index"),
    ],
)
def test_bad_parameters_are_refused(
    index: GatedParentIndex, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        index.as_retriever().invoke("RNA", **kwargs)


def test_replacing_and_deleting_a_document_leaves_no_orphans(
    fresh_index: GatedParentIndex,
) -> None:
    doc = json.loads(json.dumps(GAPDH))
    fresh_index.add_documents([Document(page_content=json.dumps(doc))])
    doc["sections"] = doc["sections"][:2]
    report = fresh_index.add_documents([Document(page_content=json.dumps(doc))])
    assert report.documents == 1
    stats = fresh_index.stats()
    assert (stats["parents"], stats["children"]) == (2, 3)
    assert fresh_index.verify().ok
    assert fresh_index.delete(["P-GAPDH-01"]) == 1
    stats = fresh_index.stats()
    assert (stats["documents"], stats["parents"], stats["children"]) == (0, 0, 0)
    assert fresh_index.verify().ok


class TestGatedParentRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever suite against the real retriever on a real Chroma."""

    @pytest.fixture(autouse=True)
    def _index(self, index_dir: Path, embeddings: Any) -> None:
        self._built = GatedParentIndex(embeddings, directory=index_dir)

    @property
    def retriever_constructor(self) -> type[GatedParentRetriever]:
        return GatedParentRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"index": self._built}

    @property
    def retriever_query_example(self) -> str:
        return "RNA extraction"
