"""Load on ``gated-parent serve``: latency and throughput by concurrent clients and workers.

Usage:
    .. code-block:: bash

        python -m benchmarks.load --data ../shared/data/qasper/dev.jsonl

Indexes the first 20 QASPER papers (or opens ``--index``), then starts, for each worker count,
``gated-parent serve --workers N`` on a free 127.0.0.1 port as a separate process (all of them
for the whole run; their measurements alternate) and measures:

* one client, interleaved: each question asked in this process (``retriever.invoke`` and
  ``retriever.ainvoke`` on the same index, with the server's embedding thread count) and of
  every server in turn, so all see the same machine load; p50 of each;
* ``C`` concurrent clients (asyncio, one keep-alive connection each) for ``--seconds``:
  requests, errors, throughput, p50 and p95 of the request latency.

Every run is bounded (``--seconds`` per level and a request cap) and talks to loopback only;
the servers are stopped at the end. Prints a Markdown table, the targets' ratios from this run,
and the load average before and after (the machine may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from benchmarks.metrics import percentile
from benchmarks.qasper_data import load_papers

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_gated_parent.retriever import GatedParentRetriever

PAPERS = 20
WARMUP = 10
MAX_REQUESTS_PER_CLIENT = 2000
"""Cap on one client's requests in one level, whatever ``--seconds`` says."""
START_TIMEOUT = 180.0
INVOKE = "/retriever/invoke"


@dataclass(frozen=True)
class Level:
    """One measured setting: how many workers and concurrent clients, and what came out."""

    workers: int
    clients: int
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]
    load_average: float = 0.0
    """The machine's 1-minute load average when the level ended (the machine may be shared)."""

    @property
    def throughput(self) -> float:
        """Successful requests per second."""
        return (self.requests - self.errors) / self.seconds

    @property
    def p50(self) -> float:
        """Median latency of the successful requests, ms."""
        return statistics.median(self.latencies_ms)

    @property
    def p95(self) -> float:
        """95th percentile latency of the successful requests, ms."""
        return percentile(self.latencies_ms, 95)


def build_index(data: Path, directory: Path, papers: int) -> list[str]:
    """Index the first ``papers`` papers (unless already there); return their questions."""
    from langchain_core.documents import Document  # noqa: PLC0415

    from langchain_gated_parent import GatedParentIndex  # noqa: PLC0415

    loaded = load_papers(data, papers)
    if not GatedParentIndex.exists(directory):
        index = GatedParentIndex(directory=directory)
        index.add_documents(
            [
                Document(
                    page_content=paper.markdown,
                    metadata={"doc_id": paper.paper_id, "title": paper.title},
                )
                for paper in loaded
            ]
        )
        del index
    return [q.question for paper in loaded for q in paper.questions]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def server(index: Path, workers: int) -> Iterator[str]:
    """``gated-parent serve --workers N`` in its own process group, until the block ends."""
    port = _free_port()
    command = [sys.executable, "-m", "langchain_gated_parent.cli", "serve", "--index", str(index)]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                msg = (
                    f"the server exited: {process.stderr.read().decode() if process.stderr else ''}"
                )
                raise RuntimeError(msg)
            if time.monotonic() > deadline:
                msg = f"the server did not answer within {START_TIMEOUT} s"
                raise RuntimeError(msg)
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def interleaved(
    urls: dict[int, str], retriever: GatedParentRetriever, questions: list[str]
) -> dict[str, list[float]]:
    """One client: each question in process (sync, async) and to every server in turn.

    The order rotates from question to question; returns ms per path (``invoke``,
    ``ainvoke``, ``http-<workers>``).
    """
    paths = ["invoke", "ainvoke", *(f"http-{workers}" for workers in urls)]
    timings: dict[str, list[float]] = {path: [] for path in paths}
    loop = asyncio.new_event_loop()
    with contextlib.ExitStack() as stack:
        clients = {
            f"http-{workers}": stack.enter_context(httpx.Client(base_url=url, timeout=60))
            for workers, url in urls.items()
        }

        def ask(path: str, question: str) -> None:
            if path == "invoke":
                retriever.invoke(question)
            elif path == "ainvoke":
                loop.run_until_complete(retriever.ainvoke(question))
            else:
                clients[path].post(INVOKE, json={"input": question}).raise_for_status()

        try:
            for question in questions[:WARMUP]:
                for path in paths:
                    ask(path, question)
            for n, question in enumerate(questions):
                for path in paths[n % len(paths) :] + paths[: n % len(paths)]:
                    started = time.perf_counter()
                    ask(path, question)
                    timings[path].append(1000 * (time.perf_counter() - started))
        finally:
            loop.close()
    return timings


async def _load(url: str, questions: list[str], clients: int, seconds: float) -> Level:
    latencies: list[float] = []
    errors = 0
    requests = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        for question in questions[:clients]:  # open the connections before the clock starts
            await http.post(INVOKE, json={"input": question})
        stop = time.perf_counter() + seconds

        async def client(offset: int) -> None:
            nonlocal errors, requests
            for n in range(MAX_REQUESTS_PER_CLIENT):
                if time.perf_counter() >= stop:
                    return
                question = questions[(offset + n * clients) % len(questions)]
                started = time.perf_counter()
                try:
                    response = await http.post(INVOKE, json={"input": question})
                    ok = response.status_code == 200
                except httpx.HTTPError:
                    ok = False
                requests += 1
                if ok:
                    latencies.append(1000 * (time.perf_counter() - started))
                else:
                    errors += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(c) for c in range(clients)))
        elapsed = time.perf_counter() - began
    return Level(0, clients, requests, errors, elapsed, latencies, os.getloadavg()[0])


def load(url: str, questions: list[str], clients: int, seconds: float, workers: int) -> Level:
    """``clients`` concurrent clients for ``seconds`` (each one request at a time)."""
    level = asyncio.run(_load(url, questions, clients, seconds))
    return dataclasses.replace(level, workers=workers)


def _print_report(
    levels: list[Level], single: dict[int, dict[str, float]], loads: tuple[Any, Any]
) -> None:
    print("| workers | clients | requests | errors | req/s | p50 ms | p95 ms | load avg |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for level in levels:
        print(
            f"| {level.workers} | {level.clients} | {level.requests} | {level.errors} | "
            f"{level.throughput:.1f} | {level.p50:.1f} | {level.p95:.1f} | "
            f"{level.load_average:.1f} |"
        )
    print()
    print(
        "| workers | in-process invoke p50 ms | in-process ainvoke p50 ms | HTTP p50 ms | "
        "HTTP - faster in-process |"
    )
    print("|---:|---:|---:|---:|---:|")
    for workers, p50 in single.items():
        best = min(p50["invoke"], p50["ainvoke"])
        print(
            f"| {workers} | {p50['invoke']:.1f} | {p50['ainvoke']:.1f} | {p50['http']:.1f} | "
            f"{p50['http'] - best:+.1f} ms |"
        )
    print()
    by = {(level.workers, level.clients): level for level in levels}
    for workers in single:
        one, eight = by.get((workers, 1)), by.get((workers, 8))
        if one and eight:
            print(
                f"{workers} worker(s), 8 clients: throughput "
                f"{eight.throughput / one.throughput:.2f} x one client's, "
                f"p95 {eight.p95 / one.p50:.2f} x one client's p50, "
                f"{eight.errors} errors"
            )
    print(f"load average before: {loads[0]}, after: {loads[1]}; cores: {os.cpu_count()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="QASPER jsonl")
    parser.add_argument("--papers", type=int, default=PAPERS)
    parser.add_argument("--index", type=Path, help="index folder (built if empty; default: temp)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=15.0, help="per level (default 15)")
    parser.add_argument(
        "--rounds", type=int, default=2, help="passes over the questions, one client (default 2)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="gated-load-") as tmp:
        directory = args.index or Path(tmp) / "index"
        questions = build_index(args.data, directory, args.papers)
        print(f"{args.papers} QASPER papers, {len(questions)} questions; index {directory}")
        from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings  # noqa: PLC0415
        from langchain_gated_parent.server_settings import ServerSettings  # noqa: PLC0415

        # the server's embedding threads (ServerSettings.embedding_threads), for a fair baseline
        embeddings = MiniLMEmbeddings(intra_op_num_threads=ServerSettings().embedding_threads)
        retriever = GatedParentIndex(embeddings, directory=directory).as_retriever()
        with contextlib.ExitStack() as stack:
            # every server runs for the whole run, and their levels alternate, so a change in
            # the machine's load lands on all of them rather than on the last one measured
            urls = {w: stack.enter_context(server(directory, w)) for w in args.workers}
            before = os.getloadavg()
            timings = interleaved(urls, retriever, questions * args.rounds)
            p50 = {path: statistics.median(values) for path, values in timings.items()}
            single = {
                w: {"invoke": p50["invoke"], "ainvoke": p50["ainvoke"], "http": p50[f"http-{w}"]}
                for w in args.workers
            }
            levels: list[Level] = []
            for n, clients in enumerate(args.clients):
                order = args.workers if n % 2 == 0 else args.workers[::-1]
                levels.extend(load(urls[w], questions, clients, args.seconds, w) for w in order)
            after = os.getloadavg()
        levels.sort(key=lambda level: (level.workers, level.clients))
        _print_report(levels, single, (before, after))


if __name__ == "__main__":
    main()
