"""How often a fresh process cannot find a stored vector, by how many threads build Chroma's graph.

A local Chroma (1.5) at its default settings keeps the last writes' records, up to 999, in its
log only, and each process that opens the collection inserts them into its own HNSW graph, on
rayon's threads (as many as cores, unless ``RAYON_NUM_THREADS`` says otherwise). With
near-identical vectors, a graph built that way sometimes leaves a stored vector that no query
returns in that process. The package's collections save their graph after every write
(``langchain_gated_parent.stores.chroma.SYNC_THRESHOLD``), so a fresh process loads the graph
the writer saved; the package also scores an index of at most eight documents exactly, from
its section records (see ``docs/scaling-out.md``).

This builds one small folder index the way the CLI writers-and-readers test leaves one:
paragraphs that differ by a digit, indexed, re-indexed with new text and new metadata, and
deleted; then ``--documents`` such files re-indexed at a new revision and every fifth deleted
(192 vectors at the default 40, fewer than Chroma's default 1,000 between saves). For each
setting, a fresh copy of the folder is opened in each of ``--processes`` new processes, which
queries every stored parent and child vector with itself (``n_results``: all of them) and
counts those its own query does not return. Settings: Chroma's default threads, and
``RAYON_NUM_THREADS=1``.

Usage:
    .. code-block:: bash

        python -m benchmarks.graph_threads --processes 100
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SETTINGS = {"default threads": None, "RAYON_NUM_THREADS=1": "1"}
"""Each setting's ``RAYON_NUM_THREADS`` in the probing process (``None``: unset)."""


def write_docs(folder: Path, numbers: range, version: int, front: str = "") -> list[Path]:
    """Markdown files ``dN.md`` of two parts with two paragraphs each, differing by numbers only.

    The CLI writers-and-readers test writes these too.
    """
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for number in numbers:
        body = "\n\n".join(
            f"# Part {s} of d{number}\n\n"
            + "\n\n".join(
                f"Paragraph {p} of part {s} in file d{number}, revision {version}, on glycolysis."
                for p in range(2)
            )
            for s in range(2)
        )
        path = folder / f"d{number}.md"
        path.write_text(front + body, encoding="utf-8")
        written.append(path)
    return written


def build(directory: Path, work: Path, documents: int) -> int:
    """The CLI test's writes, in order by one process, then ``documents`` files rewritten.

    Returns how many vectors the index stores.
    """
    from langchain_gated_parent import GatedParentIndex  # noqa: PLC0415
    from langchain_gated_parent.loaders import load_documents  # noqa: PLC0415

    index = GatedParentIndex(directory=directory)
    seed = work / "seed.md"
    seed.write_text("# Seed\n\nA first document so the server has an index to open.\n")
    index.add_documents(load_documents([seed]))
    first = write_docs(work / "first", range(6), version=1)
    index.add_documents(load_documents(first))
    index.delete(["seed.md"])
    write_docs(work / "first", range(1, 2), version=2)
    write_docs(work / "first", range(2, 3), version=1, front="---\nlab: north\n---\n")
    index.add_documents(load_documents(first[:3]))
    index.delete(["d3.md"])
    index.add_documents(load_documents(write_docs(work / "second", range(6, 9), version=1)))
    # Then more of the same, so a process fails often enough to count: every file re-indexed
    # with new text, new ones added, every fifth deleted.
    index.add_documents(load_documents(write_docs(work / "all", range(documents), version=3)))
    index.delete([f"d{n}.md" for n in range(0, documents, 5)])
    parents, children = index.vectors.counts()
    return parents + children


def probe(directory: Path) -> None:
    """Open the index as a reader and print how many stored vectors their own query misses."""
    from langchain_gated_parent import GatedParentIndex  # noqa: PLC0415

    index = GatedParentIndex(directory=directory)
    unreachable = 0
    for collection in (index.vectors.parents, index.vectors.children):
        stored = collection.get(include=["embeddings"])
        found = collection.query(
            query_embeddings=stored["embeddings"], n_results=len(stored["ids"]), include=[]
        )
        unreachable += sum(
            own not in ids for own, ids in zip(stored["ids"], found["ids"], strict=True)
        )
    print(json.dumps({"unreachable": unreachable}))


def _probe_copy(built: Path, scratch: Path, threads: str | None) -> int:
    copy = scratch / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(built, copy)
    env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    if threads is not None:
        env["RAYON_NUM_THREADS"] = threads
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.graph_threads", "--probe", str(copy)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(json.loads(out.splitlines()[-1])["unreachable"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=100, help="fresh processes a setting")
    parser.add_argument(
        "--documents", type=int, default=40, help="files rewritten after the CLI test's writes"
    )
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe is not None:
        probe(args.probe)
        return
    with tempfile.TemporaryDirectory() as scratch:
        built = Path(scratch) / "index"
        vectors = build(built, Path(scratch), args.documents)
        print(f"{vectors} vectors stored; {args.processes} fresh processes a setting")
        for name, threads in SETTINGS.items():
            lost = [_probe_copy(built, Path(scratch), threads) for _ in range(args.processes)]
            failed = sum(1 for n in lost if n)
            print(
                f"{name:22s} processes that missed a stored vector {failed:4d} of {len(lost)}"
                f"  (vectors missed: {sum(lost)})",
                flush=True,
            )


if __name__ == "__main__":
    main()
