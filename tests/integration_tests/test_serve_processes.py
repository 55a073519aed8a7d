"""``gated-parent serve --workers 2`` as its own process: workers, CLI bounds, and an ingest.

The ingest is a ``gated-parent index`` process writing to the served index while the server
answers queries: every answer must be a normal one, and the ingest must complete.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from langchain_gated_parent import GatedParentIndex, MiniLMEmbeddings, keys
from langchain_gated_parent.server import RETRIEVER_PATH

from .conftest import corpus
from .stores import free_port, wait_until_healthy

if TYPE_CHECKING:
    from collections.abc import Iterator

QUERY = "48 h RNA extraction"
README = Path(__file__).resolve().parents[2] / "README.md"
START_TIMEOUT = 180.0
CLI = [sys.executable, "-m", "langchain_gated_parent.cli"]


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, embeddings: MiniLMEmbeddings
) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    directory = tmp_path_factory.mktemp("served") / "index"
    GatedParentIndex(embeddings, directory=directory).add_documents(corpus())
    port = free_port()
    options = ["--port", str(port), "--workers", "2", "--max-k", "3"]
    server = subprocess.Popen(
        [*CLI, "serve", "--index", str(directory), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, server, START_TIMEOUT)
        yield url, directory, server
    finally:
        server.terminate()
        server.communicate(timeout=60)


def test_a_port_in_use_is_refused_with_its_address_before_any_worker_starts(
    served: tuple[str, Path, subprocess.Popen[str]],
) -> None:
    url, directory, _ = served
    port = url.rsplit(":", 1)[1]  # the served fixture's server listens there
    for workers in ("1", "2"):
        second = subprocess.run(
            [*CLI, "serve", "--index", str(directory), "--port", port, "--workers", workers],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT,
            check=False,
        )
        assert second.returncode == 1, second.stderr
        assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
        assert "--port" in second.stderr
        assert "serving" not in second.stdout  # refused before it announced anything
    assert invoke(url).status_code == 200  # the first server is untouched


def invoke(url: str, k: int | None = None) -> httpx.Response:
    body: dict[str, object] = {"input": QUERY}
    if k is not None:
        body["config"] = {"configurable": {"k": k}}
    return httpx.post(f"{url}{RETRIEVER_PATH}/invoke", json=body, timeout=60)


def test_two_workers_serve(served: tuple[str, Path, subprocess.Popen[str]]) -> None:
    url, _, server = served
    workers = [
        pid
        for pid in _children(server.pid)
        if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert len(workers) == 2
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(6):
            response = client.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUERY})
            assert response.status_code == 200, response.text
            assert response.json()["output"][0]["metadata"][keys.CHUNK_ID]


def test_cli_bounds_reach_every_worker(served: tuple[str, Path, subprocess.Popen[str]]) -> None:
    url = served[0]
    for _ in range(4):  # new connections, so both workers are asked
        refused = invoke(url, k=4)
        assert refused.status_code == 422, refused.text
        assert "max_k (3)" in refused.json()["detail"]
        assert len(invoke(url, k=3).json()["output"]) == 3


def _ingest_corpus(folder: Path, documents: int) -> None:
    folder.mkdir()
    for n in range(documents):
        sections = "\n\n".join(
            f"# Section {s}\n\nFinding {n}.{s}: cells were incubated for {s + 12} h before "
            f"RNA extraction in batch {n}.\n\nThe yield of batch {n} step {s} was recorded."
            for s in range(5)
        )
        (folder / f"lab-notes-{n:03d}.md").write_text(sections, encoding="utf-8")


def test_the_server_answers_during_an_ingest_by_another_process(
    served: tuple[str, Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    url, directory, _ = served
    _ingest_corpus(tmp_path / "notes", 40)
    ingest = subprocess.Popen(
        [*CLI, "index", str(tmp_path / "notes"), "--index", str(directory), "--batch-size", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    answered = 0
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            while ingest.poll() is None:
                response = client.post(f"{RETRIEVER_PATH}/invoke", json={"input": QUERY})
                assert response.status_code == 200, response.text
                docs = response.json()["output"]
                assert docs
                assert all(d["metadata"][keys.SCORE] is not None for d in docs)
                answered += 1
    finally:
        output = ingest.communicate(timeout=600)[0]
    assert ingest.returncode == 0, output
    assert answered >= 3, f"the ingest ended before the server was asked much: {output}"
    after = invoke(url)
    assert after.status_code == 200, after.text
    verify = subprocess.run(
        [*CLI, "verify", "--index", str(directory)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_the_readme_uvicorn_recipe_runs_as_written(
    tmp_path: Path, embeddings: MiniLMEmbeddings
) -> None:
    """The README's two lines, with the index folder and the port replaced."""
    recipe = re.search(
        r"```bash\n(export GATED_PARENT_SERVER_SETTINGS=.*?)```", README.read_text(), re.DOTALL
    )
    assert recipe is not None
    export, command = recipe.group(1).strip().splitlines()
    name, _, value = shlex.split(export)[1].partition("=")
    directory = tmp_path / "index"
    GatedParentIndex(embeddings, directory=directory).add_documents(corpus())
    port = free_port()
    argv = shlex.split(command.replace("8000", str(port)))
    assert argv[0] == "uvicorn"
    server = subprocess.Popen(
        [sys.executable, "-m", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, name: value.replace("./my-index", str(directory))},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, server, START_TIMEOUT)
        assert invoke(url).status_code == 200
        refused = invoke(url, k=21)  # the recipe's max_k is 20
        assert refused.status_code == 422, refused.text
        assert "max_k (20)" in refused.json()["detail"]
    finally:
        server.terminate()
        server.communicate(timeout=60)
