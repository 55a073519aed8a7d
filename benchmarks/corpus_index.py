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
    """The built index's folder, the papers, the questions to ask (the last file's) and the
    query embeddings (the bundled model, live)."""

    folder: Path
    papers: list[Any]
    questions: list[str]
    embeddings: Any

    def open(self, **options: Any) -> Any:
        """A ``GatedParentIndex`` on the folder (``options``: e.g. ``cached_sections=0``)."""
        from langchain_gated_parent.index import GatedParentIndex  # noqa: PLC0415

        return GatedParentIndex(self.embeddings, directory=self.folder, **options)


def corpus_parser(description: str) -> argparse.ArgumentParser:
    """``--data`` (repeatable), ``--limit-papers`` and ``--cache-dir``; callers may add more."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--data",
        action="append",
        required=True,
        help="QASPER jsonl; give it twice to index both files and ask the last one's questions",
    )
    parser.add_argument("--limit-papers", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    return parser


@contextmanager
def built(args: argparse.Namespace) -> Iterator[CorpusIndex]:
    """Build the gated index over the papers (embeddings from the disk cache); removed after."""
    from langchain_gated_parent.embeddings import MiniLMEmbeddings  # noqa: PLC0415

    embeddings = MiniLMEmbeddings()
    papers = load_corpus(args.data, args.limit_papers)
    with tempfile.TemporaryDirectory() as tmp:
        peer = PEERS["gated"]()
        peer.setting = "corpus"
        peer.build(
            papers, Path(tmp), CachedEmbeddings(embeddings, args.cache_dir / "embeddings.sqlite")
        )
        peer.close()
        folder = next(Path(tmp).rglob("docstore.sqlite")).parent
        questions = [q.question for p in papers for q in p.questions]
        yield CorpusIndex(folder, papers, questions, embeddings)
