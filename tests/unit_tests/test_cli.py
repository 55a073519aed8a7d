"""The ``gated-parent`` CLI without an index: parsing, file reading and its error lines.

Every failure here must be one ``gated-parent: error: ...`` line on stderr with the documented
exit status (2 usage / bad value, 1 failed work), and must happen before an index is opened,
so these tests never load the model. Commands that need an index are in
``tests/integration_tests/test_cli_end_to_end.py``.
"""

import json
from importlib.resources import files

import pytest

from langchain_gated_parent import cli, keys, loaders
from langchain_gated_parent.cli import app, common, output
from langchain_gated_parent.cli import query as query_command
from langchain_gated_parent.cli.query import where
from langchain_gated_parent.demo import DEMO_QUERIES, demo_documents
from langchain_gated_parent.server_settings import ServerSettings

pytestmark = pytest.mark.disable_socket


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_error_line(err, *fragments):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gated-parent: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in lines[0]


def test_subcommands_table_builds_every_command():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) == {
        "index", "sections", "query", "delete", "stats", "verify", "recover", "demo", "serve"
    }  # fmt: skip
    assert len(app.SUBCOMMANDS) == len(commands)


def test_query_options_parse():
    args = cli.build_parser().parse_args(
        [
            "query", "48 h RNA extraction", "--index", "idx", "--k", "3", "--alpha", "auto",
            "--parent-top-k", "2", "--child-per-parent", "4",
            "--filter", "doc_id=a", "--filter", "doc_id=b", "--filter", "lang=en", "--json",
        ]
    )  # fmt: skip
    assert (args.k, args.alpha, args.parent_top_k, args.child_per_parent) == (3, "auto", 2, 4)
    assert args.filter == [("doc_id", "a"), ("doc_id", "b"), ("lang", "en")]
    assert args.json
    assert args.run is query_command.run
    assert (
        cli.build_parser().parse_args(["query", "q", "--index", "i", "--alpha", "0.7"]).alpha == 0.7
    )


def test_query_defaults_leave_the_retriever_defaults():
    args = cli.build_parser().parse_args(["query", "q", "--index", "i"])
    assert (args.k, args.alpha, args.parent_top_k, args.child_per_parent) == (None,) * 4
    assert args.filter == []


def test_filters_become_a_chroma_where():
    assert where([]) is None
    assert where([("doc_id", "a")]) == {"doc_id": "a"}
    assert where([("doc_id", "a"), ("doc_id", "b")]) == {"doc_id": {"$in": ["a", "b"]}}
    assert where([("doc_id", "a"), ("lang", "en")]) == {"$and": [{"doc_id": "a"}, {"lang": "en"}]}


def test_filter_values_are_strings_unless_typed():
    args = cli.build_parser().parse_args(
        [
            "query", "q", "--index", "i", "--filter", "doc_id=2003.13032",
            "--filter", "total_pages:=41", "--filter", "draft:=true", "--filter", 'tag:="7"',
            "--filter", "ratio:=0.5", "--filter", "formula=a:=b",
        ]
    )  # fmt: skip
    assert args.filter == [
        ("doc_id", "2003.13032"),
        ("total_pages", 41),
        ("draft", True),
        ("tag", "7"),
        ("ratio", 0.5),
        ("formula", "a:=b"),
    ]


def test_no_results_for_a_string_that_reads_as_a_number_names_the_typed_form():
    assert query_command.typed_filter_hint([("doc_id", "P-GAPDH-01"), ("lang", "en")]) is None
    assert query_command.typed_filter_hint([("total_pages", 41)]) is None
    hint = query_command.typed_filter_hint([("lang", "en"), ("draft", "true")])
    assert hint is not None
    assert "--filter draft=true matches the string 'true'" in hint
    assert hint.endswith("write --filter draft:=true")


def test_filter_help_says_which_values_are_strings(capsys):
    with pytest.raises(SystemExit):
        cli.main(["query", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "KEY=VALUE matches the string VALUE" in help_text
    assert "KEY:=JSON matches a JSON number, true, false or quoted string" in help_text


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["query", "q", "--index", "i", "--alpha", "high"], "argument --alpha"),
        (["query", "q", "--index", "i", "--k", "0"], "argument --k: expected an integer >= 1"),
        (["query", "q", "--index", "i", "--k", "three"], "got 'three'"),
        (["query", "q", "--index", "i", "--parent-top-k", "-1"], "--parent-top-k"),
        (["query", "q", "--index", "i", "--filter", "doc_id"], "expected KEY=VALUE or KEY:=JSON"),
        (["query", "q", "--index", "i", "--filter", ":=1"], "expected KEY=VALUE or KEY:=JSON"),
        (["query", "q", "--index", "i", "--filter", "pages:=4O"], "got '4O'; for a plain string"),
        (["query", "q"], "--index"),
        (["index", "--index", "i"], "PATH"),
        (["frobnicate"], "invalid choice"),
        ([], "COMMAND"),
    ],
)
def test_usage_mistakes_exit_2_with_one_line(capsys, argv, fragment):
    status, out, err = run(capsys, *argv)
    assert status == common.EXIT_USAGE
    assert out == ""
    assert_error_line(err, fragment, "--help")


@pytest.mark.parametrize("command", ["query", "stats", "delete", "verify"])
def test_missing_index_is_refused_and_not_created(capsys, tmp_path, command):
    folder = tmp_path / "no-index"
    argv = {"query": ["query", "q"], "stats": ["stats"], "delete": ["delete", "d1"]}
    status, _, err = run(capsys, *argv.get(command, [command]), "--index", folder)
    assert status == common.EXIT_FAILURE
    assert_error_line(err, f"no index in {folder}", "gated-parent index PATH")
    assert not folder.exists()


def test_folder_without_an_index_is_left_alone(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("not an index")
    status, _, err = run(capsys, "stats", "--index", tmp_path)
    assert status == common.EXIT_FAILURE
    assert_error_line(err, "no index in")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.md", b"# T\n\ncaf\xe9 latin-1\n", (1, ["bad.md is not UTF-8", "0xe9"])),
        ("blob.txt", b"\x89PNG\r\n\x1a\n\x00\x00", (1, ["blob.txt is a binary file"])),
        ("data.json", b"{not json", (1, ["data.json is not valid JSON"])),
        ("list.json", b"[1, 2]", (1, ["must be a JSON object", "got list"])),
        ("nosec.json", b'{"doc_id": "x"}', (1, ["nosec.json: ", "no 'sections'"])),
        ("lines.jsonl", b'{"sections": []}\n\n{oops\n', (1, ["lines.jsonl line 3"])),
        ("paper.pdf", b"%PDF-1.7", (1, ["paper.pdf: truncated", "download it again"])),
        ("movie.mp4", b"\x00\x00", (2, ["movie.mp4: unsupported file type"])),
    ],
)
def test_bad_files_are_named(capsys, tmp_path, name, content, expected):
    status, fragments = expected
    path = tmp_path / name
    path.write_bytes(content)
    index = tmp_path / "idx"
    code, out, err = run(capsys, "index", path, "--index", index)
    assert code == status
    assert out == ""
    assert_error_line(err, *fragments)
    assert not index.exists()  # refused before the index was opened


def test_missing_path_and_empty_folder(capsys, tmp_path):
    status, _, err = run(capsys, "index", tmp_path / "nope", "--index", tmp_path / "i")
    assert status == common.EXIT_USAGE
    assert_error_line(err, "nope does not exist")
    (tmp_path / "empty").mkdir()
    status, _, err = run(capsys, "index", tmp_path / "empty", "--index", tmp_path / "i")
    assert status == common.EXIT_USAGE
    assert_error_line(err, "no files to index under")


def test_unreadable_file(capsys, tmp_path, monkeypatch):
    path = tmp_path / "secret.md"
    path.write_text("# S\n\ntext")

    def deny(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(path), "read_bytes", deny)
    status, _, err = run(capsys, "index", path, "--index", tmp_path / "i")
    assert status == common.EXIT_FAILURE
    assert_error_line(err, f"cannot read {path}: Permission denied")


def test_two_files_with_one_id_are_refused(capsys, tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "readme.md").write_text("# R\n\ntext")
    status, _, err = run(capsys, "index", tmp_path / "a", tmp_path / "b", "--index", tmp_path / "i")
    assert status == common.EXIT_FAILURE
    assert_error_line(err, "both give document id 'readme.md'")


def test_folder_walk_ids_formats_and_hidden_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub" / "note.md").write_text(
        "---\ntitle: 'A note: with colon'\nlang: en\n---\n# H\n\nx"
    )
    (tmp_path / "page.HTML").write_text("<h1>T</h1><p>para</p>")
    (tmp_path / "plain.txt").write_text("just text")
    (tmp_path / "image.png").write_bytes(b"\x89PNG\x00")
    (tmp_path / ".git" / "config.txt").write_text("hidden")
    structured = {"doc_id": "P-1", "sections": [{"id": "s", "title": "T", "paras": ["p"]}]}
    (tmp_path / "s.json").write_text(json.dumps(structured))
    lines = [
        json.dumps(structured | {"doc_id": "L-1"}),
        "",
        json.dumps(structured | {"doc_id": ""}),
    ]
    (tmp_path / "many.jsonl").write_text("\n".join(lines))

    documents = loaders.load_documents([tmp_path])
    by_id = {d.metadata[keys.DOC_ID]: d for d in documents}
    assert list(by_id) == ["L-1", "many.jsonl:3", "page.HTML", "plain.txt", "P-1", "sub/note.md"]
    assert {k: d.metadata[keys.FORMAT] for k, d in by_id.items()} == {
        "L-1": "structured",
        "many.jsonl:3": "structured",
        "page.HTML": "html",
        "plain.txt": "text",
        "P-1": "structured",
        "sub/note.md": "markdown",
    }
    note = by_id["sub/note.md"]
    assert note.page_content == "# H\n\nx"
    assert note.metadata[keys.TITLE] == "A note: with colon"
    assert note.metadata["lang"] == "en"
    assert note.metadata[keys.SOURCE] == str(tmp_path / "sub" / "note.md")
    single = loaders.load_documents([tmp_path / "sub" / "note.md"])
    assert single[0].metadata[keys.DOC_ID] == "note.md"


def test_front_matter():
    text = "---\ndoc_id: 1909.02027\ntitle: CoVoST: A Corpus\ntags:\n  - nlp\n---\n# Abstract\n"
    fields, body = loaders.split_front_matter(text)
    assert fields == {"doc_id": "1909.02027", "title": "CoVoST: A Corpus"}
    assert body == "# Abstract\n"
    assert loaders.split_front_matter("# T\n---\nx") == ({}, "# T\n---\nx")
    assert loaders.split_front_matter("---\nunclosed: yes\n# T") == ({}, "---\nunclosed: yes\n# T")


def test_result_record_is_the_contract():
    from langchain_core.documents import Document

    meta = {key: i for i, key in enumerate(output.RESULT_KEYS)} | {"extra": "dropped"}
    record = output.result_record(Document(page_content="text", metadata=meta))
    assert list(record) == [*output.RESULT_KEYS, "text"]
    assert set(record) == {
        "chunk_id", "parent_id", "doc_id", "score", "parent_score", "child_score", "gate_rank",
        "section_path", "start_index", "end_index", "text",
    }  # fmt: skip


def test_demo_corpus_and_queries_agree():
    documents = demo_documents()
    ids = [d.metadata[keys.DOC_ID] for d in documents]
    assert ids == [
        "1909.02027",
        "1911.06964",
        "2002.01320",
        "2002.01664",
        "2003.13032",
        "P-GAPDH-01",
    ]
    assert all(
        d.metadata.get(keys.TITLE) for d in documents if d.metadata[keys.FORMAT] == "markdown"
    )
    for demo in DEMO_QUERIES:
        text = next(d.page_content for d in documents if d.metadata[keys.DOC_ID] == demo.doc_id)
        for title in demo.section_path:
            assert title in text, (demo.question, title)
    gapdh = json.loads(documents[-1].page_content)
    methods = next(s for s in gapdh["sections"] if s["title"] == "Methods")
    assert any("48 h before RNA extraction" in p for p in methods["paras"])
    assert any("20 nM siRNA targeting GAPDH" in p for p in methods["paras"])


def test_attribution_lists_every_qasper_paper():
    attribution = (
        files("langchain_gated_parent").joinpath("demo_corpus/ATTRIBUTION.md").read_text("utf-8")
    )
    for fragment in ("CC BY 4.0", "arXiv:2105.03011", "S2ORC", "Dasigi"):
        assert fragment in attribution
    for document in demo_documents():
        if document.metadata[keys.FORMAT] == "markdown":
            assert f"| {document.metadata[keys.DOC_ID]} |" in attribution
            assert document.metadata[keys.TITLE] in attribution


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--workers", "0"], "--workers"),
        (["--max-k", "-3"], "--max-k"),
        (["--lock-timeout", "-1"], "--lock-timeout"),
        (["--tenant-key", "tenant"], "api_keys_file"),
        (["--tenant-header", "X-Tenant"], "tenant_key"),
        (["--api-keys", "no-such-keys.json"], "no-such-keys.json"),
    ],
)
def test_serve_refuses_bad_settings_before_opening_the_index(capsys, tmp_path, options, fragment):
    folder = tmp_path / "no-index"
    status, out, err = run(capsys, "serve", "--index", folder, *options)
    assert status == common.EXIT_USAGE
    assert out == ""
    assert_error_line(err, fragment)
    assert not folder.exists()


def test_serve_options_parse():
    args = cli.build_parser().parse_args(
        ["serve", "--index", "i", "--workers", "2", "--max-k", "9", "--api-keys", "k.json"]
    )
    assert (args.workers, args.max_k, str(args.api_keys)) == (2, 9, "k.json")
    assert args.max_batch == 32
    assert args.lock_timeout == ServerSettings().lock_timeout
    assert (
        cli.build_parser()
        .parse_args(["serve", "--index", "i", "--lock-timeout", "2.5"])
        .lock_timeout
        == 2.5
    )
