"""Section records: what a query reads about a parent survives the bytes it is stored as."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryByteStore

from langchain_gated_parent import keys
from langchain_gated_parent.lexical import child_terms, searchable
from langchain_gated_parent.records import ChildRows
from langchain_gated_parent.stores.journal import Journal, Stamp
from langchain_gated_parent.stores.section_reads import SectionReads
from langchain_gated_parent.stores.sections import (
    LAYOUT,
    SectionStore,
    decode,
    encode,
    parent_copy,
    section_of,
)
from langchain_gated_parent.stores.undo import SavedVersion, UndoStore
from tests.layout_1 import encode_layout_1
from tests.layout_2 import encode_layout_2

DIMENSION = 4
OFFSET = 100
"""Where the parent starts in its document (children's spans are the document's)."""
PARAGRAPHS = ("Cells grow", "Mice eats.", "The rats. ")
"""Ten characters each: child ``n`` is the ``n``-th."""


def parent(pid: str = "P-doc:s1") -> Document:
    return Document(
        "".join(PARAGRAPHS),
        metadata={
            keys.PARENT_ID: pid,
            keys.DOC_ID: "doc",
            keys.HEADINGS: "Methods Cells",
            keys.START_INDEX: OFFSET,
        },
    )


def child(n: int) -> dict[str, object]:
    return {
        keys.CHUNK_ID: f"C-doc:s1-{n}",
        keys.PARENT_ID: "P-doc:s1",
        keys.START_INDEX: OFFSET + 10 * n,
        keys.END_INDEX: OFFSET + 10 * n + 10,
        keys.SECTION_PATH: ["Méthodes", "Animals"],
    }


def unit_rows(count: int, seed: int, dimension: int = DIMENSION) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def as_stored(vectors: np.ndarray) -> np.ndarray:
    """What a record of layout 3 gives back of float32 vectors: their float16 roundings."""
    return vectors.astype(np.float16).astype(np.float32)


@pytest.mark.parametrize("children", [0, 1, 3])
def test_a_record_decodes_to_what_was_encoded(children: int) -> None:
    record = section_of(
        parent(), unit_rows(1, 0)[0], [child(n) for n in range(children)], unit_rows(children, 1)
    )
    back = decode(encode(record))
    assert (back.parent_id, back.doc_id, back.headings) == ("P-doc:s1", "doc", "Methods Cells")
    assert back.child_count == children
    assert back.children == record.children
    assert back.vector.dtype == back.child_vectors.dtype == np.float32
    assert np.array_equal(back.vector, as_stored(record.vector))
    assert back.child_vectors.shape == (children, DIMENSION)
    assert np.array_equal(back.child_vectors, as_stored(record.child_vectors))
    assert back.child_terms == record.child_terms
    assert back.child_terms is not None
    assert len(back.child_terms) == children


def test_a_stored_vectors_cosines_stay_within_a_thousandth_of_the_given_ones() -> None:
    """Layout 3 keeps vectors as float16: scores from them move by less than 1e-3."""
    given = unit_rows(201, 2, dimension=384)
    record = section_of(parent(), given[0], [child(n % 3) for n in range(200)], given[1:])
    back = decode(encode(record))
    query = unit_rows(1, 3, dimension=384)[0]
    exact = given[1:] @ query
    assert np.abs(back.child_vectors @ query - exact).max() < 1e-3
    assert np.abs(back.vector @ query - given[0] @ query) < 1e-3
    assert np.abs(back.child_vectors @ back.vector - given[1:] @ given[0]).max() < 1e-3


def test_a_record_of_a_later_layout_is_refused_not_misread() -> None:
    raw = bytearray(encode(section_of(parent(), unit_rows(1, 0)[0], [child(0)], unit_rows(1, 1))))
    struct.pack_into("<I", raw, 4, LAYOUT + 1)
    for kind in ({}, {"children": False}):
        with pytest.raises(ValueError, match=rf"layout {LAYOUT + 1}, .*upgrade the package"):
            decode(bytes(raw), **kind)
    with pytest.raises(ValueError, match=rf"layout {LAYOUT + 1}"):
        parent_copy(bytes(raw))


def test_a_record_keeps_each_childs_terms_from_its_heading_path_and_text() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(0), child(2)], unit_rows(2, 1))
    back = decode(encode(record))
    assert back.child_terms == [" m  thode  animal  cell  grow ", " m  thode  animal  rat "]
    assert back.child_terms == [
        searchable(" ".join(child_terms(child(n), PARAGRAPHS[n]))) for n in (0, 2)
    ]


def unpacked(record: bytes) -> tuple[dict[str, Any], int, bytes]:
    """A layout-1 record's JSON header, its children's JSON size, and all that follows it."""
    header_size, children_size = struct.unpack_from("<II", record)
    return json.loads(record[8 : 8 + header_size]), children_size, record[8 + header_size :]


def packed(header: dict[str, Any], children_size: int, rest: bytes) -> bytes:
    """The inverse of :func:`unpacked`."""
    raw_header = json.dumps(header).encode()
    return struct.pack("<II", len(raw_header), children_size) + raw_header + rest


def without_parent(record: bytes) -> bytes:
    """The same record as written before records held their parent."""
    header, children_size, rest = unpacked(record)
    parent = sum(header.pop("parent"))
    return packed(header, children_size, rest[:children_size] + rest[children_size + parent :])


def older_layout(record: bytes) -> bytes:
    """The same record as written before children's terms were kept (no rule, no terms)."""
    header, children_size, rest = unpacked(without_parent(record))
    del header["terms_rule"]
    vectors = 4 * (1 + header["child_count"]) * DIMENSION
    return packed(header, children_size, rest[: children_size + vectors])


def test_a_record_kept_before_terms_were_is_read_and_its_children_listed_from_their_text() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(0), child(1)], unit_rows(2, 1))
    back = decode(older_layout(encode_layout_1(record)))
    assert back.child_terms is None
    assert back.children == record.children
    assert np.array_equal(back.child_vectors, record.child_vectors)
    rows = ChildRows(
        ["C-doc:s1-0", "C-doc:s1-1"], list(PARAGRAPHS[:2]), back.children, back.child_vectors
    )
    assert rows.bm25_terms == record.child_terms


def test_terms_kept_under_other_rules_are_not_read() -> None:
    section = section_of(parent(), unit_rows(1, 0)[0], [child(0)], unit_rows(1, 1))
    header, children_size, rest = unpacked(encode_layout_1(section))
    header["terms_rule"] += 1
    assert decode(packed(header, children_size, rest)).child_terms is None
    fields = list(struct.unpack_from("<12I", encode(section)))
    assert fields[:2] == [0xFFFFFFFF, 3]  # the mark, then the layout's number
    fields[4] += 1  # the terms' rule
    assert decode(struct.pack("<12I", *fields) + encode(section)[48:]).child_terms is None


@pytest.mark.parametrize("children", [0, 1, 3])
@pytest.mark.parametrize("older", [encode_layout_1, encode_layout_2])
def test_a_record_of_layout_1_or_2_reads_as_its_layout_3_twin(older: Any, children: int) -> None:
    """What format 6 and earlier wrote reads as what this release writes, in every kind of read
    (of vectors that float16 holds exactly)."""
    record = section_of(
        parent(),
        as_stored(unit_rows(1, 0)[0]),
        [child(n) for n in range(children)],
        as_stored(unit_rows(children, 1)),
    )
    old, new = older(record), encode(record)
    assert not old.startswith(new[:8])
    if older is encode_layout_2:  # the same bytes, but two for each number of a vector
        assert len(old) - len(new) == 2 * (1 + children) * DIMENSION
    for kind in ({}, {"children": False}, {"parent": False}):
        a, b = decode(old, **kind), decode(new, **kind)
        assert (a.parent_id, a.doc_id, a.headings, a.child_count, a.children, a.parent) == (
            b.parent_id,
            b.doc_id,
            b.headings,
            b.child_count,
            b.children,
            b.parent,
        )
        assert a.child_terms == b.child_terms
        assert np.array_equal(a.vector, b.vector)
        assert np.array_equal(a.child_vectors, b.child_vectors)
    assert parent_copy(old) == parent_copy(new) == record.parent


def test_childrens_metadata_stored_by_column_comes_back_as_given() -> None:
    """A value is shared by all children only if each has it, of the same type, in one order."""
    same = [child(0), child(1), child(2)]
    typed = [{**child(0), "x": 1}, {**child(1), "x": True}, {**child(2), "x": 1.0}]
    reordered = [child(0), dict(reversed(child(1).items()))]
    missing = [child(0), {k: v for k, v in child(1).items() if k != keys.SECTION_PATH}]
    for given in (same, typed, reordered, missing):
        record = section_of(parent(), unit_rows(1, 0)[0], given, unit_rows(len(given), 1))
        back = decode(encode(record)).children
        assert back == given
        assert [list(own.items()) for own in back] == [list(own.items()) for own in given]
        assert [[type(v) for v in own.values()] for own in back] == [
            [type(v) for v in own.values()] for own in given
        ]


def test_a_header_read_reads_nothing_after_the_parents_vector() -> None:
    """Candidates' headers are read without the JSON that follows the vectors."""
    record = section_of(parent(), unit_rows(1, 0)[0], [child(1), child(2)], unit_rows(2, 1))
    raw = encode(record)
    vectors_end = raw.index(record.child_vectors.astype("<f2").tobytes()) + 2 * 2 * DIMENSION
    light = decode(raw[:vectors_end] + b"not json" * 40, children=False)
    assert (light.parent_id, light.doc_id, light.headings) == ("P-doc:s1", "doc", "Methods Cells")
    assert np.array_equal(light.vector, as_stored(record.vector))
    with pytest.raises(UnicodeDecodeError):
        decode(raw[:vectors_end] + b"\xff" * 40)


def test_a_record_without_its_parent_or_terms_is_not_written() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(0)], unit_rows(1, 1))
    for lacking in ({"parent": None}, {"child_terms": None}):
        with pytest.raises(ValueError, match=r"'P-doc:s1' lacks its parent or its children"):
            encode(replace(record, **lacking))


def test_a_header_read_skips_the_children_but_keeps_their_count() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(1), child(2)], unit_rows(2, 1))
    light = decode(encode(record), children=False)
    assert (light.child_count, light.children, light.child_vectors.shape) == (2, [], (0, 4))
    assert light.parent is None
    assert np.array_equal(light.vector, as_stored(record.vector))


def test_a_read_for_scoring_alone_skips_the_parents_copy() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(1), child(2)], unit_rows(2, 1))
    scored = decode(encode(record), parent=False)
    assert scored.parent is None
    assert (scored.children, scored.child_terms) == (record.children, record.child_terms)
    assert np.array_equal(scored.child_vectors, as_stored(record.child_vectors))


@pytest.mark.parametrize("text", ["".join(PARAGRAPHS), 'Zellen wachsen \ud800 \u00e9\n"quoted"'])
def test_a_record_holds_its_parent_as_given(text: str) -> None:
    given = parent()
    given = Document(text, id="parent-doc", metadata={**given.metadata, "year": 2024, "x": None})
    record = encode(section_of(given, unit_rows(1, 0)[0], [child(0)], unit_rows(1, 1)))
    back = decode(record)
    assert back.parent is not None
    assert (back.parent.id, back.parent.page_content) == ("parent-doc", text)
    assert back.parent.metadata == given.metadata
    assert parent_copy(record) == back.parent  # what verify reads of a record
    assert np.array_equal(back.child_vectors, as_stored(unit_rows(1, 1)))
    assert back.children == [child(0)]


def test_a_record_written_before_records_held_their_parent_is_read_without_it() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(0), child(1)], unit_rows(2, 1))
    back = decode(without_parent(encode_layout_1(record)))
    assert back.parent is None
    assert parent_copy(without_parent(encode_layout_1(record))) is None
    assert back.children == record.children
    assert back.child_terms == record.child_terms
    assert np.array_equal(back.child_vectors, record.child_vectors)


def test_the_store_returns_records_in_the_order_asked_and_forgets_deleted_ones() -> None:
    store = SectionStore(InMemoryByteStore())
    store.put(
        [
            section_of(parent(p), unit_rows(1, n)[0], [], unit_rows(0, n))
            for n, p in enumerate(["P-a", "P-b"])
        ]
    )
    assert list(store.get(["P-b", "P-missing", "P-a"])) == ["P-b", "P-a"]
    store.delete(["P-a", "P-unknown"])
    assert store.parent_ids() == {"P-b"}


def test_a_saved_version_comes_back_with_its_manifest_and_records_in_order() -> None:
    undo = UndoStore(InMemoryByteStore())
    records = [
        section_of(parent(p), unit_rows(1, n)[0], [child(m) for m in range(n)], unit_rows(n, n))
        for n, p in enumerate(["P-b", "P-a", "P-c"])
    ]
    manifest = {"status": "complete", "hash": "h1", "parents": ["P-b", "P-a", "P-c"]}
    undo.save([("doc", SavedVersion(manifest, records)), ("other", SavedVersion(manifest, []))])
    back = undo.get(["missing", "doc"])
    assert list(back) == ["doc"]
    assert back["doc"].manifest == manifest
    assert [r.parent_id for r in back["doc"].sections] == ["P-b", "P-a", "P-c"]
    for got, want in zip(back["doc"].sections, records, strict=True):
        assert got.children == want.children
        assert got.child_terms == want.child_terms
        assert np.array_equal(got.child_vectors, want.child_vectors)
        assert got.parent is not None
        assert want.parent is not None
        assert (got.parent.page_content, got.parent.metadata) == (
            want.parent.page_content,
            want.parent.metadata,
        )
    undo.forget(["doc", "unknown"])
    assert undo.doc_ids() == ["other"]


def test_a_kept_section_holds_its_own_vectors() -> None:
    """What the read cache keeps of an opened section does not keep the record's bytes alive:
    its vectors are a copy, not a view of them."""
    store = SectionStore(InMemoryByteStore())
    first = section_of(parent("P-a"), unit_rows(1, 0)[0], [child(0), child(2)], unit_rows(2, 1))
    store.put([first])
    docs = {"P-a": parent("P-a")}
    reads = SectionReads(
        Journal(InMemoryByteStore()),
        store,
        lambda ids: [docs.get(p) for p in ids],
        cached_sections=4,
    )
    opened = reads._read(["P-a"])  # what the read cache is given to keep
    assert opened["P-a"].vectors.base is None
    assert opened["P-a"].texts == [PARAGRAPHS[0], PARAGRAPHS[2]]
    assert np.array_equal(opened["P-a"].vectors, as_stored(first.child_vectors))
    assert opened["P-a"].bm25_terms == first.child_terms


def test_an_opened_section_reads_the_docstore_only_for_records_without_their_parent() -> None:
    def dated(pid: str) -> Document:
        given = parent(pid)
        return Document(given.page_content, metadata={**given.metadata, "year": 2024})

    raw = InMemoryByteStore()
    store = SectionStore(raw)
    sections = {
        p: section_of(dated(p), unit_rows(1, n)[0], [child(0), child(1)], unit_rows(2, n))
        for n, p in enumerate(["P-a", "P-b"])
    }
    store.put(list(sections.values()))
    raw.mset([("P-b", without_parent(encode_layout_1(sections["P-b"])))])  # as format 4 wrote
    asked: list[list[str]] = []

    def read_parents(ids: list[str]) -> list[Document | None]:
        asked.append(ids)
        return [dated(p) for p in ids]

    reads = SectionReads(Journal(InMemoryByteStore()), store, read_parents, cached_sections=0)
    opened = reads._read(["P-a", "P-b"])
    assert asked == [["P-b"]]
    assert list(opened) == ["P-a", "P-b"]
    for pid, rows in opened.items():
        assert rows.texts == list(PARAGRAPHS[:2])
        assert rows.parents[pid].metadata == dated(pid).metadata
        assert rows.metadatas[0] == {"year": 2024, **child(0)}


def stamped_reads() -> tuple[SectionReads, SectionStore, Journal, list[int]]:
    """Reads of one record, with the journal's stamp reads counted in the list returned."""
    store = SectionStore(InMemoryByteStore())
    store.put([section_of(parent("P-a"), unit_rows(1, 0)[0], [child(0)], unit_rows(1, 1))])
    journal = Journal(InMemoryByteStore())
    journal.put_stamp(Stamp(seq=2))
    stamp_reads = [0]
    read_stamp = journal.stamp

    def counted() -> Stamp:
        stamp_reads[0] += 1
        return read_stamp()

    journal.stamp = counted  # type: ignore[method-assign]
    reads = SectionReads(journal, store, lambda ids: [None] * len(ids), cached_sections=4)
    return reads, store, journal, stamp_reads


def test_opening_sections_after_the_filter_check_reads_one_stamp() -> None:
    """The stamp the query's filter check saw is the read's "before": one stamp read, not two."""
    reads, _, journal, stamp_reads = stamped_reads()
    reads.observe(journal.stamp())  # what the filter check does
    stamp_reads[0] = 0
    assert reads.children_of(["P-a"]).texts == [PARAGRAPHS[0]]
    assert stamp_reads[0] == 1
    assert reads.children_of(["P-a"]).texts == [PARAGRAPHS[0]]  # kept: checked by one read
    assert stamp_reads[0] == 2


def test_a_kept_section_is_not_served_once_a_write_moved_the_stamp_since_it_was_seen() -> None:
    """Sections kept at the stamp last seen are checked against the journal, not trusted."""
    reads, store, journal, _ = stamped_reads()
    reads.observe(journal.stamp())
    assert reads.children_of(["P-a"]).texts == [PARAGRAPHS[0]]
    moved = section_of(parent("P-a"), unit_rows(1, 0)[0], [child(1)], unit_rows(1, 1))
    store.put([moved])  # another process's write, unseen by this one
    journal.put_stamp(Stamp(seq=4))
    assert reads.children_of(["P-a"]).texts == [PARAGRAPHS[1]]


def test_opened_sections_carry_each_childs_number_of_terms() -> None:
    """Counted once per opened section, and kept with it, not on every query's scoring."""
    store = SectionStore(InMemoryByteStore())
    store.put(
        [
            section_of(parent(p), unit_rows(1, n)[0], [child(0), child(2)], unit_rows(2, n))
            for n, p in enumerate(["P-a", "P-b"])
        ]
    )
    reads = SectionReads(
        Journal(InMemoryByteStore()), store, lambda ids: [None] * len(ids), cached_sections=4
    )
    rows = reads.children_of(["P-b", "P-a"])
    assert rows.lengths is not None
    assert rows.lengths.tolist() == [len(t.split()) for t in rows.bm25_terms]
    assert rows.lengths.tolist() == [5, 4, 5, 4]  # "m thode animal cell grow", "... rat"
