"""The term search across a collection: FTS5 ranking in SQL against the postings kept in memory.

Builds the gated index over the papers (embeddings from the benchmark's disk cache), then asks
every question's term search twice per pass, once ranked by FTS5 (``cached_sections=0``: no
postings kept) and once from the kept postings, in the same loop; a second pass times the
postings warm. Prints how often the two rankings agree, the largest score difference, the
medians and what the postings kept take in memory.

Usage:
    .. code-block:: bash

        python -m benchmarks.term_search --data ../shared/data/qasper/dev.jsonl
        python -m benchmarks.term_search --data ../shared/data/qasper/train.jsonl \\
            --data ../shared/data/qasper/dev.jsonl
"""

from __future__ import annotations

import statistics
import time

from benchmarks.corpus_index import built, corpus_parser

N = 20
"""Parents asked of each search, as the gate asks at k=60."""


def main() -> None:
    args = corpus_parser(__doc__.splitlines()[0]).parse_args()
    with built(args) as corpus:
        papers, questions = corpus.papers, corpus.questions
        kept = corpus.open()
        fts5 = corpus.open(cached_sections=0)
        kept.check_filter(None)  # the version the postings are kept for
        timings: dict[str, list[float]] = {"fts5": [], "kept, first pass": [], "kept, warm": []}
        agree = tied = 0
        largest = 0.0
        for question in questions:
            started = time.perf_counter()
            ranked = fts5.search_sparse(question, N)
            timings["fts5"].append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            found = kept.search_sparse(question, N)
            timings["kept, first pass"].append(1000 * (time.perf_counter() - started))
            same = [p for p, _ in found] == [p for p, _ in ranked]
            agree += same
            tied += not same and all(
                abs(a - b) < 1e-9 for (_, a), (_, b) in zip(found, ranked, strict=True)
            )
            scores = dict(ranked)
            largest = max([largest, *(abs(s - scores[p]) for p, s in found if p in scores)])
        for question in questions:
            started = time.perf_counter()
            kept.search_sparse(question, N)
            timings["kept, warm"].append(1000 * (time.perf_counter() - started))
        postings = kept.sparse._postings if kept.sparse is not None else None  # noqa: SLF001
        memory = postings.kept() if postings is not None else (0, 0)
    print(f"{len(papers)} papers, {len(questions)} questions, top {N}")
    print(
        f"same ranking as FTS5: {agree} of {len(questions)}, {tied} more that differ only in the "
        f"order of equal scores; largest score difference {largest:.1e}"
    )
    for name, values in timings.items():
        p50, mean = statistics.median(values), statistics.mean(values)
        print(f"{name:17s} p50 {p50:6.2f} ms  mean {mean:6.2f} ms")
    print(f"postings kept: {memory[0]} terms, {memory[1] / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
