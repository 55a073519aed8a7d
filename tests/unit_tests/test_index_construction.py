"""Building an index: what it accepts as ``client``, which settings it records, when it embeds.

The embeddings are fakes (``DeterministicFakeEmbedding`` and a counting wrapper); Chroma and
the SQLite docstore are real, in a temporary folder or in memory.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import chromadb
import pytest
from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from langchain_gated_parent import GatedParentIndex, ParagraphSplitter, SectionSplitter, keys
from langchain_gated_parent.stores.chroma import CHILD_SEARCH_EF, SYNC_THRESHOLD

if TYPE_CHECKING:
    from pathlib import Path

PAPER = Document(
    page_content="# Methods\n\nCells were lysed on ice.\n\n# Results\n\nYield doubled.",
    metadata={"doc_id": "P-1", "lab": "north"},
)
OTHER = Document(
    page_content="# Intro\n\nGlycolysis in yeast.\n\n# Discussion\n\nIt was fast.",
    metadata={"doc_id": "P-2", "lab": "south"},
)


class CountingEmbeddings(Embeddings):
    """A fake that counts every model call (sync and async), to prove which paths embed."""

    def __init__(self, size: int = 16) -> None:
        self.inner = DeterministicFakeEmbedding(size=size)
        self.model_name = "counting-fake"
        self.calls: list[str] = []
        self.on_async_call: Any = None

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append("embed_documents")
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls.append("embed_query")
        return self.inner.embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append("aembed_documents")
        if self.on_async_call is not None:
            self.on_async_call()
        return self.inner.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        self.calls.append("aembed_query")
        return self.inner.embed_query(text)


def stored(index: GatedParentIndex) -> dict[str, Any]:
    """Everything the index holds, to compare two indexes or an index before and after."""
    rows = {}
    for name, collection in (("parents", index.parents), ("children", index.children)):
        got = collection.get(include=["embeddings", "metadatas"])
        rows[name] = sorted(
            (i, [round(float(x), 5) for x in v], sorted(m.items()))
            for i, v, m in zip(got["ids"], got["embeddings"], got["metadatas"], strict=True)
        )
    ids = sorted(index.docstore.yield_keys())
    found = index.docstore.mget(ids)
    rows["docstore"] = [(i, d.page_content) for i, d in zip(ids, found, strict=True) if d]
    return rows


# ---------------------------------------------------------------- the vector dimension
def test_opening_a_new_index_makes_no_embedding_call(tmp_path: Path) -> None:
    embeddings = CountingEmbeddings(size=16)
    index = GatedParentIndex(embeddings, directory=tmp_path)
    assert embeddings.calls == []
    assert index.stats()["dimension"] is None
    index.add_documents([PAPER])
    assert index.stats()["dimension"] == 16
    embeddings.calls.clear()
    reopened = GatedParentIndex(embeddings, directory=tmp_path)
    assert embeddings.calls == []
    assert reopened.stats()["dimension"] == 16


def test_a_query_on_an_index_never_written_finds_nothing(tmp_path: Path) -> None:
    index = GatedParentIndex(CountingEmbeddings(), directory=tmp_path)
    assert index.as_retriever().invoke("lysis") == []


def test_a_model_of_another_dimension_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    GatedParentIndex(CountingEmbeddings(size=16), directory=tmp_path).add_documents([PAPER])
    other = GatedParentIndex(CountingEmbeddings(size=24), directory=tmp_path)  # same name
    before = stored(other)
    with pytest.raises(ValueError, match=r"'counting-fake' \(16-d\), not 'counting-fake' \(24-d\)"):
        other.add_documents([OTHER])
    assert stored(other) == before
    assert other.verify().ok


# ---------------------------------------------------------------- the client
def test_a_langchain_chroma_vector_store_is_accepted_with_its_settings() -> None:
    embeddings = CountingEmbeddings(size=16)
    vectorstore = Chroma(
        collection_name="papers",
        embedding_function=embeddings,
        client=chromadb.EphemeralClient(),
        collection_metadata={"team": "wet-lab"},
        collection_configuration={"hnsw": {"ef_search": 120}},
    )
    index = GatedParentIndex(client=vectorstore)
    assert index.embeddings is embeddings  # the vector store's embeddings
    assert index.client is vectorstore._client
    assert index.parents.name == "papers-parents"
    assert index.children.name == "papers-children"
    assert index.parents.metadata == {"team": "wet-lab"}
    hnsw = index.parents.configuration_json["hnsw"]
    assert (hnsw["space"], hnsw["ef_search"]) == ("cosine", 120)
    assert hnsw["sync_threshold"] == SYNC_THRESHOLD  # the store's settings do not name one
    index.add_documents([PAPER])
    hits = index.as_retriever(k=2).invoke("Cells were lysed on ice.")
    assert hits[0].metadata[keys.DOC_ID] == "P-1"


def chroma_default_ef_search() -> int:
    """Chroma's own ``ef_search``: what a collection created without settings holds."""
    collection = chromadb.EphemeralClient().get_or_create_collection("no-settings")
    return int(collection.configuration_json["hnsw"]["ef_search"])


def hnsw_settings(client: Any, name: str) -> list[tuple[int, int]]:
    """``(sync_threshold, ef_search)`` as Chroma holds them for an index's two collections."""
    found = []
    for part in ("parents", "children"):
        hnsw = client.get_collection(f"{name}-{part}").configuration_json["hnsw"]
        found.append((hnsw["sync_threshold"], hnsw["ef_search"]))
    return found


def test_a_new_index_s_collections_save_every_write_and_its_children_search_with_its_ef() -> None:
    client = chromadb.EphemeralClient()
    GatedParentIndex(CountingEmbeddings(), client=client, name="fresh")
    default_ef = chroma_default_ef_search()
    assert default_ef != CHILD_SEARCH_EF
    assert hnsw_settings(client, "fresh") == [
        (SYNC_THRESHOLD, default_ef),
        (SYNC_THRESHOLD, CHILD_SEARCH_EF),
    ]


def test_a_chroma_naming_its_own_hnsw_settings_keeps_them_through_writes() -> None:
    vectorstore = Chroma(
        collection_name="own-sync",
        embedding_function=CountingEmbeddings(),
        client=chromadb.EphemeralClient(),
        collection_configuration={"hnsw": {"sync_threshold": 500, "ef_search": 80}},
    )
    index = GatedParentIndex(client=vectorstore)
    index.add_documents([PAPER])
    assert hnsw_settings(vectorstore._client, "own-sync") == [(500, 80), (500, 80)]


def test_collections_created_with_other_hnsw_settings_get_the_index_s_at_a_write() -> None:
    client = chromadb.EphemeralClient()
    default_ef = chroma_default_ef_search()
    GatedParentIndex(CountingEmbeddings(), client=client, name="older-sync")
    for part in ("parents", "children"):  # as releases before them created them
        client.get_collection(f"older-sync-{part}").modify(
            configuration={"hnsw": {"sync_threshold": 1000, "ef_search": default_ef}}
        )
    index = GatedParentIndex(CountingEmbeddings(), client=client, name="older-sync")
    assert hnsw_settings(client, "older-sync") == [(1000, default_ef)] * 2  # an open: unchanged
    index.add_documents([PAPER])
    assert hnsw_settings(client, "older-sync") == [
        (SYNC_THRESHOLD, default_ef),
        (SYNC_THRESHOLD, CHILD_SEARCH_EF),
    ]
    hits = index.as_retriever(k=2).invoke("Cells were lysed on ice.")
    assert hits[0].metadata[keys.DOC_ID] == "P-1"


def test_a_chroma_of_another_distance_is_refused() -> None:
    vectorstore = Chroma(
        collection_name="l2-store",
        embedding_function=CountingEmbeddings(),
        client=chromadb.EphemeralClient(),
        collection_configuration={"hnsw": {"space": "l2"}},
    )
    with pytest.raises(ValueError, match=r"uses the l2 distance.*cosine"):
        GatedParentIndex(client=vectorstore)


@pytest.mark.parametrize("client", ["./chroma", object(), {"host": "localhost"}])
def test_anything_else_as_client_is_refused_saying_what_is_accepted(client: object) -> None:
    with pytest.raises(TypeError) as refused:
        GatedParentIndex(CountingEmbeddings(), client=client)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "chromadb client" in message
    assert "langchain_chroma.Chroma" in message
    assert type(client).__qualname__ in message


# ---------------------------------------------------------------- settings that round-trip
def test_a_length_function_round_trips_through_a_reopen(tmp_path: Path) -> None:
    built = GatedParentIndex(
        CountingEmbeddings(),
        directory=tmp_path,
        parent_splitter=SectionSplitter(max_parent_tokens=400, length_function=len),
        child_splitter=ParagraphSplitter(max_child_tokens=60, length_function=len),
    )
    built.add_documents([PAPER])
    reopened = GatedParentIndex(CountingEmbeddings(), directory=tmp_path)
    assert reopened.child_splitter.length_function is len
    assert reopened.parent_splitter.length_function is len
    assert reopened.child_splitter.settings() == built.child_splitter.settings()
    assert reopened.child_splitter.settings()["length_function"] == "len"


def test_reopening_with_another_encoding_is_refused_naming_it(tmp_path: Path) -> None:
    GatedParentIndex(CountingEmbeddings(), directory=tmp_path).add_documents([PAPER])
    with pytest.raises(ValueError, match="other settings") as refused:
        GatedParentIndex(
            CountingEmbeddings(),
            directory=tmp_path,
            child_splitter=ParagraphSplitter(encoding_name="o200k_base"),
        )
    assert "child_splitter.encoding_name='cl100k_base' (index) vs 'o200k_base'" in str(
        refused.value
    )


def test_reopening_with_another_length_function_is_refused_naming_it(tmp_path: Path) -> None:
    GatedParentIndex(
        CountingEmbeddings(),
        directory=tmp_path,
        child_splitter=ParagraphSplitter(length_function=len),
    ).add_documents([PAPER])
    with pytest.raises(ValueError, match="other settings") as refused:
        GatedParentIndex(
            CountingEmbeddings(), directory=tmp_path, child_splitter=ParagraphSplitter()
        )
    message = str(refused.value)
    assert "child_splitter.length_function='len' (index) vs None" in message
    assert "child_splitter.encoding_name=None (index) vs 'cl100k_base'" in message


def test_a_length_function_without_a_name_is_refused(tmp_path: Path) -> None:
    splitter = ParagraphSplitter(length_function=lambda text: len(text.split()))
    assert splitter.split_text("# A\n\nOne two.") == ["One two."]  # fine on its own
    with pytest.raises(ValueError, match="cannot be recorded with an index"):
        GatedParentIndex(CountingEmbeddings(), directory=tmp_path, child_splitter=splitter)


def words(text: str) -> int:
    """A module-level length function: recorded by its importable name."""
    return len(text.split())


def test_splitter_settings_rebuild_the_splitter() -> None:
    for splitter in (
        SectionSplitter(parent_chunk_level="subsection", max_parent_tokens=300),
        SectionSplitter(length_function=words),
        ParagraphSplitter(child_chunk_level="sentence", min_child_tokens=4, max_child_tokens=40),
        ParagraphSplitter(child_overlap_tokens=3, encoding_name="o200k_base"),
    ):
        settings = splitter.settings()
        rebuilt = type(splitter).from_settings(settings)
        assert rebuilt.settings() == settings
        text = "# A\n\nOne two three. Four five six seven.\n\n## B\n\nEight nine."
        assert rebuilt.split_text(text) == splitter.split_text(text)
    assert SectionSplitter(length_function=words).settings()["length_function"] == (
        f"{__name__}:words"
    )


# ---------------------------------------------------------------- native async
def test_async_writes_store_what_sync_writes_store(tmp_path: Path) -> None:
    sync = GatedParentIndex(CountingEmbeddings(), directory=tmp_path / "sync")
    sync.add_documents([PAPER, OTHER])
    sync.delete(["P-2"])
    embeddings = CountingEmbeddings()
    index = GatedParentIndex(embeddings, directory=tmp_path / "async")
    depths: list[int] = []
    embeddings.on_async_call = lambda: depths.append(index._write_depth)

    report = asyncio.run(index.aadd_documents([PAPER, OTHER]))
    assert (report.documents, report.unchanged) == (2, 0)
    assert depths == [1]  # the writer lock was held while the model embedded
    assert "embed_documents" not in embeddings.calls
    assert asyncio.run(index.adelete(["P-2", "absent"])) == 1
    assert stored(index) == stored(sync)
    assert index.verify().ok
    again = asyncio.run(index.aadd_documents([PAPER]))
    assert (again.documents, again.unchanged) == (0, 1)
