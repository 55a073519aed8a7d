"""Section parents and paragraph children: contract, spans, ids, sizes and configuration."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_gated_parent import keys
from langchain_gated_parent.keys import (
    CHUNK_ID,
    DOC_ID,
    END_INDEX,
    LEVEL,
    PARENT_ID,
    SECTION_ID,
    SECTION_PATH,
    START_INDEX,
    TITLE,
    TOKENS,
)
from langchain_gated_parent.sections import parse_document
from langchain_gated_parent.splitters import (
    ChildChunkLevel,
    ParagraphSplitter,
    ParentChildSplit,
    ParentChunkLevel,
    SectionSplitter,
    split_document,
)
from langchain_gated_parent.tokens import token_counter

CONTRACT: dict[str, Any] = {
    "doc_id": "P-GAPDH-01",
    "sections": [
        {
            "id": "S-methods",
            "title": "Methods",
            "paras": ["20 nM siRNA targeting GAPDH", "48 h before RNA extraction"],
        }
    ],
}

SENTENCES = " ".join(f"Sentence number {n} says something about cells." for n in range(40))
LONG_MD = (
    "Preamble here.\n\n# Big\n\n"
    + "\n\n".join(f"Paragraph {n} has a handful of words in it." for n in range(30))
    + "\n\n## Inner\n\nInner text.\n\n# Small\n\nTiny."
)
count = token_counter("cl100k_base")


def spans_ok(split: ParentChildSplit) -> None:
    for doc in [*split.parents, *split.children]:
        assert split.text[doc.metadata[START_INDEX] : doc.metadata[END_INDEX]] == doc.page_content
        assert doc.metadata[TOKENS] == count(doc.page_content)


def test_contract_example() -> None:
    split = split_document(Document(json.dumps(CONTRACT)))
    assert split.doc_id == "P-GAPDH-01"
    assert [p.metadata[PARENT_ID] for p in split.parents] == ["P-S-methods"]
    assert [(c.metadata[CHUNK_ID], c.page_content) for c in split.children] == [
        ("C-S-methods-1", "20 nM siRNA targeting GAPDH"),
        ("C-S-methods-2", "48 h before RNA extraction"),
    ]
    parent = split.parents[0]
    assert parent.page_content == split.text
    assert parent.metadata == {
        DOC_ID: "P-GAPDH-01",
        PARENT_ID: "P-S-methods",
        SECTION_ID: "S-methods",
        SECTION_PATH: ["Methods"],
        LEVEL: 1,
        START_INDEX: 0,
        END_INDEX: len(split.text),
        TOKENS: count(split.text),
    }
    child = split.children[0]
    assert child.metadata[TOKENS] == 8  # real cl100k count, offline
    assert child.metadata[PARENT_ID] == "P-S-methods"
    assert child.metadata[SECTION_PATH] == ["Methods"]
    spans_ok(split)


def test_splitters_are_text_splitters_and_split_text_returns_strings() -> None:
    for splitter in (SectionSplitter(), ParagraphSplitter()):
        assert isinstance(splitter, TextSplitter)
    assert SectionSplitter().split_text("# A\n\nOne.\n\n# B\n\nTwo.") == [
        "# A\n\nOne.",
        "# B\n\nTwo.",
    ]
    assert ParagraphSplitter().split_text("# A\n\nOne.\n\nTwo.") == ["One.", "Two."]


def test_create_documents_carries_metadata_and_title() -> None:
    metadata = {"doc_id": "d1", "source": "a.md", "title": "Doc", "tags": ["x"]}
    parents = SectionSplitter().create_documents(["# A\n\nOne."], [metadata])
    children = ParagraphSplitter().create_documents(["# A\n\nOne."], [metadata])
    assert parents[0].metadata[PARENT_ID] == "P-d1:s0"
    assert parents[0].metadata["source"] == "a.md"
    assert parents[0].metadata[TITLE] == "Doc"
    assert children[0].metadata[CHUNK_ID] == "C-d1:s0-1"
    assert children[0].metadata[PARENT_ID] == "P-d1:s0"
    assert children[0].metadata[TITLE] == "Doc"
    children[0].metadata["tags"].append("y")
    assert metadata["tags"] == ["x"]
    with pytest.raises(ValueError, match="zip"):
        SectionSplitter().create_documents(["a", "b"], [{}])


def test_no_two_documents_share_a_mutable_metadata_value() -> None:
    nested = Document("# A\n\nOne.\n\nTwo.", metadata={"doc_id": "d", "tags": ["x"], "n": 1})
    split = split_document(nested)
    documents = [*split.parents, *split.children]
    assert len({id(d.metadata["tags"]) for d in documents}) == len(documents) == 3
    split.children[0].metadata["tags"].append("y")
    assert [documents[0].metadata["tags"], documents[2].metadata["tags"]] == [["x"], ["x"]]
    scalars = split_document(Document("# A\n\nOne.", metadata={"doc_id": "d", "n": 1}))
    assert [c.metadata["n"] for c in scalars.children] == [1]


def test_split_documents_matches_split_document() -> None:
    docs = [Document(LONG_MD, metadata={"doc_id": "m"}), Document(json.dumps(CONTRACT))]
    parents = SectionSplitter().split_documents(docs)
    children = ParagraphSplitter().split_documents(docs)
    splits = [split_document(doc) for doc in docs]
    assert parents == [p for split in splits for p in split.parents]
    assert children == [c for split in splits for c in split.children]


def test_section_level_folds_subsections() -> None:
    split = split_document(Document(LONG_MD, metadata={"doc_id": "m"}))
    ids = [p.metadata[PARENT_ID] for p in split.parents]
    assert ids == ["P-m:s0", "P-m:s1", "P-m:s3"]
    assert split.parents[1].page_content.startswith("# Big")
    assert split.parents[1].page_content.endswith("## Inner\n\nInner text.")
    inner = next(c for c in split.children if c.page_content == "Inner text.")
    assert inner.metadata[PARENT_ID] == "P-m:s1"
    assert inner.metadata[SECTION_PATH] == ["Big", "Inner"]
    assert inner.metadata[SECTION_ID] == "m:s2"
    assert inner.metadata[CHUNK_ID] == "C-m:s1-31"
    assert split.parents[0].metadata[LEVEL] == 0
    assert split.parents[0].metadata[SECTION_PATH] == []
    spans_ok(split)


def test_subsection_level() -> None:
    text = "# A\n\n## A1\n\nx.\n\n## A2\n\ny.\n\n### A2a\n\n# B\n\nb."
    split = split_document(
        Document(text, metadata={"doc_id": "d"}),
        parent_splitter=SectionSplitter(parent_chunk_level="subsection"),
    )
    # A has no paragraphs of its own and has subsections: not a parent; A2a is a leaf heading.
    assert [p.page_content for p in split.parents] == [
        "## A1\n\nx.",
        "## A2\n\ny.",
        "### A2a",
        "# B\n\nb.",
    ]
    assert [p.metadata[SECTION_PATH] for p in split.parents] == [
        ["A", "A1"],
        ["A", "A2"],
        ["A", "A2", "A2a"],
        ["B"],
    ]
    assert [c.metadata[PARENT_ID] for c in split.children] == ["P-d:s1", "P-d:s2", "P-d:s4"]
    spans_ok(split)


def test_max_parent_tokens_cuts_into_parts() -> None:
    doc = Document(LONG_MD, metadata={"doc_id": "m"})
    tree = parse_document(doc)
    split = split_document(
        doc,
        parent_splitter=SectionSplitter(max_parent_tokens=60),
        child_splitter=ParagraphSplitter(max_child_tokens=None),
    )
    big = [p for p in split.parents if p.metadata[SECTION_ID] == "m:s1"]
    assert len(big) > 2
    assert [p.metadata[PARENT_ID] for p in big] == [
        f"P-m:s1-part{n}" for n in range(1, len(big) + 1)
    ]
    assert all(p.metadata[TOKENS] <= 60 for p in big)
    assert big[0].page_content.startswith("# Big\n\nParagraph 0")
    assert big[1].page_content.startswith("Paragraph")
    assert big[-1].page_content.endswith("## Inner\n\nInner text.")
    # Parts tile the section: consecutive, nothing lost, nothing repeated.
    for before, after in pairwise(big):
        assert split.text[before.metadata[END_INDEX] : after.metadata[START_INDEX]] == "\n\n"
    all_paragraphs = [span for section in tree.sections for span in section.paragraphs]
    for start, end in all_paragraphs:
        holders = [
            p
            for p in split.parents
            if p.metadata[START_INDEX] <= start and end <= p.metadata[END_INDEX]
        ]
        assert len(holders) == 1
    assert [
        (c.metadata[START_INDEX], c.metadata[END_INDEX]) for c in split.children
    ] == all_paragraphs
    second = [c for c in split.children if c.metadata[PARENT_ID] == "P-m:s1-part2"]
    assert [c.metadata[CHUNK_ID] for c in second] == [
        f"C-m:s1-part2-{n}" for n in range(1, len(second) + 1)
    ]
    spans_ok(split)


def test_part_keeps_subsection_heading_with_its_text() -> None:
    text = "# A\n\n" + "word " * 50 + "\n\n## B\n\n" + "more " * 50
    split = split_document(
        Document(text, metadata={"doc_id": "d"}),
        parent_splitter=SectionSplitter(max_parent_tokens=60),
        child_splitter=ParagraphSplitter(max_child_tokens=None),
    )
    assert [p.page_content.split("\n")[0] for p in split.parents] == ["# A", "## B"]
    spans_ok(split)


def test_single_oversized_paragraph_stays_whole_parent() -> None:
    text = "# A\n\n" + SENTENCES + "\n\nshort."
    split = split_document(
        Document(text, metadata={"doc_id": "d"}),
        parent_splitter=SectionSplitter(max_parent_tokens=50),
        child_splitter=ParagraphSplitter(max_child_tokens=20),
    )
    assert [p.page_content for p in split.parents] == [f"# A\n\n{SENTENCES}", "short."]
    assert [p.metadata[PARENT_ID] for p in split.parents] == ["P-d:s0-part1", "P-d:s0-part2"]
    spans_ok(split)


def test_unlimited_parent() -> None:
    split = split_document(
        Document(LONG_MD, metadata={"doc_id": "m"}),
        parent_splitter=SectionSplitter(max_parent_tokens=None),
    )
    assert len(split.parents) == 3


def test_max_child_cuts_at_sentence_boundaries() -> None:
    split = split_document(
        Document("# A\n\n" + SENTENCES, metadata={"doc_id": "d"}),
        child_splitter=ParagraphSplitter(max_child_tokens=30),
    )
    assert len(split.children) > 3
    for child in split.children:
        assert child.metadata[TOKENS] <= 30
        assert child.page_content.startswith("Sentence number")
        assert child.page_content.endswith("cells.")
    joined = " ".join(c.page_content for c in split.children)
    assert joined == SENTENCES
    spans_ok(split)


def test_child_overlap_repeats_trailing_sentences() -> None:
    split = split_document(
        Document("# A\n\n" + SENTENCES, metadata={"doc_id": "d"}),
        child_splitter=ParagraphSplitter(max_child_tokens=30, child_overlap_tokens=10),
    )
    children = split.children
    for before, after in pairwise(children):
        assert after.metadata[START_INDEX] < before.metadata[END_INDEX]
        assert after.metadata[START_INDEX] > before.metadata[START_INDEX]
        assert after.metadata[TOKENS] <= 30
    assert children[-1].page_content.endswith("number 39 says something about cells.")
    spans_ok(split)


def test_too_long_sentence_cut_at_words() -> None:
    words = " ".join(f"w{n}" for n in range(200))
    split = split_document(
        Document("# A\n\n" + words, metadata={"doc_id": "d"}),
        child_splitter=ParagraphSplitter(max_child_tokens=25),
    )
    assert len(split.children) > 3
    assert " ".join(c.page_content for c in split.children) == words
    assert all(c.metadata[TOKENS] <= 25 for c in split.children)


def test_sentence_level_children() -> None:
    text = "# A\n\nFirst one. Second, e.g. this one! Third? Fig. 2 shows it.\n\nNew para."
    splitter = ParagraphSplitter(child_chunk_level="sentence")
    assert splitter.split_text(text) == [
        "First one.",
        "Second, e.g. this one!",
        "Third?",
        "Fig. 2 shows it.",
        "New para.",
    ]


def test_min_child_tokens_merges_within_section() -> None:
    text = (
        "# A\n\nTiny.\n\nAlso tiny.\n\n" + "A much longer paragraph with many words " * 3 + "\n\n"
    )
    text += "End.\n\n## B\n\nOther section."
    split = split_document(
        Document(text, metadata={"doc_id": "d"}),
        child_splitter=ParagraphSplitter(min_child_tokens=8),
    )
    contents = [c.page_content for c in split.children]
    assert contents[0].startswith("Tiny.\n\nAlso tiny.\n\nA much longer")
    assert contents[0].endswith("End.")  # trailing small child joins its predecessor
    assert contents[1] == "Other section."  # no merge across sections
    assert [c.metadata[CHUNK_ID] for c in split.children] == ["C-d:s0-1", "C-d:s0-2"]
    spans_ok(split)


def test_min_merge_respects_max() -> None:
    text = "# A\n\n" + "\n\n".join(["One two three four five."] * 6)
    split = split_document(
        Document(text, metadata={"doc_id": "d"}),
        child_splitter=ParagraphSplitter(min_child_tokens=7, max_child_tokens=13),
    )
    assert [c.metadata[TOKENS] for c in split.children] == [12, 12, 12]  # 3 paras would be 18
    spans_ok(split)


def test_length_function_and_encoding_choice() -> None:
    by_chars = SectionSplitter(max_parent_tokens=40, length_function=len)
    parts = by_chars.split_text("# A\n\n" + "\n\n".join(["x" * 15] * 4))
    x15 = "x" * 15
    assert parts == [f"# A\n\n{x15}\n\n{x15}", f"{x15}\n\n{x15}"]  # 37 and 32 characters
    o200k = ParagraphSplitter(encoding_name="o200k_base")
    docs = o200k.create_documents(["# A\n\nhello world"])
    assert docs[0].metadata[TOKENS] == 2
    assert o200k.length_function is token_counter("o200k_base")


def test_sentence_level_and_configuration_properties() -> None:
    parent = SectionSplitter(parent_chunk_level=ParentChunkLevel.SUBSECTION, max_parent_tokens=100)
    child = ParagraphSplitter(
        child_chunk_level="sentence",
        min_child_tokens=2,
        max_child_tokens=50,
        child_overlap_tokens=5,
    )
    assert parent.parent_chunk_level is ParentChunkLevel.SUBSECTION
    assert parent.max_parent_tokens == 100
    assert child.child_chunk_level is ChildChunkLevel.SENTENCE
    assert (child.min_child_tokens, child.max_child_tokens, child.child_overlap_tokens) == (
        2,
        50,
        5,
    )


def test_each_format_splits() -> None:
    html = "<h1>Intro</h1><p>Hello there.</p><h2>Sub</h2><ul><li>item</li></ul>"
    text = "1 Introduction\n\nPlain intro.\n\n2 Methods\n\nPlain methods."
    for doc, expected in [
        (Document(html, metadata={"doc_id": "h"}), ["Hello there.", "item"]),
        (Document(text, metadata={"doc_id": "t"}), ["Plain intro.", "Plain methods."]),
        (Document(LONG_MD, metadata={keys.FORMAT: "markdown", "doc_id": "m"}), None),
        (Document(json.dumps(CONTRACT), metadata={keys.FORMAT: "structured"}), None),
    ]:
        split = split_document(doc)
        spans_ok(split)
        if expected is not None:
            assert [c.page_content for c in split.children] == expected
    html_split = split_document(Document(html, metadata={"doc_id": "h"}))
    assert html_split.text == "# Intro\n\nHello there.\n\n## Sub\n\nitem"
    assert [p.metadata[PARENT_ID] for p in html_split.parents] == ["P-h:s0"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: SectionSplitter(parent_chunk_level="chapter"),
            r"unknown parent_chunk_level 'chapter'; choose one of 'section', 'subsection'",
        ),
        (
            lambda: ParagraphSplitter(child_chunk_level="word"),
            r"unknown child_chunk_level 'word'; choose one of 'paragraph', 'sentence'",
        ),
        (
            lambda: SectionSplitter(max_parent_tokens=0),
            r"max_parent_tokens must be a positive number of tokens or None for no limit, got 0",
        ),
        (lambda: SectionSplitter(max_parent_tokens=-5), r"got -5"),
        (lambda: ParagraphSplitter(max_child_tokens=0), r"max_child_tokens must be a positive"),
        (
            lambda: ParagraphSplitter(min_child_tokens=-1),
            r"min_child_tokens must be 0 \(no merging\) or positive, got -1",
        ),
        (
            lambda: ParagraphSplitter(min_child_tokens=64, max_child_tokens=64),
            r"min_child_tokens \(64\) must be smaller than max_child_tokens \(64\)",
        ),
        (
            lambda: ParagraphSplitter(child_overlap_tokens=-1),
            r"child_overlap_tokens must be 0 or positive, got -1",
        ),
        (
            lambda: ParagraphSplitter(child_overlap_tokens=512),
            r"child_overlap_tokens \(512\) must be smaller than max_child_tokens \(512\)",
        ),
        (
            lambda: ParagraphSplitter(child_overlap_tokens=5, max_child_tokens=None),
            r"child_overlap_tokens \(5\) needs max_child_tokens",
        ),
        (lambda: SectionSplitter(encoding_name="gpt2"), r"unknown encoding 'gpt2'"),
        (lambda: ParagraphSplitter(encoding_name="p50k_base"), r"unknown encoding 'p50k_base'"),
        (
            lambda: split_document(
                Document("# A\n\nx"),
                parent_splitter=SectionSplitter(max_parent_tokens=300),
                child_splitter=ParagraphSplitter(max_child_tokens=400),
            ),
            r"max_child_tokens \(400\) must be smaller than max_parent_tokens \(300\); lower",
        ),
        (
            lambda: split_document(Document("x", metadata={keys.FORMAT: "docx"})),
            r"unknown metadata format 'docx'",
        ),
        (
            lambda: split_document(Document('{"sections": [{"id": "a"}]}')),
            r"sections\[0\]\.title is missing",
        ),
    ],
)
def test_configuration_errors(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


# -- Property test over generated Markdown ----------------------------------------------------

WORD = st.text(alphabet="abcdefgXYZ019.,!?-#*`'\" ", min_size=1, max_size=9)
SENTENCE = st.builds(
    lambda first, rest, end: " ".join([first.capitalize(), *rest]) + end,
    st.sampled_from(["alpha", "beta", "Gamma", "e.g.", "Fig.", "3"]),
    st.lists(WORD, max_size=12),
    st.sampled_from([".", "!", "?", "", ". "]),
)
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=6).map(" ".join)
TITLE_TEXT = st.text(alphabet="abcXYZ 12#", min_size=0, max_size=12)
BLOCK = st.one_of(
    st.builds(lambda level, title: f"{'#' * level} {title}", st.integers(1, 6), TITLE_TEXT),
    st.builds(lambda title, mark: f"T{title}\n{mark * 3}", TITLE_TEXT, st.sampled_from("=-")),
    PARAGRAPH,
    st.lists(PARAGRAPH, min_size=2, max_size=3).map("\n".join),
    st.builds(
        lambda fence, lines: f"{fence}\n" + "\n".join(lines) + f"\n{fence}",
        st.sampled_from(["```", "~~~"]),
        st.lists(st.sampled_from(["# not heading", "", "code()", "  x = 1"]), max_size=4),
    ),
)
MARKDOWN = st.builds(
    lambda lead, blocks, seps, tail: (
        lead + "".join(block + sep for block, sep in zip(blocks, seps, strict=False)) + tail
    ),
    st.sampled_from(["", "\n", "  \n\n"]),
    st.lists(BLOCK, min_size=1, max_size=14),
    st.lists(st.sampled_from(["\n\n", "\n", "\n\n\n", "\r\n\r\n"]), min_size=14, max_size=14),
    st.sampled_from(["", "\n", "   "]),
)
CONFIG = st.fixed_dictionaries(
    {
        "parent_chunk_level": st.sampled_from(["section", "subsection"]),
        "max_parent_tokens": st.sampled_from([None, 24, 60, 2048]),
        "child_chunk_level": st.sampled_from(["paragraph", "sentence"]),
        "max_child_tokens": st.sampled_from([None, 6, 12, 20]),
        "min_child_tokens": st.sampled_from([0, 3]),
        "child_overlap_tokens": st.sampled_from([0, 2]),
    }
)


def _splitters(config: dict[str, Any]) -> tuple[SectionSplitter, ParagraphSplitter]:
    max_child = config["max_child_tokens"]
    parent = SectionSplitter(
        parent_chunk_level=config["parent_chunk_level"],
        max_parent_tokens=config["max_parent_tokens"],
    )
    child = ParagraphSplitter(
        child_chunk_level=config["child_chunk_level"],
        max_child_tokens=max_child,
        min_child_tokens=config["min_child_tokens"] if max_child is not None else 0,
        child_overlap_tokens=config["child_overlap_tokens"] if max_child is not None else 0,
    )
    return parent, child


def _signature(split: ParentChildSplit) -> list[tuple[Any, ...]]:
    return [
        (
            doc.page_content,
            doc.metadata.get(CHUNK_ID),
            doc.metadata[PARENT_ID],
            doc.metadata[START_INDEX],
            doc.metadata[END_INDEX],
        )
        for doc in [*split.parents, *split.children]
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=MARKDOWN, config=CONFIG)
def test_property_spans_ids_determinism(text: str, config: dict[str, Any]) -> None:
    parent_splitter, child_splitter = _splitters(config)
    doc = Document(text, metadata={"doc_id": "gen", keys.FORMAT: "markdown"})
    split = split_document(doc, parent_splitter=parent_splitter, child_splitter=child_splitter)
    again = split_document(doc, parent_splitter=parent_splitter, child_splitter=child_splitter)
    assert _signature(split) == _signature(again)

    for chunk in [*split.parents, *split.children]:
        start, end = chunk.metadata[START_INDEX], chunk.metadata[END_INDEX]
        assert split.text[start:end] == chunk.page_content
        assert chunk.page_content == chunk.page_content.strip()
    parent_ids = [p.metadata[PARENT_ID] for p in split.parents]
    chunk_ids = [c.metadata[CHUNK_ID] for c in split.children]
    assert len(set(parent_ids)) == len(parent_ids)
    assert len(set(chunk_ids)) == len(chunk_ids)

    parents = {p.metadata[PARENT_ID]: p for p in split.parents}
    starts = [c.metadata[START_INDEX] for c in split.children]
    assert starts == sorted(starts)
    for child in split.children:
        parent = parents[child.metadata[PARENT_ID]]
        assert parent.metadata[START_INDEX] <= child.metadata[START_INDEX]
        assert child.metadata[END_INDEX] <= parent.metadata[END_INDEX]  # text cut from parent
        assert (
            child.metadata[SECTION_PATH][: len(parent.metadata[SECTION_PATH])]
            == parent.metadata[SECTION_PATH]
        )

    tree = parse_document(doc)
    for section in tree.sections:
        for start, end in section.paragraphs:
            holders = [
                p
                for p in split.parents
                if p.metadata[START_INDEX] <= start and end <= p.metadata[END_INDEX]
            ]
            assert len(holders) == 1
            covering = [
                c
                for c in split.children
                if c.metadata[START_INDEX] <= start < c.metadata[END_INDEX]
            ]
            assert covering  # every paragraph starts inside some child
