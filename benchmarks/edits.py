"""Edited documents written again: what replacing a paper with one paragraph changed costs.

Usage:
    .. code-block:: bash

        python -m benchmarks.edits --data ../shared/data/qasper/dev.jsonl --edits 10

Builds gated over all the papers (every vector from the embedding cache, untimed), then writes
``--edits`` of them again, one ``add_documents`` call each, with one paragraph changed (a
sentence added to the end of its middle paragraph), embedding live with the package's default
model (no cache: what an ingest job pays). Prints each replace's time, how many texts it sent
to the model, and the medians; the baseline, measured in the same run on the same papers, is
the same write as a new document (another ``doc_id``: every text embedded, as a replace did
before it kept the vectors of the texts that did not change), alternating with the replaces.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings

from benchmarks.corpus_index import corpus_parser
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import gated_document
from benchmarks.qasper import load_corpus

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from benchmarks.qasper_data import Paper

REVISION = " This sentence was added in a revision of the paper."


class CountedEmbeddings(Embeddings):
    """Another model's calls, passed through, with the number of texts embedded counted."""

    def __init__(self, model: Embeddings, model_name: str) -> None:
        self.model = model
        self.model_name = model_name
        self.texts = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.texts += 1
        return self.model.embed_query(text)


def edited(paper: Paper, doc_id: str | None = None) -> Document:
    """The paper with :data:`REVISION` added to its middle paragraph (under another id)."""
    document = gated_document(paper)
    end = paper.paragraphs[len(paper.paragraphs) // 2].end
    document.page_content = document.page_content[:end] + REVISION + document.page_content[end:]
    if doc_id is not None:
        document.metadata["doc_id"] = doc_id
    return document


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=10, help="papers written again, edited")
    args = parser.parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415
    from langchain_gated_parent.index import GatedParentIndex  # noqa: PLC0415
    from langchain_gated_parent.settings import model_name_of  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    chosen = papers[:: max(1, len(papers) // args.edits)][: args.edits]
    model = MiniLMEmbeddings()
    cached = CachedEmbeddings(model, args.cache_dir / "embeddings.sqlite")
    live = CountedEmbeddings(model, model_name_of(model))
    with tempfile.TemporaryDirectory() as tmp:
        GatedParentIndex(cached, directory=Path(tmp)).add_documents(
            [gated_document(p) for p in papers]
        )
        index = GatedParentIndex(live, directory=Path(tmp))
        model.embed_documents(["warm the model up"])
        rows: dict[str, list[tuple[float, int]]] = {"replace": [], "as new": []}
        for n, paper in enumerate(chosen):
            writes = [
                ("replace", edited(paper)),
                ("as new", edited(paper, f"{paper.paper_id}-new")),
            ]
            for kind, document in writes if n % 2 == 0 else writes[::-1]:
                live.texts = 0
                started = time.perf_counter()
                index.add_documents([document])
                rows[kind].append((time.perf_counter() - started, live.texts))
    print(
        f"{len(papers)} papers built; {len(chosen)} written again with one paragraph edited, "
        "one a write, embedding live"
    )
    for kind, values in rows.items():
        print(f"each {kind}: " + " ".join(f"{s:.2f} s/{t}" for s, t in values) + " (texts)")
        print(
            f"median {kind} {statistics.median(s for s, _ in values):.2f} s, "
            f"{statistics.median(t for _, t in values):.0f} texts embedded"
        )
    ratio = statistics.median(
        r[0] / a[0] for r, a in zip(rows["replace"], rows["as new"], strict=True)
    )
    print(f"replace / as new, paper by paper: median {ratio:.2f}x")


if __name__ == "__main__":
    main()
