"""Where a gated build's time goes: its steps timed one by one, beside a flat-para build.

Builds flat-para, then gated, over the papers in this process (vectors from the benchmark's
embedding cache, which must be warm: run ``benchmarks.build_time`` first), each after an
untimed build of one paper (as ``benchmarks.build_time`` does: what a process loads once is no
part of a build), and prints each of gated's write steps' total time beside the two builds'
own. The steps nest (``write`` holds the store writes), so they do not add up
to the build. One run, one process: read the steps against each other, and the build ratio
from ``benchmarks.build_time``.

Usage:
    .. code-block:: bash

        python -m benchmarks.build_steps --data ../shared/data/qasper/dev.jsonl
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.build_time import warm_up
from benchmarks.corpus_index import corpus_parser
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import PEERS
from benchmarks.qasper import load_corpus


def _steps() -> list[tuple[Any, str, str]]:
    """``(owner, attribute, label)`` of every step timed."""
    from langchain_classic.storage.encoder_backed import EncoderBackedStore  # noqa: PLC0415

    from langchain_gated_parent import index  # noqa: PLC0415
    from langchain_gated_parent.stores import chroma, sections, sparse  # noqa: PLC0415

    gated = index.GatedParentIndex
    return [
        (gated, "__init__", "open the index"),
        (gated, "_merge_and_split", "split (parse, count tokens)"),
        (gated, "_embed_documents", "embed (cache reads)"),
        (gated, "_write", "write (every store below)"),
        (index, "_sections_of", "  section records, made"),
        (sections.SectionStore, "put", "  section records, stored"),
        (EncoderBackedStore, "mset", "  docstore and journal"),
        (sparse.SqliteSparseIndex, "upsert", "  sparse index"),
        (chroma.ChromaVectors, "upsert_parents", "  Chroma, parent vectors"),
        (chroma.ChromaVectors, "upsert_children", "  Chroma, child vectors"),
        (gated, "as_retriever", "as_retriever"),
    ]


def _timed(steps: list[tuple[Any, str, str]], totals: defaultdict[str, float]) -> None:
    """Wrap each step so the time of its calls adds up in ``totals``."""
    for owner, attribute, label in steps:
        step = getattr(owner, attribute)

        @functools.wraps(step)
        def timed(*args: Any, _step: Any = step, _label: str = label, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _step(*args, **kwargs)
            finally:
                totals[_label] += time.perf_counter() - started

        setattr(owner, attribute, timed)


def main() -> None:
    args = corpus_parser(__doc__.splitlines()[0]).parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(
        MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite", progress=False
    )
    builds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("flat-para", "gated"):
            warm_up(name, papers, Path(tmp) / f"{name}-warm-up", embeddings)
        steps = _steps()
        totals: defaultdict[str, float] = defaultdict(float)
        _timed(steps, totals)
        for name in ("flat-para", "gated"):
            started = time.perf_counter()
            PEERS[name]().build(papers, Path(tmp) / name, embeddings)
            builds[name] = time.perf_counter() - started
    print(f"{len(papers)} papers, one process, embedding cache warm, one paper built first")
    for name, seconds in builds.items():
        print(f"{name + ' build':34s} {seconds:6.2f} s")
    for _, _, label in steps:
        print(f"  {label:32s} {totals[label]:6.2f} s")


if __name__ == "__main__":
    main()
