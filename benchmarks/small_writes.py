"""One paper a write into a built index, as an ingest job that adds papers as they come.

Usage:
    .. code-block:: bash

        python -m benchmarks.small_writes --data ../shared/data/qasper/train.jsonl \\
            --data ../shared/data/qasper/dev.jsonl --writes 10

Builds gated over all the papers but the last ``--writes`` (every vector from the embedding
cache, filled first, untimed), then adds those one ``add_documents`` call each, then writes
each of them again with one metadata value changed (a replace of every section: the texts, and
so the vectors, are the same), and prints each write's time and their medians. Gated's Chroma
collections save their HNSW graph after every write
(``langchain_gated_parent.stores.chroma.SYNC_THRESHOLD``), which a write of a few vectors pays
for; a replace also saves the paper's stored version first (``stores.undo``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.corpus_index import corpus_parser
from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import PEERS, gated_document
from benchmarks.qasper import load_corpus


def main() -> None:
    parser = corpus_parser(__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=10, help="papers added one a write")
    args = parser.parse_args()

    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415
    from langchain_gated_parent.index import GatedParentIndex  # noqa: PLC0415

    papers = load_corpus(args.data, args.limit_papers)
    built, added = papers[: -args.writes], papers[-args.writes :]
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), args.cache_dir / "embeddings.sqlite")
    with tempfile.TemporaryDirectory() as tmp:
        filler = PEERS["gated"]()
        filler.build(added, Path(tmp) / "fill", embeddings)  # their vectors, untimed
        filler.close()
        index = GatedParentIndex(embeddings, directory=Path(tmp) / "index")
        index.add_documents([gated_document(paper) for paper in built])
        seconds: dict[str, list[float]] = {"write": [], "replace": []}
        for kind, revision in (("write", {}), ("replace", {"revision": 2})):
            for paper in added:
                document = gated_document(paper)
                document.metadata.update(revision)
                started = time.perf_counter()
                index.add_documents([document])
                seconds[kind].append(time.perf_counter() - started)
    print(f"{len(built)} papers built, then {len(added)} added one a write, then replaced")
    for kind, times in seconds.items():
        print(f"each {kind}: " + " ".join(f"{s:.2f}" for s in times) + " s")
        print(f"median {kind} {statistics.median(times):.2f} s")


if __name__ == "__main__":
    main()
