"""Scoring choices tried while fixing the gate, measured on QASPER (paper setting).

Usage:
    .. code-block:: bash

        python -m benchmarks.scoring_ablations --data ../shared/data/qasper/dev.jsonl \\
            [--limit-papers 40]

A numpy replay of the retriever's scoring with every section of the question's paper open
(what ``fill=True`` does at k=60), so that choices the package did *not* adopt can be compared
with the ones it did, on the same cached embeddings: heading path prefixed to each child's
embedded text, reciprocal-rank fusion instead of a linear blend, neighbour smoothing, and
``alpha`` per question kind. Parents are top-level sections with centroid vectors, as in the
package. Prints nDCG@10 and Recall@8 per variant. The package's own end-to-end figures come
from ``benchmarks.qasper``; this script only ranks the alternatives.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import metrics
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.qasper import DEFAULT_CACHE_DIR
from benchmarks.qasper_data import Paper, load_papers

Scorer = Callable[["Case"], np.ndarray]


class Case:
    """One question with everything the scorers need about its paper."""

    def __init__(
        self, paper: Paper, question: Any, vectors: dict[str, np.ndarray], q: np.ndarray
    ) -> None:
        from langchain_gated_parent.lexical import bm25

        self.question = question
        self.keys = [p.key for p in paper.paragraphs]
        path = {s.section_id: s.title.split(" ::: ") for s in paper.sections}
        self.paths = [path[p.key[0]] for p in paper.paragraphs]
        top = [p[0] for p in self.paths]
        self.unit = np.array([sorted(set(top), key=top.index).index(t) for t in top])
        self.section = np.array([p.key[0] for p in paper.paragraphs])
        self.dense = {name: np.clip(v @ q, 0, 1) for name, v in vectors.items()}
        texts = [p.text for p in paper.paragraphs]
        self.lexical = bm25(
            question.question, [" ".join([*h, t]) for h, t in zip(self.paths, texts, strict=True)]
        )
        centroid = np.zeros(len(texts))
        titles = np.zeros(len(texts))
        unit_titles = [
            " ".join(
                dict.fromkeys(
                    t for h, u in zip(self.paths, self.unit, strict=True) if u == k for t in h
                )
            )
            for k in range(self.unit.max() + 1)
        ]
        title_scores = bm25(question.question, unit_titles)
        for k in range(self.unit.max() + 1):
            members = self.unit == k
            mean = vectors["plain"][members].mean(axis=0)
            centroid[members] = max(0.0, float(mean @ q / np.linalg.norm(mean)))
            titles[members] = title_scores[k]
        self.centroid = centroid
        self.titles = titles


def fused(
    alpha: float = 0.4,
    lexical: float = 0.3,
    title: float = 0.3,
    *,
    vectors: str = "plain",
    rrf: bool = False,
    smooth: float = 0.0,
    auto: bool = False,
) -> Scorer:
    """A scorer: the package's fusion, with one choice changed."""
    from langchain_gated_parent.scoring import route_alpha

    def score(case: Case) -> np.ndarray:
        dense = case.dense[vectors]
        if rrf:
            ranks = [np.argsort(np.argsort(-signal)) for signal in (dense, case.lexical)]
            child = np.sum([1.0 / (60 + r) for r in ranks], axis=0)
            child = child / child.max()
        else:
            child = (1 - lexical) * dense + lexical * case.lexical
        if smooth:
            same = case.section[1:] == case.section[:-1]
            before = np.r_[-1.0, np.where(same, child[:-1], -1.0)]
            after = np.r_[np.where(same, child[1:], -1.0), -1.0]
            neighbour = np.maximum(before, after)
            child = (child + smooth * np.where(neighbour < 0, child, neighbour)) / (1 + smooth)
        parent = (1 - title) * case.centroid + title * case.titles
        a = route_alpha(case.question.question) if auto else alpha
        fused_score: np.ndarray = a * parent + (1 - a) * child
        return fused_score

    return score


VARIANTS: dict[str, Scorer] = {
    "flat dense (flat-para)": lambda c: c.dense["plain"],
    "package defaults": fused(),
    "dense only (alpha 0.4, no lexical, no title)": fused(lexical=0.0, title=0.0),
    "heading path prefixed to embedded child text": fused(vectors="headed"),
    "heading-prefixed embeddings, dense only": fused(vectors="headed", lexical=0.0, title=0.0),
    "reciprocal-rank fusion of dense and BM25": fused(rrf=True),
    "neighbour smoothing 0.2": fused(smooth=0.2),
    "alpha='auto' (question-type router)": fused(auto=True),
    "no title signal": fused(title=0.0),
    "no lexical signal in the child score": fused(lexical=0.0),
    "alpha 0.2": fused(alpha=0.2),
    "alpha 0.6": fused(alpha=0.6),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--limit-papers", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    args = parser.parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings

    papers = load_papers(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite")
    cases: list[Case] = []
    for paper in papers:
        if not paper.questions:
            continue
        paths = {s.section_id: s.title.split(" ::: ") for s in paper.sections}
        plain = np.asarray(embeddings.embed_documents([p.text for p in paper.paragraphs]))
        headed = np.asarray(
            embeddings.embed_documents(
                [" > ".join(paths[p.key[0]]) + "\n\n" + p.text for p in paper.paragraphs]
            )
        )
        queries = np.asarray(embeddings.embed_documents([q.question for q in paper.questions]))
        cases.extend(
            Case(paper, q, {"plain": plain, "headed": headed}, v)
            for q, v in zip(paper.questions, queries, strict=True)
        )
    print(f"{len(cases)} questions, {len(papers)} papers")
    for name, scorer in VARIANTS.items():
        ndcg, recall = [], []
        for case in cases:
            ranked = [case.keys[i] for i in np.argsort(-scorer(case), kind="stable")]
            ndcg.append(metrics.ndcg_at_k(ranked, case.question.evidence, 10))
            recall.append(metrics.recall_at_k(ranked, case.question.evidence, 8))
        print(f"{name:48s} nDCG@10 {np.mean(ndcg):.3f}  Recall@8 {np.mean(recall):.3f}")


if __name__ == "__main__":
    main()
