"""Interleaved query latency: flat-para, flat-hybrid and gated timed question by question.

Usage:
    .. code-block:: bash

        python -m benchmarks.latency --data ../shared/data/qasper/dev.jsonl --setting paper
        python -m benchmarks.latency --data ../shared/data/qasper/train.jsonl \\
            --data ../shared/data/qasper/dev.jsonl --setting corpus   # 1,169 papers, dev questions

``benchmarks.qasper`` times each retriever in its own process, one after the other, so on a
shared machine a load spike can land on one retriever and not the other. Here every index is
built in one process and every question is asked of each in turn (order rotating), with the
query embedded live, so all see the same load. Gated variants with the same build settings
share one build, each through a view with its own read caches (see ``GatedPeer.view``), so
they differ by their query settings only. Prints p50/p95 per retriever and the ratio of each
median to flat-para's. Retrievers: flat-para, flat-hybrid, gated (the defaults) and
gated-dense-gate (the gate before the hybrid one); ``--retrievers`` picks others (any name of
:data:`benchmarks.peers.PEERS`, e.g. ``gated-alpha``, or ``flat-para-retriever``: flat-para's
search through LangChain's Chroma retriever, as a LangChain user runs it). ``--rounds 2``
asks every question again and prints each round apart: the first pays for every first read of
a section or a term, the second shows a process that has read them (a server some time after
it started), as far as its read cache holds them: ``--cached-sections`` sets the gated
indexes' ``cached_sections``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.corpus_index import corpus_parser
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.metrics import percentile
from benchmarks.peers import PEERS, GatedPeer, Peer
from benchmarks.qasper import load_corpus

WARMUP = 5
RETRIEVERS = ("flat-para", "flat-hybrid", "gated", "gated-dense-gate")


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--setting", choices=("paper", "corpus"), default="paper")
    parser.add_argument(
        "--retrievers",
        default=",".join(RETRIEVERS),
        help="comma-separated; flat-para, the base of the ratios, is always timed",
    )
    parser.add_argument("--rounds", type=int, default=1, help="times every question is asked")
    parser.add_argument(
        "--cached-sections", type=int, default=None, help="the gated indexes' read cache size"
    )
    args = parser.parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite")
    names = dict.fromkeys(["flat-para", *args.retrievers.split(",")])
    peers: list[Peer] = [PEERS[name]() for name in names]
    for peer in peers:
        peer.setting = args.setting
        if isinstance(peer, GatedPeer):
            peer.cached_sections = args.cached_sections
    questions = [
        (q.question, p.paper_id if args.setting == "paper" else None)
        for p in papers
        for q in p.questions
    ]
    rounds: list[dict[str, list[float]]] = [{p.name: [] for p in peers} for _ in range(args.rounds)]
    with tempfile.TemporaryDirectory() as tmp:
        builds: dict[str, GatedPeer] = {}
        for peer in peers:
            if not isinstance(peer, GatedPeer):
                peer.build(papers, Path(tmp) / peer.name, embeddings)
                continue
            key = repr(peer.variant.build)
            if key in builds:
                peer.view(builds[key])
                continue
            peer.build(papers, Path(tmp) / peer.name, embeddings)
            builds[key] = peer
        for question, paper_id in questions[:WARMUP]:
            for peer in peers:
                peer.search(question, paper_id)
        for timings in rounds:
            for n, (question, paper_id) in enumerate(questions):
                for peer in peers[n % len(peers) :] + peers[: n % len(peers)]:
                    started = time.perf_counter()
                    peer.search(question, paper_id)
                    timings[peer.name].append(1000 * (time.perf_counter() - started))
        for peer in peers:
            peer.close()
    print(f"{args.setting} setting, {len(papers)} papers, {len(questions)} questions, interleaved")
    for number, timings in enumerate(rounds, 1):
        if args.rounds > 1:
            print(f"round {number}")
        base = statistics.median(timings["flat-para"])
        for name, values in timings.items():
            print(
                f"{name:20s} p50 {statistics.median(values):6.1f} ms  "
                f"p95 {percentile(values, 95):6.1f} ms  "
                f"p50 / flat-para {statistics.median(values) / base:.2f}x"
            )


if __name__ == "__main__":
    main()
