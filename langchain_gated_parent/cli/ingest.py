"""Adding documents in batches with a progress bar and a one-line summary (``index``, ``demo``)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tqdm import tqdm

from langchain_gated_parent.cli.common import EXIT_FAILURE, WRITE_REFUSALS, refused

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.documents import Document

    from langchain_gated_parent.index import GatedParentIndex

DEFAULT_BATCH_SIZE = 16


@dataclass
class Totals:
    """What an ingest did, summed over its batches."""

    documents: int = 0
    unchanged: int = 0
    parents: int = 0
    children: int = 0
    reused: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: counts, seconds and rates (children/s: embedding throughput, if none kept)."""
        seen = self.documents + self.unchanged
        seconds = max(self.seconds, 1e-9)
        kept = f", {self.reused} texts' vectors kept from before" if self.reused else ""
        return (
            f"indexed {seen} documents ({self.documents} new or changed, {self.unchanged} "
            f"unchanged): {self.parents} parents, {self.children} children{kept} in "
            f"{self.seconds:.1f} s ({seen / seconds:.3g} documents/s, "
            f"{self.children / seconds:.3g} children/s)"
        )


def ingest(index: GatedParentIndex, documents: Sequence[Document], batch_size: int) -> Totals:
    """Add documents in batches, with a progress bar on stderr when it is a terminal."""
    totals = Totals()
    started = time.perf_counter()
    with tqdm(
        total=len(documents), desc="indexing", unit="doc", file=sys.stderr, disable=None
    ) as bar:
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            with refused(EXIT_FAILURE, *WRITE_REFUSALS):
                report = index.add_documents(batch)
            totals.documents += report.documents
            totals.unchanged += report.unchanged
            totals.parents += report.parents
            totals.children += report.children
            totals.reused += report.reused
            bar.set_postfix(parents=totals.parents, children=totals.children, refresh=False)
            bar.update(len(batch))
    totals.seconds = time.perf_counter() - started
    return totals
