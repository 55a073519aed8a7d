"""Small-to-big retrieval for LangChain: section parents gate paragraph children.

The public names load lazily (PEP 562), so ``import langchain_gated_parent`` and
``gated-parent --help`` do not pay for onnxruntime and chromadb until they are used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_gated_parent.embeddings import MiniLMEmbeddings
    from langchain_gated_parent.index import (
        GatedParentIndex,
        IndexReport,
        VerifyReport,
    )
    from langchain_gated_parent.records import Explanation
    from langchain_gated_parent.retriever import GatedParentRetriever
    from langchain_gated_parent.splitters import (
        ParagraphSplitter,
        ParentChildSplit,
        SectionSplitter,
        split_document,
    )
    from langchain_gated_parent.stores.docstore import sql_docstore
    from langchain_gated_parent.tools import ScoredResultPrompt, create_gated_retriever_tool

_MODULE_OF = {
    "Explanation": "records",
    "GatedParentIndex": "index",
    "GatedParentRetriever": "retriever",
    "IndexReport": "index",
    "MiniLMEmbeddings": "embeddings",
    "ParagraphSplitter": "splitters",
    "ParentChildSplit": "splitters",
    "ScoredResultPrompt": "tools",
    "SectionSplitter": "splitters",
    "VerifyReport": "index",
    "create_gated_retriever_tool": "tools",
    "split_document": "splitters",
    "sql_docstore": "stores.docstore",
}

__all__ = [
    "Explanation",
    "GatedParentIndex",
    "GatedParentRetriever",
    "IndexReport",
    "MiniLMEmbeddings",
    "ParagraphSplitter",
    "ParentChildSplit",
    "ScoredResultPrompt",
    "SectionSplitter",
    "VerifyReport",
    "create_gated_retriever_tool",
    "split_document",
    "sql_docstore",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use."""
    if name not in _MODULE_OF:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    return getattr(import_module(f"{__name__}.{_MODULE_OF[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
