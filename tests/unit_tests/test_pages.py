"""Pages of one source merged into one document, and the warning for documents without headings."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.pages import merge_pages, page_source
from langchain_gated_parent.structure import LONG_WITHOUT_HEADINGS, flat_structure_advice


def page(number, text, source="a.pdf", **metadata):
    return Document(text, metadata={"source": source, "page": number, **metadata})


def nothing_indexed(doc_ids):
    return {}


def test_documents_without_pages_pass_through_untouched():
    documents = [Document("# A\n\ntext", metadata={"doc_id": "x", "page_count": 3})]
    calls = []
    merged = merge_pages(documents, lambda ids: calls.append(ids) or {})
    assert merged.documents == documents
    assert merged.pages == {}
    assert calls == []  # no journal read when nothing is a page


def test_pages_of_one_source_merge_in_page_order_keeping_other_documents_in_place():
    other = Document("# B\n\nother", metadata={"doc_id": "b"})
    documents = [
        page(2, "third", total_pages=3, page_label="iii"),
        other,
        page(0, "first", total_pages=3, page_label="i"),
        page(1, "second", total_pages=3, page_label="ii"),
    ]
    merged = merge_pages(documents, nothing_indexed)
    assert [d.metadata.get(keys.DOC_ID) for d in merged.documents] == ["a.pdf", "b"]
    paged = merged.documents[0]
    assert paged.page_content == "first\n\nsecond\n\nthird"
    assert paged.metadata == {
        keys.FORMAT: "text",
        "source": "a.pdf",
        "total_pages": 3,
        keys.DOC_ID: "a.pdf",
    }
    assert merged.pages == {"a.pdf": {"0": "first", "1": "second", "2": "third"}}


def test_a_later_page_merges_with_the_recorded_ones_and_a_repeated_page_replaces_itself():
    recorded = {"a.pdf": {"0": "first", "2": "third"}}
    asked = []

    def indexed(doc_ids):
        asked.append(doc_ids)
        return {d: recorded[d] for d in doc_ids if d in recorded}

    merged = merge_pages([page(1, "second"), page(2, "third, edited")], indexed)
    assert asked == [["a.pdf"]]
    assert merged.documents[0].page_content == "first\n\nsecond\n\nthird, edited"
    assert merged.pages["a.pdf"] == {"0": "first", "1": "second", "2": "third, edited"}


def test_chunks_of_one_page_are_joined_and_labels_sort_after_numbers():
    documents = [page("x", "appendix"), page(10, "ten"), page(9, "nine a"), page(9, "nine b")]
    merged = merge_pages(documents, nothing_indexed)
    assert merged.documents[0].page_content == "nine a\nnine b\n\nten\n\nappendix"


def test_a_page_needs_a_source_and_the_doc_id_wins_over_it():
    assert page_source(Document("x", metadata={"page": 1})) is None
    assert page_source(Document("x", metadata={"source": "s.pdf"})) is None
    assert page_source(page(0, "x", doc_id="paper-1")) == "paper-1"
    merged = merge_pages([page(0, "x", doc_id="paper-1"), page(1, "y")], nothing_indexed)
    assert [d.metadata[keys.DOC_ID] for d in merged.documents] == ["paper-1", "a.pdf"]


def test_a_format_hint_on_the_pages_is_kept():
    merged = merge_pages([page(0, "# T\n\nx", **{keys.FORMAT: "markdown"})], nothing_indexed)
    assert merged.documents[0].metadata[keys.FORMAT] == "markdown"


@pytest.mark.parametrize(
    ("levels", "length", "source", "expected"),
    [
        ([0], LONG_WITHOUT_HEADINGS, None, "BSHTMLLoader"),
        ([0], LONG_WITHOUT_HEADINGS, "paper.PDF", "GatedParentLoader, which recovers"),
        ([0], LONG_WITHOUT_HEADINGS - 1, None, None),
        ([0, 1], 10 * LONG_WITHOUT_HEADINGS, None, None),
    ],
)
def test_flat_structure_advice(levels, length, source, expected):
    advice = flat_structure_advice("doc", levels, length, source)
    if expected is None:
        assert advice is None
    else:
        assert advice is not None
        assert expected in advice
        assert advice.startswith(f"document 'doc' has no headings ({length} characters")
