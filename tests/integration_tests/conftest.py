"""Shared fixtures: the real offline embeddings and a persistent index on a real Chroma."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from langchain_core.documents import Document

from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings, keys

if TYPE_CHECKING:
    from pathlib import Path

GAPDH = {
    "doc_id": "P-GAPDH-01",
    "title": "GAPDH knockdown in HeLa cells",
    "sections": [
        {
            "id": "S-abstract",
            "title": "Abstract",
            "paras": ["We silence GAPDH in HeLa cells and measure glycolytic flux."],
        },
        {
            "id": "S-methods",
            "title": "Methods",
            "paras": ["20 nM siRNA targeting GAPDH", "48 h before RNA extraction"],
        },
        {
            "id": "S-results",
            "title": "Results",
            "paras": [
                "GAPDH mRNA fell by 85% relative to the scrambled control.",
                "Lactate production dropped by a third after knockdown.",
            ],
        },
    ],
}

RIVAL = {
    "doc_id": "P-RIVAL-02",
    "title": "Time courses of RNA extraction protocols",
    "sections": [
        {
            "id": "R-overview",
            "title": "Overview",
            "paras": [
                "RNA extraction timing matters: we compare 12 h, 24 h and 72 h protocols.",
                "Column-based kits outperform phenol extraction for small samples.",
            ],
        },
        {
            "id": "R-discussion",
            "title": "Discussion",
            "paras": ["Longer incubation lowers RNA integrity numbers in fibroblasts."],
        },
    ],
}

MARKDOWN = """Preamble line about the manual.

# Installation

Install the package with pip and check the version.

## Requirements

Python 3.10 or newer and 2 GB of free disk space.

# Configuration

Set the cache directory with the CACHE_DIR environment variable.

Logging is configured through a YAML file next to the binary.
"""


def corpus() -> list[Document]:
    """A small corpus: the method's GAPDH example, a rival paper and a Markdown manual."""
    return [
        Document(page_content=json.dumps(GAPDH), metadata={keys.FORMAT: "structured"}),
        Document(page_content=json.dumps(RIVAL), metadata={keys.FORMAT: "structured"}),
        Document(page_content=MARKDOWN, metadata={"doc_id": "manual", keys.FORMAT: "markdown"}),
    ]


@pytest.fixture(scope="session")
def embeddings() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory: pytest.TempPathFactory, embeddings: MiniLMEmbeddings) -> Path:
    """A persistent index built once for the session (tests must not modify it)."""
    directory = tmp_path_factory.mktemp("index")
    GatedParentIndex(embeddings, directory=directory).add_documents(corpus())
    return directory


@pytest.fixture
def index(index_dir: Path, embeddings: MiniLMEmbeddings) -> GatedParentIndex:
    return GatedParentIndex(embeddings, directory=index_dir)


@pytest.fixture
def fresh_index(tmp_path: Path, embeddings: MiniLMEmbeddings) -> GatedParentIndex:
    """An empty persistent index of its own, for tests that write."""
    return GatedParentIndex(embeddings, directory=tmp_path / "index")
