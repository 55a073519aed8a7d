"""Small-to-big retrieval for LangChain: section parents gate paragraph children."""

from langchain_gated_parent.embeddings import MiniLMEmbeddings
from langchain_gated_parent.index import GatedParentIndex, IndexReport, VerifyReport, sql_docstore
from langchain_gated_parent.retriever import Explanation, GatedParentRetriever
from langchain_gated_parent.splitters import (
    ParagraphSplitter,
    ParentChildSplit,
    SectionSplitter,
    split_document,
)

__all__ = [
    "Explanation",
    "GatedParentIndex",
    "GatedParentRetriever",
    "IndexReport",
    "MiniLMEmbeddings",
    "ParagraphSplitter",
    "ParentChildSplit",
    "SectionSplitter",
    "VerifyReport",
    "split_document",
    "sql_docstore",
]
