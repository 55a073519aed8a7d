"""The lock on a local Chroma folder's files, held by a separate OS process.

A holder process takes :class:`VectorFilesLock` on the index's Chroma folder, as another
index process would around a write (exclusive) or a read (shared), until its stdin closes.
The index in this process must wait for it where the files could change under a reader, and
go on where both only read; a hold that outlasts the index's ``lock_timeout`` makes the call
raise (or a server answer 503), and the index works on once the holder lets go. The
embedding is the deterministic FAKE (the lock does not depend on the model), but for the
served folder, which a server opens with the real model.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from langchain_core.documents import Document

from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings
from langchain_gated_parent.server import RETRIEVER_PATH, create_app, running_server
from langchain_gated_parent.server_settings import ServerSettings
from langchain_gated_parent.stores.section_reads import EXACT_DOCUMENTS
from langchain_gated_parent.stores.vector_files import LOCK_FILE, VectorFilesTimeoutError
from tests.integration_tests.conftest import corpus
from tests.integration_tests.stores import fake_embeddings

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

BLOCKED_FOR = 1.0
"""Seconds a call must stay waiting to count as held off (it returns in milliseconds)."""
SHORT_TIMEOUT = 0.5
"""The ``lock_timeout`` of an index that must give up on a holder that does not let go."""
LATE = Document(page_content="# Notes\n\nA late paragraph.", metadata={"doc_id": "late"})

HOLDER = """
import sys
from pathlib import Path
from langchain_gated_parent.stores.vector_files import VectorFilesLock
lock = VectorFilesLock(Path(sys.argv[1]), timeout=60)
with getattr(lock, sys.argv[2])():
    print("held", flush=True)
    sys.stdin.read()
"""


class Holder:
    """A separate process holding the folder's lock (``shared`` or ``exclusive``)."""

    def __init__(self, folder: Path, mode: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(folder), mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "held\n"

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


class Call:
    """A call run in a thread, so the test can see whether it is waiting."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        self.result = fn()

    def waiting(self) -> bool:
        self.thread.join(BLOCKED_FOR)
        return self.thread.is_alive()

    def finished(self) -> Any:
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.result


def built(directory: Path, **options: Any) -> GatedParentIndex:
    index = GatedParentIndex(fake_embeddings(), directory=directory, **options)
    index.add_documents(corpus())
    return index


def test_a_write_in_another_process_holds_reads_off(tmp_path: Path) -> None:
    index = built(tmp_path / "index")
    expected = index.vectors.counts()
    holder = Holder(tmp_path / "index" / "chroma", "exclusive")
    try:
        call = Call(index.vectors.counts)
        assert call.waiting()
    finally:
        holder.release()
    assert call.finished() == expected


def test_reads_go_on_together_and_a_write_waits_for_them(tmp_path: Path) -> None:
    index = built(tmp_path / "index")
    expected = index.vectors.counts()  # this view's first read is done
    holder = Holder(tmp_path / "index" / "chroma", "shared")
    try:
        assert Call(index.vectors.counts).finished() == expected
        write = Call(lambda: index.add_documents([LATE]))
        assert write.waiting()
    finally:
        holder.release()
    write.finished()
    assert index.vectors.counts()[0] > expected[0]


def test_a_fresh_view_waits_for_readers_before_its_first_read(tmp_path: Path) -> None:
    # Its first call may apply (and save) the writes Chroma's log holds: a write, in effect.
    built(tmp_path / "index")
    holder = Holder(tmp_path / "index" / "chroma", "shared")
    try:
        reopened = GatedParentIndex(fake_embeddings(), directory=tmp_path / "index")
        call = Call(reopened.vectors.counts)
        assert call.waiting()
    finally:
        holder.release()
    assert call.finished()[1] > 0


def test_the_lock_file_sits_in_the_chroma_folder_it_guards(tmp_path: Path) -> None:
    index = built(tmp_path / "index")
    assert index.vectors.files is not None
    assert index.vectors.files.path == tmp_path / "index" / "chroma" / LOCK_FILE
    assert index.vectors.files.path.is_file()


def test_an_in_memory_index_takes_no_lock() -> None:
    index = GatedParentIndex(fake_embeddings())
    index.add_documents(corpus())
    assert index.vectors.files is None
    assert index.vectors.counts()[1] > 0


def refused_while_held(directory: Path, mode: str, call: Callable[[], Any]) -> str:
    """What ``call`` raises while another process holds the lock past the index's timeout."""
    holder = Holder(directory / "chroma", mode)
    try:
        started = time.monotonic()
        with pytest.raises(VectorFilesTimeoutError) as refused:
            call()
        assert time.monotonic() - started >= SHORT_TIMEOUT
    finally:
        holder.release()
    return str(refused.value)


def test_a_read_held_off_past_the_timeout_raises_naming_the_lock_and_the_fix(
    tmp_path: Path,
) -> None:
    index = built(tmp_path / "index", lock_timeout=SHORT_TIMEOUT)
    expected = index.vectors.counts()
    message = refused_while_held(tmp_path / "index", "exclusive", index.vectors.counts)
    assert str(tmp_path / "index" / "chroma" / LOCK_FILE) in message
    assert "lock_timeout" in message
    assert index.vectors.counts() == expected


def test_a_write_held_off_past_the_timeout_raises_and_the_index_keeps_what_it_held(
    tmp_path: Path,
) -> None:
    index = built(tmp_path / "index", lock_timeout=SHORT_TIMEOUT)
    before = index.vectors.counts()
    refused_while_held(tmp_path / "index", "shared", lambda: index.add_documents([LATE]))
    assert index.recover() == ["late"]  # rolled back as a crashed write is, and nothing else
    assert index.vectors.counts() == before
    assert index.verify().ok
    index.add_documents([LATE])
    assert "late" in index.journal.doc_ids()
    assert index.verify().ok


@pytest.fixture(scope="module")
def model_index(tmp_path_factory: pytest.TempPathFactory, embeddings: MiniLMEmbeddings) -> Path:
    """A folder served or queried as users do, so opened with the real model and built with it.

    It holds more documents than an index scores exactly from its records, so that its
    queries search Chroma (under the lock).
    """
    directory = tmp_path_factory.mktemp("model") / "index"
    notes = [
        Document(page_content=f"# Part {n}\n\nNote {n} on results.", metadata={"doc_id": f"n{n}"})
        for n in range(EXACT_DOCUMENTS)
    ]
    GatedParentIndex(embeddings, directory=directory).add_documents([*corpus(), *notes])
    return directory


def test_a_server_answers_503_while_a_holder_outlasts_its_lock_timeout(model_index: Path) -> None:
    settings = ServerSettings(lock_timeout=SHORT_TIMEOUT)
    with (
        running_server(create_app(model_index, settings)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        assert client.post(f"{RETRIEVER_PATH}/invoke", json={"input": "treatment"}).is_success
        holder = Holder(model_index / "chroma", "exclusive")
        try:
            busy = client.post(f"{RETRIEVER_PATH}/invoke", json={"input": "results"})
        finally:
            holder.release()
        assert busy.status_code == 503, busy.text
        assert LOCK_FILE in busy.json()["detail"]
        assert busy.headers["Retry-After"] == "1"
        assert client.post(f"{RETRIEVER_PATH}/invoke", json={"input": "results"}).is_success


def test_a_cli_query_held_off_past_its_lock_timeout_fails_in_one_line(model_index: Path) -> None:
    command = [sys.executable, "-m", "langchain_gated_parent.cli", "query", "results"]
    command += ["--index", str(model_index), "--lock-timeout", str(SHORT_TIMEOUT)]
    holder = Holder(model_index / "chroma", "exclusive")
    try:
        held = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    finally:
        holder.release()
    assert held.returncode == 1, held.stderr
    assert held.stdout == ""
    assert "Traceback" not in held.stderr
    assert LOCK_FILE in held.stderr
    assert "lock_timeout" in held.stderr
    assert len(held.stderr.strip().splitlines()) == 1
    answered = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert answered.returncode == 0, answered.stderr
