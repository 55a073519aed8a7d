"""All 281 QASPER dev papers, rendered to Markdown, split into parents and children."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.keys import (
    CHUNK_ID,
    END_INDEX,
    PARENT_ID,
    SECTION_PATH,
    START_INDEX,
)
from langchain_gated_parent.splitters import ParagraphSplitter, ParentChildSplit, split_document

QASPER = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "qasper" / "dev.jsonl"
PAPERS_IN_DEV = 281


def qasper_markdown(paper: dict[str, Any]) -> tuple[str, list[tuple[list[str], str]]]:
    """Render a QASPER paper to Markdown; return it and its (heading path, paragraph) pairs.

    A title ``A ::: B`` is a heading ``## B`` under ``# A`` (depth = number of parts); an
    ancestor heading the paper does not list itself is written once, without paragraphs.
    Paragraphs have their whitespace collapsed to one line, and a leading ``#`` or fence
    marker is backslash-escaped, so each stays exactly one Markdown paragraph.
    """
    blocks: list[str] = []
    expected: list[tuple[list[str], str]] = []
    open_path: list[str] = []
    for section in paper["sections"]:
        path = [" ".join(part.split()) for part in section["title"].split(" ::: ")]
        blocks.extend(
            f"{'#' * (depth + 1)} {path[depth]}"
            for depth in range(len(path))
            if depth == len(path) - 1 or open_path[: depth + 1] != path[: depth + 1]
        )
        open_path = path
        for paragraph in section["paragraphs"]:
            text = " ".join(paragraph.split())
            if text.startswith(("#", "```", "~~~")):
                text = "\\" + text
            blocks.append(text)
            expected.append((path, text))
    return "\n\n".join(blocks), expected


@pytest.fixture(scope="module")
def papers() -> list[dict[str, Any]]:
    if not QASPER.is_file():
        pytest.skip(f"QASPER dev split not found at {QASPER}; see shared/data/qasper/README.md")
    with QASPER.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _check(split: ParentChildSplit) -> None:
    parents = {p.metadata[PARENT_ID]: p for p in split.parents}
    assert len(parents) == len(split.parents)
    assert len({c.metadata[CHUNK_ID] for c in split.children}) == len(split.children)
    for doc in [*split.parents, *split.children]:
        assert split.text[doc.metadata[START_INDEX] : doc.metadata[END_INDEX]] == doc.page_content
    for child in split.children:
        parent = parents[child.metadata[PARENT_ID]]
        assert parent.metadata[START_INDEX] <= child.metadata[START_INDEX]
        assert child.metadata[END_INDEX] <= parent.metadata[END_INDEX]
        prefix = parent.metadata[SECTION_PATH]
        assert child.metadata[SECTION_PATH][: len(prefix)] == prefix


def test_every_paragraph_is_one_child_in_its_sections_parent(papers: list[dict[str, Any]]) -> None:
    assert len(papers) == PAPERS_IN_DEV
    child_splitter = ParagraphSplitter(min_child_tokens=0, max_child_tokens=None)
    elapsed = 0.0
    for paper in papers:
        markdown, expected = qasper_markdown(paper)
        document = Document(markdown, metadata={"doc_id": paper["doc_id"], keys.FORMAT: "markdown"})
        started = time.perf_counter()
        split = split_document(document, child_splitter=child_splitter)
        elapsed += time.perf_counter() - started
        assert [(c.metadata[SECTION_PATH], c.page_content) for c in split.children] == expected
        _check(split)
    print(f"\nsplit {len(papers)} QASPER papers at paragraph level in {elapsed:.2f} s")  # noqa: T201


def test_default_splitters_on_all_papers(papers: list[dict[str, Any]]) -> None:
    started = time.perf_counter()
    splits = []
    for paper in papers:
        markdown, _ = qasper_markdown(paper)
        splits.append(split_document(Document(markdown, metadata={"doc_id": paper["doc_id"]})))
    elapsed = time.perf_counter() - started
    for split in splits:
        _check(split)
        assert all(
            c.metadata[keys.TOKENS] <= 512 or "." not in c.page_content for c in split.children
        )
    parents = sum(len(split.parents) for split in splits)
    children = sum(len(split.children) for split in splits)
    print(  # noqa: T201
        f"\nsplit {len(papers)} QASPER papers with default splitters in {elapsed:.2f} s: "
        f"{parents} parents, {children} children"
    )
