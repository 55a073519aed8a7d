"""A reader's queries while an ingest job writes: latency before, during and after the writes.

Usage:
    .. code-block:: bash

        python -m benchmarks.reads_during_writes --data ../shared/data/qasper/dev.jsonl

Builds gated over all the papers but the last ``--writes`` (every vector from the embedding
cache, filled first, untimed) and opens it in this process, the reader (a server's worker).
A writer process (spawned) then adds the last papers one ``add_documents`` call each, while
the reader asks the questions in turn (their vectors given: the embedding is not what is
measured) for ``--idle`` seconds before the writer starts, all the while it writes, and
``--idle`` seconds after it ends. A reader whose index moved reopens its view of the local
Chroma folder before its next search (``GatedParentIndex.refresh``): the reopens from the
writer's start on are counted (a write the reader first sees after the last one ended is
reopened for in the "after" phase), and the prints give each phase's p50, p95 and maximum and
how many queries it held.
"""

from __future__ import annotations

import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus_index import corpus_parser
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.metrics import percentile
from benchmarks.peers import PEERS, gated_document
from benchmarks.qasper import load_corpus


def _write(folder: str, papers: list[Any], cache: str, started: Any, done: Any) -> None:
    """The ingest job: one paper an ``add_documents`` call (run in its own process)."""
    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415
    from langchain_gated_parent.index import GatedParentIndex  # noqa: PLC0415

    index = GatedParentIndex(CachedEmbeddings(MiniLMEmbeddings(), Path(cache)), directory=folder)
    started.set()
    for paper in papers:
        index.add_documents([gated_document(paper)])
    done.set()


def _line(phase: str, times: list[float], seconds: float) -> str:
    if not times:
        return f"{phase:7s} {seconds:5.1f} s, no queries"
    return (
        f"{phase:7s} {seconds:5.1f} s, {len(times):5d} queries  p50 {statistics.median(times):7.1f}"
        f" ms  p95 {percentile(times, 95):7.1f} ms  max {max(times):7.1f} ms"
    )


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=10, help="papers added one a write")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds asked before and after")
    args = parser.parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415
    from langchain_gated_parent.index import GatedParentIndex  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    built, added = papers[: -args.writes], papers[-args.writes :]
    cache = args.cache_dir / "embeddings.sqlite"
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), cache)
    questions = [q.question for p in built for q in p.questions]
    vectors = [embeddings.embed_query(q) for q in questions]
    spawn = multiprocessing.get_context("spawn")
    started, done = spawn.Event(), spawn.Event()
    times: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        filler = PEERS["gated"]()
        filler.build(added, Path(tmp) / "fill", embeddings)  # their vectors, untimed
        filler.close()
        folder = Path(tmp) / "index"
        GatedParentIndex(embeddings, directory=folder).add_documents(
            [gated_document(p) for p in built]
        )
        index = GatedParentIndex(embeddings, directory=folder)
        reopens = 0
        reopen = index.vectors.reopen

        def counted() -> None:
            nonlocal reopens
            reopens += 1
            reopen()

        index.vectors.reopen = counted  # type: ignore[method-assign]
        retriever = index.as_retriever(k=10)
        writer = spawn.Process(target=_write, args=(str(folder), added, str(cache), started, done))
        phase, n, since = "before", 0, time.monotonic()
        reopens_before = 0
        while True:
            now = time.monotonic()
            if phase == "before" and now - since > args.idle:
                writer.start()
                started.wait()
                seconds[phase], phase, since = now - since, "during", time.monotonic()
                reopens_before = reopens
            elif phase == "during" and done.is_set():
                seconds[phase], phase, since = now - since, "after", now
            elif phase == "after" and now - since > args.idle:
                seconds[phase] = now - since
                break
            question, vector = questions[n % len(questions)], vectors[n % len(vectors)]
            begun = time.perf_counter()
            retriever.invoke(question, query_vector=vector)
            times[phase].append(1000 * (time.perf_counter() - begun))
            n += 1
        writer.join()
    print(f"{len(built)} papers built; a writer process adds {len(added)}, one a write")
    for name, values in times.items():
        print(_line(name, values, seconds[name]))
    print(
        f"reopens of the reader's Chroma view once the writer started: {reopens - reopens_before}"
    )


if __name__ == "__main__":
    main()
