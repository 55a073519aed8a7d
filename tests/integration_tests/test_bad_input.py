"""Bad input, as one table: each row is refused with a clear error, or has a documented result.

A refusal is checked by exception type and message fragments that name the offending value and
the fix. A documented result is checked by what it does. After every row, nothing already
stored is lost: ``verify()`` is ok and the counts and records of the index are unchanged (rows
that add a document delete it again first).

The stored index uses the deterministic FAKE embedding (``stores.fake_embeddings``): input
validation does not depend on the model; the real MiniLM appears where a row needs it (an index
opened with another model, the embedding of a 100,000-character query).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from langchain_core.documents import Document
from pydantic import ValidationError

from langchain_gated_parent import GatedParentIndex, cli, keys
from langchain_gated_parent.tokens import token_counter
from tests.integration_tests.stores import fake_embeddings, snapshot

from .conftest import GAPDH, corpus

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_gated_parent import MiniLMEmbeddings

FIVE_MB = 5 * 1024 * 1024
FIVE_MB_BUDGET_S = 120.0
"""The 5 MB paragraph must not take minutes (measured: ~20 s split + write on a loaded 2-core)."""
LONG_QUERY = "x" * 100_000


@dataclass
class Context:
    """What a row acts on: the stored index and its folder, scratch space, the real model."""

    index: GatedParentIndex
    directory: Path
    tmp_path: Path
    minilm: MiniLMEmbeddings
    capsys: pytest.CaptureFixture[str]
    added: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Refused:
    """The row raises ``error`` with every fragment in its message."""

    error: type[BaseException]
    fragments: tuple[str, ...]


@dataclass(frozen=True)
class CliRefused:
    """The CLI exits with ``status`` and one error line holding every fragment."""

    status: int
    fragments: tuple[str, ...]


@dataclass(frozen=True)
class Documented:
    """The input is accepted; ``check(context, result)`` asserts the documented result."""

    check: Callable[[Context, Any], None]


@dataclass(frozen=True)
class Row:
    name: str
    act: Callable[[Context], Any]
    expect: Refused | CliRefused | Documented


# ---------------------------------------------------------------------------------- actions
def add(*documents: Document) -> Callable[[Context], Any]:
    def act(context: Context) -> Any:
        return context.index.add_documents(list(documents))

    return act


def add_raw(documents: Any) -> Callable[[Context], Any]:
    def act(context: Context) -> Any:
        return context.index.add_documents(documents)

    return act


def structured(data: Any) -> Document:
    return Document(page_content=json.dumps(data), metadata={keys.FORMAT: "structured"})


def query(text: Any, **kwargs: Any) -> Callable[[Context], Any]:
    def act(context: Context) -> Any:
        return context.index.as_retriever().invoke(text, **kwargs)

    return act


def retriever(**fields: Any) -> Callable[[Context], Any]:
    def act(context: Context) -> Any:
        return context.index.as_retriever(**fields).invoke("RNA extraction")

    return act


def cli_index(name: str, content: bytes) -> Callable[[Context], Any]:
    def act(context: Context) -> Any:
        path = context.tmp_path / name
        path.write_bytes(content)
        status = cli.main(["index", str(path), "--index", str(context.directory)])
        return status, *context.capsys.readouterr()

    return act


def open_at(where: Callable[[Context], Path]) -> Callable[[Context], Any]:
    def act(context: Context) -> Any:
        return GatedParentIndex(fake_embeddings(), directory=where(context))

    return act


def open_with_minilm(context: Context) -> Any:
    return GatedParentIndex(context.minilm, directory=context.directory)


def five_mb_paragraph(context: Context) -> Any:
    """One paragraph of 5 MB without a sentence end: the splitter's worst case."""
    text = "# Big\n\n" + "word " * (FIVE_MB // 5)
    started = time.perf_counter()
    report = context.index.add_documents([Document(page_content=text, metadata={"doc_id": "big"})])
    context.timings["5 MB paragraph"] = time.perf_counter() - started
    return report


def long_query(context: Context) -> Any:
    started = time.perf_counter()
    vector = context.minilm.embed_query(LONG_QUERY)
    context.timings["100k-char query, MiniLM embed"] = time.perf_counter() - started
    return vector, context.index.as_retriever(k=3).invoke(LONG_QUERY)


# ---------------------------------------------------------------------------------- results
def added(doc_id: str, parents: int, children: int) -> Callable[[Context, Any], None]:
    def check(context: Context, report: Any) -> None:
        context.added.append(doc_id)
        assert (report.documents, report.parents, report.children) == (1, parents, children)
        assert context.index.verify().ok

    return check


def heading_only(context: Context, report: Any) -> None:
    """A heading without text is a childless parent, embedded from its heading text."""
    context.added.append("hollow")
    assert (report.parents, report.children) == (2, 1)
    empty = context.index.parents.get(ids=["P-hollow:s0"], include=["embeddings"])
    assert len(empty["embeddings"][0]) == 32
    assert context.index.children.get(where={keys.PARENT_ID: "P-hollow:s0"})["ids"] == []
    parent = context.index.get_parents(["P-hollow:s0"])[0]
    assert parent is not None
    assert parent.page_content == "# Empty"
    assert parent.metadata[keys.CHILD_COUNT] == 0


def five_mb_result(context: Context, report: Any) -> None:
    context.added.append("big")
    assert context.timings["5 MB paragraph"] < FIVE_MB_BUDGET_S
    assert report.parents == 1
    assert report.children >= 2000
    rows = context.index.children.get(where={keys.DOC_ID: "big"}, include=["metadatas"])
    parent = (rows["metadatas"] or [{}])[0][keys.PARENT_ID]
    texts = context.index.children_of([parent]).texts
    count = token_counter("cl100k_base")
    assert len(texts) == report.children
    assert max(count(text) for text in texts) <= 512


def long_query_result(context: Context, result: Any) -> None:
    vector, answer = result
    assert len(vector) == 384
    assert len(answer) == 3


def utf8_bytes_result(context: Context, report: Any) -> None:
    context.added.append("from-bytes")
    assert report.children == 1
    stored = context.index.get_parents(["P-from-bytes:s0"])[0]
    assert stored is not None
    assert "é" in stored.page_content


def created_empty(context: Context, opened: Any) -> None:
    assert opened.verify().documents == 0
    assert (context.tmp_path / "new-index" / "docstore.sqlite").exists()


def nested_metadata(context: Context, report: Any) -> None:
    context.added.append("nested")
    vector = context.index.parents.get(where={keys.DOC_ID: "nested"}, include=["metadatas"])
    only = {keys.DOC_ID: "nested", keys.PARENT_ID: "P-nested:s0"}  # what a filter can name
    assert (vector["metadatas"] or [{}])[0] == only
    child = context.index.as_retriever(k=1).invoke("text", filter={keys.DOC_ID: "nested"})
    assert child[0].metadata["extra"] == {"a": [1, {"b": None}]}  # from its parent, as is
    parent = context.index.get_parents(["P-nested:s0"])[0]
    assert parent is not None
    assert parent.metadata["extra"] == {"a": [1, {"b": None}]}


GAPDH_BAD_PARAS = {**GAPDH, "sections": [{"id": "S-x", "title": "X", "paras": "one string"}]}
GAPDH_NO_PARAS = {**GAPDH, "sections": [{"id": "S-x", "title": "X"}]}
GARBAGE = {"doc_id": "junk", "sections": {"a": {"b": [1, 2, {"c": None}]}}}
NESTED_GARBAGE = {"sections": [{"id": "S-1", "title": "T", "paras": [["x", {"y": 1}]]}]}

ROWS = [
    # --- documents
    Row(
        "empty-document",
        add(Document(page_content="", metadata={"doc_id": "empty"})),
        Refused(ValueError, ("'empty'", "has no text to index", "leave it out")),
    ),
    Row(
        "whitespace-only-document",
        add(Document(page_content=" \n\t\n  ", metadata={"doc_id": "blank"})),
        Refused(ValueError, ("'blank'", "empty or whitespace only", "delete(['blank'])")),
    ),
    Row(
        "no-headings",  # one preamble parent; each paragraph a child
        add(Document(page_content="Plain text.\n\nMore text.", metadata={"doc_id": "plain"})),
        Documented(added("plain", parents=1, children=2)),
    ),
    Row(
        "heading-without-text",  # (a subheading without text stays in its parent's text)
        add(Document(page_content="# Empty\n\n# Full\n\nText.", metadata={"doc_id": "hollow"})),
        Documented(heading_only),
    ),
    Row("five-mb-paragraph", five_mb_paragraph, Documented(five_mb_result)),
    Row(
        "non-utf8-bytes-page-content",
        lambda _: Document(page_content=b"\xff\xfe# caf\xe9"),
        Refused(ValidationError, ("page_content", "unable to parse raw data as a unicode string")),
    ),
    Row(
        "utf8-bytes-page-content",  # pydantic decodes valid UTF-8 bytes to str
        add(Document(page_content="# Café\n\nCrème.".encode(), metadata={"doc_id": "from-bytes"})),
        Documented(utf8_bytes_result),
    ),
    Row(
        "non-utf8-file-to-cli",
        cli_index("latin1.md", "# Café\n\nCrème brûlée.".encode("latin-1")),
        CliRefused(cli.EXIT_FAILURE, ("latin1.md is not UTF-8 text", "byte 0xe9", "iconv")),
    ),
    Row(
        "binary-file-to-cli",
        cli_index("image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))),
        CliRefused(cli.EXIT_FAILURE, ("image.md is a binary file, not text", "remove it")),
    ),
    Row(
        "duplicate-ids-in-one-batch",
        add(
            Document(page_content="# A\n\none", metadata={"doc_id": "twice"}),
            Document(page_content="# A\n\ntwo", metadata={"doc_id": "twice"}),
        ),
        Refused(ValueError, ("'twice' appears twice in one batch", "unique 'doc_id'")),
    ),
    Row(
        "metadata-json-cannot-hold",
        add(
            Document(
                page_content="# A\n\nA note.",
                metadata={
                    "doc_id": "dated",
                    "when": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
                },
            )
        ),
        Refused(ValueError, ("document 'dated'", "metadata 'when' is a datetime", "str(value)")),
    ),
    Row(
        "text-utf-8-cannot-hold",
        add(Document(page_content="# A\n\nbad \ud800 x", metadata={"doc_id": "surrogate"})),
        Refused(
            ValueError, ("document 'surrogate'", "'\\ud800' at position 9", "errors='replace'")
        ),
    ),
    Row(
        "metadata-json-cannot-hold-in-a-replacement",
        add(
            Document(
                page_content="# Methods\n\nA new version of the paper.",
                metadata={"doc_id": "P-GAPDH-01", "score": np.float32(0.5)},
            )
        ),
        Refused(ValueError, ("document 'P-GAPDH-01'", "metadata 'score' is a float32")),
    ),
    Row(
        "a-section-id-two-documents-of-one-batch-share",
        add(
            structured(
                {"doc_id": "one", "sections": [{"id": "S-x", "title": "X", "paras": ["First."]}]}
            ),
            structured(
                {"doc_id": "two", "sections": [{"id": "S-x", "title": "X", "paras": ["Second."]}]}
            ),
        ),
        Refused(
            ValueError,
            ("parent id 'P-S-x' of document 'two' already belongs to document 'one'", "prefix"),
        ),
    ),
    Row(
        "a-section-id-a-stored-document-owns",
        add(
            structured(
                {
                    "doc_id": "copy",
                    "sections": [{"id": "S-abstract", "title": "A", "paras": ["A."]}],
                }
            )
        ),
        Refused(ValueError, ("'P-S-abstract' of document 'copy' already belongs to document",)),
    ),
    Row(
        "delete-given-one-string",
        lambda context: context.index.delete("P-GAPDH-01"),
        Refused(TypeError, ("got the string 'P-GAPDH-01'", "delete(['P-GAPDH-01'])")),
    ),
    Row(
        "a-single-document-not-a-list",
        add_raw(Document(page_content="# A\n\ntext", metadata={"doc_id": "single"})),
        Refused(TypeError, ("list of Documents, got Document", "add_documents([document])")),
    ),
    Row(
        "a-string-in-the-list",
        add_raw(["# A\n\ntext"]),
        Refused(TypeError, ("documents[0] is a str", "Document(page_content=text")),
    ),
    Row(
        "structured-missing-paras",
        add(structured(GAPDH_NO_PARAS)),
        Refused(ValueError, ("sections[0].paras is missing", "list of paragraph strings")),
    ),
    Row(
        "structured-wrong-type",
        add(structured(GAPDH_BAD_PARAS)),
        Refused(ValueError, ("sections[0].paras must be a list of strings, got str",)),
    ),
    Row(
        "structured-nested-garbage",
        add(structured(GARBAGE)),
        Refused(ValueError, ("sections must be a list of section objects, got dict",)),
    ),
    Row(
        "structured-nested-paragraph",
        add(structured(NESTED_GARBAGE)),
        Refused(ValueError, ("sections[0].paras[0] must be a string, got list",)),
    ),
    Row(
        "structured-not-json",
        add(Document(page_content="{'sections': [", metadata={keys.FORMAT: "structured"})),
        Refused(ValueError, ("structured input is not valid JSON", "pass a JSON object")),
    ),
    Row(
        "nested-metadata",  # as is in the docstore and results, JSON text in Chroma
        add(
            Document(
                page_content="# A\n\nText.",
                metadata={"doc_id": "nested", "extra": {"a": [1, {"b": None}]}},
            )
        ),
        Documented(nested_metadata),
    ),
    # --- queries
    Row("empty-query", query(""), Refused(ValueError, ("query is empty", "question text"))),
    Row("whitespace-query", query("  \n"), Refused(ValueError, ("query is empty",))),
    Row("100k-char-query", long_query, Documented(long_query_result)),
    Row("int-query", query(42), Refused(TypeError, ("query must be a string, got int",))),
    Row("none-query", query(None), Refused(TypeError, ("got NoneType",))),
    Row("bytes-query", query(b"RNA"), Refused(TypeError, ("got bytes",))),
    Row("alpha-above-1", query("RNA", alpha=1.5), Refused(ValueError, ("alpha", "1.5", "[0, 1]"))),
    Row("alpha-below-0", query("RNA", alpha=-0.1), Refused(ValueError, ("alpha", "-0.1"))),
    Row("alpha-in-retriever", retriever(alpha=2.0), Refused(ValueError, ("alpha", "2.0"))),
    Row("k-zero", query("RNA", k=0), Refused(ValueError, ("k must be an integer >= 1, got 0",))),
    Row("k-negative", query("RNA", k=-3), Refused(ValueError, ("k must be", "got -3"))),
    Row("k-zero-in-retriever", retriever(k=0), Refused(ValueError, ("k", "0"))),
    Row(
        "parent-top-k-zero",
        query("RNA", parent_top_k=0),
        Refused(ValueError, ("parent_top_k must be an integer >= 1, got 0",)),
    ),
    Row(
        "filter-with-an-empty-in-list",
        query("RNA", filter={"doc_id": {"$in": []}}),
        Refused(
            ValueError,
            ("filter {'doc_id': {'$in': []}} is malformed", "non-empty list", "skip the search"),
        ),
    ),
    Row(
        "unknown-filter-operator",
        query("RNA", filter={"$foo": 1}),
        Refused(ValueError, ("'$foo' is no operator", "$and or $or")),
    ),
    Row(
        "unknown-filter-key",
        query("RNA", filter={"colour": "red"}),
        Refused(ValueError, ("'colour' are not metadata of this index", "known keys: doc_id")),
    ),
    Row(
        "unknown-filter-key-nested",
        query("RNA", filter={"$and": [{"doc_id": "manual"}, {"colour": "red"}]}),
        Refused(ValueError, ("'colour'",)),
    ),
    # --- index folders and models
    Row(
        "unwritable-directory",  # /sys is read-only even for root
        open_at(lambda _: Path("/sys/gated-parent-index")),
        Refused(ValueError, ("cannot use index directory '/sys/gated-parent-index'", "writable")),
    ),
    Row(
        "directory-under-a-file",
        open_at(lambda c: c.directory / "docstore.sqlite" / "index"),
        Refused(ValueError, ("Not a directory", "choose a writable folder")),
    ),
    Row(
        "missing-directory-is-created",
        open_at(lambda c: c.tmp_path / "new-index"),
        Documented(created_empty),
    ),
    Row(
        "missing-directory-for-cli-query",
        lambda c: (
            cli.main(["query", "RNA", "--index", str(c.tmp_path / "absent")]),
            *c.capsys.readouterr(),
        ),
        CliRefused(cli.EXIT_FAILURE, ("no index in", "absent", "build one with")),
    ),
    Row(
        "another-embedding-model",
        open_with_minilm,
        Refused(
            ValueError,
            (
                "built with embeddings 'DeterministicFakeEmbedding' (32-d)",
                "not 'all-MiniLM-L6-v2-int8' (384-d)",
                "open it with the same embeddings",
            ),
        ),
    ),
]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[GatedParentIndex, Path]:
    directory = tmp_path_factory.mktemp("bad-input") / "index"
    index = GatedParentIndex(fake_embeddings(), directory=directory)
    index.add_documents(corpus())
    return index, directory


TIMINGS: dict[str, float] = {}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input(
    row: Row,
    stored: tuple[GatedParentIndex, Path],
    tmp_path: Path,
    embeddings: MiniLMEmbeddings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    index, directory = stored
    before = snapshot(index)
    context = Context(index, directory, tmp_path, embeddings, capsys)
    try:
        expect = row.expect
        if isinstance(expect, Refused):
            with pytest.raises(expect.error) as refused:
                row.act(context)
            for fragment in expect.fragments:
                assert fragment in str(refused.value)
        elif isinstance(expect, CliRefused):
            status, out, err = row.act(context)
            assert status == expect.status
            assert out == ""
            assert len(err.splitlines()) == 1, err
            assert err.startswith("gated-parent: error: ")
            for fragment in expect.fragments:
                assert fragment in err
        else:
            expect.check(context, row.act(context))
    finally:
        index.delete(context.added)
        TIMINGS.update(context.timings)
    report = index.verify()
    assert report.ok, report.problems
    after = snapshot(index)
    assert sorted(after["docstore"]) == sorted(before["docstore"])
    assert after["parents"]["ids"] == before["parents"]["ids"]
    assert after["children"]["ids"] == before["children"]["ids"]
    assert after["children"]["documents"] == before["children"]["documents"]


def test_report_timings() -> None:
    """Shows the measured times with ``-s`` (runs after the table)."""
    print(f"\nbad-input timings: {TIMINGS}")  # noqa: T201
