"""``gated-parent`` end to end, as a user runs it: a subprocess per command on a real index.

One index of the bundled demo corpus is built for the module (embedding it is the slow part);
the read-only commands run against it, and the last test deletes a document and lets ``demo``
put it back, so the demo also shows that unchanged documents are skipped.
"""

import json
import os
import subprocess
import sys
from importlib.resources import files

import pytest

from langchain_gated_parent.cli.output import RESULT_KEYS
from langchain_gated_parent.demo import CORPUS_FOLDER, DEMO_QUERIES

pytestmark = pytest.mark.slow

CORPUS = files("langchain_gated_parent").joinpath(CORPUS_FOLDER)
CORPUS_IDS = ["1909.02027", "1911.06964", "2002.01320", "2002.01664", "2003.13032", "P-GAPDH-01"]


def gated_parent(*argv, check=True):
    result = subprocess.run(
        [sys.executable, "-m", "langchain_gated_parent.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},  # the table's text column fits the terminal
        timeout=600,
        check=False,
    )
    assert "Traceback" not in result.stderr, result.stderr
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli") / "index"
    result = gated_parent("index", CORPUS, "--index", directory)
    return directory, result.stdout


def test_index_prints_a_summary(index):
    _, summary = index
    assert summary.startswith("indexed 6 documents (6 new or changed, 0 unchanged): ")
    assert " parents, " in summary
    assert "documents/s, " in summary
    assert "children/s)" in summary


def test_reindexing_skips_unchanged_documents(index):
    directory, _ = index
    result = gated_parent("index", CORPUS, "--index", directory)
    assert "(0 new or changed, 6 unchanged): 0 parents, 0 children" in result.stdout


def test_reindexing_an_edited_file_embeds_only_its_new_paragraph(tmp_path):
    notes = tmp_path / "notes.md"
    paragraphs = [f"Step {n}: turn the valve {n} times and wait." for n in range(1, 6)]
    notes.write_text("# Procedure\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
    gated_parent("index", notes, "--index", tmp_path / "index")
    notes.write_text(notes.read_text(encoding="utf-8").replace("valve 3", "valve 33"), "utf-8")

    result = gated_parent("index", notes, "--index", tmp_path / "index")

    assert "(1 new or changed, 0 unchanged): 1 parents, 5 children, 4 texts' vectors kept" in (
        result.stdout
    )


def test_query_json_is_the_contract(index):
    directory, _ = index
    result = gated_parent("query", "48 h RNA extraction", "--index", directory, "--json", "--k", 4)
    records = json.loads(result.stdout)
    assert len(records) == 4
    assert all(list(r) == [*RESULT_KEYS, "text"] for r in records)
    top = records[0]
    assert top["doc_id"] == "P-GAPDH-01"
    assert top["section_path"] == ["Methods"]
    assert "48 h before RNA extraction" in top["text"]
    assert top["gate_rank"] == 1
    assert 0 <= top["child_score"] <= 1
    assert 0 <= top["parent_score"] <= 1
    assert [r["score"] for r in records] == sorted((r["score"] for r in records), reverse=True)


def test_query_filter_and_table(index):
    directory, _ = index
    question = "How many documents are in the new corpus?"
    result = gated_parent("query", question, "--index", directory, "--filter", "doc_id=2003.13032")
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["#", "score", "s_p", "s_c", "where", "text"]
    assert lines[1].split()[0] == "1"
    assert all("2003.13032" in line for line in lines[1:])
    assert "53 documents" in lines[1]

    json_result = gated_parent(
        "query", question, "--index", directory, "--json",
        "--filter", "doc_id=2003.13032", "--filter", "doc_id=P-GAPDH-01",
    )  # fmt: skip
    assert {r["doc_id"] for r in json.loads(json_result.stdout)} <= {"2003.13032", "P-GAPDH-01"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--alpha", "1.5"],
            "--alpha: expected a number in [0, 1] or 'auto' or 'learned', got '1.5'",
        ),
        (["--filter", "colour=red"], "'colour' are not metadata of this index"),
        (["--k", "0"], "expected an integer >= 1"),
    ],
)
def test_query_refusals_are_one_line(index, options, message):
    directory, _ = index
    result = gated_parent("query", "GhostVLAD", "--index", directory, *options, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("gated-parent: error: ")
    assert message in result.stderr


def test_stats_json_counts(index):
    directory, _ = index
    stats = json.loads(gated_parent("stats", "--index", directory, "--json").stdout)
    assert stats["documents"] == 6
    assert stats["parents"] >= 6
    assert stats["children"] > stats["parents"]
    assert stats["bytes_on_disk"] > 0
    assert stats["embedding_model"]
    text = gated_parent("stats", "--index", directory).stdout
    assert "documents" in text
    assert "bytes on disk" in text


def test_missing_index_is_not_created(tmp_path):
    result = gated_parent("query", "anything", "--index", tmp_path / "absent", check=False)
    assert result.returncode == 1
    assert "gated-parent: error: no index in" in result.stderr
    assert not (tmp_path / "absent").exists()


def test_delete_verify_and_demo_put_it_back(index):
    directory, _ = index
    deleted = gated_parent("delete", "2003.13032", "--index", directory)
    assert deleted.stdout.strip() == "deleted 1 document(s): 2003.13032"
    again = gated_parent("delete", "2003.13032", "P-GAPDH-01", "--index", directory, check=False)
    assert again.returncode == 1
    assert "deleted 1 document(s): P-GAPDH-01" in again.stdout
    assert again.stderr.strip() == "gated-parent: error: not in the index: 2003.13032"
    verified = gated_parent("verify", "--index", directory)
    assert verified.stdout.startswith("ok: 4 documents")

    demo = gated_parent("demo", "--index", directory).stdout
    assert "indexed 6 documents (2 new or changed, 4 unchanged)" in demo
    for query in DEMO_QUERIES:
        assert f"question: {query.question}" in demo
    assert demo.count("gate opened") == len(DEMO_QUERIES)
    assert "1. s_p 0." in demo
    assert "P-GAPDH-01 > Methods" in demo
    assert "filter: doc_id=2003.13032" in demo
    assert gated_parent("verify", "--index", directory).stdout.startswith("ok: 6 documents")


def test_a_reader_that_closes_early_ends_the_command_quietly(tmp_path):
    headings = "".join(f"## Step {n}\n\nMix and wait {n} minutes.\n\n" for n in range(500))
    for n in range(20):  # 400 kB of output: more than a pipe holds
        (tmp_path / f"protocol-{n}.md").write_text(f"# Protocol {n}\n\n{headings}")
    command = [sys.executable, "-m", "langchain_gated_parent.cli", "sections", tmp_path]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout.readline()  # as `| head -1` does: one line, then close
        process.stdout.close()
        stderr = process.stderr.read().decode()
        status = process.wait(timeout=600)
    assert stderr == ""
    assert status == 141  # 128 + SIGPIPE, what the shell shows for `yes | head -1`
