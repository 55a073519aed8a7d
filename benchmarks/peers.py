"""The retrievers compared by the QASPER benchmark, behind one small interface.

Every peer indexes the same rendered papers (:mod:`benchmarks.qasper_data`) with the same
embeddings, keeps its index in a persistent directory (so bytes on disk can be measured), and
answers ``search(question, paper_id)``: ``paper_id`` set is the paper setting (search only that
paper), ``None`` the corpus setting.

Peers:

* ``flat-para``: one vector per paragraph in a Chroma collection (cosine), top 60.
* ``flat-chunk``: ``RecursiveCharacterTextSplitter(1000, 100)`` over each paper's Markdown, top 30.
* ``bm25-para``: rank-bm25 ``BM25Okapi`` over paragraphs (lowercased ``\\w\\w+`` tokens, no
  stop words), top 60; the paper setting uses one index per paper, the corpus setting one index.
* ``flat-hybrid``: LangChain's ``EnsembleRetriever`` over ``BM25Retriever`` (same tokens as
  ``bm25-para``) and the ``flat-para`` collection as a LangChain ``Chroma`` retriever, weights
  0.5/0.5 (its weighted reciprocal-rank fusion, c=60), each side top 60, top 60 returned.
* ``lc-pdr``: LangChain ``ParentDocumentRetriever``; parents = whole sections (heading and
  paragraphs), children = ``RecursiveCharacterTextSplitter(400, 0)``, 20 children; returns sections.
* ``llamaindex-automerging``: ``HierarchicalNodeParser([2048, 512, 128])`` leaves in a
  ``VectorStoreIndex`` + ``AutoMergingRetriever``, top 12 leaves; returns (merged) nodes.
* ``gated`` and variants (:data:`GATED_VARIANTS`): this package's ``GatedParentIndex``.
"""

# Heavy dependencies are imported where used, so each worker process loads (and is charged
# peak memory for) only the retriever it runs.
# ruff: noqa: PLC0415

from __future__ import annotations

import logging
import os
import pickle
import re
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_gated_parent.settings import model_name_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings

    from benchmarks.metrics import Span
    from benchmarks.qasper_data import Paper

logger = logging.getLogger(__name__)

DOC_ID = "doc_id"
START = "start_index"
"""LangChain's own chunk offset key (``add_start_index=True``), used by the flat peers."""
END = "end_index"


@dataclass
class SearchResult:
    """What one query returned, in rank order.

    Attributes:
        texts: Returned texts (for the context metric).
        spans: ``(paper_id, start, end)`` of each returned text, or ``None`` when the peer
            returns section-sized (or merged) results: ranking metrics are then not computed.
    """

    texts: list[str]
    spans: list[Span] | None
    paper_ids: list[str] | None = None
    """The paper of each returned text, for peers without spans (they read PDFs): their texts
    are mapped to truth paragraphs by text (:class:`benchmarks.metrics.TextLocator`)."""

    def papers(self) -> list[str] | None:
        """The paper of each returned text, from ``paper_ids`` or the spans."""
        if self.paper_ids is not None:
            return self.paper_ids
        return [span[0] for span in self.spans] if self.spans is not None else None


@dataclass
class Peer(ABC):
    """A retriever under test.

    Attributes:
        name: The name used on the command line and in results.
    """

    name: str
    setting: str = field(default="paper", kw_only=True)
    """``paper`` or ``corpus``; only peers that index differently per setting read it."""

    @abstractmethod
    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        """Index the papers under ``directory``; return the number of vectors stored."""

    @abstractmethod
    def search(self, question: str, paper_id: str | None) -> SearchResult:
        """Return results for a question (``paper_id`` restricts the search to one paper)."""

    def gate(self, question: str, paper_id: str | None) -> list[Span] | None:  # noqa: ARG002
        """Return the spans of the parents a gate opened (``None`` for peers without a gate)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (clients, files) before the directory is measured or removed."""


# --------------------------------------------------------------------------- Chroma helpers


def _chroma_client(directory: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(
        path=str(directory / "chroma"), settings=Settings(anonymized_telemetry=False)
    )


def _cosine_collection(client: Any, name: str) -> Any:
    return client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"})


def _paragraphs_found(docs: Sequence[Document]) -> SearchResult:
    """The result of a LangChain retriever over the paragraph collection (its span metadata)."""
    spans = [(str(d.metadata[DOC_ID]), int(d.metadata[START]), int(d.metadata[END])) for d in docs]
    return SearchResult(texts=[d.page_content for d in docs], spans=spans)


def _add_batched(
    client: Any,
    collection: Any,
    *,
    ids: list[str],
    texts: list[str],
    vectors: list[list[float]],
    metadatas: list[dict[str, Any]],
) -> None:
    step = int(client.get_max_batch_size())
    for i in range(0, len(ids), step):
        collection.add(
            ids=ids[i : i + step],
            documents=texts[i : i + step],
            embeddings=vectors[i : i + step],
            metadatas=metadatas[i : i + step],
        )


@dataclass
class _ChromaPeer(Peer):
    """A flat dense retriever over spans of the papers (paragraphs or chunks)."""

    k: int = 60
    _client: Any = field(default=None, init=False, repr=False)
    _collection: Any = field(default=None, init=False, repr=False)
    _embeddings: Any = field(default=None, init=False, repr=False)

    @abstractmethod
    def units(self, paper: Paper) -> list[tuple[str, int, int]]:
        """Return ``(text, start, end)`` of the units indexed for a paper."""

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        ids: list[str] = []
        texts: list[str] = []
        metadatas: list[dict[str, Any]] = []
        for paper in papers:
            for n, (text, start, end) in enumerate(self.units(paper)):
                ids.append(f"{paper.paper_id}#{n}")
                texts.append(text)
                metadatas.append({DOC_ID: paper.paper_id, START: start, END: end})
        vectors = embeddings.embed_documents(texts)
        self._embeddings = embeddings
        self._client = _chroma_client(directory)
        self._collection = _cosine_collection(self._client, self.name.replace("-", "_"))
        _add_batched(
            self._client,
            self._collection,
            ids=ids,
            texts=texts,
            vectors=vectors,
            metadatas=metadatas,
        )
        return len(ids)

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        vector = self._embeddings.embed_query(question)
        res = self._collection.query(
            query_embeddings=[vector],
            n_results=self.k,
            where={DOC_ID: paper_id} if paper_id is not None else None,
            include=["documents", "metadatas"],
        )
        texts = list(res["documents"][0])
        spans = [(m[DOC_ID], int(m[START]), int(m[END])) for m in res["metadatas"][0]]
        return SearchResult(texts=texts, spans=spans)

    def close(self) -> None:
        self._collection = None
        self._client = None


@dataclass
class FlatParagraphs(_ChromaPeer):
    """``flat-para``: one vector per paragraph."""

    def units(self, paper: Paper) -> list[tuple[str, int, int]]:
        return [(p.text, p.start, p.end) for p in paper.paragraphs]


@dataclass
class FlatChunks(_ChromaPeer):
    """``flat-chunk``: ``RecursiveCharacterTextSplitter(1000, 100)`` over the paper Markdown."""

    k: int = 30
    chunk_size: int = 1000
    chunk_overlap: int = 100

    def units(self, paper: Paper) -> list[tuple[str, int, int]]:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(
            chunk_size=self.chunk_size, chunk_overlap=self.chunk_overlap, add_start_index=True
        )
        docs = splitter.create_documents([paper.markdown])
        units = []
        for doc in docs:
            start = int(doc.metadata[START])
            end = start + len(doc.page_content)
            if paper.markdown[start:end] != doc.page_content:
                msg = f"flat-chunk: start_index of a chunk of {paper.paper_id} is wrong"
                raise RuntimeError(msg)
            units.append((doc.page_content, start, end))
        return units


@dataclass
class FlatParagraphsRetriever(FlatParagraphs):
    """``flat-para-retriever``: ``flat-para`` searched through LangChain, for latency.

    ``langchain_chroma.Chroma(...).as_retriever(search_kwargs={"k": 60}).invoke``: the same
    vectors and results as ``flat-para``, which reads its collection with the raw chromadb
    client, plus what a LangChain user's flat search also pays (the retriever's run callbacks,
    a ``Document`` per result), as the gated retriever does.
    """

    _retriever: Any = field(default=None, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        from langchain_chroma import Chroma

        vectors = super().build(papers, directory, embeddings)
        store = Chroma(
            client=self._client,
            collection_name=self.name.replace("-", "_"),
            embedding_function=embeddings,
        )
        self._retriever = store.as_retriever(search_kwargs={"k": self.k})
        return vectors

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        where = {} if paper_id is None else {"filter": {DOC_ID: paper_id}}
        docs = self._retriever.invoke(question, **where)
        return _paragraphs_found(docs)

    def close(self) -> None:
        self._retriever = None
        super().close()


# --------------------------------------------------------------------------- BM25


_BM25_TOKEN = re.compile(r"(?u)\b\w\w+\b")
"""Tokens of two or more word characters (scikit-learn's and bm25s's default pattern)."""


def bm25_tokenize(text: str) -> list[str]:
    """Lowercase and split into ``\\w\\w+`` tokens; no stop words, no stemming."""
    return _BM25_TOKEN.findall(text.lower())


@dataclass
class BM25Paragraphs(Peer):
    """``bm25-para``: rank-bm25 ``BM25Okapi`` (k1 1.5, b 0.75, epsilon 0.25) over paragraphs.

    The paper setting scores a question against an index of its own paper only (IDF and average
    length from that paper), the corpus setting against one index of every paragraph.
    """

    k: int = 60
    _indexes: dict[str | None, Any] = field(default_factory=dict, init=False, repr=False)
    _rows: dict[str | None, list[int]] = field(default_factory=dict, init=False, repr=False)
    _texts: list[str] = field(default_factory=list, init=False, repr=False)
    _spans: list[Span] = field(default_factory=list, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:  # noqa: ARG002
        from rank_bm25 import BM25Okapi

        tokens: list[list[str]] = []
        for paper in papers:
            for para in paper.paragraphs:
                self._rows.setdefault(paper.paper_id, []).append(len(self._texts))
                self._texts.append(para.text)
                self._spans.append((paper.paper_id, para.start, para.end))
                tokens.append(bm25_tokenize(para.text))
        if self.setting == "paper":
            for paper_id, rows in self._rows.items():
                self._indexes[paper_id] = BM25Okapi([tokens[i] for i in rows])
        else:
            self._rows = {None: list(range(len(self._texts)))}
            self._indexes[None] = BM25Okapi(tokens)
        (directory / "bm25").mkdir(parents=True, exist_ok=True)
        with (directory / "bm25" / "index.pkl").open("wb") as fh:
            pickle.dump((self._indexes, self._rows, self._texts, self._spans), fh)
        return 0

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        index = self._indexes[paper_id]
        rows = self._rows[paper_id]
        scores = np.asarray(index.get_scores(bm25_tokenize(question)))
        # Stable sort: ties (e.g. paragraphs sharing no query term) keep document order.
        order = [rows[i] for i in np.argsort(-scores, kind="stable")[: self.k]]
        return SearchResult(
            texts=[self._texts[i] for i in order], spans=[self._spans[i] for i in order]
        )


# --------------------------------------------------------------------------- LangChain hybrid


@dataclass
class FlatHybrid(FlatParagraphs):
    """``flat-hybrid``: ``EnsembleRetriever([BM25Retriever, Chroma retriever], [0.5, 0.5])``.

    The hybrid recipe LangChain users pick today. ``BM25Retriever`` has no filter, so the paper
    setting keeps one per paper (as ``bm25-para`` does) and the corpus setting one over every
    paragraph; the dense side is the ``flat-para`` collection behind ``langchain_chroma.Chroma``.
    """

    _bm25: dict[str | None, Any] = field(default_factory=dict, init=False, repr=False)
    _vectorstore: Any = field(default=None, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        from langchain_chroma import Chroma
        from langchain_community.retrievers import BM25Retriever
        from langchain_core.documents import Document

        vectors = super().build(papers, directory, embeddings)
        self._vectorstore = Chroma(
            client=self._client,
            collection_name=self.name.replace("-", "_"),
            embedding_function=embeddings,
        )
        docs: dict[str | None, list[Document]] = {}
        for paper in papers:
            for para in paper.paragraphs:
                doc = Document(
                    page_content=para.text,
                    metadata={DOC_ID: paper.paper_id, START: para.start, END: para.end},
                )
                key = paper.paper_id if self.setting == "paper" else None
                docs.setdefault(key, []).append(doc)
        for key, group in docs.items():
            self._bm25[key] = BM25Retriever.from_documents(
                group, k=self.k, preprocess_func=bm25_tokenize
            )
        (directory / "bm25").mkdir(parents=True, exist_ok=True)
        with (directory / "bm25" / "retrievers.pkl").open("wb") as fh:
            pickle.dump(self._bm25, fh)
        return vectors

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        from langchain_classic.retrievers import EnsembleRetriever

        search_kwargs: dict[str, Any] = {"k": self.k}
        if paper_id is not None:
            search_kwargs["filter"] = {DOC_ID: paper_id}
        ensemble = EnsembleRetriever(
            retrievers=[
                self._bm25[paper_id],
                self._vectorstore.as_retriever(search_kwargs=search_kwargs),
            ],
            weights=[0.5, 0.5],
        )
        docs = ensemble.invoke(question)[: self.k]
        return _paragraphs_found(docs)

    def close(self) -> None:
        self._vectorstore = None
        super().close()


# --------------------------------------------------------------------------- LangChain PDR


@dataclass
class LangChainParentDocument(Peer):
    """``lc-pdr``: ``ParentDocumentRetriever`` with whole sections as parents."""

    k: int = 20
    child_size: int = 400
    _retriever: Any = field(default=None, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        from langchain_chroma import Chroma
        from langchain_classic.retrievers import ParentDocumentRetriever
        from langchain_classic.storage import LocalFileStore, create_kv_docstore
        from langchain_core.documents import Document
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        client = _chroma_client(directory)
        vectorstore = Chroma(
            client=client,
            collection_name="lc_pdr_children",
            embedding_function=embeddings,
            collection_metadata={"hnsw:space": "cosine"},
        )
        docstore = create_kv_docstore(LocalFileStore(str(directory / "docstore")))
        self._retriever = ParentDocumentRetriever(
            vectorstore=vectorstore,
            docstore=docstore,
            child_splitter=RecursiveCharacterTextSplitter(
                chunk_size=self.child_size, chunk_overlap=0
            ),
            id_key="parent_id",
            search_kwargs={"k": self.k},
        )
        parents: list[Document] = []
        ids: list[str] = []
        for paper in papers:
            for sec in paper.sections:
                parents.append(
                    Document(
                        page_content=paper.section_text(sec),
                        metadata={DOC_ID: paper.paper_id, START: sec.start, END: sec.end},
                    )
                )
                # LocalFileStore keys allow [A-Za-z0-9_.-/] only.
                ids.append(sec.section_id.replace(":", "_"))
        # Chroma.add_texts does not batch (max 5461 rows per add): add a few sections at a time.
        step = 200
        for i in range(0, len(parents), step):
            self._retriever.add_documents(parents[i : i + step], ids=ids[i : i + step])
        return int(vectorstore._collection.count())  # noqa: SLF001

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        kwargs: dict[str, Any] = {"k": self.k}
        if paper_id is not None:
            kwargs["filter"] = {DOC_ID: paper_id}
        # MultiVectorRetriever reads search_kwargs on every call and takes no per-call kwargs.
        self._retriever.search_kwargs = kwargs
        docs = self._retriever.invoke(question)
        return SearchResult(texts=[d.page_content for d in docs], spans=None)

    def close(self) -> None:
        self._retriever = None


# --------------------------------------------------------------------------- LlamaIndex


def _llamaindex_offline_setup() -> None:
    """Make LlamaIndex tokenize with our offline cl100k_base encoding.

    LlamaIndex's default tokenizer is ``tiktoken.encoding_for_model("gpt-3.5-turbo")`` (served
    from a cache bundled in llama-index-core, but we do not rely on it), and its sentence
    splitter uses NLTK punkt data bundled in ``llama_index/core/_static/nltk_cache``; nothing is
    downloaded as long as ``NLTK_DATA`` is not pointed elsewhere.
    """
    from llama_index.core import set_global_tokenizer

    from langchain_gated_parent.tokens import get_encoding

    set_global_tokenizer(get_encoding("cl100k_base").encode_ordinary)


def llamaindex_embedding_adapter(embeddings: Embeddings) -> Any:
    """Wrap LangChain ``Embeddings`` as a LlamaIndex ``BaseEmbedding``.

    Documents go through ``embed_documents`` (so through the disk cache), queries through
    ``embed_query`` (live).
    """
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class LangChainEmbeddingAdapter(BaseEmbedding):
        """Adapter from LangChain ``Embeddings`` to LlamaIndex ``BaseEmbedding``."""

        _lc: Any = PrivateAttr()

        def __init__(self, lc: Embeddings) -> None:
            super().__init__(model_name=model_name_of(lc), embed_batch_size=2048)
            self._lc = lc

        def _get_query_embedding(self, query: str) -> list[float]:
            return list(self._lc.embed_query(query))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(self._lc.embed_documents([text])[0])

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [list(v) for v in self._lc.embed_documents(texts)]

    return LangChainEmbeddingAdapter(embeddings)


@dataclass
class LlamaIndexAutoMerging(Peer):
    """``llamaindex-automerging``: hierarchical nodes + ``AutoMergingRetriever``."""

    similarity_top_k: int = 12
    chunk_sizes: tuple[int, ...] = (2048, 512, 128)
    _index: Any = field(default=None, init=False, repr=False)
    _storage: Any = field(default=None, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        _llamaindex_offline_setup()
        from llama_index.core import Document as LIDocument
        from llama_index.core import StorageContext, VectorStoreIndex
        from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes

        parser = HierarchicalNodeParser.from_defaults(chunk_sizes=list(self.chunk_sizes))
        docs = [
            LIDocument(
                text=paper.markdown,
                id_=paper.paper_id,
                metadata={DOC_ID: paper.paper_id},
                # Keep the id out of the embedded text and out of the chunk-size budget.
                excluded_embed_metadata_keys=[DOC_ID],
                excluded_llm_metadata_keys=[DOC_ID],
            )
            for paper in papers
        ]
        nodes = parser.get_nodes_from_documents(docs)
        leaves = get_leaf_nodes(nodes)
        self._storage = StorageContext.from_defaults()
        self._storage.docstore.add_documents(nodes)
        self._index = VectorStoreIndex(
            leaves,
            storage_context=self._storage,
            embed_model=llamaindex_embedding_adapter(embeddings),
        )
        self._storage.persist(persist_dir=str(directory / "llamaindex"))
        return len(leaves)

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        from llama_index.core.retrievers import AutoMergingRetriever
        from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters

        filters = (
            MetadataFilters(filters=[ExactMatchFilter(key=DOC_ID, value=paper_id)])
            if paper_id is not None
            else None
        )
        base = self._index.as_retriever(similarity_top_k=self.similarity_top_k, filters=filters)
        retriever = AutoMergingRetriever(base, self._storage)
        nodes = retriever.retrieve(question)
        return SearchResult(texts=[n.node.get_content() for n in nodes], spans=None)


# --------------------------------------------------------------------------- this package


@dataclass(frozen=True)
class GatedVariant:
    """How to build and query one variant of ``GatedParentIndex``.

    Attributes:
        build: Keyword arguments of ``GatedParentIndex(embeddings, directory=..., **build)``.
        retriever: Keyword arguments of ``index.as_retriever(**retriever)``.
        return_parents: Query with ``return_parents=True`` (section results: EvR only).
    """

    build: dict[str, Any] = field(default_factory=dict)
    retriever: dict[str, Any] = field(default_factory=dict)
    return_parents: bool = False


GATED_K = 60
"""Children asked of every gated variant, enough to fill 2,048 tokens where the gate allows."""

GATED_VARIANTS: dict[str, GatedVariant] = {
    "gated": GatedVariant(retriever={"k": GATED_K}),
    "gated-text": GatedVariant(build={"parent_representation": "text"}, retriever={"k": GATED_K}),
    # The published method: text parents, a hard gate of 3 parents, 6 children each, alpha 0.4,
    # and none of the later additions (gate margin, filling k, lexical or title scores).
    "gated-published": GatedVariant(
        build={"parent_representation": "text"},
        retriever={
            "k": GATED_K,
            "alpha": 0.4,
            "parent_top_k": 3,
            "child_per_parent": 6,
            "gate_margin": 0.0,
            "fill": False,
            "lexical_weight": 0.0,
            "title_weight": 0.0,
            "sparse_weight": 0.0,
            "child_weight": 0.0,
        },
    ),
    "gated-parents": GatedVariant(retriever={"k": GATED_K}, return_parents=True),
    "gated-auto": GatedVariant(retriever={"k": GATED_K, "alpha": "auto"}),
    # The fused score alpha * s_parent + (1 - alpha) * s_child over the defaults' gate (the
    # default before the learned child ranker, which benchmarks/learn_fusion.py fitted on train).
    "gated-alpha": GatedVariant(retriever={"k": GATED_K, "alpha": 0.4}),
    # Ablations: the hard gate (no filling), and dense scores only (the fused score, alpha 0.4).
    "gated-hard": GatedVariant(retriever={"k": GATED_K, "fill": False}),
    "gated-dense": GatedVariant(
        retriever={"k": GATED_K, "alpha": 0.4, "lexical_weight": 0.0, "title_weight": 0.0}
    ),
    # The gate before the hybrid one: candidates from the parent-vector search only.
    "gated-dense-gate": GatedVariant(
        retriever={"k": GATED_K, "sparse_weight": 0.0, "child_weight": 0.0}
    ),
}
"""Gated variants by name; add one with a line here."""


def gated_document(paper: Paper) -> Document:
    """A paper as gated indexes it: its Markdown, its id and title."""
    from langchain_core.documents import Document

    from langchain_gated_parent import keys

    return Document(
        page_content=paper.markdown,
        metadata={DOC_ID: paper.paper_id, keys.FORMAT: "markdown", "title": paper.title},
    )


@dataclass
class GatedPeer(Peer):
    """This package's ``GatedParentIndex`` with one :class:`GatedVariant`."""

    variant: GatedVariant = field(default_factory=GatedVariant)
    cached_sections: int | None = None
    """The index's ``cached_sections`` (``None``: its default), for this process's reads."""
    _index: Any = field(default=None, init=False, repr=False)
    _retriever: Any = field(default=None, init=False, repr=False)

    def build(self, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> int:
        from langchain_gated_parent.index import GatedParentIndex

        self._index = GatedParentIndex(
            embeddings, directory=directory / "gated", **self.variant.build, **self._reads()
        )
        report = self._index.add_documents([gated_document(paper) for paper in papers])
        self._retriever = self._index.as_retriever(**self.variant.retriever)
        # What this build wrote, as flat-para counts its own (``stats()`` reads every store
        # and the folder's size, which is no part of a build).
        return int(report.children + report.parents)

    def view(self, built: GatedPeer) -> None:
        """Search ``built``'s index (the same build settings) through a view of its own.

        The view has its own read caches, so it pays for first reads as a build of its own
        would, while two variants timed side by side share one vector index and do not differ
        by how each build's HNSW graph happened to come out.
        """
        from langchain_gated_parent.index import GatedParentIndex

        index = built._index
        self._index = GatedParentIndex(index.embeddings, directory=index.directory, **self._reads())
        self._retriever = self._index.as_retriever(**self.variant.retriever)

    def _reads(self) -> dict[str, Any]:
        return {} if self.cached_sections is None else {"cached_sections": self.cached_sections}

    def _kwargs(self, paper_id: str | None) -> dict[str, Any]:
        return {"filter": {DOC_ID: paper_id}} if paper_id is not None else {}

    def search(self, question: str, paper_id: str | None) -> SearchResult:
        if self.variant.return_parents:
            docs = self._retriever.invoke(question, return_parents=True, **self._kwargs(paper_id))
            return SearchResult(texts=[d.page_content for d in docs], spans=None)
        from langchain_gated_parent import keys

        docs = self._retriever.invoke(question, **self._kwargs(paper_id))
        spans = [
            (
                str(d.metadata[DOC_ID]),
                int(d.metadata[keys.START_INDEX]),
                int(d.metadata[keys.END_INDEX]),
            )
            for d in docs
        ]
        return SearchResult(texts=[d.page_content for d in docs], spans=spans)

    def gate(self, question: str, paper_id: str | None) -> list[Span] | None:
        from langchain_gated_parent import keys

        exp = self._retriever.explain(question, **self._kwargs(paper_id))
        return [
            (
                str(p.metadata[DOC_ID]),
                int(p.metadata[keys.START_INDEX]),
                int(p.metadata[keys.END_INDEX]),
            )
            for p in exp.parents
        ]

    def close(self) -> None:
        close = getattr(self._index, "close", None)
        if callable(close):
            close()
        self._retriever = None
        self._index = None


PEERS: dict[str, Callable[[], Peer]] = {
    "flat-para": lambda: FlatParagraphs(name="flat-para"),
    "flat-para-retriever": lambda: FlatParagraphsRetriever(name="flat-para-retriever"),
    "flat-chunk": lambda: FlatChunks(name="flat-chunk"),
    "bm25-para": lambda: BM25Paragraphs(name="bm25-para"),
    "flat-hybrid": lambda: FlatHybrid(name="flat-hybrid"),
    "lc-pdr": lambda: LangChainParentDocument(name="lc-pdr"),
    "llamaindex-automerging": lambda: LlamaIndexAutoMerging(name="llamaindex-automerging"),
}
for _name, _variant in GATED_VARIANTS.items():
    PEERS[_name] = lambda n=_name, v=_variant: GatedPeer(name=n, variant=v)  # type: ignore[misc]

DEFAULT_RETRIEVERS = (
    "flat-para",
    "flat-chunk",
    "bm25-para",
    "flat-hybrid",
    "lc-pdr",
    "llamaindex-automerging",
    *GATED_VARIANTS,
)


def make_peer(name: str) -> Peer:
    """Return a fresh peer by name.

    Raises:
        ValueError: If the name is unknown.
    """
    try:
        factory = PEERS[name]
    except KeyError:
        msg = f"unknown retriever {name!r}; choose from {', '.join(PEERS)}"
        raise ValueError(msg) from None
    return factory()


def quiet_third_party() -> None:
    """Silence known noise: langchain_community deprecation, Chroma telemetry, tokenizers fork."""
    warnings.filterwarnings(
        "ignore", message=".*langchain.community.*", category=DeprecationWarning
    )
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
