"""What the read cache costs in memory: a kept section, a kept header, a process after one pass.

Builds the gated index over the papers (embeddings from the benchmark's disk cache). On a view
of it with ``--cached-sections`` (the default if not given), asks every question once (the
query embedded live) and measures with ``tracemalloc`` what the process still holds after the
pass: the sections, headers and term postings it kept. Then, on a fresh view, reads the
headers and then the children of the first 1,000 sections (a few at a time, as a query opens
them) and measures what stays allocated once the reads' results are dropped: what the cache
keeps of each, and of each child (an opened section's size grows with its children).

Usage:
    .. code-block:: bash

        python -m benchmarks.read_cache --data ../shared/data/qasper/dev.jsonl
        python -m benchmarks.read_cache --data ../shared/data/qasper/train.jsonl \\
            --data ../shared/data/qasper/dev.jsonl --cached-sections 2048
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

from benchmarks.corpus_index import built, corpus_parser
from langchain_gated_parent.stores.section_reads import DEFAULT_CACHED_SECTIONS

K = 60
SAMPLE = 1000
"""Sections measured (the first this many by id; all of them if fewer)."""
OPENED_AT_ONCE = 18
"""Sections one read opens (what a query at k=60 opens across QASPER)."""


def _kept_bytes(read: Any, items: list[Any], at_once: int) -> int:
    """Bytes still allocated after ``read`` of ``items``, ``at_once`` at a time."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for start in range(0, len(items), at_once):
        read(items[start : start + at_once])
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return kept


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--cached-sections", type=int, default=None)
    args = parser.parse_args()
    size = DEFAULT_CACHED_SECTIONS if args.cached_sections is None else args.cached_sections
    with built(args) as corpus:
        asked = corpus.open(cached_sections=size).as_retriever(k=K)
        asked.invoke(corpus.questions[0])  # loads what any query needs
        kept = _kept_bytes(lambda q: asked.invoke(q[0]), corpus.questions[1:], 1)
        fresh = corpus.open(cached_sections=max(size, SAMPLE))
        ids = sorted(fresh.section_store.parent_ids())[:SAMPLE]
        fresh.as_retriever(k=K).invoke(corpus.questions[0])  # sees the index's version
        header = _kept_bytes(fresh.reads.headers, ids, 3 * OPENED_AT_ONCE) / len(ids)
        opened = _kept_bytes(fresh.reads.children_of, ids, OPENED_AT_ONCE) / len(ids)
        children = sum(s.child_count for s in fresh.reads.headers(ids).values()) / len(ids)
    print(f"{len(corpus.papers)} papers, {len(corpus.questions)} questions")
    print(f"cached_sections {size}: {kept / 2**20:.0f} MB kept after one pass over the questions")
    print(
        f"kept per section ({len(ids)} measured): opened {opened / 1024:.1f} KB, header "
        f"{header / 1024:.1f} KB; {children:.1f} children a section, so "
        f"{opened / children / 1024:.1f} KB a child"
    )


if __name__ == "__main__":
    main()
