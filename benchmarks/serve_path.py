"""Where a served query's time goes: the same questions through each layer, interleaved.

Usage:
    .. code-block:: bash

        python -m benchmarks.serve_path --data ../shared/data/qasper/dev.jsonl

On an index of the first 20 QASPER papers (``--index`` to reuse one), every question is asked,
in turn and in one process (so each layer sees the same machine load), through:

* ``invoke``: the retriever, synchronously (no event loop, no executor);
* ``ainvoke``: its async driver (query embedding and the two Chroma reads handed to executor
  threads) on an event loop;
* ``asgi``: the LangServe app through an in-memory ASGI transport (request parsing, config
  validation, the per-request guard, callbacks, output serialisation), no socket;
* ``http``: the same app on uvicorn over loopback, one keep-alive connection.

Prints each layer's p50 and the step from the one before it: the cost that layer adds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.load import build_index

ROUNDS = 2
WARMUP = 10
INVOKE = "/retriever/invoke"


async def _measure(directory: Path, questions: list[str]) -> dict[str, list[float]]:
    from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings  # noqa: PLC0415
    from langchain_gated_parent.server import create_app, running_server  # noqa: PLC0415
    from langchain_gated_parent.server_settings import ServerSettings  # noqa: PLC0415

    threads = ServerSettings().embedding_threads
    index = GatedParentIndex(MiniLMEmbeddings(intra_op_num_threads=threads), directory=directory)
    retriever = index.as_retriever()
    app = create_app(retriever)
    timings: dict[str, list[float]] = {"invoke": [], "ainvoke": [], "asgi": [], "http": []}
    transport = httpx.ASGITransport(app=app)
    with running_server(app) as url, httpx.Client(base_url=url, timeout=60) as http:
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as asgi:

            async def ask(layer: str, question: str) -> None:
                if layer == "invoke":
                    retriever.invoke(question)
                elif layer == "ainvoke":
                    await retriever.ainvoke(question)
                elif layer == "asgi":
                    (await asgi.post(INVOKE, json={"input": question})).raise_for_status()
                else:  # blocking on purpose: the server has its own thread and event loop, and
                    # an async client sharing this process's GIL would add its own waits
                    http.post(INVOKE, json={"input": question}).raise_for_status()  # noqa: ASYNC212

            layers = list(timings)
            for question in questions[:WARMUP]:
                for layer in layers:
                    await ask(layer, question)
            for n, question in enumerate(questions * ROUNDS):
                for layer in layers[n % len(layers) :] + layers[: n % len(layers)]:
                    started = time.perf_counter()
                    await ask(layer, question)
                    timings[layer].append(1000 * (time.perf_counter() - started))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="QASPER jsonl")
    parser.add_argument("--papers", type=int, default=20)
    parser.add_argument("--index", type=Path, help="index folder (built if empty; default: temp)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gated-path-") as tmp:
        directory = args.index or Path(tmp) / "index"
        questions = build_index(args.data, directory, args.papers)
        timings = asyncio.run(_measure(directory, questions))
    print(f"{args.papers} QASPER papers, {len(questions)} questions x {ROUNDS}, interleaved")
    print("| layer | p50 ms | added by the layer |")
    print("|---|---:|---:|")
    previous = None
    for layer, values in timings.items():
        p50 = statistics.median(values)
        step = "" if previous is None else f"{p50 - previous:+.1f} ms"
        print(f"| {layer} | {p50:.1f} | {step} |")
        previous = p50


if __name__ == "__main__":
    main()
