"""Writers and readers in separate processes on one index: nothing lost, nothing half seen.

* On a folder index, through the CLI as users run it: writer processes (``index``, ``delete``,
  re-``index`` of changed files, two at a time) while reader processes loop ``stats`` and
  ``query`` and a ``serve`` server answers HTTP queries, repeated ``ROUNDS`` times. Every
  write that exits 0 leaves its documents present, ``verify`` is clean, every reader gets
  answers or one clear error line, and the server sees a metadata key a writer added after it
  started.
* On a ``chroma run`` server with a PostgreSQL docstore (and on a folder): two writer processes
  at once; the second waits for the writer lock, both succeed, their writes do not interleave,
  and reader processes see only whole documents.
* ``kill -9`` of a writer holding the lock mid-write: the next writer takes the lock, rolls
  back what the dead one left, and a re-run converges to the uninterrupted state.

The CLI runs with the bundled MiniLM (it has no other model); the worker processes
(``rw_worker``) use the deterministic FAKE embedding. Figures (runs, processes, index opens,
documents lost) are printed for the record (``-s``).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from benchmarks.graph_threads import write_docs
from tests.integration_tests.crash_worker import ROOT
from tests.integration_tests.rw_worker import PER_WRITE
from tests.integration_tests.rw_worker import documents as rw_documents
from tests.integration_tests.stores import (
    POSTGRES_ENV,
    StoreSpec,
    assert_same_state,
    chroma_server,
    close_http_clients,
    fake_embeddings,
    free_port,
    snapshot,
    wait_until_healthy,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

ROUNDS = 2
READER_LIMIT = 40
"""Most commands one CLI reader loop runs in a round (it stops when the writers are done)."""
PROCESS_TIMEOUT = 300.0
SERVER_START = 120.0


@dataclass
class Tally:
    """What a test exercised, printed for the record."""

    runs: int = 0
    processes: int = 0
    opens: int = 0
    queries: int = 0
    http_queries: int = 0
    documents_lost: int = 0
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def line(self, what: str) -> str:
        return (
            f"\n{what}: {self.runs} runs, {self.processes} processes, {self.opens} index opens, "
            f"{self.queries} queries, {self.http_queries} HTTP queries, "
            f"{self.documents_lost} documents lost, {len(self.errors)} clear reader errors"
            + "".join(f"\n  {error}" for error in sorted(set(self.errors)))
        )


# ---------------------------------------------------------------------------------- the CLI
def gated_parent(*argv: Any) -> list[str]:
    return [sys.executable, "-m", "langchain_gated_parent.cli", *map(str, argv)]


def run(command: list[str], tally: Tally) -> subprocess.CompletedProcess[str]:
    tally.add(processes=1, opens=1)
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT,
        check=False,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )


def assert_clean_failure(result: subprocess.CompletedProcess[str]) -> str:
    """A failed command printed one ``gated-parent: error:`` line, no traceback."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "Traceback" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gated-parent: error: "), result.stderr
    return lines[0]


class ReaderLoop(threading.Thread):
    """Run a read-only command again and again until told to stop; check every outcome."""

    def __init__(self, command: list[str], tally: Tally, stop: threading.Event) -> None:
        super().__init__()
        self.command, self.tally, self.stop = command, tally, stop
        self.failures: list[str] = []

    def run(self) -> None:
        for _ in range(READER_LIMIT):
            if self.stop.is_set():
                break
            result = run(self.command, self.tally)
            try:
                if result.returncode == 0:
                    answer = json.loads(result.stdout)
                    assert isinstance(answer, (list, dict)), result.stdout
                    self.tally.add(queries=1)
                else:
                    line = assert_clean_failure(result)
                    with self.tally.lock:
                        self.tally.errors.append(line)
            except (AssertionError, ValueError) as error:
                self.failures.append(f"{self.command[3]}: {error}")


class HttpLoop(threading.Thread):
    """Query a ``serve`` server until told to stop: 200 with results, or 503 with a reason."""

    def __init__(self, url: str, tally: Tally, stop: threading.Event) -> None:
        super().__init__()
        self.url, self.tally, self.stop = url, tally, stop
        self.failures: list[str] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as client:
            while not self.stop.wait(0.2):
                response = client.post("/retriever/invoke", json={"input": "glycolysis part 1"})
                self.tally.add(http_queries=1)
                body = response.json()
                if response.status_code == 200 and isinstance(body.get("output"), list):
                    continue
                if response.status_code == 503 and isinstance(body.get("detail"), str):
                    with self.tally.lock:  # a clear "retry" answer
                        self.tally.errors.append(body["detail"])
                    continue
                self.failures.append(f"{response.status_code}: {response.text[:300]}")


@contextmanager
def serving(directory: Path, tally: Tally) -> Iterator[str]:
    """Run ``gated-parent serve`` on 127.0.0.1 until the block ends; yields its URL."""
    port = free_port()
    tally.add(processes=1, opens=1)
    server = subprocess.Popen(
        gated_parent("serve", "--index", directory, "--port", port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, server, SERVER_START)
        yield url
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert "Traceback" not in output, output


def start_writers(*commands: list[str], tally: Tally) -> list[subprocess.CompletedProcess[str]]:
    """Run writer commands at the same time; returns their results in order."""
    results: list[Any] = [None] * len(commands)

    def one(position: int) -> None:
        results[position] = run(commands[position], tally)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(commands))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def assert_searchable(index: GatedParentIndex, state: dict[str, Any]) -> None:
    """Every stored vector is found by a query with itself: it is in the vector index too.

    Among the top 3, not first, so a near-identical vector may rank ahead. For the fake
    embedding's spread-out vectors; on near-identical ones an HNSW graph can leave a stored
    vector no query returns (see :func:`assert_found_by_own_text`).
    """
    for part in ("parents", "children"):
        rows, collection = state[part], getattr(index, part)
        found = collection.query(query_embeddings=rows["embeddings"], n_results=3, include=[])
        missing = [i for i, hits in zip(rows["ids"], found["ids"], strict=True) if i not in hits]
        assert missing == [], part


def assert_found_by_own_text(index: GatedParentIndex) -> None:
    """Every stored child is among the retriever's top 3 for its own text, duplicates kept.

    An index of a few documents is scored exactly (no HNSW graph, whose near-identical
    vectors can leave one no query returns), so the answer does not depend on the process.
    Dedupe is off: two paragraphs with the same words in another order get nearly the same
    vector, and it would keep only one of them.
    """
    parents = [p for m in index.journal.all_manifests().values() for p in m["parents"]]
    rows = index.children_of(parents)
    assert index.document_sections(None) is not None, "expected an index scored exactly"
    retriever = index.as_retriever(k=3)
    missing = [
        child
        for child, text in zip(rows.ids, rows.texts, strict=True)
        if child not in [d.id for d in retriever.invoke(text, dedupe=False)]
    ]
    assert missing == []


def cli_round(work: Path, tally: Tally, embeddings: MiniLMEmbeddings) -> None:
    """One round of the CLI scenario on a fresh folder index (see the module docstring)."""
    from langchain_gated_parent import GatedParentIndex

    index_dir, first, second = work / "index", work / "first", work / "second"
    write_docs(first, range(6), version=1)
    write_docs(second, range(6, 9), version=1)
    seed = work / "seed.md"
    seed.write_text("# Seed\n\nA first document so the server has an index to open.\n")
    assert run(gated_parent("index", seed, "--index", index_dir), tally).returncode == 0
    stop = threading.Event()
    with serving(index_dir, tally) as url:
        readers = [
            ReaderLoop(gated_parent("stats", "--index", index_dir, "--json"), tally, stop),
            ReaderLoop(
                gated_parent("query", "glycolysis part 1", "--index", index_dir, "--json"),
                tally,
                stop,
            ),
        ]
        http = HttpLoop(url, tally, stop)
        for reader in [*readers, http]:
            reader.start()
        try:
            written = start_writers(
                gated_parent("index", first, "--index", index_dir),
                gated_parent("delete", "seed.md", "--index", index_dir),
                tally=tally,
            )
            # Re-index changed files (d1's text; d2 gains a metadata key; d3's file is gone and
            # its document deleted) beside new ones, three writers at once.
            write_docs(first, range(1, 2), version=2)
            write_docs(first, range(2, 3), version=1, front="---\nlab: north\n---\n")
            (first / "d3.md").unlink()
            written += start_writers(
                gated_parent("index", first, "--index", index_dir),
                gated_parent("index", second, "--index", index_dir),
                gated_parent("delete", "d3.md", "--index", index_dir),
                tally=tally,
            )
            # The server opened the index before "lab" existed: a filter on it is accepted now.
            answer = httpx.post(
                f"{url}/retriever/invoke",
                json={
                    "input": "glycolysis",
                    "config": {"configurable": {"filter": {"lab": "north"}}},
                },
                timeout=60,
            )
            tally.add(http_queries=1)
        finally:
            stop.set()
            for reader in [*readers, http]:
                reader.join(timeout=PROCESS_TIMEOUT)
    for result in written:
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
    assert answer.status_code == 200, answer.text
    assert {d["metadata"]["doc_id"] for d in answer.json()["output"]} == {"d2.md"}
    for reader in [*readers, http]:
        assert reader.failures == [], reader.failures
    verified = run(gated_parent("verify", "--index", index_dir), tally)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    expected = {f"d{n}.md" for n in (0, 1, 2, 4, 5, 6, 7, 8)}
    index = GatedParentIndex(embeddings, directory=index_dir)
    manifests = index.journal.all_manifests()
    tally.add(opens=1, documents_lost=len(expected - set(manifests)))
    assert set(manifests) == expected
    assert all(m["status"] == "complete" for m in manifests.values())
    edited = index.get_parents(manifests["d1.md"]["parents"])
    assert all(p is not None and "revision 2" in p.page_content for p in edited)
    assert index.verify().ok
    assert_found_by_own_text(index)


def test_cli_writers_and_readers_on_a_folder(tmp_path: Path, embeddings: MiniLMEmbeddings) -> None:
    tally = Tally()
    for number in range(ROUNDS):
        cli_round(tmp_path / f"round-{number}", tally, embeddings)
        tally.add(runs=1)
    print(tally.line("CLI writers and readers on a folder"))  # noqa: T201 (for the record)
    assert tally.documents_lost == 0
    assert tally.queries > 0
    assert tally.http_queries > 0


# ---------------------------------------------------------------------------------- workers
def worker(*argv: Any) -> list[str]:
    return [sys.executable, "-m", "tests.integration_tests.rw_worker", *map(str, argv)]


def popen(command: list[str], tally: Tally, log: Path) -> subprocess.Popen[str]:
    """Start a worker; its stderr goes to ``log`` (a test can watch it while it runs)."""
    tally.add(processes=1)
    with log.open("w") as stderr:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT)


def finish(process: subprocess.Popen[str], log: Path) -> tuple[int, str, str]:
    out, _ = process.communicate(timeout=PROCESS_TIMEOUT)
    return process.returncode, out, log.read_text()


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PROCESS_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def write_spans(output: str) -> list[tuple[float, float]]:
    """Each ``add_documents`` call's span, from its first to its last store write."""
    spans: dict[int, list[float]] = {}
    for number, _step, start, end in json.loads(output.splitlines()[-1])["calls"]:
        span = spans.setdefault(number, [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    return [(a, b) for a, b in spans.values()]


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV, "")
    if url:
        return url
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{POSTGRES_ENV} is not set under CI=true")
    pytest.skip(f"set {POSTGRES_ENV} (source .ci/postgres.sh && postgres_up) to run this")


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with chroma_server(tmp_path_factory.mktemp("chroma-server")) as port:
        yield port
    gc.collect()


@pytest.fixture(params=["folder", "server-and-postgres"])
def new_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], StoreSpec]]:
    """A factory of fresh stores: a folder, or a Chroma server with a PostgreSQL docstore."""
    made: list[StoreSpec] = []

    def new() -> StoreSpec:
        tag = uuid.uuid4().hex[:10]
        if request.param == "folder":
            made.append(StoreSpec(directory=str(tmp_path / tag)))
        else:
            made.append(
                StoreSpec(
                    directory=str(tmp_path / tag),
                    name=f"gp-{tag}",
                    chroma_port=request.getfixturevalue("chroma_port"),
                    postgres_url=postgres_url(),
                    namespace=f"gp-{tag}",
                )
            )
        return made[-1]

    try:
        yield new
    finally:
        for spec in made:
            spec.drop()
        close_http_clients()
        gc.collect()


def check_index(spec: StoreSpec, documents: int) -> dict[str, Any]:
    """All ``documents`` present, complete and searchable, stores in agreement; a snapshot."""
    index = spec.open(fake_embeddings())
    manifests = index.journal.all_manifests()
    assert sorted(manifests) == sorted(f"doc-{n}" for n in range(documents))
    assert all(m["status"] == "complete" for m in manifests.values())
    report = index.verify()
    assert report.ok, report.problems
    state = snapshot(index)
    assert_searchable(index, state)
    return state


def test_two_writers_at_once_wait_for_each_other(
    new_spec: Callable[[], StoreSpec], tmp_path: Path
) -> None:
    tally = Tally()
    spec = new_spec()
    tag = uuid.uuid4().hex[:6]
    stop_file, release = tmp_path / f"stop-{tag}", tmp_path / f"release-{tag}"
    logs = [tmp_path / f"{tag}-{n}.log" for n in range(4)]
    readers = [popen(worker("read", spec.to_json(), stop_file), tally, logs[n]) for n in (2, 3)]
    # Both start at once; whichever takes the lock first pauses inside its first write until
    # the other has said that it waits for the lock.
    writers = [
        popen(
            worker("write", spec.to_json(), first, first + 6, "children.upsert", 1, 600, release),
            tally,
            logs[n],
        )
        for n, first in enumerate((0, 6))
    ]
    wait_for(
        lambda: (
            any("waiting up to" in log.read_text() for log in logs[:2])
            or any(writer.poll() is not None for writer in writers)
        ),
        "a waiter",
    )
    release.touch()
    done = [finish(writer, log) for writer, log in zip(writers, logs, strict=False)]
    stop_file.touch()
    read = [finish(reader, log) for reader, log in zip(readers, logs[2:], strict=True)]
    for code, _out, err in done:
        assert code == 0, err
    assert any("waiting up to" in err for _code, _out, err in done), "no writer waited"
    spans = [write_spans(out) for _code, out, _err in done]
    assert len(spans[0]) == len(spans[1]) == 6 // PER_WRITE
    for a_start, a_end in spans[0]:
        for b_start, b_end in spans[1]:
            assert a_end < b_start or b_end < a_start, "two writes interleaved"
    for code, out, err in read:
        assert code == 0, err
        outcome = json.loads(out.splitlines()[-1])
        # A reader may get the clear "retry the query" refusal of a read that kept colliding
        # with the writers (counted in the record line), never any other error.
        unclear = [e for e in outcome["errors"] if not e.startswith("ConcurrentWriteError: ")]
        assert unclear == [], unclear
        with tally.lock:
            tally.errors.extend(outcome["errors"])
        tally.add(opens=outcome["opens"], queries=outcome["queries"])
    check_index(spec, 12)
    tally.add(runs=1, opens=1)
    print(tally.line("two writers at once"))  # noqa: T201 (for the record)


def test_kill_9_of_the_lock_holder_then_a_new_writer(
    new_spec: Callable[[], StoreSpec], tmp_path: Path
) -> None:
    tally = Tally()
    log = tmp_path / f"{uuid.uuid4().hex[:6]}.log"
    reference = new_spec()
    for first in (0, 6):
        writer = popen(worker("write", reference.to_json(), first, first + 6), tally, log)
        code, _out, err = finish(writer, log)
        assert code == 0, err
    expected = check_index(reference, 12)

    spec = new_spec()
    holder_log = tmp_path / "holder.log"
    holder = popen(
        worker("write", spec.to_json(), 0, 6, "children.upsert", 1, PROCESS_TIMEOUT),
        tally,
        holder_log,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "holding", finish(holder, holder_log)
    waiting = popen(worker("write", spec.to_json(), 6, 12), tally, log)
    time.sleep(1.0)
    holder.kill()  # SIGKILL: the kernel (lock file) or PostgreSQL (its session) frees the lock
    holder.communicate(timeout=30)
    code, _out, err = finish(waiting, log)
    assert code == 0, err
    assert "rolling back 3 interrupted document write(s): doc-0, doc-1, doc-2" in err, err
    if spec.postgres_url is None:  # the lock file still named the dead holder
        assert f"left by process {holder.pid}" in err, err
    code, _out, err = finish(popen(worker("write", spec.to_json(), 0, 6), tally, log), log)
    assert code == 0, err
    assert_same_state(check_index(spec, 12), expected)
    tally.add(runs=1, opens=2)
    print(tally.line("kill -9 of the lock holder"))  # noqa: T201 (for the record)


def test_an_index_opened_again_in_a_process_finds_what_another_process_wrote_since(
    tmp_path: Path,
) -> None:
    """chromadb gives every client of one folder in a process the same view of its vectors:
    an index opened after another was (even one since dropped) must not search that old view.
    """
    spec = StoreSpec(directory=str(tmp_path / "index"))
    first = spec.open(fake_embeddings())
    first.add_documents(rw_documents(range(1)))
    first.as_retriever(k=3).invoke("paragraph")  # this process's view reads the vectors
    del first
    gc.collect()
    log = tmp_path / "writer.log"
    code, _out, err = finish(popen(worker("write", spec.to_json(), 1, 40), Tally(), log), log)
    assert code == 0, err

    again = spec.open(fake_embeddings())
    vector = fake_embeddings().embed_query("paragraph")
    assert len(again.search_children(vector, 1000)) == 4 * 40  # every child vector is searched
    found = again.as_retriever(k=10).invoke("paragraph", filter={"topic": "t2"})
    assert found
    assert {d.metadata["doc_id"] for d in found} <= {f"doc-{n}" for n in range(2, 40, 3)}


def test_a_reader_given_its_own_chroma_client_finds_what_another_process_wrote(
    tmp_path: Path,
) -> None:
    """A client the caller gives holds its own view of the folder: it goes stale the same way."""
    import chromadb

    from langchain_gated_parent import GatedParentIndex
    from langchain_gated_parent.index import CHROMA_FOLDER

    spec = StoreSpec(directory=str(tmp_path / "index"))
    spec.open(fake_embeddings()).add_documents(rw_documents(range(1)))
    gc.collect()
    client = chromadb.PersistentClient(path=str(tmp_path / "index" / CHROMA_FOLDER))
    reader = GatedParentIndex(fake_embeddings(), client=client, directory=tmp_path / "index")
    reader.as_retriever(k=3).invoke("paragraph")  # the reader's view reads the vectors
    log = tmp_path / "writer.log"
    code, _out, err = finish(popen(worker("write", spec.to_json(), 1, 40), Tally(), log), log)
    assert code == 0, err

    found = reader.as_retriever(k=10).invoke("paragraph", filter={"topic": "t2"})
    assert found
    assert {d.metadata["doc_id"] for d in found} <= {f"doc-{n}" for n in range(2, 40, 3)}
    vector = fake_embeddings().embed_query("paragraph")
    assert len(reader.search_children(vector, 1000)) == 4 * 40
