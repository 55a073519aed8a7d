"""Writer and reader processes for the multi-process suite (``test_writers_and_readers``).

Run as ``python -m tests.integration_tests.rw_worker MODE SPEC ...`` from the repository root,
with the deterministic FAKE embedding (see ``stores.fake_embeddings``):

* ``write SPEC FIRST STOP [HOLD_STEP HOLD_CALL HOLD_SECONDS [RELEASE_FILE]]``: add documents
  ``FIRST`` to ``STOP - 1`` of :func:`documents`, three per ``add_documents`` call. Every store
  write is timed (for the "nothing interleaves" check). With a hold point, the process pauses
  after the Nth call of that store write, inside the writer lock, for ``HOLD_SECONDS`` or until
  ``RELEASE_FILE`` exists, and prints ``holding`` first (so a test can start a competing
  writer, or ``kill -9`` it, while it holds the lock); a writer that reaches its hold point
  when the release file exists already does not pause. Prints one
  JSON line: the store writes as ``[write number, step, start, end]`` and the documents.
* ``read SPEC STOP_FILE``: until ``STOP_FILE`` exists (at most ``READ_LIMIT`` rounds), open the
  index as a new reader would, read its stats and run a query; prints one JSON line with the
  counts and every error as one line (type and message).

The writer logs the library's INFO messages on stderr: a writer that had to wait for the lock
says ``waiting up to ... for the writer lock ..., held by process ...``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from tests.integration_tests.crash_worker import instrumented
from tests.integration_tests.stores import StoreSpec, close_http_clients, fake_embeddings

READ_LIMIT = 200
PER_WRITE = 3


def documents(numbers: range, version: int = 1) -> list[Document]:
    """Small Markdown documents ``doc-N``: two sections of two paragraphs, a ``topic`` key."""
    out = []
    for number in numbers:
        sections = "\n\n".join(
            f"# Section {s} of doc {number}\n\n"
            + "\n\n".join(
                f"Paragraph {p} of section {s} in document {number}, version {version}."
                for p in range(2)
            )
            for s in range(2)
        )
        out.append(
            Document(
                page_content=sections,
                metadata={"doc_id": f"doc-{number}", "topic": f"t{number % 3}"},
            )
        )
    return out


def is_paragraph_of(text: str, doc_id: str) -> bool:
    """Whether ``text`` is a whole paragraph of some version of document ``doc_id``.

    A child's text is cut from its parent's at the child's offsets: a parent and a child of
    two versions of a document would give a piece of text that is not a paragraph.
    """
    number = doc_id.removeprefix("doc-")
    return (
        re.fullmatch(rf"Paragraph \d of section \d in document {number}, version \d\.", text)
        is not None
    )


def write(
    spec: StoreSpec,
    first: int,
    stop: int,
    hold: tuple[str, int, float] | None,
    release: Path | None = None,
) -> None:
    """Add documents ``first..stop-1``, timing every store write (see the module docstring)."""
    calls: list[list[Any]] = []
    started: dict[str, float] = {}

    def hook(step: str, phase: str) -> None:
        if phase == "before":
            started[step] = time.time()
            return
        calls.append([current[0], step, started[step], time.time()])
        if hold is not None and step == hold[0] and counted[step] == hold[1]:
            sys.stdout.write("holding\n")
            sys.stdout.flush()
            until = time.monotonic() + hold[2]
            while time.monotonic() < until and not (release and release.exists()):
                time.sleep(0.05)

    index = spec.open(fake_embeddings())
    current = [0]  # the number of the add_documents call under way
    with instrumented(hook) as counted:
        batch = documents(range(first, stop))
        for number, start in enumerate(range(0, len(batch), PER_WRITE)):
            current[0] = number
            index.add_documents(batch[start : start + PER_WRITE])
    sys.stdout.write(json.dumps({"calls": calls, "writes": len(batch)}) + "\n")


def read(spec: StoreSpec, stop_file: Path) -> None:
    """Open, stats and query in a loop until ``stop_file`` exists (see the module docstring)."""
    opens = queries = results = 0
    errors: list[str] = []
    for _ in range(READ_LIMIT):
        if stop_file.exists():
            break
        try:
            index = spec.open(fake_embeddings())
            opens += 1
            index.stats()
            answer = index.as_retriever(k=4).invoke("paragraph of section 1")
            queries += 1
            results += len(answer)
            errors.extend(
                f"half a document: {d.id} of {d.metadata['doc_id']} reads {d.page_content!r}"
                for d in answer
                if not is_paragraph_of(d.page_content, d.metadata["doc_id"])
            )
        except Exception as error:  # noqa: BLE001 (every failure is reported as one line)
            errors.append(f"{type(error).__name__}: {error}".splitlines()[0])
        finally:
            close_http_clients()
    sys.stdout.write(
        json.dumps({"opens": opens, "queries": queries, "results": results, "errors": errors})
        + "\n"
    )


def main(argv: list[str]) -> None:
    """Dispatch ``write`` or ``read``."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("langchain_gated_parent").setLevel(logging.INFO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        spec = StoreSpec.from_json(argv[1])
        if argv[0] == "write":
            hold = (argv[4], int(argv[5]), float(argv[6])) if len(argv) > 4 else None
            release = Path(argv[7]) if len(argv) > 7 else None
            write(spec, int(argv[2]), int(argv[3]), hold, release)
        else:
            read(spec, Path(argv[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
