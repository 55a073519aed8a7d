"""alpha x parent_top_k grid of nDCG@10 on QASPER (paper setting), saved as a heatmap.

Usage:
    .. code-block:: bash

        python -m benchmarks.tune_grid --data ../shared/data/qasper/dev.jsonl --out bench-out/grid

One gated index is built (embeddings from the benchmark's disk cache); each question is
embedded once and every grid cell reuses that vector (``query_vector=``), so the grid measures
ranking quality only. Two panels, both with the hard gate (``fill=False``, ``k=10``): the
published fusion of dense scores and the package's scoring (title and lexical signals on).
Writes ``OUT/grid.json`` and ``OUT/alpha_parent_top_k.png``.
"""

# Heavy dependencies are imported where used, so --help stays fast.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import metrics
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.qasper import DEFAULT_CACHE_DIR
from benchmarks.qasper_data import load_papers

ALPHAS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
PARENT_TOP_KS = (1, 2, 3, 5, 8)
SCORINGS: dict[str, dict[str, Any]] = {
    "dense scores only (the published fusion)": {"lexical_weight": 0.0, "title_weight": 0.0},
    "package (title + lexical)": {},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit-papers", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    args = parser.parse_args()

    from langchain_core.documents import Document

    from langchain_gated_parent.embeddings import MiniLMEmbeddings
    from langchain_gated_parent.index import GatedParentIndex

    papers = load_papers(args.data, args.limit_papers)
    locator = metrics.ParagraphLocator(
        {p.paper_id: [(q.key, q.start, q.end) for q in p.paragraphs] for p in papers}
    )
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        index = GatedParentIndex(embeddings, directory=Path(tmp))
        index.add_documents(
            [
                Document(p.markdown, metadata={"doc_id": p.paper_id, "title": p.title})
                for p in papers
            ]
        )
        retriever = index.as_retriever(k=10, fill=False)
        questions = [(p.paper_id, q) for p in papers for q in p.questions]
        vectors = embeddings.embed_documents([q.question for _, q in questions])
        grid: dict[str, list[list[float]]] = {}
        for name, scoring in SCORINGS.items():
            grid[name] = [
                [
                    _mean_ndcg(retriever, questions, vectors, locator, alpha, top_k, scoring)
                    for alpha in ALPHAS
                ]
                for top_k in PARENT_TOP_KS
            ]
            print(name)
            for top_k, row in zip(PARENT_TOP_KS, grid[name], strict=True):
                print(f"  parent_top_k={top_k}: " + " ".join(f"{v:.3f}" for v in row))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "grid.json").write_text(
        json.dumps(
            {
                "alphas": ALPHAS,
                "parent_top_ks": PARENT_TOP_KS,
                "ndcg@10": grid,
                "questions": len(questions),
                "papers": len(papers),
            },
            indent=2,
        )
    )
    _plot(grid, args.out / "alpha_parent_top_k.png")


def _mean_ndcg(  # noqa: PLR0917 (one grid cell's inputs)
    retriever: Any,
    questions: list[tuple[str, Any]],
    vectors: list[list[float]],
    locator: metrics.ParagraphLocator,
    alpha: float,
    top_k: int,
    scoring: dict[str, Any],
) -> float:
    from langchain_gated_parent import keys

    scores = []
    for (paper_id, question), vector in zip(questions, vectors, strict=True):
        docs = retriever.invoke(
            question.question,
            query_vector=vector,
            alpha=alpha,
            parent_top_k=top_k,
            filter={"doc_id": paper_id},
            **scoring,
        )
        ranked = locator.ranked_paragraphs(
            (paper_id, d.metadata[keys.START_INDEX], d.metadata[keys.END_INDEX]) for d in docs
        )
        scores.append(metrics.ndcg_at_k(ranked, question.evidence, 10))
    return sum(scores) / len(scores)


def _plot(grid: dict[str, list[list[float]]], path: Path) -> None:
    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(grid), figsize=(6 * len(grid), 4.2), sharey=True)
    low = min(v for rows in grid.values() for row in rows for v in row)
    high = max(v for rows in grid.values() for row in rows for v in row)
    for ax, (name, rows) in zip(axes, grid.items(), strict=True):
        image = ax.imshow(rows, cmap="viridis", vmin=low, vmax=high, aspect="auto")
        ax.set_xticks(range(len(ALPHAS)), [f"{a:.1f}" for a in ALPHAS])
        ax.set_yticks(range(len(PARENT_TOP_KS)), [str(k) for k in PARENT_TOP_KS])
        ax.set_xlabel("alpha")
        ax.set_title(f"{name}\nhard gate, k=10")
        for y, row in enumerate(rows):
            for x, value in enumerate(row):
                ax.text(x, y, f"{value:.3f}", ha="center", va="center", color="w", fontsize=8)
    axes[0].set_ylabel("parent_top_k")
    fig.colorbar(image, ax=axes, label="nDCG@10 (QASPER dev, paper setting)")
    fig.savefig(path, dpi=120, bbox_inches="tight")


if __name__ == "__main__":
    main()
