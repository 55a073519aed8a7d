"""The sparse index on both stacks: kept in step with add, update and delete, never rebuilt.

Stacks: a local folder (FTS5 in the folder's SQLite file) and a PostgreSQL docstore
(``tsvector`` + GIN). Vectors come from the deterministic FAKE embedding (random vectors, so
the dense parent search cannot find a section by meaning: only the sparse search can).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING

import pytest
from langchain_core.documents import Document

from tests.integration_tests.stores import POSTGRES_ENV, StoreSpec, fake_embeddings

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from langchain_gated_parent.index import GatedParentIndex

RARE = "zyzzogeton"
"""A word that occurs in one section of one document only."""


def _document(doc_id: str, *, rare_in: str = "Methods", extra: str = "") -> Document:
    sections = ["Introduction", "Methods", "Results", "Discussion"]
    body = []
    for name in sections:
        text = (
            f"The {name.lower()} of {doc_id} describe common things about samples. " * 12
        ).strip()
        if name == rare_in:
            text += f" We measured the {RARE} response."
        body.append(f"# {name}\n\n{text}{extra}\n")
    return Document(
        page_content="\n".join(body),
        metadata={"doc_id": doc_id, "format": "markdown"},
    )


@pytest.fixture(params=["folder", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreSpec]:
    import os

    tag = uuid.uuid4().hex[:10]
    if request.param == "postgres":
        url = os.environ.get(POSTGRES_ENV, "")
        if not url:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"{POSTGRES_ENV} is not set under CI=true")
            pytest.skip(f"set {POSTGRES_ENV} to run the PostgreSQL sparse-index tests")
        made = StoreSpec(directory=str(tmp_path / tag), postgres_url=url, namespace=f"gp-{tag}")
    else:
        made = StoreSpec(directory=str(tmp_path / tag))
    try:
        yield made
    finally:
        made.drop()


def _parents_with(index: GatedParentIndex, word: str) -> list[str]:
    """The parents whose stored text holds ``word`` (read from the docstore)."""
    keys = sorted(index.docstore.yield_keys())
    return [
        key
        for key, parent in zip(keys, index.docstore.mget(keys), strict=True)
        if parent is not None and word in parent.page_content
    ]


def test_add_update_delete_keep_the_sparse_index_in_step(spec: StoreSpec) -> None:
    index = spec.open(fake_embeddings())
    assert index.sparse is not None
    index.add_documents([_document("a", rare_in="Methods"), _document("b", rare_in="None")])
    assert index.sparse.count() == index.stats()["parents"]
    hits = index.search_sparse(RARE, 10)
    first = _parents_with(index, RARE)
    assert len(first) == 1
    assert [pid for pid, _ in hits] == first
    assert hits[0][1] > 0
    # A filter on doc_id is applied inside the search.
    assert index.search_sparse(RARE, 10, {"doc_id": "b"}) == []
    assert index.search_sparse("samples", 10, {"doc_id": {"$in": ["b"]}})
    assert {
        pid.split(":")[0] for pid, _ in index.search_sparse("samples", 20, {"doc_id": "b"})
    } == {"P-b"}

    # Update: the word moves to another section; the old row is gone, the new one found.
    index.add_documents([_document("a", rare_in="Results")])
    moved = _parents_with(index, RARE)
    assert moved != first
    assert [pid for pid, _ in index.search_sparse(RARE, 10)] == moved
    assert index.sparse.count() == index.stats()["parents"]

    # Delete: no row of the document is left.
    index.delete(["a"])
    assert index.search_sparse(RARE, 10) == []
    assert {row[1] for row in index.sparse.rows()} == {"b"}
    assert index.verify().ok


def test_a_reader_finds_what_another_writer_moved_not_what_it_kept(spec: StoreSpec) -> None:
    """The reader's term search keeps postings between queries; a write elsewhere drops them."""
    writer = spec.open(fake_embeddings())
    writer.add_documents([_document("a", rare_in="Methods"), _document("b", rare_in="None")])
    reader = spec.open(fake_embeddings())
    retriever = reader.as_retriever(k=3)
    question = f"the {RARE} response"
    (first,) = _parents_with(reader, RARE)
    for _ in range(2):  # the second query is answered from the postings kept
        assert first in {p.id for p in retriever.explain(question).parents}
    writer.add_documents([_document("a", rare_in="Results")])
    (moved,) = _parents_with(reader, RARE)
    opened = {p.id: p.metadata["gate_sources"] for p in retriever.explain(question).parents}
    assert moved != first
    assert "sparse" in opened[moved]
    assert reader.search_sparse(RARE, 5)[0][0] == moved


def test_a_new_process_searches_without_rebuilding(spec: StoreSpec) -> None:
    index = spec.open(fake_embeddings())
    index.add_documents(
        [_document(f"d{i}", rare_in="Discussion" if i == 3 else "None") for i in range(6)]
    )
    rows = index.sparse.rows() if index.sparse is not None else None
    (target,) = _parents_with(index, RARE)
    script = (
        "import json, sys\n"
        "from tests.integration_tests.stores import StoreSpec, fake_embeddings\n"
        "from langchain_gated_parent.stores import sparse\n"
        "calls = []\n"
        "for cls in (sparse.SqliteSparseIndex, sparse.PostgresSparseIndex):\n"
        "    original = cls.upsert\n"
        "    cls.upsert = lambda self, rows, o=original: (calls.append(len(rows)), o(self, rows))\n"
        "index = StoreSpec.from_json(sys.argv[1]).open(fake_embeddings())\n"
        "hits = index.search_sparse(sys.argv[2], 5)\n"
        "docs = index.as_retriever(k=3).explain(sys.argv[2])\n"
        "opened = {p.id: p.metadata['gate_sources'] for p in docs.parents}\n"
        "print(json.dumps({'hits': hits, 'upserts': calls, 'opened': opened}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, spec.to_json(), f"the {RARE} response"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    reply = json.loads(out.stdout.strip().splitlines()[-1])
    assert reply["upserts"] == [], "opening the index wrote to the sparse index"
    assert next(pid for pid, _ in reply["hits"]) == target
    # The hybrid gate opened the section through the term search, and says so.
    assert "sparse" in reply["opened"][target]
    reopened = spec.open(fake_embeddings())
    assert reopened.sparse is not None
    assert reopened.sparse.rows() == rows


def test_the_gate_without_sparse_and_child_search_is_the_dense_gate(spec: StoreSpec) -> None:
    index = spec.open(fake_embeddings())
    index.add_documents(
        [_document(f"d{i}", rare_in="Discussion" if i == 3 else "None") for i in range(6)]
    )
    dense = index.as_retriever(k=6, sparse_weight=0.0, child_weight=0.0).explain(RARE)
    assert {tuple(p.metadata["gate_sources"]) for p in dense.parents} == {("dense",)}
    hybrid = index.as_retriever(k=6).explain(RARE)
    (target,) = _parents_with(index, RARE)
    assert target in [p.id for p in hybrid.parents]
    assert any(d.metadata["parent_id"] == target for d in hybrid.documents)


@pytest.mark.parametrize("cached_sections", [None, 0], ids=["postings kept", "FTS5 ranks"])
def test_equal_term_scores_rank_by_parent_id_whatever_order_they_were_written_in(
    spec: StoreSpec, cached_sections: int | None
) -> None:
    """Six documents of the same text tie; the three kept are the same after two are rewritten.

    On a folder, the term search ranks from the postings it keeps once it has seen a quiet
    index, or (kept none, or a filter) in FTS5; PostgreSQL ranks in SQL.
    """
    options = {} if cached_sections is None else {"cached_sections": cached_sections}
    index = spec.open(fake_embeddings(), **options)

    def note(doc_id: str) -> Document:
        text = f"# Notes\n\nA shared note on the {RARE} response.\n"
        return Document(page_content=text, metadata={"doc_id": doc_id, "format": "markdown"})

    for doc_id in ("d3", "d1", "d5", "d0", "d4", "d2"):  # one write each: rows in this order
        index.add_documents([note(doc_id)])
    index.refresh()  # a quiet index seen: the postings can be kept
    every = index.search_sparse(RARE, 20)
    assert len(every) == 6
    assert len({score for _, score in every}) == 1  # all tie
    assert [pid for pid, _ in every] == sorted(pid for pid, _ in every)
    best = [pid for pid, _ in index.search_sparse(RARE, 3)]
    assert best == [pid for pid, _ in every[:3]]
    some = ["d5", "d0", "d2", "d4"]
    in_some = [pid for pid, _ in index.search_sparse(RARE, 2, {"doc_id": {"$in": some}})]
    assert in_some == [pid for pid, _ in every if pid.split(":")[0][2:] in some][:2]

    index.delete(["d0", "d1"])  # and written again, after the others
    for doc_id in ("d1", "d0"):
        index.add_documents([note(doc_id)])
    index.refresh()
    assert [pid for pid, _ in index.search_sparse(RARE, 3)] == best
    assert [pid for pid, _ in index.search_sparse(RARE, 2, {"doc_id": {"$in": some}})] == in_some


def test_verify_names_a_term_index_row_out_of_step_with_the_parents(spec: StoreSpec) -> None:
    """A row lost from the term index, or one left for a parent that is gone, is reported."""
    from langchain_gated_parent.stores.sparse import SparseRow

    index = spec.open(fake_embeddings())
    index.add_documents([_document("a"), _document("b", rare_in="None")])
    assert index.sparse is not None
    assert index.verify().ok
    (lost,) = _parents_with(index, RARE)
    index.sparse.delete([lost])
    index.sparse.upsert([SparseRow("P-gone:s9", "gone", "a stray row")])
    assert sorted(index.verify().problems) == [
        f"parent without a term-index row: {lost}",
        "term-index row without a parent: P-gone:s9",
    ]


def test_verify_names_stored_postings_out_of_step_with_the_term_index(tmp_path: Path) -> None:
    """A folder index's term postings, stored beside FTS5, are checked against FTS5's own."""
    from langchain_gated_parent.index import GatedParentIndex
    from langchain_gated_parent.stores.sparse import SqliteSparseIndex

    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents([_document("a"), _document("b", rare_in="None")])
    assert index.verify().ok
    sparse = index.sparse
    assert isinstance(sparse, SqliteSparseIndex)
    table = sparse._stored.postings
    with sparse._engine.begin() as conn:
        (term,) = conn.exec_driver_sql(f"SELECT term FROM {table} WHERE term = ?", (RARE,)).one()  # noqa: S608
        conn.exec_driver_sql(f"DELETE FROM {table} WHERE term = ?", (term,))  # noqa: S608
    assert index.verify().problems == [f"stored postings out of step with the term index: {RARE}"]
