"""Tune ``alpha`` and ``parent_top_k`` on a few QASPER dev papers: nDCG@10 per cell, a heatmap.

Each question is asked of its own paper (``filter={"doc_id": ...}``), as in the benchmark's
"paper" setting; a returned paragraph counts when it overlaps an evidence paragraph. Every cell
is one ``retriever.batch`` call whose settings come from ``config["configurable"]``: no
retriever is rebuilt, and each question is embedded as a query, exactly as ``invoke`` does.
The metrics are ``benchmarks/metrics.py``'s, the papers are rendered by
``benchmarks/qasper_data.py``.

A few papers are a smoke test of the method, not a result: tune on the dev split with
``--papers 50`` or more before trusting a cell.

Run:
    python cookbook/tune_alpha.py [--papers 3] [--out cookbook/tune_alpha.png] [--index DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib as mpl

mpl.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
from langchain_core.documents import Document

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the benchmarks package lives at the repository root

from benchmarks import metrics  # noqa: E402
from benchmarks.qasper_data import Paper, load_papers  # noqa: E402
from langchain_gated_parent import GatedParentIndex, keys  # noqa: E402

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

DEFAULT_DATA = REPO.parent / "shared" / "data" / "qasper" / "dev.jsonl"
DEFAULT_OUT = REPO / "cookbook" / "tune_alpha.png"
ALPHAS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
PARENT_TOP_KS = (1, 2, 3, 5, 8)
MAX_PARAGRAPHS = 80
"""Only small papers, so the script runs in seconds."""


def small_papers(data: Path, count: int) -> list[Paper]:
    """The first ``count`` papers with at most 80 paragraphs and at least 2 questions."""
    chosen: list[Paper] = []
    for paper in load_papers(data):
        if len(paper.paragraphs) <= MAX_PARAGRAPHS and len(paper.questions) >= 2:
            chosen.append(paper)
        if len(chosen) == count:
            break
    return chosen


def grid(index: GatedParentIndex, papers: list[Paper]) -> list[list[float]]:
    """Mean nDCG@10 for each (parent_top_k, alpha) cell: rows parent_top_k, columns alpha."""
    locator = metrics.ParagraphLocator(
        {p.paper_id: [(para.key, para.start, para.end) for para in p.paragraphs] for p in papers}
    )
    questions = [q for p in papers for q in p.questions]
    retriever = index.as_retriever(k=10)
    rows = []
    for parent_top_k in PARENT_TOP_KS:
        row = []
        for alpha in ALPHAS:
            configs: list[RunnableConfig] = [
                {
                    "configurable": {
                        "alpha": alpha,
                        "parent_top_k": parent_top_k,
                        "filter": {keys.DOC_ID: q.paper_id},
                    }
                }
                for q in questions
            ]
            results = retriever.batch([q.question for q in questions], configs)
            scores = []
            for question, docs in zip(questions, results, strict=True):
                spans = [
                    (
                        d.metadata[keys.DOC_ID],
                        d.metadata[keys.START_INDEX],
                        d.metadata[keys.END_INDEX],
                    )
                    for d in docs
                ]
                ranked = locator.ranked_paragraphs(spans)
                scores.append(metrics.ndcg_at_k(ranked, question.evidence, 10))
            row.append(sum(scores) / len(scores))
        rows.append(row)
    return rows


def heatmap(rows: list[list[float]], title: str, out: Path) -> None:
    figure, axes = plt.subplots(figsize=(7, 4.5))
    image = axes.imshow(rows, cmap="viridis", origin="lower", aspect="auto")
    axes.set_xticks(range(len(ALPHAS)), [f"{a:.1f}" for a in ALPHAS])
    axes.set_yticks(range(len(PARENT_TOP_KS)), [str(p) for p in PARENT_TOP_KS])
    axes.set_xlabel("alpha (weight of the parent's score)")
    axes.set_ylabel("parent_top_k (parents the gate opens)")
    axes.set_title(title)
    for y, row in enumerate(rows):
        for x, value in enumerate(row):
            axes.text(x, y, f"{value:.2f}", ha="center", va="center", color="white", fontsize=8)
    figure.colorbar(image, ax=axes, label="nDCG@10")
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)


def run(args: argparse.Namespace, directory: Path) -> None:
    papers = small_papers(args.data, args.papers)
    n_questions = sum(len(p.questions) for p in papers)
    print(f"{len(papers)} papers, {n_questions} questions: {', '.join(p.paper_id for p in papers)}")
    index = GatedParentIndex(directory=directory)
    report = index.add_documents(
        [
            Document(
                page_content=p.markdown,
                metadata={keys.DOC_ID: p.paper_id, keys.FORMAT: "markdown", keys.TITLE: p.title},
            )
            for p in papers
        ]
    )
    print(f"index: {report}\n")

    rows = grid(index, papers)
    print("nDCG@10  parent_top_k \\ alpha " + " ".join(f"{a:>5.1f}" for a in ALPHAS))
    for parent_top_k, row in zip(PARENT_TOP_KS, rows, strict=True):
        print(f"{parent_top_k:>30}  " + " ".join(f"{v:5.3f}" for v in row))
    best, y, x = max((v, y, x) for y, row in enumerate(rows) for x, v in enumerate(row))
    print(f"\nbest: alpha {ALPHAS[x]:.1f}, parent_top_k {PARENT_TOP_KS[y]} (nDCG@10 {best:.3f})")

    title = f"nDCG@10 on {len(papers)} QASPER dev papers ({n_questions} questions)"
    heatmap(rows, title, args.out)
    print(f"heatmap: {args.out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="QASPER-format jsonl")
    parser.add_argument("--papers", type=int, default=3, help="papers to use (default 3)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="heatmap PNG path")
    parser.add_argument("--index", type=Path, help="index folder (default: a temporary one)")
    args = parser.parse_args()
    if args.index is not None:
        run(args, args.index)
        return
    with tempfile.TemporaryDirectory(prefix="gated-tune-") as tmp:
        run(args, Path(tmp))


if __name__ == "__main__":
    main()
