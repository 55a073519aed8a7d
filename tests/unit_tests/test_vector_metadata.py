"""Vector metadata holds what a filter can name: the parent and document ids, the user's scalars."""

from __future__ import annotations

from langchain_gated_parent import keys
from langchain_gated_parent.stores.chroma import to_chroma


def test_a_parent_vector_keeps_its_ids_and_the_users_scalars_only() -> None:
    metadata = {
        keys.DOC_ID: "P-1",
        keys.PARENT_ID: "P-P-1:s1",
        keys.SECTION_PATH: ["Methods"],
        keys.LEVEL: 1,
        keys.START_INDEX: 10,
        keys.CHILD_COUNT: 3,
        keys.HEADINGS: "Methods",
        "title": "A paper",
        "year": 2024,
        "reviewed": True,
        "score": 0.5,
        "authors": ["A", "B"],
        "missing": None,
    }
    assert to_chroma(metadata) == {
        keys.PARENT_ID: "P-P-1:s1",
        keys.DOC_ID: "P-1",
        "title": "A paper",
        "year": 2024,
        "reviewed": True,
        "score": 0.5,
    }


def test_a_child_vector_names_its_parent_and_document() -> None:
    own = {
        keys.DOC_ID: "P-1",
        keys.CHUNK_ID: "C-P-1:s1-2",
        keys.PARENT_ID: "P-P-1:s1",
        keys.SECTION_PATH: ["Methods"],
        keys.START_INDEX: 10,
        keys.END_INDEX: 40,
        keys.TOKENS: 9,
    }
    assert to_chroma(own) == {keys.PARENT_ID: "P-P-1:s1", keys.DOC_ID: "P-1"}
