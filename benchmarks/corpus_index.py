"""A gated index over a QASPER corpus, built in a temporary folder for one measurement.

Shared by the scripts that time parts of a query across the collection
(:mod:`benchmarks.term_search`, :mod:`benchmarks.query_steps`): the same arguments, the same
papers and questions as :mod:`benchmarks.latency`, the gated peer's own build.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.embedding_cache import CachedEmbeddings
from benchmarks.peers import PEERS
from benchmarks.qasper import DEFAULT_CACHE_DIR, load_corpus

if TYPE_CHECKING:
    from collections.abc import Iterator


@dataclass(frozen=True)
class CorpusIndex:
    """The built index's folder, the papers and the questions to ask (the last file's)."""

    folder: Path
    papers: list[Any]
    questions: list[str]


def parse_args(description: str) -> argparse.Namespace:
    """``--data`` (repeatable), ``--limit-papers`` and ``--cache-dir``, as the latency run takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", action="append", required=True, help="QASPER jsonl (repeatable)")
    parser.add_argument("--limit-papers", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    return parser.parse_args()


@contextmanager
def built(args: argparse.Namespace, embeddings: Any) -> Iterator[CorpusIndex]:
    """Build the gated index over the papers (embeddings from the disk cache); removed after."""
    papers = load_corpus(args.data, args.limit_papers)
    with tempfile.TemporaryDirectory() as tmp:
        peer = PEERS["gated"]()
        peer.setting = "corpus"
        peer.build(
            papers, Path(tmp), CachedEmbeddings(embeddings, args.cache_dir / "embeddings.sqlite")
        )
        peer.close()
        folder = next(Path(tmp).rglob("docstore.sqlite")).parent
        yield CorpusIndex(folder, papers, [q.question for p in papers for q in p.questions])
