"""Interleaved warm-cache build time: flat-para and gated built alternately, several rounds.

Usage:
    .. code-block:: bash

        python -m benchmarks.build_time --data ../shared/data/qasper/dev.jsonl --rounds 3

``benchmarks.qasper`` builds each retriever once, one after the other, so on a shared machine
a load spike can land on one build and not the other. Here both are built in turn,
``--rounds`` times, which goes first alternating, every vector read from the embedding cache
(filled first, untimed). Each build runs in a fresh process, as a user's would: a local
Chroma's insert threads (``RAYON_NUM_THREADS``) are fixed the first time a process inserts,
so builds sharing one process would all get the thread count of whichever inserted first.
Each process first builds one paper, untimed, so the time is the build's alone: not the
process's start, nor what it loads once (modules, the token encoding, a first Chroma client;
gated's modules alone bring LangChain's retriever and tracing modules, 0.9-1.0 s on a slow
machine, which flat-para's raw Chroma client never imports).
Prints each retriever's median build time, the ratio to flat-para's, and the median of the two
builds' ratio within each round (a round's two builds run minutes apart, not hours: the paired
figure moves less with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.corpus_index import corpus_parser
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import PEERS
from benchmarks.qasper import load_corpus

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.embeddings import Embeddings

    from benchmarks.qasper_data import Paper

RETRIEVERS = ("flat-para", "gated")


def warm_up(name: str, papers: Sequence[Paper], directory: Path, embeddings: Embeddings) -> None:
    """Build ``name`` over the first paper, untimed, before a build that is timed.

    What a process loads once (modules, the token encoding, Chroma's client and threads) is no
    part of a build, and the two peers load different amounts of it.
    """
    peer = PEERS[name]()
    peer.build(papers[:1], directory, embeddings)
    peer.close()


def _build(args: argparse.Namespace, name: str, directory: Path) -> None:
    """Build ``name`` once in this process and print its build time in seconds, as JSON."""
    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(
        MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite", progress=False
    )
    warm_up(name, papers, directory.with_name(f"{directory.name}-warm-up"), embeddings)
    peer = PEERS[name]()
    started = time.perf_counter()
    peer.build(papers, directory, embeddings)
    seconds = time.perf_counter() - started
    peer.close()
    print(json.dumps({"seconds": seconds}))


def _build_in_process(args: argparse.Namespace, name: str, directory: Path) -> float:
    data = [option for path in args.data for option in ("--data", path)]
    if args.limit_papers is not None:
        data += ["--limit-papers", str(args.limit_papers)]
    command = [sys.executable, "-m", "benchmarks.build_time", *data, "--cache-dir"]
    command += [str(args.cache_dir), "--build", name, "--directory", str(directory)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return float(json.loads(done.stdout.splitlines()[-1])["seconds"])


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", choices=RETRIEVERS, help=argparse.SUPPRESS)
    parser.add_argument("--directory", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        _build(args, args.build, args.directory)
        return

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(
        MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite", progress=False
    )
    timings: dict[str, list[float]] = {name: [] for name in RETRIEVERS}
    with tempfile.TemporaryDirectory() as tmp:
        for name in RETRIEVERS:  # fills the embedding cache, untimed
            PEERS[name]().build(papers, Path(tmp) / f"{name}-fill", embeddings)
        for round_ in range(1, args.rounds + 1):
            for name in RETRIEVERS[:: 1 if round_ % 2 else -1]:
                directory = Path(tmp) / f"{name}-{round_}"
                timings[name].append(_build_in_process(args, name, directory))
    print(f"{len(papers)} papers, {args.rounds} rounds, alternating, embedding cache warm")
    base = statistics.median(timings["flat-para"])
    for name, values in timings.items():
        median = statistics.median(values)
        rounds = " ".join(f"{v:.1f}" for v in values)
        ratio = median / base
        print(f"{name:10s} build {median:6.1f} s  / flat-para {ratio:.2f}x  (rounds: {rounds})")
    paired = [g / f for g, f in zip(timings["gated"], timings["flat-para"], strict=True)]
    print(
        f"gated / flat-para, round by round: median {statistics.median(paired):.2f}x "
        f"({' '.join(f'{r:.2f}' for r in paired)})"
    )


if __name__ == "__main__":
    main()
