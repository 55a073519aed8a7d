import langchain_gated_parent

EXPECTED_ALL = [
    "Explanation",
    "GatedParentIndex",
    "GatedParentRetriever",
    "IndexReport",
    "MiniLMEmbeddings",
    "ParagraphSplitter",
    "ParentChildSplit",
    "SectionSplitter",
    "ScoredResultPrompt",
    "VerifyReport",
    "create_gated_retriever_tool",
    "split_document",
    "sql_docstore",
]


def test_all_imports() -> None:
    assert sorted(langchain_gated_parent.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert getattr(langchain_gated_parent, name) is not None
