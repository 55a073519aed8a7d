"""Concurrency: eight threads query while a ninth re-ingests and deletes documents.

The index is a real persistent Chroma with the SQLite docstore; embeddings are the
deterministic FAKE (see ``stores.fake_embeddings``), since what is checked is consistency,
not relevance. Every loop is bounded by an iteration count and a deadline.

What an answer may contain, given that documents change under it. A query runs in the time
window ``[t0, t1]``; its answer is checked at ``t2 > t1``:

* every returned child is a child the index legitimately held (its id, text and parent id are
  those of some version of its document), so nothing half-written or foreign leaks out;
* a returned child's parent is in the docstore at ``t2``, or a write to that child's document
  (a replace or a delete) ended after ``t0``: the parent was present when the gate opened it
  and was legitimately removed since;
* with ``return_parents=True``, no parent is dangling: each returned parent has the exact text
  of some version of that parent (the retriever drops a parent deleted between search and
  fetch rather than return an empty one), and the same presence rule holds.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_gated_parent import keys
from langchain_gated_parent.splitters import split_document
from tests.integration_tests.crash_worker import corpus
from tests.integration_tests.stores import StoreSpec, fake_embeddings

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_gated_parent.index import GatedParentIndex

READERS = 8
WRITES = 24
MAX_QUERIES_PER_READER = 400
DEADLINE = 60.0
QUERY_TEXTS = (
    "paragraph about glycolysis",
    "section 1 of doc 3",
    "edited paragraph knockdown",
    "appendix raw counts",
    "imaging",
)


@dataclass
class Journal:
    """What the writer did, when: per document, writes in progress and when the others ended."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    writing: set[str] = field(default_factory=set)
    writes_ended: dict[str, list[float]] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    operations: int = 0

    def start(self, doc_id: str) -> None:
        with self.lock:
            self.writing.add(doc_id)

    def end(self, doc_id: str) -> None:
        with self.lock:
            self.writing.discard(doc_id)
            self.writes_ended.setdefault(doc_id, []).append(time.monotonic())
            self.operations += 1

    def written_since(self, doc_id: str, t0: float) -> bool:
        """A write to ``doc_id`` is in progress, or one ended after ``t0``."""
        with self.lock:
            return doc_id in self.writing or any(
                end >= t0 for end in self.writes_ended.get(doc_id, [])
            )


@dataclass
class Outcome:
    """What one concurrent run exercised and found."""

    queries: int = 0
    results: int = 0
    parents_returned: int = 0
    legitimately_gone: int = 0
    writes: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def legitimate_versions(index: GatedParentIndex) -> tuple[dict[str, set[Any]], dict[str, set[str]]]:
    """Every (text, parent id) a child id and every text a parent id has in some version."""
    children: dict[str, set[Any]] = {}
    parents: dict[str, set[str]] = {}
    for version in (1, 2):
        for document in corpus(version):
            split = split_document(
                document,
                parent_splitter=index.parent_splitter,
                child_splitter=index.child_splitter,
            )
            for child in split.children:
                children.setdefault(child.metadata[keys.CHUNK_ID], set()).add(
                    (child.page_content, child.metadata[keys.PARENT_ID])
                )
            for parent in split.parents:
                parents.setdefault(parent.metadata[keys.PARENT_ID], set()).add(parent.page_content)
    return children, parents


def exercise_concurrently(index: GatedParentIndex) -> Outcome:  # noqa: C901, PLR0915 (one scenario)
    """Run ``READERS`` query threads against one writer thread; return what happened.

    The index must hold version 1 of :func:`crash_worker.corpus` when called.
    """
    journal = Journal()
    outcome = Outcome()
    known_children, known_parents = legitimate_versions(index)
    counter_lock = threading.Lock()
    deadline = time.monotonic() + DEADLINE
    versions = {1: corpus(1), 2: corpus(2)}

    def writer() -> None:
        try:
            for step in range(WRITES):
                if time.monotonic() > deadline:
                    break
                number = step % 8
                doc_id = f"doc-{number}"
                journal.start(doc_id)
                if step % 3 == 2:
                    index.delete([doc_id])
                else:
                    index.add_documents([versions[1 + step % 2][number]])
                journal.end(doc_id)
        except Exception as error:  # noqa: BLE001 (reported as a test failure below)
            outcome.errors.append(f"writer: {error!r}")
        finally:
            journal.done.set()

    def check(answer: list[Any], t0: float, *, parents: bool, where: str) -> None:
        present = set(index.docstore.yield_keys())
        for document in answer:
            meta = document.metadata
            doc_id = meta[keys.DOC_ID]
            if parents:
                pid = document.id
                if document.page_content not in known_parents.get(pid, set()):
                    outcome.errors.append(f"{where}: parent {pid} is not a legitimate version")
            else:
                pid = meta[keys.PARENT_ID]
                if (document.page_content, pid) not in known_children.get(document.id, set()):
                    outcome.errors.append(f"{where}: child {document.id} is not legitimate")
            if pid not in present:
                if journal.written_since(doc_id, t0):
                    with counter_lock:
                        outcome.legitimately_gone += 1
                else:
                    outcome.errors.append(f"{where}: {document.id}'s parent {pid} is dangling")

    def reader(number: int) -> None:
        return_parents = number >= READERS // 2
        retriever = index.as_retriever(k=5, parent_top_k=3, return_parents=return_parents)
        loop = asyncio.new_event_loop() if number == READERS - 1 else None
        try:
            for iteration in range(MAX_QUERIES_PER_READER):
                if journal.done.is_set() or time.monotonic() > deadline:
                    break
                query = QUERY_TEXTS[(number + iteration) % len(QUERY_TEXTS)]
                t0 = time.monotonic()
                if loop is not None:  # one reader goes through the async path
                    answer = loop.run_until_complete(retriever.ainvoke(query))
                else:
                    answer = retriever.invoke(query)
                check(answer, t0, parents=return_parents, where=f"reader {number}")
                with counter_lock:
                    outcome.queries += 1
                    outcome.results += len(answer)
                    outcome.parents_returned += len(answer) if return_parents else 0
        except Exception as error:  # noqa: BLE001 (reported as a test failure below)
            where = traceback.extract_tb(error.__traceback__)
            calls = " < ".join(f"{f.name}:{f.lineno}" for f in reversed(where[-6:]))
            outcome.errors.append(f"reader {number}: {error!r} at {calls}")
        finally:
            if loop is not None:
                loop.close()

    started = time.monotonic()
    threads = [threading.Thread(target=reader, args=(n,)) for n in range(READERS)]
    threads.append(threading.Thread(target=writer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=DEADLINE + 30)
    outcome.seconds = time.monotonic() - started
    outcome.writes = journal.operations
    assert not any(thread.is_alive() for thread in threads), "a thread did not stop"
    return outcome


def check_concurrent_use(index: GatedParentIndex) -> Outcome:
    """Ingest version 1, run :func:`exercise_concurrently`, assert everything held."""
    index.add_documents(corpus(1))
    outcome = exercise_concurrently(index)
    assert outcome.errors == []
    assert outcome.writes == WRITES
    assert outcome.queries >= READERS
    assert outcome.results > 0
    report = index.verify()
    assert report.ok, report.problems
    deleted = {f"doc-{step % 8}" for step in range(WRITES) if step % 3 == 2}
    last = {f"doc-{step % 8}": step % 3 == 2 for step in range(WRITES)}
    assert report.documents == 8 - sum(last.values())
    assert deleted  # the run did delete documents under the readers
    return outcome


def test_queries_stay_consistent_while_documents_change(tmp_path: Path) -> None:
    spec = StoreSpec(directory=str(tmp_path / "index"))
    index = spec.open(fake_embeddings())
    outcome = check_concurrent_use(index)
    print(  # noqa: T201 (the numbers go into the report, shown with -s)
        f"\nconcurrency: {outcome.queries} queries on {READERS} threads, {outcome.writes} writes, "
        f"{outcome.results} results ({outcome.parents_returned} parents), "
        f"{outcome.legitimately_gone} legitimately gone, {outcome.seconds:.1f} s"
    )
