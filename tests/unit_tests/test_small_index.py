"""An index of a few documents is scored exactly, from its section records, not searched.

Real Chroma and SQLite stores in a temporary folder; the embedding is LangChain's
``DeterministicFakeEmbedding`` (a fake: these tests check which reads a query makes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_gated_parent import GatedParentIndex
from langchain_gated_parent.stores.section_reads import EXACT_DOCUMENTS

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _document(number: int) -> Document:
    text = f"# Methods {number}\n\nCells of batch {number} were lysed on ice.\n\n"
    text += f"# Results {number}\n\nYield {number} doubled after 48 h."
    return Document(page_content=text, metadata={"doc_id": f"d{number}"})


def _index(tmp_path: Path, documents: int) -> GatedParentIndex:
    index = GatedParentIndex(DeterministicFakeEmbedding(size=16), directory=tmp_path)
    index.add_documents([_document(n) for n in range(documents)])
    return index


def _vector_searches(index: GatedParentIndex, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the vector-index searches the index makes from now on."""
    made: list[str] = []
    for name in ("search_children", "search_parents"):
        search = getattr(index.vectors, name)

        def recorded(*args: Any, _name: str = name, _search: Any = search) -> Any:
            made.append(_name)
            return _search(*args)

        monkeypatch.setattr(index.vectors, name, recorded)
    return made


def _watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, documents: int
) -> tuple[GatedParentIndex, list[str], Any]:
    """An index of ``documents`` documents, the vector searches it makes, a retriever (k 5)."""
    index = _index(tmp_path, documents)
    return index, _vector_searches(index, monkeypatch), index.as_retriever(k=5)


def _answers(documents: list[Document]) -> list[tuple[str | None, float]]:
    return [(d.id, d.metadata["score"]) for d in documents]


def test_a_small_index_is_scored_as_a_filter_naming_all_its_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, searches, retriever = _watched(tmp_path, monkeypatch, EXACT_DOCUMENTS)
    every = {"doc_id": {"$in": [f"d{n}" for n in range(EXACT_DOCUMENTS)]}}
    for query in ("lysed on ice", "yield doubled 48 h", "batch 3"):
        found = retriever.invoke(query)
        assert found
        assert _answers(found) == _answers(retriever.invoke(query, filter=every))
    assert searches == []


def test_a_larger_index_is_searched_until_a_delete_makes_it_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, searches, retriever = _watched(tmp_path, monkeypatch, EXACT_DOCUMENTS + 1)
    assert retriever.invoke("lysed on ice")
    assert "search_children" in searches
    searches.clear()
    index.delete(["d0"])
    found = retriever.invoke("lysed on ice")
    assert searches == []
    assert found
    assert all(d.metadata["doc_id"] != "d0" for d in found)


def test_a_filter_on_other_metadata_is_searched_even_in_a_small_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = GatedParentIndex(DeterministicFakeEmbedding(size=16), directory=tmp_path)
    index.add_documents(
        [Document(page_content="# A\n\nCells.", metadata={"doc_id": "a", "lab": "n"})]
    )
    searches = _vector_searches(index, monkeypatch)
    assert index.as_retriever().invoke("cells", filter={"lab": "n"})
    assert "search_children" in searches


def test_a_filter_on_parent_ids_scores_the_sections_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, searches, retriever = _watched(tmp_path, monkeypatch, EXACT_DOCUMENTS + 2)
    one = retriever.invoke("lysed on ice", filter={"parent_id": "P-d9:s0"})
    assert [d.metadata["parent_id"] for d in one] == ["P-d9:s0"]
    both = {"parent_id": {"$in": ["P-d9:s0", "P-d3:s1"]}}
    assert {d.metadata["parent_id"] for d in retriever.invoke("yield", filter=both)} == {
        "P-d9:s0",
        "P-d3:s1",
    }
    assert searches == []  # scored from the named sections' records
    assert retriever.invoke("lysed", filter={"parent_id": "P-unknown:s0"}) == []
    with_document = {"$and": [{"parent_id": "P-d3:s1"}, {"doc_id": "d3"}]}
    found = retriever.invoke("yield", filter=with_document)  # left to the vector store
    assert "search_children" in searches
    assert [d.metadata["parent_id"] for d in found] == ["P-d3:s1"]
