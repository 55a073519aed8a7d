"""Worker processes for the crash, persistence and scale-out suites.

Run as ``python -m tests.integration_tests.crash_worker MODE`` from the repository root:

* ``serve``: a warm "zygote". It imports everything once, then reads one JSON request per
  line on stdin and answers each with one JSON line on stdout. Every request runs in a child
  forked for it (the zygote itself never opens a store, so forking is safe), so a child can be
  killed with ``SIGKILL`` in the middle of an ingest without paying the ~8 s import cost per kill.
  Operations: ``ingest`` (run :func:`run_script`, optionally dying at an injected write or
  being killed after a delay), ``open`` (open the index and recover it, optionally dying in the
  recovery) and ``check`` (reopen, query before recovering, recover, verify, query, re-run the
  ingest, snapshot everything).
  The zygote exits at the end of its stdin; each child is killed after ``CHILD_TIMEOUT`` s.
* ``query SPEC EMBEDDINGS QUERIES``: open an index and print the results of the queries
  (ids and scores) as JSON, for the persistence suite's "reopen in a new process".

Injected kill points need no production hook: the write methods every store write goes through
(``EncoderBackedStore.mset/mdelete`` for the docstore, ``upsert/delete`` of the sparse index,
``save/forget`` of the replaced documents' saved versions, ``Collection.upsert/delete`` for
the parent and child collections) are wrapped, and the child calls
``os.kill(os.getpid(), SIGKILL)`` before or after the Nth call of one of them.

Crash runs use the deterministic FAKE embedding (see ``stores.fake_embeddings``): what a crash
leaves behind does not depend on the model.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import signal
import sys
import time
import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from typing_extensions import Self

from langchain_gated_parent import keys
from tests.integration_tests.stores import StoreSpec, embeddings_named, snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from langchain_gated_parent.index import GatedParentIndex

STEPS = (
    "docstore.mset",
    "docstore.mdelete",
    "parents.upsert",
    "parents.delete",
    "children.upsert",
    "children.delete",
    "sparse.upsert",
    "sparse.delete",
    "undo.save",
    "undo.forget",
)
"""Every kind of write the index makes; a kill point is (step, call number, before|after)."""

ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT = 300.0
BATCH = 3
DELETED = ("doc-5", "doc-6")
TOPICS = ("glycolysis", "rna", "imaging")
QUERIES = ("paragraph about glycolysis", "appendix", "section 2 of doc 4")


# ---------------------------------------------------------------------------------- the workload
def corpus(version: int) -> list[Document]:
    """Eight Markdown documents; version 2 edits, shrinks, grows and re-tags some of them.

    Version 2: ``doc-0`` has an edited paragraph (same ids, new text), ``doc-1`` loses its last
    section (stale parent and children to delete), ``doc-2`` gains a section, ``doc-3`` changes
    metadata only; the rest are unchanged (skipped).
    """
    documents = []
    for i in range(8):
        topic = TOPICS[i % 3]
        sections = [
            (
                f"Section {s} of doc {i}",
                [f"Paragraph {p} of section {s} in document {i} about {topic}." for p in range(3)],
            )
            for s in range(3)
        ]
        if version == 2 and i == 0:
            sections[1][1][0] = "An edited paragraph: the knockdown was repeated twice."
        if version == 2 and i == 1:
            sections = sections[:2]
        if version == 2 and i == 2:
            sections.append(("Appendix", ["A new appendix paragraph with the raw counts."]))
        if version == 2 and i == 3:
            topic = "changed"
        text = "\n\n".join(f"# {title}\n\n" + "\n\n".join(paras) for title, paras in sections)
        documents.append(
            Document(
                page_content=text,
                metadata={"doc_id": f"doc-{i}", "topic": topic, keys.FORMAT: "markdown"},
            )
        )
    return documents


def run_script(index: GatedParentIndex, stage: Callable[[str], None] | None = None) -> None:
    """The ingest under test: version 1 in batches, version 2 in batches, then two deletes.

    Args:
        index: The index to write.
        stage: Called with ``"v1"`` and ``"v2"`` after each version is fully written.
    """
    for version in (1, 2):
        documents = corpus(version)
        for start in range(0, len(documents), BATCH):
            index.add_documents(documents[start : start + BATCH])
        if stage is not None:
            stage(f"v{version}")
    index.delete(DELETED)


# ---------------------------------------------------------------------------------- kill points
@contextmanager
def instrumented(hook: Callable[[str, str], None]) -> Iterator[Counter[str]]:
    """Wrap every store write so ``hook(step, phase)`` runs before and after each call.

    Yields:
        The number of calls made so far, per step.
    """
    from chromadb.api.models.Collection import Collection
    from langchain_classic.storage.encoder_backed import EncoderBackedStore

    from langchain_gated_parent.stores.sparse import PostgresSparseIndex, SqliteSparseIndex
    from langchain_gated_parent.stores.undo import UndoStore

    calls: Counter[str] = Counter()
    originals = {
        (EncoderBackedStore, "mset"): EncoderBackedStore.mset,
        (EncoderBackedStore, "mdelete"): EncoderBackedStore.mdelete,
        (Collection, "upsert"): Collection.upsert,
        (Collection, "delete"): Collection.delete,
        (SqliteSparseIndex, "upsert"): SqliteSparseIndex.upsert,
        (SqliteSparseIndex, "delete"): SqliteSparseIndex.delete,
        (PostgresSparseIndex, "upsert"): PostgresSparseIndex.upsert,
        (PostgresSparseIndex, "delete"): PostgresSparseIndex.delete,
        (UndoStore, "save"): UndoStore.save,
        (UndoStore, "forget"): UndoStore.forget,
    }

    def wrap(owner: type, method: str, original: Any) -> Any:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            if owner is EncoderBackedStore:
                step = f"docstore.{method}"
            elif owner in {SqliteSparseIndex, PostgresSparseIndex}:
                step = f"sparse.{method}"
            elif owner is UndoStore:
                step = f"undo.{method}"
            else:
                step = f"{'parents' if self.name.endswith('-parents') else 'children'}.{method}"
            calls[step] += 1
            hook(step, "before")
            result = original(self, *args, **kwargs)
            hook(step, "after")
            return result

        return wrapper

    for (owner, method), original in originals.items():
        setattr(owner, method, wrap(owner, method, original))
    try:
        yield calls
    finally:
        for (owner, method), original in originals.items():
            setattr(owner, method, original)


def killer(point: list[Any] | None, calls: Counter[str]) -> Callable[[str, str], None]:
    """A hook that SIGKILLs this process at ``point`` = ``[step, n, "before"|"after"]``."""

    def hook(step: str, phase: str) -> None:
        if point is not None and [step, calls[step], phase] == list(point):
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


# ---------------------------------------------------------------------------------- operations
def _ingest(request: dict[str, Any], ready: Callable[[], None]) -> None:
    spec = StoreSpec.from_json(request["spec"])
    embeddings = embeddings_named(request.get("embeddings", "fake"))
    calls: Counter[str] = Counter()
    stages: dict[str, Any] = {}

    def hook(step: str, phase: str) -> None:
        killer(request.get("kill"), calls)(step, phase)

    with instrumented(hook) as counted:
        calls = counted
        index = spec.open(embeddings)
        ready()
        started = time.perf_counter()

        def stage(name: str) -> None:
            if request.get("stages"):
                stages[name] = snapshot(index)
                stages[f"counts_{name}"] = dict(calls)

        run_script(index, stage)
        elapsed = time.perf_counter() - started
    if request.get("stages"):
        stages["final"] = snapshot(index)
        stages["counts"] = dict(calls)
        stages["seconds"] = elapsed
        Path(request["stages"]).write_bytes(pickle.dumps(stages))


def _open(request: dict[str, Any]) -> None:
    spec = StoreSpec.from_json(request["spec"])
    calls: Counter[str] = Counter()

    def hook(step: str, phase: str) -> None:
        killer(request.get("kill"), calls)(step, phase)

    with instrumented(hook) as counted:
        calls = counted
        spec.open(embeddings_named(request.get("embeddings", "fake"))).recover()


def _check(request: dict[str, Any]) -> None:
    """Reopen, read, recover, look at everything, re-run the ingest, look again."""
    spec = StoreSpec.from_json(request["spec"])
    index = spec.open(embeddings_named(request.get("embeddings", "fake")))
    out: dict[str, Any] = {"opened": snapshot(index)}
    out["pending"] = sorted(
        d for d, m in index.journal.all_manifests().items() if m["status"] != "complete"
    )
    out["seen_before_recovery"] = sorted(
        {
            str(d.metadata["doc_id"])
            for query in QUERIES
            for return_parents in (False, True)
            for d in index.as_retriever(k=8, return_parents=return_parents).invoke(query)
        }
    )
    out["read"] = snapshot(index)
    index.recover()
    out["recovered"] = snapshot(index)
    out["verify"] = index.verify().problems
    answers = []
    for query in QUERIES:
        children = index.as_retriever(k=4).invoke(query)
        parents = index.as_retriever(k=4, return_parents=True).invoke(query)
        present = set(index.docstore.yield_keys())
        answers.append(
            {
                "children": [(d.id, d.metadata["parent_id"]) for d in children],
                "parents": [d.id for d in parents],
                "present": sorted(present),
            }
        )
    out["answers"] = answers
    run_script(index)
    out["verify_after_rerun"] = index.verify().problems
    out["final"] = snapshot(index)
    Path(request["out"]).write_bytes(pickle.dumps(out))


def _child(request: dict[str, Any], ready_fd: int) -> int:
    def ready() -> None:
        os.write(ready_fd, b"r")

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            if request["op"] == "ingest":
                _ingest(request, ready)
            elif request["op"] == "open":
                _open(request)
            else:
                _check(request)
    except BaseException:  # noqa: BLE001 (a child reports every failure by its exit status)
        import traceback

        traceback.print_exc(file=sys.stderr)
        return 1
    return 0


def _wait(pid: int, deadline: float) -> tuple[str, int]:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if os.WIFSIGNALED(status):
                return "killed", os.WTERMSIG(status)
            return "exited", os.WEXITSTATUS(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout", -1
        time.sleep(0.02)


def _serve_one(request: dict[str, Any]) -> dict[str, Any]:
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the zygote's loop
        os.close(read_fd)
        code = 1
        try:
            code = _child(request, write_fd)
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write_fd)
    deadline = started + CHILD_TIMEOUT
    delay = request.get("kill_after")
    killed_by_us = False
    if delay is not None:
        readable, _, _ = select.select([read_fd], [], [], CHILD_TIMEOUT)
        if readable and os.read(read_fd, 1) == b"r":
            time.sleep(delay)
            try:
                os.kill(pid, signal.SIGKILL)
                killed_by_us = True
            except ProcessLookupError:
                pass
    status, code = _wait(pid, deadline)
    os.close(read_fd)
    return {
        "status": status,
        "code": code,
        "killed_by_parent": killed_by_us and status == "killed",
        "seconds": time.monotonic() - started,
    }


def serve() -> None:
    """Answer requests from stdin until it closes (see the module docstring)."""
    import chromadb  # noqa: F401 (warm the imports every child needs)

    from langchain_gated_parent.retriever import GatedParentRetriever  # noqa: F401
    from langchain_gated_parent.tokens import get_encoding

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import langchain_classic.storage  # noqa: F401
        import langchain_community.storage  # noqa: F401
    get_encoding("cl100k_base")
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _serve_one(json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def query(spec_json: str, embeddings: str, queries_json: str) -> None:
    """Print the ids and scores of each query's children and parents as one JSON document."""
    index = StoreSpec.from_json(spec_json).open(embeddings_named(embeddings))
    results = []
    for text in json.loads(queries_json):
        children = index.as_retriever(k=6).invoke(text)
        parents = index.as_retriever(k=3, return_parents=True).invoke(text)
        results.append(
            {
                "children": [(d.id, d.metadata["score"]) for d in children],
                "parents": [(d.id, d.metadata["score"]) for d in parents],
            }
        )
    sys.stdout.write(json.dumps(results) + "\n")


def main(argv: list[str]) -> None:
    """Dispatch ``serve`` or ``query`` (see the module docstring)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if argv[0] == "serve":
            serve()
        else:
            query(*argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])


class Zygote:
    """The test side of ``serve``: start the zygote, send requests, stop it.

    Example:
        .. code-block:: python

            with Zygote() as zygote:
                point = ["parents.upsert", 1, "after"]
                zygote.request(op="ingest", spec=spec.to_json(), kill=point)
    """

    def __init__(self) -> None:
        """Start ``python -m tests.integration_tests.crash_worker serve`` and wait until warm."""
        import subprocess

        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.integration_tests.crash_worker", "serve"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self._read()
        if not first.get("ready"):
            msg = f"crash worker did not start: {first!r}"
            raise RuntimeError(msg)

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            msg = f"crash worker exited with {self.process.wait()}"
            raise RuntimeError(msg)
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, **fields: Any) -> dict[str, Any]:
        """Run one operation in a fresh child; returns its status (``killed``/``exited``)."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(fields) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        """Close stdin (the zygote then exits); kill it if it does not within a minute."""
        import subprocess

        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Self:
        """Use as a context manager; the zygote stops at the end of the block."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the zygote."""
        self.close()
