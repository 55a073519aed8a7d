"""Interleaved warm-cache build time: flat-para and gated built alternately, several rounds.

Usage:
    .. code-block:: bash

        python -m benchmarks.build_time --data ../shared/data/qasper/dev.jsonl --rounds 3

``benchmarks.qasper`` builds each retriever once, in its own process, one after the other,
so on a shared machine a load spike can land on one build and not the other. Here both are
built in one process, in turn, ``--rounds`` times, every vector read from the embedding cache
(filled first, untimed). Prints each retriever's median build time and the ratio to
flat-para's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import PEERS
from benchmarks.qasper import DEFAULT_CACHE_DIR, load_corpus

RETRIEVERS = ("flat-para", "gated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", action="append", required=True, help="QASPER jsonl (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    args = parser.parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    papers = load_corpus(args.data, None)
    embeddings = CachedEmbeddings(
        MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite", progress=False
    )
    timings: dict[str, list[float]] = {name: [] for name in RETRIEVERS}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds + 1):  # round 0 fills the cache, untimed
            for name in RETRIEVERS:
                peer = PEERS[name]()
                started = time.perf_counter()
                peer.build(papers, Path(tmp) / f"{name}-{round_}", embeddings)
                if round_:
                    timings[name].append(time.perf_counter() - started)
                peer.close()
    print(f"{len(papers)} papers, {args.rounds} rounds, interleaved, embedding cache warm")
    base = statistics.median(timings["flat-para"])
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:10s} build {median:6.1f} s  / flat-para {median / base:.2f}x")


if __name__ == "__main__":
    main()
