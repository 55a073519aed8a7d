"""The section tree: every format, exact spans, ids, paths and malformed input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.sections import (
    DocumentFormat,
    SectionTree,
    detect_format,
    parse_document,
    parse_html,
    parse_markdown,
    parse_structured,
    parse_text,
)

STRUCTURED: dict[str, Any] = {
    "doc_id": "P-GAPDH-01",
    "title": "GAPDH knockdown",
    "sections": [
        {
            "id": "S-methods",
            "title": "Methods",
            "paras": ["20 nM siRNA targeting GAPDH", "48 h before RNA extraction"],
            "sections": [
                {"id": "S-culture", "title": "Cell culture", "paragraphs": ["HeLa cells."]},
            ],
        },
        {"id": "S-results", "title": "Results", "paras": ["  Knockdown worked.  "]},
    ],
}


def paragraphs(tree: SectionTree) -> list[list[str]]:
    return [[tree.text[a:b] for a, b in section.paragraphs] for section in tree.sections]


def headings(tree: SectionTree) -> list[str | None]:
    return [tree.text[s.heading[0] : s.heading[1]] if s.heading else None for s in tree.sections]


def assert_spans_exact(tree: SectionTree) -> None:
    for section in tree.sections:
        spans = [*section.paragraphs, *([section.heading] if section.heading else [])]
        for start, end in spans:
            piece = tree.text[start:end]
            assert piece
            assert piece == piece.strip()


# -- Markdown ---------------------------------------------------------------------------------


def test_markdown_atx_levels_paths_and_ids() -> None:
    text = (
        "# Intro\n\nHello.\n\n## Sub ##\nDirect line.\n\n### Deep\n\nDeep text.\n\n# Next\n\nEnd."
    )
    tree = parse_markdown(text, "d")
    assert [s.section_id for s in tree.sections] == ["d:s0", "d:s1", "d:s2", "d:s3"]
    assert [s.title for s in tree.sections] == ["Intro", "Sub", "Deep", "Next"]
    assert [s.level for s in tree.sections] == [1, 2, 3, 1]
    assert [s.path for s in tree.sections] == [
        ("Intro",),
        ("Intro", "Sub"),
        ("Intro", "Sub", "Deep"),
        ("Next",),
    ]
    assert [s.parent_id for s in tree.sections] == [None, "d:s0", "d:s1", None]
    assert headings(tree) == ["# Intro", "## Sub ##", "### Deep", "# Next"]
    assert paragraphs(tree) == [["Hello."], ["Direct line."], ["Deep text."], ["End."]]
    assert tree.text is text
    assert_spans_exact(tree)


def test_markdown_preamble_is_level_zero_section() -> None:
    tree = parse_markdown("  Before any heading.\n\nStill before.\n\n# Title\n\nBody.", "d")
    preamble = tree.sections[0]
    assert (preamble.section_id, preamble.title, preamble.level) == ("d:s0", "", 0)
    assert preamble.heading is None
    assert preamble.path == ()
    assert paragraphs(tree)[0] == ["Before any heading.", "Still before."]
    assert tree.sections[1].section_id == "d:s1"
    assert tree.sections[1].parent_id is None


def test_markdown_without_preamble() -> None:
    tree = parse_markdown("# Only\n\ntext", "d")
    assert [s.level for s in tree.sections] == [1]


def test_markdown_opening_with_a_byte_order_mark_keeps_its_first_heading() -> None:
    """A file read with encoding="utf-8" keeps the mark: the heading after it is still one."""
    text = "\ufeff# Intro\n\nAbout lemurs.\n\n# Second\n\nOther."
    assert detect_format("\ufeff# Only heading\n\ntext") == DocumentFormat.MARKDOWN
    tree = parse_markdown(text, "d")
    assert [s.title for s in tree.sections] == ["Intro", "Second"]
    assert headings(tree) == ["# Intro", "# Second"]
    assert paragraphs(tree) == [["About lemurs."], ["Other."]]
    assert_spans_exact(tree)


def test_markdown_setext_headings() -> None:
    text = "Top Title\n=========\n\nIntro.\n\nTwo line\nsub title\n---\n\nBody.\n\n---\n"
    tree = parse_markdown(text, "d")
    assert [(s.title, s.level) for s in tree.sections] == [
        ("Top Title", 1),
        ("Two line sub title", 2),
    ]
    assert headings(tree) == ["Top Title\n=========", "Two line\nsub title\n---"]
    # A lone --- after a blank line is a thematic break, kept as text, not a heading.
    assert paragraphs(tree) == [["Intro."], ["Body.", "---"]]


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_markdown_fenced_code_is_one_paragraph(fence: str) -> None:
    code = f"{fence}python\n# not a heading\n\nx = 1\n{fence}"
    text = f"# Code\n\nBefore.\n{code}\nAfter.\n\n## Real\n\ntext"
    tree = parse_markdown(text, "d")
    assert [s.title for s in tree.sections] == ["Code", "Real"]
    assert paragraphs(tree)[0] == ["Before.", code, "After."]


def test_markdown_unclosed_fence_runs_to_end() -> None:
    tree = parse_markdown("# A\n\n```\n# x\n\n# y\n", "d")
    assert [s.title for s in tree.sections] == ["A"]
    assert paragraphs(tree) == [["```\n# x\n\n# y"]]


def test_markdown_not_headings() -> None:
    text = "#hashtag is text\n\n    # indented code\n\n####### seven"
    tree = parse_markdown(text, "d")
    assert [s.level for s in tree.sections] == [0]
    assert len(tree.sections[0].paragraphs) == 3


def test_markdown_empty_heading_and_crlf() -> None:
    tree = parse_markdown("#\r\n\r\nbody\r\n# B\r\nx\r\n", "d")
    assert [s.title for s in tree.sections] == ["", "B"]
    assert paragraphs(tree) == [["body"], ["x"]]


def test_markdown_default_doc_id_is_stable_hash() -> None:
    first = parse_markdown("# A\n\nx")
    assert first.doc_id == parse_markdown("# A\n\nx").doc_id
    assert first.doc_id.startswith("doc-")
    assert len(first.doc_id) == len("doc-") + 16
    assert first.doc_id != parse_markdown("# A\n\ny").doc_id


# -- Structured -------------------------------------------------------------------------------


def test_structured_nested_sections() -> None:
    tree = parse_structured(STRUCTURED)
    assert tree.doc_id == "P-GAPDH-01"
    assert tree.title == "GAPDH knockdown"
    assert [s.section_id for s in tree.sections] == ["S-methods", "S-culture", "S-results"]
    assert [s.level for s in tree.sections] == [1, 2, 1]
    assert [s.parent_id for s in tree.sections] == [None, "S-methods", None]
    assert tree.sections[1].path == ("Methods", "Cell culture")
    assert tree.text == (
        "# Methods\n\n20 nM siRNA targeting GAPDH\n\n48 h before RNA extraction\n\n"
        "## Cell culture\n\nHeLa cells.\n\n# Results\n\nKnockdown worked."
    )
    assert paragraphs(tree) == [
        ["20 nM siRNA targeting GAPDH", "48 h before RNA extraction"],
        ["HeLa cells."],
        ["Knockdown worked."],
    ]
    assert_spans_exact(tree)


def test_structured_json_string_and_doc_id_override() -> None:
    tree = parse_structured(json.dumps(STRUCTURED), doc_id="other")
    assert tree.doc_id == "other"
    assert tree.sections[0].section_id == "S-methods"


def test_structured_deep_nesting_caps_heading_marks() -> None:
    section: dict[str, Any] = {"id": "s8", "title": "L8", "paras": ["deep"]}
    for depth in range(7, 0, -1):
        section = {"id": f"s{depth}", "title": f"L{depth}", "paras": [], "sections": [section]}
    tree = parse_structured({"sections": [section]})
    assert tree.sections[-1].level == 8
    assert headings(tree)[-1] == "###### L8"
    assert tree.doc_id.startswith("doc-")


def _with(path: str, value: object) -> dict[str, Any]:
    data = json.loads(json.dumps(STRUCTURED))
    *parents, last = path.split(".")
    node: Any = data
    for key in parents:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is KeyError:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", r"not valid JSON"),
        ("[1, 2]", r"structured input must be an object with 'sections', got list"),
        ({"doc_id": "x"}, r"has no 'sections'"),
        (_with("sections", "abc"), r"^sections must be a list of section objects, got str$"),
        (_with("sections.1", 3), r"^sections\[1\] must be an object, got int$"),
        (_with("sections.1.paras", KeyError), r"^sections\[1\]\.paras is missing"),
        (
            _with("sections.1.paras", 5),
            r"^sections\[1\]\.paras must be a list of strings, got int$",
        ),
        (_with("sections.1.paras", [1]), r"^sections\[1\]\.paras\[0\] must be a string, got int$"),
        (_with("sections.1.paras", [" "]), r"sections\[1\]\.paras\[0\] is blank"),
        (_with("sections.1.title", KeyError), r"^sections\[1\]\.title is missing"),
        (_with("sections.1.title", None), r"^sections\[1\]\.title must be a string, got NoneType$"),
        (_with("sections.1.id", KeyError), r"^sections\[1\]\.id is missing"),
        (_with("sections.1.id", value=True), r"^sections\[1\]\.id must be a string, got bool$"),
        (_with("sections.1.id", ""), r"sections\[1\]\.id is empty"),
        (_with("sections.1.id", "S-methods"), r"sections\[1\]\.id is a duplicate of 'S-methods'"),
        (_with("sections.1.paragraphs", ["x"]), r"has both 'paras' and 'paragraphs'"),
        (_with("sections.0.sections", {"a": 1}), r"^sections\[0\]\.sections must be a list"),
        (
            _with("sections.0.sections.0.paragraphs", [["nested"]]),
            r"^sections\[0\]\.sections\[0\]\.paragraphs\[0\] must be a string, got list$",
        ),
        (_with("doc_id", 7), r"^doc_id must be a string, got int$"),
        (_with("title", ["t"]), r"^title must be a string, got list$"),
    ],
)
def test_structured_malformed_names_field_path(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_structured(data)  # type: ignore[arg-type]


# -- HTML -------------------------------------------------------------------------------------

HTML = """<!DOCTYPE html><html><head><title> The  Doc </title><style>p {}</style></head>
<body><p>Loose preamble.</p>
<h1>Intro</h1><p>Hello <b>bold</b>
 world.</p><!-- comment -->
<ul><li>one</li><li>two<ul><li>three</li></ul></li></ul>
<h2>Code</h2><pre>x = 1

y = 2</pre><script>alert(1)</script>
<table><tr><td>cell a</td><td><p>cell b</p></td></tr></table>
<blockquote>quoted<br><a href="#">link</a></blockquote><div>tail text</div></body></html>"""


def test_html_sections_and_paragraphs() -> None:
    tree = parse_html(HTML, "h")
    assert tree.title == "The Doc"
    assert [(s.section_id, s.title, s.level) for s in tree.sections] == [
        ("h:s0", "", 0),
        ("h:s1", "Intro", 1),
        ("h:s2", "Code", 2),
    ]
    assert tree.sections[2].path == ("Intro", "Code")
    assert paragraphs(tree) == [
        ["Loose preamble."],
        ["Hello bold world.", "one", "two", "three"],
        ["x = 1\n\ny = 2", "cell a", "cell b", "quoted link", "tail text"],
    ]
    assert headings(tree) == [None, "# Intro", "## Code"]
    assert "alert" not in tree.text
    assert "p {}" not in tree.text
    assert_spans_exact(tree)


def test_html_without_headings() -> None:
    tree = parse_html("<p>a</p><p>b</p>", "h")
    assert [s.level for s in tree.sections] == [0]
    assert tree.text == "a\n\nb"
    assert tree.title is None


# -- Plain text -------------------------------------------------------------------------------


def test_text_numbered_and_caps_headings() -> None:
    text = (
        "Preamble line.\n\nMETHODS\n\n2 Materials\n\n2.1 Cell culture\nHeLa cells were grown.\n\n"
        "2.1.3 Deep Dive\n\nDeep.\n\n3 Results\n\n20 nM siRNA worked.\n\n2 mL of buffer was added"
    )
    tree = parse_text(text, "t")
    assert [(s.title, s.level, s.parent_id) for s in tree.sections] == [
        ("", 0, None),
        ("METHODS", 1, None),
        ("2 Materials", 1, None),
        ("2.1 Cell culture", 2, "t:s2"),
        ("2.1.3 Deep Dive", 3, "t:s3"),
        ("3 Results", 1, None),
    ]
    assert paragraphs(tree) == [
        ["Preamble line."],
        [],
        [],
        ["HeLa cells were grown."],
        ["Deep."],
        ["20 nM siRNA worked.", "2 mL of buffer was added"],
    ]
    assert_spans_exact(tree)


def test_text_without_headings_is_one_section() -> None:
    tree = parse_text("One paragraph here.\n\n\nAnother one, here.\n", "t")
    assert len(tree.sections) == 1
    assert paragraphs(tree) == [["One paragraph here.", "Another one, here."]]


def test_text_sentences_are_not_headings() -> None:
    tree = parse_text("1 We ran it.\n\nDNA.\n\nA B C D E F G H I J K L M N", "t")
    assert [s.level for s in tree.sections] == [0]


# -- Detection and Documents ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(STRUCTURED), DocumentFormat.STRUCTURED),
        ('{"no": "sections"}', DocumentFormat.TEXT),
        ("  <html><p>x</p></html>", DocumentFormat.HTML),
        ("Intro <p>para</p>", DocumentFormat.HTML),
        ("<5% of cells died", DocumentFormat.TEXT),
        ("text\n\n## Heading\n\nmore", DocumentFormat.MARKDOWN),
        ("Heading\n-----\n\nmore", DocumentFormat.MARKDOWN),
        ("1 Introduction\n\nplain", DocumentFormat.TEXT),
    ],
)
def test_detect_format(text: str, expected: DocumentFormat) -> None:
    assert detect_format(text) is expected


def test_document_format_hint_overrides_detection() -> None:
    doc = Document("# not a heading in text mode", metadata={keys.FORMAT: "text", "doc_id": "x"})
    tree = parse_document(doc)
    assert [s.level for s in tree.sections] == [0]
    assert parse_document(Document("<p>a</p>", metadata={keys.FORMAT: "html"})).text == "a"


def test_document_unknown_format_lists_choices() -> None:
    with pytest.raises(ValueError, match="unknown metadata format 'pdf'; use one of markdown"):
        parse_document(Document("x", metadata={keys.FORMAT: "pdf"}))


def test_document_id_precedence() -> None:
    text = json.dumps(STRUCTURED)
    assert parse_document(Document(text, metadata={"doc_id": "a", "source": "b"})).doc_id == "a"
    assert parse_document(Document(text, metadata={"source": "b.json"})).doc_id == "b.json"
    assert parse_document(Document(text)).doc_id == "P-GAPDH-01"
    markdown = parse_document(Document("# A\n\nx"))
    assert markdown.doc_id == parse_markdown("# A\n\nx").doc_id
    assert markdown.sections[0].section_id == f"{markdown.doc_id}:s0"


def test_document_title_metadata_wins() -> None:
    tree = parse_document(Document(json.dumps(STRUCTURED), metadata={"title": "Mine"}))
    assert tree.title == "Mine"
    assert parse_document(Document(HTML)).title == "The Doc"
