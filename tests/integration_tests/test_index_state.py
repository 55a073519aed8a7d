"""Who owns an index's state: opening reads only, writers take turns, own records apart.

In-process checks on real folder indexes (persistent Chroma, SQLite docstore) with the
deterministic FAKE embedding; the multi-process checks are in ``test_writers_and_readers``.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.formats import (
    FORMAT_VERSION,
    LAYOUT_1_RECORDS,
    LAYOUT_2_RECORDS,
    PARENTLESS_RECORDS,
)
from langchain_gated_parent.stores import WriterLockTimeoutError
from langchain_gated_parent.stores.journal import (
    LEGACY_CONFIG_KEY,
    MANIFEST_PREFIX,
    STAMP_KEY,
)
from langchain_gated_parent.stores.sections import LAYOUT
from tests.integration_tests.crash_worker import corpus
from tests.integration_tests.stores import assert_same_state, fake_embeddings, snapshot
from tests.layout_1 import encode_layout_1
from tests.layout_2 import encode_layout_2

if TYPE_CHECKING:
    from pathlib import Path


def test_opening_a_new_folder_writes_no_record(tmp_path: Path) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert index.journal.records() == {}
    assert index.journal.stamp().seq == 0
    assert index.stats()["documents"] == 0
    index.add_documents(corpus(1)[:2])
    assert sorted(index.journal.records()) == [
        "config",
        MANIFEST_PREFIX + "doc-0",
        MANIFEST_PREFIX + "doc-1",
    ]


def test_the_docstore_holds_parents_only(tmp_path: Path) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1))
    stored = list(index.docstore.yield_keys())
    assert stored
    assert all(key.startswith("P-") for key in stored), stored
    assert index.verify().ok


def test_a_second_writer_times_out_naming_the_holder(tmp_path: Path) -> None:
    first = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    first.add_documents(corpus(1)[:1])
    second = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index", lock_timeout=0.3)
    before = snapshot(second)
    first.writer_lock.acquire(1.0)
    try:
        with pytest.raises(WriterLockTimeoutError) as refused:
            second.add_documents(corpus(1)[1:2])
        with pytest.raises(WriterLockTimeoutError):
            second.delete(["doc-0"])
    finally:
        first.writer_lock.release()
    message = str(refused.value)
    assert f"process {os.getpid()} on " in message
    assert " since " in message
    assert "gave up after waiting 0.3 s" in message
    assert "lock_timeout" in message
    after = snapshot(second)
    assert after["docstore"] == before["docstore"]
    assert after["journal"] == before["journal"]
    assert second.add_documents(corpus(1)[1:2]).documents == 1  # the lock is free again


def test_a_reader_sees_metadata_keys_a_later_write_added(tmp_path: Path) -> None:
    writer = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    writer.add_documents(corpus(1)[:2])
    reader = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    with pytest.raises(ValueError, match="'lab'"):
        reader.check_filter({"lab": "north"})
    tagged = Document(
        page_content="# Notes\n\nA tagged note about glycolysis.",
        metadata={"doc_id": "tagged", "lab": "north"},
    )
    writer.add_documents([tagged])
    reader.check_filter({"lab": "north"})
    found = reader.as_retriever(k=3).invoke("glycolysis note", filter={"lab": "north"})
    assert {d.metadata["doc_id"] for d in found} == {"tagged"}


def test_an_index_of_another_name_in_the_folder_is_refused_and_an_older_one_gets_its_name(
    tmp_path: Path,
) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index", name="papers")
    index.add_documents(corpus(1)[:1])
    assert index.journal.config()["index_name"] == "papers"
    with pytest.raises(ValueError, match="the docstore holds index 'papers', not 'notes'"):
        GatedParentIndex(fake_embeddings(), directory=tmp_path / "index", name="notes")
    older = {k: v for k, v in index.journal.config().items() if k != "index_name"}
    index.journal.put_config(older, index.journal.stamp())  # as a release before names wrote
    reopened = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index", name="papers")
    reopened.add_documents(corpus(1)[1:2])  # a write records the name
    assert reopened.journal.config()["index_name"] == "papers"


def test_a_persistent_client_with_a_memory_docstore_is_refused(tmp_path: Path) -> None:
    import chromadb

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    with pytest.raises(ValueError, match="needs a persistent docstore"):
        GatedParentIndex(fake_embeddings(), client=client)


def test_a_writer_killed_before_its_first_stamp_leaves_vectors_readers_see(
    tmp_path: Path,
) -> None:
    """A kill between a first write's complete manifests and its closing stamp: the stamp still
    says "writing, no vectors yet". Recovery must not leave the stored vectors unseen."""
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1)[:2])
    stamp = index.journal.stamp()
    index.journal.put_stamp(replace(stamp, writing=True, vectors=False))

    recovered = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert recovered.recover() == []
    assert recovered.journal.stamp().vectors
    assert recovered.verify().ok, recovered.verify().problems
    assert recovered.as_retriever().invoke("alpha")


def format_3_child(own: dict[str, Any]) -> dict[str, Any]:
    """A child's vector metadata as format 3 wrote it: its own keys, the section path as JSON."""
    left_out = {keys.CHUNK_ID, keys.SECTION_ID, keys.TOKENS, keys.FORMAT}
    kept = {k: v for k, v in own.items() if k not in left_out}
    return {**kept, keys.SECTION_PATH: json.dumps(own[keys.SECTION_PATH])}


def answers(index: GatedParentIndex, query: str) -> list[tuple[str | None, float, str]]:
    """The top 8 children of a query: each one's id, score and text."""
    found = index.as_retriever(k=8).invoke(query)
    return [(d.id, d.metadata["score"], d.page_content) for d in found]


def assert_answers_as_before(found: list[Any], expected: list[Any]) -> None:
    """The same children with the same texts, and the same scores up to float rounding."""
    assert [(i, t) for i, _, t in found] == [(i, t) for i, _, t in expected]
    assert [s for _, s, _ in found] == pytest.approx([s for _, s, _ in expected])


def test_an_index_of_format_3_is_upgraded_in_place_by_recover(tmp_path: Path) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(2))
    expected = answers(index, "alpha")
    records = index.section_store.parent_ids()
    # Make it what format 3 left on disk: no section records, each child's own metadata (its
    # span and section path) in Chroma beside its vector.
    for section in index.section_store.get(sorted(records)).values():
        index.children.update(
            ids=[own[keys.CHUNK_ID] for own in section.children],
            metadatas=[format_3_child(own) for own in section.children],
        )
    index.section_store.delete(sorted(records))
    config = {**index.journal.config(), "format_version": 3}
    index.journal.put_config(config, index.journal.stamp())

    old = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    with pytest.raises(ValueError, match=r"format version 3; upgrade .*`gated-parent recover"):
        old.as_retriever().invoke("alpha")
    assert old.recover() == []
    assert old.config["format_version"] == FORMAT_VERSION
    assert all(s.parent is not None for s in old.section_store.get(sorted(records)).values())
    assert old.section_store.parent_ids() == records
    assert old.verify().ok
    reopened = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert_answers_as_before(answers(reopened, "alpha"), expected)


OLDER_RECORDS_QUERY = "paragraph 2 of section 1 about knockdown counts"


def written_as_before(
    tmp_path: Path, copies: int, *, encoder: Any = encode_layout_1, **dropped: None
) -> tuple[GatedParentIndex, list[Any], list[str]]:
    """An index whose section records are rewritten in layout 1 (or ``encoder``'s) without the
    ``dropped`` fields, as an earlier release wrote them: the index, its answers before, every
    parent id."""
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(copies))
    expected = answers(index, OLDER_RECORDS_QUERY)
    ids = sorted(index.section_store.parent_ids())
    kept = index.section_store.get(ids)
    assert all(getattr(s, field) for s in kept.values() for field in dropped)
    older = [(p, encoder(replace(s, **dropped))) for p, s in kept.items()]
    index.section_store._store.mset(older)
    return index, expected, ids


def layouts(index: GatedParentIndex) -> dict[str, int]:
    """Each section record's layout, by document id."""
    raw = index.section_store._store
    ids = sorted(raw.yield_keys())
    found: dict[str, int] = {}
    for pid, record in zip(ids, raw.mget(ids), strict=True):
        assert record is not None
        layout = int.from_bytes(record[4:8], "little") if record.startswith(b"\xff" * 4) else 1
        doc_id = index.section_store.get([pid])[pid].doc_id
        assert found.setdefault(doc_id, layout) == layout
    return found


def test_section_records_kept_before_childrens_terms_were_answer_as_before(
    tmp_path: Path,
) -> None:
    # What an earlier release wrote: the same record, without the children's terms or parent.
    _, expected, ids = written_as_before(tmp_path, 2, child_terms=None, parent=None)

    old = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert all(s.child_terms is None for s in old.section_store.get(ids).values())
    assert_answers_as_before(answers(old, OLDER_RECORDS_QUERY), expected)


def test_an_index_of_format_4_answers_as_before_and_its_next_write_marks_it_format_7(
    tmp_path: Path,
) -> None:
    # What format 4 left: records without their parent.
    index, expected, _ = written_as_before(tmp_path, 1, parent=None)
    config = {**index.journal.config(), "format_version": PARENTLESS_RECORDS}
    index.journal.put_config(config, index.journal.stamp())

    old = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert_answers_as_before(answers(old, OLDER_RECORDS_QUERY), expected)
    assert old.verify().ok
    assert old.journal.config()["format_version"] == PARENTLESS_RECORDS  # reading changes nothing

    old.add_documents(corpus(2))  # rewrites doc-0 to doc-3 (see corpus), keeps the rest
    assert old.journal.config()["format_version"] == FORMAT_VERSION
    records = old.section_store.get(sorted(old.section_store.parent_ids())).values()
    assert {s.doc_id for s in records if s.parent is not None} == {f"doc-{i}" for i in range(4)}
    assert {s.doc_id for s in records if s.parent is None} == {f"doc-{i}" for i in range(4, 8)}
    assert old.verify().ok, old.verify().problems


@pytest.mark.parametrize(
    ("layout", "encoder", "format_version"),
    [(1, encode_layout_1, LAYOUT_1_RECORDS), (2, encode_layout_2, LAYOUT_2_RECORDS)],
)
def test_an_index_of_format_5_or_6_answers_as_before_and_its_next_write_marks_it_format_7(
    tmp_path: Path, layout: int, encoder: Any, format_version: int
) -> None:
    # What format 5 left: records of layout 1 that hold their parent; format 6: layout 2
    # (float32 vectors). Written from this release's records, so their vectors are the same.
    index, expected, _ = written_as_before(tmp_path, 1, encoder=encoder)
    config = {**index.journal.config(), "format_version": format_version}
    index.journal.put_config(config, index.journal.stamp())

    old = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert set(layouts(old).values()) == {layout}
    assert_answers_as_before(answers(old, OLDER_RECORDS_QUERY), expected)
    assert old.verify().ok
    assert old.journal.config()["format_version"] == format_version  # reading changes nothing

    old.add_documents(corpus(2))  # rewrites doc-0 to doc-3 (see corpus), keeps the rest
    assert old.journal.config()["format_version"] == FORMAT_VERSION == 7
    assert layouts(old) == {f"doc-{i}": LAYOUT if i < 4 else layout for i in range(8)}
    assert old.verify().ok, old.verify().problems
    written_now = GatedParentIndex(fake_embeddings(), directory=tmp_path / "now")
    for version in (1, 2):
        written_now.add_documents(corpus(version))
    assert set(layouts(written_now).values()) == {LAYOUT}
    assert_answers_as_before(
        answers(old, OLDER_RECORDS_QUERY), answers(written_now, OLDER_RECORDS_QUERY)
    )


@pytest.mark.parametrize("records", ["holding their parent", "of layout 1, without their parent"])
def test_a_replace_that_fails_midway_is_rolled_back_to_the_version_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: str
) -> None:
    if records == "holding their parent":
        index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
        index.add_documents(corpus(1))
    else:  # what an earlier release wrote: the saved version takes the docstore's parents
        index, _, _ = written_as_before(tmp_path, 1, parent=None, child_terms=None)
    before = snapshot(index)
    replaced = [f"doc-{i}" for i in range(4)]
    expected = [answers_in(index, doc_id) for doc_id in replaced]

    def fail(*_: Any, **__: Any) -> None:
        msg = "the vector store went away"
        raise RuntimeError(msg)

    monkeypatch.setattr(index.vectors, "upsert_children", fail)
    with pytest.raises(RuntimeError, match="went away"):
        index.add_documents(corpus(2))  # doc-0 to doc-3 change: parents written, children not
    monkeypatch.undo()
    # The writer's own rollback failed too (the store was still away): the next write's does it.
    assert index.undo.doc_ids() == replaced

    reopened = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert reopened.recover() == replaced
    after = snapshot(reopened)
    assert after["undo"] == []
    for pid, (doc_id, headings, children, vectors, copy) in after["sections"].items():
        assert before["sections"][pid][:4] == (doc_id, headings, children, vectors), pid
        if doc_id in replaced:  # a record written back holds its parent
            assert copy == after["docstore"][pid], pid
    assert_same_state({**after, "sections": before["sections"]}, before)
    for doc_id, found in zip(replaced, expected, strict=True):
        assert_answers_as_before(answers_in(reopened, doc_id), found)
    assert reopened.verify().ok, reopened.verify().problems


def test_a_write_that_raises_rolls_itself_back_before_it_lets_go_of_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readers must not go without a replaced document until some later write recovers it."""
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1))
    before = snapshot(index)
    replaced = [f"doc-{i}" for i in range(4)]
    expected = [answers_in(index, doc_id) for doc_id in replaced]
    upsert = index.vectors.upsert_children
    calls = []

    def fail_once(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            msg = "the vector store hiccuped"
            raise RuntimeError(msg)
        upsert(*args, **kwargs)

    monkeypatch.setattr(index.vectors, "upsert_children", fail_once)
    with pytest.raises(RuntimeError, match="hiccuped"):
        index.add_documents(corpus(2))
    monkeypatch.undo()
    assert len(calls) == 2  # the write, then its rollback
    assert index.undo.doc_ids() == []
    assert not index.journal.stamp().writing
    assert all(m["status"] == "complete" for m in index.journal.all_manifests().values())
    reader = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    for doc_id, found in zip(replaced, expected, strict=True):
        assert_answers_as_before(answers_in(reader, doc_id), found)
    assert reader.recover() == []
    assert_same_state(snapshot(reader), before)
    assert reader.verify().ok, reader.verify().problems


def answers_in(index: GatedParentIndex, doc_id: str) -> list[tuple[str | None, float, str]]:
    """:func:`answers` within one document.

    Across documents, the term search ranks ties in the order their rows were written, and
    the gate fuses ranks: a document written again can move among its equals.
    """
    found = index.as_retriever(k=8, filter={keys.DOC_ID: doc_id}).invoke(OLDER_RECORDS_QUERY)
    return [(d.id, d.metadata["score"], d.page_content) for d in found]


def test_verify_finds_a_section_record_whose_parent_copy_differs(tmp_path: Path) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1))
    assert index.verify().ok
    pid = min(index.section_store.parent_ids())
    record = index.section_store.get([pid])[pid]
    assert record.parent is not None
    edited = Document(record.parent.page_content + " (edited)", metadata=record.parent.metadata)
    index.section_store.put([replace(record, parent=edited)])
    assert index.verify().problems == [
        f"section record's copy of its parent unlike the docstore's: {pid}"
    ]


def test_verify_finds_a_saved_version_a_finished_write_left_and_recover_drops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1))
    replaced = [f"doc-{i}" for i in range(4)]

    forget = index.undo.forget

    def crash(doc_ids: list[str]) -> None:  # the process dies before it drops them
        if doc_ids:  # (a write first drops what earlier writes left: nothing here)
            msg = "killed"
            raise RuntimeError(msg)
        forget(doc_ids)

    monkeypatch.setattr(index.undo, "forget", crash)
    with pytest.raises(RuntimeError, match="killed"):
        index.add_documents(corpus(2))  # doc-0 to doc-3 change, and their write completes
    monkeypatch.undo()
    reopened = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert reopened.verify().problems == [
        f"saved version of a finished write: {doc_id}" for doc_id in replaced
    ]
    assert reopened.recover() == []  # no write was unfinished: nothing is rolled back
    assert reopened.undo.doc_ids() == []
    assert reopened.verify().ok, reopened.verify().problems


def test_saved_versions_take_chromas_own_vectors_in_batches_the_client_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1))
    manifests = index.journal.manifests(["doc-0", "doc-1"])
    monkeypatch.setattr(index.vectors.client, "get_max_batch_size", lambda: 3)
    saved = dict(index._saved_versions(manifests))
    assert list(saved) == ["doc-0", "doc-1"]
    for doc_id, version in saved.items():
        assert version.manifest == manifests[doc_id]
        assert [s.parent_id for s in version.sections] == manifests[doc_id]["parents"]
        stored = index.children.get(
            ids=[str(own[keys.CHUNK_ID]) for s in version.sections for own in s.children],
            include=["embeddings"],
        )
        kept = {
            str(own[keys.CHUNK_ID]): row
            for s in version.sections
            for own, row in zip(s.children, s.child_vectors, strict=True)
        }
        assert len(stored["ids"]) == len(kept) > 3  # more than one batch
        for child_id, vector in zip(stored["ids"], stored["embeddings"], strict=True):
            assert np.array_equal(kept[child_id], np.asarray(vector, dtype=np.float32))
        parents = index.parents.get(ids=manifests[doc_id]["parents"], include=["embeddings"])
        by_id = {s.parent_id: s.vector for s in version.sections}
        for pid, vector in zip(parents["ids"], parents["embeddings"], strict=True):
            assert np.array_equal(by_id[pid], np.asarray(vector, dtype=np.float32))


def test_an_index_of_format_2_is_refused_with_the_fix(tmp_path: Path) -> None:
    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1))
    # Keep the config the way format 2 did (in the docstore, beside the parents, with the old
    # unprefixed metadata keys in the stores): it cannot be read as format 3 or 4.
    config = {**index.journal.records()["config"], "format_version": 2}
    index.docstore.mset([(LEGACY_CONFIG_KEY, Document(page_content=json.dumps(config)))])
    index.journal._records.mdelete(["config", STAMP_KEY])
    before = snapshot(index)

    with pytest.raises(ValueError, match=r"format version 2, .* formats 3 to 7 .*rebuild it"):
        GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    assert_same_state(snapshot(index), before)


@pytest.mark.parametrize("cached_sections", [1024, 0])
def test_a_reader_answers_from_another_writers_update_not_from_its_cache(
    tmp_path: Path, cached_sections: int
) -> None:
    writer = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    writer.add_documents(corpus(1))
    reader = GatedParentIndex(
        fake_embeddings(), directory=tmp_path / "index", cached_sections=cached_sections
    )
    retriever = reader.as_retriever(k=20)  # across the collection: headers and sections read
    question = "an edited paragraph of section 1 in document 0: the knockdown was repeated twice"
    before = retriever.invoke(question)
    assert before == retriever.invoke(question)  # the second answer may come from the cache
    assert "An edited paragraph" not in " ".join(d.page_content for d in before)
    writer.add_documents(corpus(2))
    after = {d.metadata["chunk_id"]: d for d in retriever.invoke(question)}
    edited = [d for d in after.values() if d.page_content.startswith("An edited paragraph")]
    assert len(edited) == 1, sorted(after)
    fresh = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index", cached_sections=0)
    expected = fresh.as_retriever(k=20).invoke(question)
    assert [(d.id, d.page_content, d.metadata) for d in after.values()] == [
        (d.id, d.page_content, d.metadata) for d in expected
    ]


def test_verify_lists_every_child_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collection larger than one page (a page of 2 here) is listed whole, pages joined."""
    from langchain_gated_parent.stores import chroma

    index = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
    index.add_documents(corpus(1)[:2])
    everything = index.vectors.child_parents()
    monkeypatch.setattr(chroma, "LIST_PAGE", 2)
    children = index.vectors.children
    limits: list[int | None] = []
    read = children.get

    def spied(*args: Any, **kwargs: Any) -> Any:
        limits.append(kwargs.get("limit"))
        return read(*args, **kwargs)

    monkeypatch.setattr(children, "get", spied)
    assert index.vectors.child_parents() == everything
    assert len(limits) > 1
    assert set(limits) == {2}  # never the whole collection in one read
    assert len(everything) == index.stats()["children"] > 2
    assert index.verify().ok
