"""Fit the hybrid gate's two weights on QASPER *train*: sparse_weight x child_weight.

Usage:
    .. code-block:: bash

        python -m benchmarks.tune_hybrid --data ../shared/data/qasper/train.jsonl \\
            --out bench-out/tune-hybrid --limit-papers 281

One gated index is built over the papers (embeddings from the benchmark's disk cache); each
question is embedded once and every cell reuses that vector (``query_vector=``). Every cell is
scored in both settings (paper: the question's paper only; corpus: every paper), with the
benchmark's ``k`` (60) and the package's other defaults, on nDCG@10 and EvidenceRecall@2048.
The cell chosen maximizes the mean, over the two settings, of nDCG@10 divided by the
dense-only gate's (both weights 0), so neither setting is traded away for the other.
Writes ``OUT/grid.json``.
"""

# Heavy dependencies are imported where used, so --help stays fast.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import metrics
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import GATED_K
from benchmarks.qasper import DEFAULT_CACHE_DIR
from benchmarks.qasper_data import load_papers

SPARSE_WEIGHTS = (0.0, 0.25, 0.5)
CHILD_WEIGHTS = (0.0, 0.25, 0.5)
SETTINGS = ("paper", "corpus")


def main() -> None:
    """Build once, score every cell in both settings, print and save the grid."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit-papers", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    args = parser.parse_args()

    from langchain_core.documents import Document

    from langchain_gated_parent.embeddings import MiniLMEmbeddings
    from langchain_gated_parent.index import GatedParentIndex
    from langchain_gated_parent.tokens import get_encoding

    papers = load_papers(args.data, args.limit_papers)
    by_id = {p.paper_id: p for p in papers}
    locator = metrics.ParagraphLocator(
        {p.paper_id: [(q.key, q.start, q.end) for q in p.paragraphs] for p in papers}
    )
    encoding = get_encoding("cl100k_base")
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite")
    cells: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        index = GatedParentIndex(embeddings, directory=Path(tmp))
        index.add_documents(
            [
                Document(
                    p.markdown,
                    metadata={"doc_id": p.paper_id, "title": p.title, "format": "markdown"},
                )
                for p in papers
            ]
        )
        print(f"built: {index.stats()} (cache misses {embeddings.misses})", flush=True)
        retriever = index.as_retriever(k=GATED_K)
        questions = [q for p in papers for q in p.questions]
        vectors = embeddings.embed_documents([q.question for q in questions])
        for sparse_weight, child_weight in itertools.product(SPARSE_WEIGHTS, CHILD_WEIGHTS):
            cell: dict[str, Any] = {"sparse_weight": sparse_weight, "child_weight": child_weight}
            for setting in SETTINGS:
                ndcg: list[float] = []
                evr: list[float] = []
                for q, vector in zip(questions, vectors, strict=True):
                    where = {"doc_id": q.paper_id} if setting == "paper" else None
                    docs = retriever.invoke(
                        q.question,
                        query_vector=vector,
                        filter=where,
                        sparse_weight=sparse_weight,
                        child_weight=child_weight,
                    )
                    spans = [
                        (d.metadata["doc_id"], d.metadata["start_index"], d.metadata["end_index"])
                        for d in docs
                    ]
                    ranked = locator.ranked_paragraphs(spans)
                    ndcg.append(metrics.ndcg_at_k(ranked, q.evidence, 10))
                    paper = by_id[q.paper_id]
                    evidence = [paper.paragraph(k).text for k in sorted(q.evidence)]
                    evr.append(
                        metrics.evidence_recall(
                            [d.page_content for d in docs], evidence, 2048, encoding
                        )
                    )
                cell[f"{setting}_ndcg@10"] = sum(ndcg) / len(ndcg)
                cell[f"{setting}_evr@2048"] = sum(evr) / len(evr)
            cells.append(cell)
            print(json.dumps(cell), flush=True)
    base = cells[0]
    for cell in cells:
        cell["objective"] = sum(
            cell[f"{s}_ndcg@10"] / base[f"{s}_ndcg@10"] for s in SETTINGS
        ) / len(SETTINGS)
    best = max(cells, key=lambda c: c["objective"])
    print(f"best: {json.dumps(best)}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "grid.json").write_text(
        json.dumps(
            {
                "cells": cells,
                "best": best,
                "questions": len(questions),
                "papers": len(papers),
                "data": str(args.data),
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
