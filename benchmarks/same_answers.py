"""Same answers in every process: an index opened by several processes, one after the other.

Usage:
    .. code-block:: bash

        python -m benchmarks.same_answers --data ../shared/data/qasper/dev.jsonl --processes 3

Builds flat-para (one Chroma collection with Chroma's default settings, as LangChain users
create it) and gated over the papers, every vector from the embedding cache, then opens each
index in ``--processes`` fresh processes in turn. Each process asks every question once, its
vector given, and keeps the ids of the top ``--k``. Prints, for each retriever and each process
after the first, how many questions got other ids than in the first process (in order), and
how many another set of ids; and the median time from opening the index to the first answer
(chromadb and the embedding model already loaded; gated's opening loads its other modules and
its token encoding).

A process that opens a Chroma collection inserts the vectors written since Chroma last saved
the collection's HNSW graph (by default, every 1000 vectors) into its own copy of the graph,
which comes out differently each time. Gated's collections save it after every write
(``langchain_gated_parent.stores.chroma.SYNC_THRESHOLD``).
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
    from collections.abc import Callable

RETRIEVERS = ("flat-para", "gated")
FLAT_COLLECTION = "flat_para"
"""flat-para's collection (a flat peer's name, ``-`` written ``_``)."""


def _answers(name: str, folder: Path, asked: Path, k: int) -> tuple[list[list[str]], float]:
    """Each question's top ``k`` ids from ``folder`` (``asked``: texts and vectors, JSON), and
    the seconds from opening the index to the first answer."""
    questions, vectors = json.loads(asked.read_text())
    import chromadb  # noqa: PLC0415 (both load it before the clock starts)

    ask: Callable[[str, list[float]], list[str]]
    if name == "gated":
        from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415
        from langchain_gated_parent.index import GatedParentIndex  # noqa: PLC0415

        # The retriever's modules (LangChain's retriever, tracing) load before the clock too.
        from langchain_gated_parent.retriever import GatedParentRetriever  # noqa: F401, PLC0415

        embeddings = MiniLMEmbeddings()
        embeddings.embed_query("loads the model before the clock starts")
        started = time.perf_counter()
        retriever = GatedParentIndex(embeddings, directory=folder).as_retriever(k=k)

        def ask(question: str, vector: list[float]) -> list[str]:
            return [str(d.id) for d in retriever.invoke(question, query_vector=vector)]
    else:
        started = time.perf_counter()
        client = chromadb.PersistentClient(path=str(folder / "chroma"))
        collection = client.get_collection(FLAT_COLLECTION)

        def ask(question: str, vector: list[float]) -> list[str]:  # noqa: ARG001
            return collection.query(query_embeddings=vector, n_results=k, include=[])["ids"][0]

    answers = [ask(questions[0], vectors[0])]
    opened = time.perf_counter() - started
    answers += [ask(q, v) for q, v in zip(questions[1:], vectors[1:], strict=True)]
    return answers, opened


def _answers_in_process(
    name: str, folder: Path, asked: Path, k: int
) -> tuple[list[list[str]], float]:
    """:func:`_answers` in a fresh process (``--data`` is required, and unread there)."""
    command = [sys.executable, "-m", "benchmarks.same_answers", "--data", "-"]
    command += ["--ask", name, "--folder", str(folder), "--asked", str(asked), "--k", str(k)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    answers, opened = json.loads(done.stdout.splitlines()[-1])
    return answers, opened


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--ask", choices=RETRIEVERS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--asked", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ask is not None:
        print(json.dumps(_answers(args.ask, args.folder, args.asked, args.k)))
        return

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite")
    questions = [q.question for p in papers for q in p.questions]
    with tempfile.TemporaryDirectory() as tmp:
        asked = Path(tmp) / "asked.json"
        vectors = [embeddings.embed_query(q) for q in questions]
        asked.write_text(json.dumps([questions, vectors]))
        for name in RETRIEVERS:
            peer = PEERS[name]()
            peer.setting = "corpus"
            peer.build(papers, Path(tmp) / name, embeddings)
            peer.close()
        # flat-para's peer keeps its Chroma folder in the directory given, gated's an index in it.
        folders = {"flat-para": Path(tmp) / "flat-para", "gated": Path(tmp) / "gated" / "gated"}
        print(
            f"{len(papers)} papers, {len(questions)} questions, top {args.k}, "
            f"{args.processes} processes, each opening the index anew"
        )
        for name in RETRIEVERS:
            done = [
                _answers_in_process(name, folders[name], asked, args.k)
                for _ in range(args.processes)
            ]
            runs = [answers for answers, _ in done]
            opened = statistics.median(seconds for _, seconds in done)
            first = runs[0]
            parts = []
            for n, run in enumerate(runs[1:], 2):
                order = sum(a != b for a, b in zip(first, run, strict=True))
                sets = sum(set(a) != set(b) for a, b in zip(first, run, strict=True))
                parts.append(f"process {n}: {order} differ ({sets} as sets)")
            print(f"{name:10s} " + "; ".join(parts) + f", of {len(questions)}")
            print(f"{name:10s} opening to first answer: median {1000 * opened:.0f} ms")


if __name__ == "__main__":
    main()
