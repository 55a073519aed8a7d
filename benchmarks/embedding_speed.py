"""Throughput and query latency of MiniLMEmbeddings on QASPER paragraphs.

Run from the repository root: ``python -m benchmarks.embedding_speed``. It embeds the first
~500 paragraphs of the QASPER dev split twice, with sorted-length batching (what
``embed_documents`` does) and with batches taken in input order (each chunk passed to
``embed_documents`` on its own, so it is padded to its own longest text, unsorted across
chunks), then times single queries on the split's questions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Tokenizer

from langchain_gated_parent.embeddings import MAX_TOKENS, TOKENIZER_PATH, MiniLMEmbeddings

if TYPE_CHECKING:
    from collections.abc import Callable

QASPER_DEV = Path(__file__).resolve().parents[1].parent / "shared/data/qasper/dev.jsonl"


def load_qasper(n_paragraphs: int, n_questions: int) -> tuple[list[str], list[str]]:
    """Read paragraphs and questions of whole papers, in file order, until both are enough."""
    paragraphs: list[str] = []
    questions: list[str] = []
    with QASPER_DEV.open(encoding="utf-8") as lines:
        for line in lines:
            paper = json.loads(line)
            paragraphs.extend(p for s in paper["sections"] for p in s["paragraphs"])
            questions.extend(q["question"] for q in paper["questions"])
            if len(paragraphs) >= n_paragraphs and len(questions) >= n_questions:
                break
    return paragraphs[:n_paragraphs], questions[:n_questions]


def best_seconds(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Wall and CPU seconds of the fastest of ``repeats`` calls (the least disturbed by load).

    CPU seconds (all threads of this process) show the work done when other processes compete
    for the cores and stretch the wall time.
    """
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=500)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="intra_op_num_threads")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    paragraphs, questions = load_qasper(args.paragraphs, args.queries)
    model = MiniLMEmbeddings(batch_size=args.batch_size, intra_op_num_threads=args.threads)
    start = time.perf_counter()
    model.embed_query("warm-up")  # loads the tokenizer and the onnxruntime session
    print(f"model load: {1000 * (time.perf_counter() - start):.0f} ms")

    untruncated = Tokenizer.from_file(str(TOKENIZER_PATH))
    untruncated.no_truncation()
    untruncated.no_padding()
    tokens = [len(e.ids) for e in untruncated.encode_batch(paragraphs)]
    print(
        f"{len(paragraphs)} paragraphs: tokens median {statistics.median(tokens):.0f}, "
        f"max {max(tokens)}, longer than {MAX_TOKENS}: {sum(n > MAX_TOKENS for n in tokens)}"
    )

    def in_input_order() -> None:
        for i in range(0, len(paragraphs), args.batch_size):
            model.embed_documents(paragraphs[i : i + args.batch_size])

    runs = {
        "sorted by length": lambda: model.embed_documents(paragraphs),
        "input order": in_input_order,
    }
    for name, run in runs.items():
        wall, cpu = best_seconds(run, args.repeats)
        print(
            f"{name:>17}: {len(paragraphs) / wall:6.1f} paragraphs/s "
            f"({wall:.2f} s wall, {cpu:.2f} s CPU)"
        )

    latencies = []
    for question in questions:
        start = time.perf_counter()
        model.embed_query(question)
        latencies.append(1000 * (time.perf_counter() - start))
    ventiles = statistics.quantiles(latencies, n=20)
    print(
        f"query latency over {len(questions)} questions: "
        f"p50 {statistics.median(latencies):.1f} ms, p95 {ventiles[18]:.1f} ms"
    )


if __name__ == "__main__":
    main()
