"""``gated-parent query --filter`` on a real folder index whose metadata holds numbers.

A value is never guessed from its look: ``KEY=VALUE`` is a string (a doc_id such as
``2003.13032`` must keep matching), ``KEY:=JSON`` a number, boolean or quoted string. The index
is built with the FAKE embedding, which the CLI is made to open it with.
"""

import json

import pytest
from langchain_core.documents import Document

from langchain_gated_parent import cli, keys
from langchain_gated_parent import index as index_module
from langchain_gated_parent.index import GatedParentIndex
from tests.integration_tests.stores import fake_embeddings

PAPER = "# Intro\n\nGhostVLAD pools the frames of {}.\n\n# Results\n\nIt wins on {} languages.\n"


@pytest.fixture
def directory(tmp_path, monkeypatch):
    """An index of two documents told apart by an int ``total_pages`` and a bool ``draft``."""
    folder = tmp_path / "index"
    GatedParentIndex(fake_embeddings(), directory=folder).add_documents(
        [
            Document(
                PAPER.format(doc_id, metadata["total_pages"]),
                metadata={keys.DOC_ID: doc_id, keys.FORMAT: "markdown", **metadata},
            )
            for doc_id, metadata in (
                ("2003.13032", {"total_pages": 41, "draft": False}),
                ("1909.02027", {"total_pages": 9, "draft": True}),
            )
        ]
    )
    monkeypatch.setattr(index_module, "_default_embeddings", fake_embeddings)
    return folder


def query(capsys, directory, *filters):
    argv = ["query", "GhostVLAD", "--index", str(directory), "--json"]
    status = cli.main([*argv, *(a for f in filters for a in ("--filter", f))])
    out, err = capsys.readouterr()
    assert status == 0, err
    return {record["doc_id"] for record in json.loads(out)}, err


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (["total_pages:=41"], {"2003.13032"}),
        (["total_pages:=9", "total_pages:=41"], {"2003.13032", "1909.02027"}),
        (["draft:=true"], {"1909.02027"}),
        (["draft:=false", "total_pages:=41"], {"2003.13032"}),
        (["doc_id=2003.13032"], {"2003.13032"}),
        (['doc_id:="1909.02027"'], {"1909.02027"}),
    ],
)
def test_typed_filters_match_numbers_and_booleans(capsys, directory, filters, expected):
    assert query(capsys, directory, *filters) == (expected, "")


def test_a_string_for_a_number_finds_nothing_and_says_why(capsys, directory):
    found, err = query(capsys, directory, "total_pages=41")
    assert found == set()
    assert err == (
        "gated-parent: note: no results; --filter total_pages=41 matches the string '41': if "
        "total_pages holds numbers or booleans, write --filter total_pages:=41\n"
    )


@pytest.mark.parametrize("value", ["forty", "[9, 41]", "null", "{}"])
def test_a_typed_value_that_is_no_scalar_is_refused(capsys, directory, value):
    status = cli.main(
        ["query", "q", "--index", str(directory), "--filter", f"total_pages:={value}"]
    )
    out, err = capsys.readouterr()
    assert status == cli.EXIT_USAGE
    assert out == ""
    assert err.startswith("gated-parent: error: argument --filter: expected one JSON number")
    assert f"got {value!r}; for a plain string write total_pages={value}" in err
