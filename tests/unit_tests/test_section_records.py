"""Section records: what a query reads about a parent survives the bytes it is stored as."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryByteStore

from langchain_gated_parent import keys
from langchain_gated_parent.stores.sections import SectionStore, decode, encode, section_of

DIMENSION = 4


def parent(pid: str = "P-doc:s1") -> Document:
    return Document(
        "Methods text.",
        metadata={keys.PARENT_ID: pid, keys.DOC_ID: "doc", keys.HEADINGS: "Methods Cells"},
    )


def child(n: int) -> dict[str, object]:
    return {
        keys.CHUNK_ID: f"C-doc:s1-{n}",
        keys.PARENT_ID: "P-doc:s1",
        keys.START_INDEX: 10 * n,
        keys.END_INDEX: 10 * n + 9,
        keys.SECTION_PATH: ["Méthodes", "Cells"],
    }


def unit_rows(count: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, DIMENSION)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("children", [0, 1, 3])
def test_a_record_decodes_to_what_was_encoded(children: int) -> None:
    record = section_of(
        parent(), unit_rows(1, 0)[0], [child(n) for n in range(children)], unit_rows(children, 1)
    )
    back = decode(encode(record))
    assert (back.parent_id, back.doc_id, back.headings) == ("P-doc:s1", "doc", "Methods Cells")
    assert back.child_count == children
    assert back.children == record.children
    assert np.array_equal(back.vector, record.vector)
    assert back.child_vectors.shape == (children, DIMENSION)
    assert np.array_equal(back.child_vectors, record.child_vectors)


def test_a_header_read_skips_the_children_but_keeps_their_count() -> None:
    record = section_of(parent(), unit_rows(1, 0)[0], [child(1), child(2)], unit_rows(2, 1))
    light = decode(encode(record), children=False)
    assert (light.child_count, light.children, light.child_vectors.shape) == (2, [], (0, 4))
    assert np.array_equal(light.vector, record.vector)


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
