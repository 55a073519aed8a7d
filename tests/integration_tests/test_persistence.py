"""Persistence and updates: reopen in a new process, refuse other embeddings, replace, delete.

Runs on the real offline MiniLM embeddings and a persistent Chroma + SQLite index. The check
functions take any index (or :class:`StoreSpec`) so ``test_scale_out`` runs them unchanged
against a Chroma server and a PostgreSQL docstore.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import chromadb
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_gated_parent import GatedParentIndex, cli, keys
from langchain_gated_parent.formats import PARENT_IDS_ON_VECTORS
from langchain_gated_parent.splitters import ParentChildSplit, split_document
from langchain_gated_parent.stores.chroma import CHILD_SEARCH_EF, SYNC_THRESHOLD
from langchain_gated_parent.stores.section_reads import EXACT_DOCUMENTS
from tests.integration_tests.crash_worker import ROOT
from tests.integration_tests.stores import StoreSpec, fake_embeddings
from tests.layout_1 import encode_layout_1

from .conftest import GAPDH, RIVAL, corpus

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from langchain_core.embeddings import Embeddings

    from langchain_gated_parent.embeddings import MiniLMEmbeddings

QUERIES = [
    "48 h RNA extraction",
    "How do I set the cache directory?",
    "lactate after GAPDH knockdown",
    "phenol versus column kits",
]


def answers(index: GatedParentIndex) -> list[dict[str, Any]]:
    """Ids and scores of each query's children and parents, as the worker's ``query`` mode."""
    out = []
    for text in QUERIES:
        children = index.as_retriever(k=6).invoke(text)
        parents = index.as_retriever(k=3, return_parents=True).invoke(text)
        out.append(
            {
                "children": [[d.id, d.metadata[keys.SCORE]] for d in children],
                "parents": [[d.id, d.metadata[keys.SCORE]] for d in parents],
            }
        )
    return out


def answers_in_new_process(spec: StoreSpec, embeddings: str = "minilm") -> list[dict[str, Any]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration_tests.crash_worker",
            "query",
            spec.to_json(),
            embeddings,
            json.dumps(QUERIES),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout.splitlines()[-1])
    return found


def check_reopens_with_the_same_answers(index: GatedParentIndex, spec: StoreSpec) -> None:
    """Another process opening the same stores answers every query identically."""
    here = answers(index)
    assert all(a["children"] for a in here)
    there = answers_in_new_process(spec)
    for mine, theirs in zip(here, there, strict=True):
        for part in ("children", "parents"):
            assert [i for i, _ in theirs[part]] == [i for i, _ in mine[part]]
            assert [s for _, s in theirs[part]] == pytest.approx([s for _, s in mine[part]], 1e-6)


def splits_of(index: GatedParentIndex, documents: list[Document]) -> list[ParentChildSplit]:
    """What the index's splitters make of ``documents``."""
    return [
        split_document(
            d, parent_splitter=index.parent_splitter, child_splitter=index.child_splitter
        )
        for d in documents
    ]


def expected_counts(index: GatedParentIndex, documents: list[Document]) -> tuple[int, int, int]:
    """Documents, parents and children the splitters make of ``documents``."""
    splits = splits_of(index, documents)
    return len(splits), sum(len(s.parents) for s in splits), sum(len(s.children) for s in splits)


def assert_holds_exactly(index: GatedParentIndex, documents: list[Document]) -> None:
    report = index.verify()
    assert report.ok, report.problems
    documents_, parents, children = expected_counts(index, documents)
    assert (report.documents, report.parents, report.children) == (documents_, parents, children)
    assert index.parents.count() == parents
    assert index.children.count() == children
    # Each text is stored once: Chroma holds no child text, which is cut from the parent's.
    assert not any(index.children.get(include=["documents"])["documents"] or [])
    for split in splits_of(index, documents):
        rows = index.children_of(list({c.metadata[keys.PARENT_ID]: 0 for c in split.children}))
        want = {c.metadata[keys.CHUNK_ID]: c.page_content for c in split.children}
        assert dict(zip(rows.ids, rows.texts, strict=True)) == want


def structured(data: dict[str, Any]) -> Document:
    return Document(page_content=json.dumps(data), metadata={keys.FORMAT: "structured"})


def check_replace_and_delete(index: GatedParentIndex) -> None:
    """Re-ingesting a changed document replaces it; deleting removes it; counts stay exact."""
    documents = corpus()
    index.add_documents(documents)
    assert_holds_exactly(index, documents)
    assert index.add_documents(documents).unchanged == len(documents)

    changed = copy.deepcopy(GAPDH)
    changed["sections"][1]["paras"] = ["10 nM siRNA, 72 h before protein extraction"]
    del changed["sections"][2]  # Results is gone: its parent and children must go
    report = index.add_documents([structured(changed)])
    assert (report.documents, report.unchanged) == (1, 0)
    now = [structured(changed), *documents[1:]]
    assert_holds_exactly(index, now)
    assert index.get_parents(["P-S-results"]) == [None]
    assert index.children.get(where={keys.PARENT_ID: "P-S-results"})["ids"] == []
    top = index.as_retriever(k=1).invoke(
        "protein extraction", filter={keys.DOC_ID: GAPDH["doc_id"]}
    )
    assert top[0].page_content == "10 nM siRNA, 72 h before protein extraction"

    assert index.delete([RIVAL["doc_id"], "no-such-document"]) == 1
    now = [structured(changed), documents[2]]
    assert_holds_exactly(index, now)
    rival_children = index.children.get(where={keys.DOC_ID: RIVAL["doc_id"]})["ids"]
    assert rival_children == []
    hits = index.as_retriever(k=8).invoke("phenol extraction kits")
    assert RIVAL["doc_id"] not in {d.metadata[keys.DOC_ID] for d in hits}


def labelled(count: int) -> list[Document]:
    """More documents than are scored exactly, so a filter goes to the vector store."""
    text = "# Methods\n\nCells were lysed on ice.\n\n# Results\n\nYield doubled after 48 h."
    return [
        Document(page_content=text, metadata={"doc_id": f"d{n}", "lab": "north"})
        for n in range(count)
    ]


def check_a_key_a_replacement_drops_stops_matching(
    open_index: Callable[[], GatedParentIndex],
) -> None:
    """Chroma's upsert keeps a key the new metadata lacks; the write removes it."""
    index = open_index()
    index.add_documents(labelled(EXACT_DOCUMENTS + 2))
    unlabelled = Document(page_content=labelled(1)[0].page_content, metadata={"doc_id": "d0"})
    index.add_documents([unlabelled])
    retriever = open_index().as_retriever(k=20)
    assert retriever.invoke("lysed", filter={"$and": [{"lab": "north"}, {"doc_id": "d0"}]}) == []
    found = retriever.invoke("cells lysed", filter={"lab": "north"})
    assert found
    assert "d0" not in {d.metadata[keys.DOC_ID] for d in found}
    assert "lab" not in index.parents.get(where={keys.DOC_ID: "d0"})["metadatas"][0]


def check_an_older_index_gets_parent_ids(open_index: Callable[[], GatedParentIndex]) -> None:
    """Parent vectors written before they carried parent_id: refused, then named by a write."""
    index = open_index()
    index.add_documents(labelled(EXACT_DOCUMENTS + 2))
    stored = index.parents.get(include=[])["ids"]
    index.parents.update(ids=stored, metadatas=[{keys.PARENT_ID: None} for _ in stored])
    config = {k: v for k, v in index.journal.config().items() if k != PARENT_IDS_ON_VECTORS}
    index.journal.put_config(config, index.journal.stamp())
    older = open_index()
    both = {"$and": [{keys.PARENT_ID: "P-d3:s1"}, {keys.DOC_ID: "d3"}]}
    with pytest.raises(ValueError, match=r"parent_id beside other keys.*gated-parent recover"):
        older.as_retriever().invoke("yield", filter=both)
    alone = older.as_retriever().invoke("yield", filter={keys.PARENT_ID: "P-d3:s1"})
    assert [d.metadata[keys.PARENT_ID] for d in alone] == ["P-d3:s1"]
    older.recover()
    assert all(m[keys.PARENT_ID] == p for p, m in zip(*_parent_metadatas(older), strict=True))
    found = open_index().as_retriever().invoke("yield", filter=both)
    assert [d.metadata[keys.PARENT_ID] for d in found] == ["P-d3:s1"]
    assert older.verify().ok


CHROMA_EF = 100
"""Chroma's own ``ef_search``, which the parent vectors keep."""


def check_every_write_is_saved_in_the_vector_graph(
    open_index: Callable[[], GatedParentIndex],
) -> None:
    """The collections save their HNSW graph after every write and the children's search walks
    with the index's ``ef_search``, older ones from their next write.

    So no process that opens the index inserts vectors of its own into its copy of the graph
    (what ``benchmarks.same_answers`` measures); an open changes no setting, a write does.
    """
    index = open_index()
    index.add_documents(labelled(EXACT_DOCUMENTS + 2))
    assert hnsw_settings(open_index()) == [
        (SYNC_THRESHOLD, CHROMA_EF),
        (SYNC_THRESHOLD, CHILD_SEARCH_EF),
    ]
    for collection in (index.parents, index.children):  # as releases before them created them
        collection.modify(configuration={"hnsw": {"sync_threshold": 1000, "ef_search": CHROMA_EF}})
    reopened = open_index()
    assert hnsw_settings(reopened) == [(1000, CHROMA_EF)] * 2
    reopened.add_documents(
        [Document(page_content="# Notes\n\nKept cold.", metadata={"doc_id": "n"})]
    )
    assert hnsw_settings(open_index()) == [
        (SYNC_THRESHOLD, CHROMA_EF),
        (SYNC_THRESHOLD, CHILD_SEARCH_EF),
    ]


def hnsw_settings(index: GatedParentIndex) -> list[tuple[int, int]]:
    """Each collection's ``(sync_threshold, ef_search)``, as Chroma holds them for a newly
    opened index."""
    return [
        (c.configuration_json["hnsw"]["sync_threshold"], c.configuration_json["hnsw"]["ef_search"])
        for c in (index.parents, index.children)
    ]


def unsaved_vectors(chroma_folder: Path) -> dict[str, int]:
    """Log entries past the saved HNSW graph, by collection, read from Chroma's own tables.

    chromadb 1.x's SQLite schema: ``embeddings_queue`` is the log (topic: the collection),
    ``max_seq_id`` the last entry each segment has saved (no row: none yet).
    """
    with closing(sqlite3.connect(chroma_folder / "chroma.sqlite3")) as db:
        rows = db.execute(
            "SELECT c.name, COUNT(*) FROM embeddings_queue q "
            "JOIN collections c ON q.topic LIKE '%/' || c.id "
            "JOIN segments s ON s.collection = c.id AND s.scope = 'VECTOR' "
            "LEFT JOIN max_seq_id m ON m.segment_id = s.id "
            "WHERE q.seq_id > COALESCE(m.seq_id, 0) GROUP BY c.name"
        ).fetchall()
    return dict(rows)


def _parent_metadatas(index: GatedParentIndex) -> tuple[list[str], list[dict[str, Any]]]:
    got = index.parents.get(include=["metadatas"])
    return got["ids"], got["metadatas"]


def test_a_key_a_replacement_drops_stops_matching(tmp_path: Path) -> None:
    check_a_key_a_replacement_drops_stops_matching(
        lambda: GatedParentIndex(fake_embeddings(), directory=tmp_path)
    )


def test_an_older_index_gets_parent_ids(tmp_path: Path) -> None:
    check_an_older_index_gets_parent_ids(
        lambda: GatedParentIndex(fake_embeddings(), directory=tmp_path)
    )


def test_every_write_is_saved_in_the_vector_graph(tmp_path: Path) -> None:
    check_every_write_is_saved_in_the_vector_graph(
        lambda: GatedParentIndex(fake_embeddings(), directory=tmp_path)
    )
    assert unsaved_vectors(tmp_path / "chroma") == {}


def test_a_collection_of_chroma_s_default_settings_leaves_vectors_unsaved(tmp_path: Path) -> None:
    """The control for :func:`unsaved_vectors`: at Chroma's default it does find them."""
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    collection = client.create_collection("defaults", configuration={"hnsw": {"space": "cosine"}})
    collection.add(
        ids=[f"v{n}" for n in range(10)], embeddings=[[1.0, float(n)] for n in range(10)]
    )
    assert unsaved_vectors(tmp_path / "chroma") == {"defaults": 10}


def test_reopens_in_a_new_process_with_the_same_answers(index: GatedParentIndex) -> None:
    assert index.directory is not None
    check_reopens_with_the_same_answers(index, StoreSpec(directory=str(index.directory)))


@pytest.mark.parametrize(
    ("other", "fragment"),
    [
        (DeterministicFakeEmbedding(size=32), "not 'DeterministicFakeEmbedding' (32-d)"),
        (DeterministicFakeEmbedding(size=384), "not 'DeterministicFakeEmbedding' (384-d)"),
    ],
    ids=["other-dimension", "same-dimension-other-name"],
)
def test_other_embeddings_are_refused(index_dir: Path, other: Embeddings, fragment: str) -> None:
    with pytest.raises(ValueError, match="built with embeddings") as refused:
        GatedParentIndex(other, directory=index_dir)
    message = str(refused.value)
    assert "'all-MiniLM-L6-v2-int8' (384-d)" in message
    assert fragment in message
    assert "open it with the same embeddings" in message


def test_reingest_replaces_and_delete_removes(fresh_index: GatedParentIndex) -> None:
    check_replace_and_delete(fresh_index)


def test_cli_verify_names_a_child_deleted_behind_the_index(
    tmp_path: Path, embeddings: Embeddings, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "index"
    index = GatedParentIndex(embeddings, directory=directory)
    index.add_documents(corpus())
    assert cli.main(["verify", "--index", str(directory)]) == 0
    assert capsys.readouterr().out.startswith("ok: 3 documents")

    index.children.delete(ids=["C-S-methods-2"])  # behind the index's back
    status = cli.main(["verify", "--index", str(directory)])
    out, err = capsys.readouterr()
    assert status == cli.EXIT_FAILURE
    assert "manifest child missing: C-S-methods-2" in out
    assert err.startswith("gated-parent: error: 1 problem(s) in ")
    assert "Traceback" not in err


@pytest.mark.parametrize("vanished", ["record", "parent of a format-4 record"])
def test_a_child_whose_section_vanished_is_dropped(
    tmp_path: Path, embeddings: MiniLMEmbeddings, vanished: str
) -> None:
    """A delete racing a query can remove a section between the gate and the child fetch: its
    children are dropped rather than returned without their text.

    A delete removes the section record (which holds the parent) before the parent; a record
    of format 4 holds no parent, so its parent is read from the docstore, and one gone from
    there drops its children too. The removal is made under the journal's back (the race
    without its stamp), so the index keeps no reads between calls (``cached_sections=0``):
    every call reads the stores.
    """
    index = GatedParentIndex(embeddings, directory=tmp_path / "index", cached_sections=0)
    index.add_documents(corpus())
    first, second = "P-S-methods", "P-S-results"
    both = index.children_of([first, second])
    mine = [c for c, m in zip(both.ids, both.metadatas, strict=True) if m[keys.PARENT_ID] == first]
    assert 0 < len(mine) < len(both.ids)
    if vanished == "record":
        index.section_store.delete([second])
    else:
        records = index.section_store.get([first, second]).values()
        older = [(r.parent_id, encode_layout_1(replace(r, parent=None))) for r in records]
        index.section_store._store.mset(older)
        index.docstore.mdelete([second])
    rows = index.children_of([first, second])
    assert (rows.ids, len(rows.texts), rows.vectors.shape) == (mine, len(mine), (len(mine), 384))
    assert {m[keys.PARENT_ID] for m in rows.metadatas} == {first}
