"""Crash consistency: SIGKILL an ingest at many points, then reopen, check and converge.

A worker process (``crash_worker``) runs one workload (version 1 of eight documents in batches,
version 2 with edits, a dropped section, a new section and a metadata change, then two
deletes) on a persistent index with the deterministic FAKE embedding (crash semantics do not
depend on the model). It is killed with SIGKILL either at an injected point (before or after
the Nth call of one of the six kinds of store write) or after a delay. After every kill:

* the index reopens unchanged, and queries on it return nothing of a document whose write
  was unfinished; ``recover()`` (what the next writer does first, under the writer lock)
  rolls those back and ``verify()`` is ok: no orphan child, no parent without its vector,
  no unfinished write;
* every document is atomic: absent, or exactly as version 1 or version 2 left it, and a
  document version 2 replaces is never absent after a kill while version 2 is written (its
  rollback restores version 1);
* queries work, and no returned child or parent lacks its parent in the docstore;
* re-running the same ingest converges to EXACTLY the state of an uninterrupted run (docstore
  keys and contents, parent and child ids, documents, metadata, vectors allclose).
"""

from __future__ import annotations

import pickle
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from langchain_gated_parent.stores.journal import MANIFEST_PREFIX
from tests.integration_tests.crash_worker import DELETED, STEPS, Zygote, corpus
from tests.integration_tests.stores import StoreSpec, assert_same_state

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.slow

EXPECTED_COUNTS = {
    "docstore.mset": 19,
    "docstore.mdelete": 9,
    "parents.upsert": 5,
    "parents.delete": 3,
    "children.upsert": 5,
    "children.delete": 3,
    "sparse.upsert": 5,
    "sparse.delete": 7,
    "undo.save": 5,
    "undo.forget": 12,
}
"""Store writes of one uninterrupted run of the workload; the kill points below are within."""

KILL_POINTS = [
    ("docstore.mset", 1, "before"),  # a fresh index dies before its config record exists
    ("docstore.mset", 2, "after"),  # first pending manifest written, nothing else
    ("docstore.mset", 3, "after"),  # parents in the docstore, no vectors yet
    ("docstore.mset", 10, "before"),  # late in version 1
    ("docstore.mset", 19, "before"),  # the last write: the second delete's pending mark
    ("docstore.mdelete", 1, "after"),  # first (empty) stale-parent delete of an ingest
    ("docstore.mdelete", 5, "before"),
    ("docstore.mdelete", 9, "before"),  # the last manifest removal of the deletes
    ("parents.upsert", 1, "after"),  # parent vectors of batch 1, no children
    ("parents.upsert", 4, "before"),
    ("children.upsert", 1, "after"),  # every store written, manifest still pending
    ("children.upsert", 5, "before"),
    ("children.delete", 2, "after"),  # stale children of a shrunk document gone
    ("children.delete", 3, "after"),
    ("parents.delete", 1, "after"),
    ("parents.delete", 3, "before"),
    ("sparse.upsert", 1, "after"),  # parents searchable by terms, no vectors yet
    ("sparse.upsert", 4, "before"),
    ("sparse.delete", 5, "before"),  # a replaced document's stale rows: docstore's gone, terms not
    ("undo.save", 4, "after"),  # version 1 of doc-0..2 saved, nothing else of version 2 written
    ("undo.forget", 8, "before"),  # doc-0..2 complete in version 2, their version 1 still saved
    ("sparse.delete", 7, "after"),  # the last delete of the run
]
"""Injected SIGKILLs: (store write, call number, before or after the call)."""

DELAY_FRACTIONS = (0.2, 0.5, 0.8)
"""Kills after a delay, as fractions of an uninterrupted run's duration."""
DELAY_ATTEMPTS = 5
"""Tries of one delayed kill, the delay halved after each ingest that finished first."""

DOUBLE_CRASHES = [
    (("children.upsert", 2, "after"), ("children.delete", 1, "after")),
    (("parents.upsert", 4, "after"), ("docstore.mdelete", 1, "after")),
]
"""A kill during the ingest, then another during the recovery of the next open."""


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    with Zygote() as worker:
        yield worker


REPLACED = ("doc-0", "doc-1", "doc-2", "doc-3")
"""The documents version 2 changes (see ``crash_worker.corpus``)."""


def during_version_2(point: tuple[str, int, str], reference: dict[str, Any]) -> bool:
    """Whether a kill point falls after version 1 was written and before version 2 was."""
    step, number, _ = point
    return reference["counts_v1"].get(step, 0) < number <= reference["counts_v2"].get(step, 0)


def new_spec(tmp_path: Path) -> StoreSpec:
    return StoreSpec(directory=str(tmp_path / f"index-{uuid.uuid4().hex[:8]}"))


def run_reference(zygote: Zygote, spec: StoreSpec, tmp_path: Path) -> dict[str, Any]:
    """An uninterrupted run: snapshots after version 1, version 2 and the deletes."""
    out = tmp_path / f"stages-{uuid.uuid4().hex[:8]}.pkl"
    reply = zygote.request(op="ingest", spec=spec.to_json(), stages=str(out))
    assert reply["status"] == "exited", reply
    assert reply["code"] == 0, reply
    stages: dict[str, Any] = pickle.loads(out.read_bytes())  # noqa: S301 (our own file)
    return stages


@pytest.fixture(scope="module")
def reference(zygote: Zygote, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("reference")
    return run_reference(zygote, new_spec(directory), directory)


def doc_view(state: dict[str, Any], doc_id: str) -> tuple[Any, ...]:
    """Everything one document owns in a snapshot: parents, vectors, children, manifest."""
    parents = {
        key: value for key, value in state["docstore"].items() if value[1].get("doc_id") == doc_id
    }
    vectors = {
        pid: meta
        for pid, meta in zip(state["parents"]["ids"], state["parents"]["metadatas"], strict=True)
        if meta.get("doc_id") == doc_id
    }
    rows = state["children"]
    children = {
        cid: (text, meta)
        for cid, text, meta in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=True)
        if meta.get("doc_id") == doc_id
    }
    return parents, vectors, children, state["journal"].get(MANIFEST_PREFIX + doc_id)


def check_after_kill(
    zygote: Zygote,
    spec: StoreSpec,
    reference: dict[str, Any],
    tmp_path: Path,
    point: tuple[str, int, str] | None = None,
) -> dict[str, Any]:
    """Reopen a killed index in a new process, check it, re-run the ingest, compare.

    ``point``: where the ingest was killed, if known (a kill while version 2 was written must
    leave every replaced document whole, as version 1 or version 2).
    """
    out = tmp_path / f"check-{uuid.uuid4().hex[:8]}.pkl"
    reply = zygote.request(op="check", spec=spec.to_json(), out=str(out))
    assert reply == {**reply, "status": "exited", "code": 0}, reply
    check: dict[str, Any] = pickle.loads(out.read_bytes())  # noqa: S301 (our own file)
    assert_same_state(check["read"], check["opened"])  # opening and reading change nothing
    assert not set(check["pending"]) & set(check["seen_before_recovery"]), "half a document"
    assert check["verify"] == [], "the recovered index disagrees with itself"
    recovered = check["recovered"]
    assert recovered["undo"] == [], "a saved version outlived the recovery"
    empty: tuple[Any, ...] = ({}, {}, {}, None)
    replacing = point is not None and during_version_2(point, reference)
    for document in corpus(1):
        doc_id = document.metadata["doc_id"]
        allowed = [doc_view(reference["v1"], doc_id), doc_view(reference["v2"], doc_id)]
        if not (replacing and doc_id in REPLACED):
            allowed.append(empty)
        assert doc_view(recovered, doc_id) in allowed, f"{doc_id} is half written or lost"
    for answer in check["answers"]:
        present = set(answer["present"])
        assert all(parent in present for _, parent in answer["children"]), answer
        assert set(answer["parents"]) <= present, answer
    assert check["verify_after_rerun"] == []
    assert_same_state(check["final"], reference["final"])
    return check


def test_an_uninterrupted_run_is_what_the_kill_points_assume(reference: dict[str, Any]) -> None:
    assert reference["counts"] == EXPECTED_COUNTS
    assert set(EXPECTED_COUNTS) == set(STEPS)
    # Kills while version 2 is written: each checks that a replace rolls back to version 1.
    assert sum(during_version_2(point, reference) for point in KILL_POINTS) == 8
    final_docs = {m[1].get("doc_id") for m in reference["final"]["docstore"].values()}
    assert not set(DELETED) & final_docs
    children = {stage: len(reference[stage]["children"]["ids"]) for stage in ("v1", "v2", "final")}
    # 8 documents x 3 sections x 3 paragraphs; v2 drops a section (-3) and adds one (+1).
    assert children == {"v1": 72, "v2": 70, "final": 52}


@pytest.mark.parametrize("point", KILL_POINTS, ids=lambda p: f"{p[0]}-{p[1]}-{p[2]}")
def test_sigkill_at_an_injected_point(
    zygote: Zygote, reference: dict[str, Any], tmp_path: Path, point: tuple[str, int, str]
) -> None:
    spec = new_spec(tmp_path)
    reply = zygote.request(op="ingest", spec=spec.to_json(), kill=list(point))
    assert reply["status"] == "killed", f"the kill point was not reached: {reply}"
    assert reply["code"] == 9
    check_after_kill(zygote, spec, reference, tmp_path, point)


@pytest.mark.parametrize("fraction", DELAY_FRACTIONS)
def test_sigkill_after_a_delay(
    zygote: Zygote, reference: dict[str, Any], tmp_path: Path, fraction: float
) -> None:
    # Ingest time varies with the machine's load: a run that ends before its kill is retried
    # with half the delay, so every row does end in a kill (at worst an early one).
    delay = fraction * reference["seconds"]
    for _ in range(DELAY_ATTEMPTS):
        spec = new_spec(tmp_path)
        reply = zygote.request(op="ingest", spec=spec.to_json(), kill_after=delay)
        assert reply["status"] in {"killed", "exited"}, reply
        if reply["killed_by_parent"]:
            break
        delay /= 2
    assert reply["killed_by_parent"], f"{DELAY_ATTEMPTS} ingests all finished before the kill"
    check_after_kill(zygote, spec, reference, tmp_path)


@pytest.mark.parametrize("points", DOUBLE_CRASHES, ids=lambda p: f"{p[0][0]}-then-{p[1][0]}")
def test_sigkill_during_recovery(
    zygote: Zygote,
    reference: dict[str, Any],
    tmp_path: Path,
    points: tuple[tuple[str, int, str], tuple[str, int, str]],
) -> None:
    spec = new_spec(tmp_path)
    first, during_recovery = points
    assert zygote.request(op="ingest", spec=spec.to_json(), kill=list(first))["status"] == "killed"
    reply = zygote.request(op="open", spec=spec.to_json(), kill=list(during_recovery))
    assert reply["status"] == "killed", f"recovery did not reach {during_recovery}: {reply}"
    check_after_kill(zygote, spec, reference, tmp_path, first)
