"""A changed document embeds only its new texts: the vectors of the ones it kept are reused.

The embeddings are a fake (``DeterministicFakeEmbedding``, a vector per text) wrapped to record
every text it is asked to embed; Chroma and the SQLite docstore are real, in a temporary folder.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.known_vectors import BatchEmbedding
from langchain_gated_parent.prepare import EmbeddingWork
from langchain_gated_parent.records import Section
from langchain_gated_parent.stores.undo import SavedVersion

if TYPE_CHECKING:
    from pathlib import Path

MANUAL = (
    "# Install\n\nDownload the archive from the mirror.\n\n"
    "Unpack it into a folder of your choice.\n\n"
    "# Configure\n\nSet the cache size in the settings file.\n\n"
    "Restart the service after each change.\n\n"
    "# Run\n\nStart the service with the run command."
)
EDITED = MANUAL.replace("Restart the service after each change.", "Reload the settings instead.")


class RecordingEmbeddings(Embeddings):
    """A fake: ``DeterministicFakeEmbedding``'s vectors, recording each text asked of it."""

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=16)
        self.model_name = "recording-fake"
        self.documents: list[str] = []
        self.queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.inner.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


def manual(text: str, **metadata: str) -> Document:
    return Document(page_content=text, metadata={"doc_id": "manual", **metadata})


def stored_vectors(index: GatedParentIndex) -> dict[str, np.ndarray]:
    """Every vector the index holds, by parent or child id."""
    parents = index.vectors.parents.get(include=["embeddings"])
    children = index.vectors.children.get(include=["embeddings"])
    return {
        i: np.asarray(v, dtype=np.float32)
        for got in (parents, children)
        for i, v in zip(got["ids"], got["embeddings"], strict=True)
    }


def same_vectors(one: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> bool:
    """The same ids, and vectors equal but for float32 rounding (a reused vector is normalized
    again, and a centroid is a mean of vectors rounded once more)."""
    return one.keys() == other.keys() and all(
        np.allclose(one[i], other[i], rtol=0, atol=1e-6) for i in one
    )


NEW_PARAGRAPH = "Reload the settings instead."
NEW_SECTION = (
    "Configure\n\n# Configure\n\nSet the cache size in the settings file.\n\n" + NEW_PARAGRAPH
)
"""The edited section as a ``"text"`` parent is embedded: heading path, then its text."""


@pytest.mark.parametrize(
    ("representation", "asynchronous", "embedded"),
    [
        ("centroid", False, [NEW_PARAGRAPH]),  # a parent's vector is its children's mean
        ("centroid", True, [NEW_PARAGRAPH]),
        ("text", False, [NEW_PARAGRAPH, NEW_SECTION]),
        ("text", True, [NEW_PARAGRAPH, NEW_SECTION]),
    ],
)
def test_an_edited_paragraph_is_the_only_text_embedded_again(
    tmp_path: Path,
    representation: str,
    asynchronous: bool,  # noqa: FBT001 (a parameter of the test)
    embedded: list[str],
) -> None:
    embeddings = RecordingEmbeddings()
    index = GatedParentIndex(
        embeddings, directory=tmp_path / "updated", parent_representation=representation
    )
    index.add_documents([manual(MANUAL)])
    embeddings.documents.clear()

    add = index.aadd_documents if asynchronous else None
    report = asyncio.run(add([manual(EDITED)])) if add else index.add_documents([manual(EDITED)])

    assert embeddings.documents == embedded
    assert report.documents == 1
    texts = report.children + (report.parents if representation == "text" else 0)
    assert report.reused == texts - len(embedded)
    fresh = GatedParentIndex(
        RecordingEmbeddings(), directory=tmp_path / "fresh", parent_representation=representation
    )
    fresh.add_documents([manual(EDITED)])
    assert same_vectors(stored_vectors(index), stored_vectors(fresh))
    ask = "how do I apply a settings change"
    found = index.as_retriever(k=4).invoke(ask)
    expected = fresh.as_retriever(k=4).invoke(ask)
    assert [d.id for d in found] == [d.id for d in expected]
    assert [d.metadata[keys.SCORE] for d in found] == pytest.approx(
        [d.metadata[keys.SCORE] for d in expected], abs=1e-6
    )


def test_a_change_of_metadata_alone_embeds_nothing(tmp_path: Path) -> None:
    embeddings = RecordingEmbeddings()
    index = GatedParentIndex(embeddings, directory=tmp_path)
    index.add_documents([manual(MANUAL, source="old/manual.md")])
    before = stored_vectors(index)
    embeddings.documents.clear()

    report = index.add_documents([manual(MANUAL, source="new/manual.md")])

    assert report.documents == 1
    assert embeddings.documents == []
    assert report.reused == report.children  # parents: their children's mean ("centroid")
    assert same_vectors(stored_vectors(index), before)
    found = index.as_retriever(k=1).invoke("cache size")
    assert found[0].metadata["source"] == "new/manual.md"


def test_a_text_repeated_in_one_write_is_embedded_once(tmp_path: Path) -> None:
    embeddings = RecordingEmbeddings()
    index = GatedParentIndex(embeddings, directory=tmp_path)
    twice = "# A\n\nThe same words.\n\n# B\n\nThe same words."

    index.add_documents([Document(page_content=twice, metadata={"doc_id": "twice"})])

    assert embeddings.documents.count("The same words.") == 1
    children = index.vectors.children.get(include=["embeddings"])["embeddings"]
    assert len(children) == 2
    assert np.allclose(children[0], children[1])


def test_under_centroid_a_childless_section_is_known_by_its_query_text() -> None:
    parent = Document(
        page_content="# Notes",
        metadata={keys.PARENT_ID: "m:s0", keys.SECTION_PATH: ["Notes"], keys.START_INDEX: 0},
    )
    vector = np.ones(4, dtype=np.float32) / 2
    empty = np.empty((0, 4), dtype=np.float32)
    section = Section("m:s0", "m", "Notes", 0, vector, [], empty, [], parent)
    work = EmbeddingWork(children=["New words."], parents=[], queries=["Notes\n\n# Notes"])

    embedding = BatchEmbedding.of(work, [SavedVersion({}, [section])], "centroid")

    assert (embedding.new_texts, embedding.new_queries, embedding.reused) == (["New words."], [], 1)
    children, parents, queries = embedding.vectors([[0.0, 1.0, 0.0, 0.0]], [])
    assert children == [[0.0, 1.0, 0.0, 0.0]]
    assert parents == []
    assert np.array_equal(queries[0], vector)
