"""The text mapping of the PDF benchmark: normalisation, and agreement with the span mapping.

On the Markdown path (results that are slices of the truth text) the text mapping must give the
figures of the span mapping within 0.005: rankings of the package's own children (what
``gated`` returns) for every question of 40 typeset QASPER papers, by a lexical score.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import metrics
from benchmarks.peers import bm25_tokenize
from benchmarks.qasper_data import load_papers
from langchain_gated_parent import keys
from langchain_gated_parent.splitters import split_document
from langchain_gated_parent.tokens import get_encoding

TRUTH = Path(__file__).resolve().parents[3] / "shared/data/qasper-pdf/truth.jsonl"
PAPERS = 40
TOP = 30


def test_normalize_text_folds_what_pdf_extraction_changes():
    truth = "The classification of state-of-the-art “fine-tuned” models, e.g. BERT."
    extracted = 'the classi-\nfication of state-of-the-\nart "ﬁne-tuned" models, e.g. BERT'
    assert metrics.normalize_text(truth) == metrics.normalize_text(extracted)
    assert metrics.normalize_text(truth) == (
        "the classification of stateoftheart finetuned models e g bert"
    )


def test_text_locator_finds_paragraphs_in_reflowed_text():
    paragraphs = [
        (("s1", 0), "Glycolysis converts glucose into pyruvate in the cytosol of the cell."),
        (("s1", 1), "The knockdown of GAPDH slowed glycolysis by half within two days."),
        (("s2", 0), "Telescopes recorded the comet passing behind the moon at dawn."),
    ]
    locator = metrics.TextLocator({"p": paragraphs})
    page = (
        "2 Results\nThe knock-\ndown of GAPDH slowed glycolysis by half within\ntwo days. "
        "Telescopes recorded the comet passing behind the moon"
    )
    assert locator.overlapping("p", page) == [("s1", 1), ("s2", 0)]
    assert locator.overlapping("other", page) == []
    grazing = "They slowed down. Telescopes recorded the comet and a hundred other faint things."
    assert locator.overlapping("p", grazing) == []  # a shared phrase is not an overlap
    ranked = locator.ranked_paragraphs([("p", paragraphs[2][1]), ("p", page)])
    assert ranked == [("s2", 0), ("s1", 1)]


def test_near_duplicate_paragraphs_compete_for_the_text():
    first = "(b) Similar to (a), but the dataset is unbalanced, obtained by removing documents."
    second = "(b) Similar to (a), but the class distribution is unbalanced, by removing documents."
    locator = metrics.TextLocator({"p": [(("s8", 2), first), (("s9", 2), second)]})
    assert locator.overlapping("p", first) == [("s8", 2)]
    assert locator.overlapping("p", second) == [("s9", 2)]
    assert locator.overlapping("p", f"{first}\n\n{second}") == [("s8", 2), ("s9", 2)]


def test_text_mapping_reproduces_span_figures_on_the_markdown_path():
    papers = load_papers(TRUTH, PAPERS)
    encoding = get_encoding("cl100k_base")
    spans = metrics.ParagraphLocator(
        {p.paper_id: [(q.key, q.start, q.end) for q in p.paragraphs] for p in papers}
    )
    texts = metrics.TextLocator(
        {p.paper_id: [(q.key, q.text) for q in p.paragraphs] for p in papers}
    )
    by_span: dict[str, list[float]] = {"ndcg": [], "evr": []}
    by_text: dict[str, list[float]] = {"ndcg": [], "evr": []}
    for paper in papers:
        document = paper_document(paper)
        children = split_document(document).children
        for question in paper.questions:
            words = set(bm25_tokenize(question.question))
            ranked = sorted(
                children,
                key=lambda c: -len(words.intersection(bm25_tokenize(c.page_content))),
            )[:TOP]
            returned = [c.page_content for c in ranked]
            evidence = [paper.paragraph(key).text for key in sorted(question.evidence)]
            by_span["ndcg"].append(
                metrics.ndcg_at_k(
                    spans.ranked_paragraphs(
                        (paper.paper_id, c.metadata[keys.START_INDEX], c.metadata[keys.END_INDEX])
                        for c in ranked
                    ),
                    question.evidence,
                    10,
                )
            )
            by_text["ndcg"].append(
                metrics.ndcg_at_k(
                    texts.ranked_paragraphs((paper.paper_id, t) for t in returned),
                    question.evidence,
                    10,
                )
            )
            by_span["evr"].append(metrics.evidence_recall(returned, evidence, 2048, encoding))
            by_text["evr"].append(metrics.evidence_recall_text(returned, evidence, 2048, encoding))
    assert len(by_span["ndcg"]) > 100
    for key in ("ndcg", "evr"):
        span_mean = sum(by_span[key]) / len(by_span[key])
        text_mean = sum(by_text[key]) / len(by_text[key])
        assert 0.05 < span_mean < 0.95  # a ranking that discriminates, not a degenerate one
        assert text_mean == pytest.approx(span_mean, abs=0.005), key


def paper_document(paper):
    from langchain_core.documents import Document

    return Document(
        paper.markdown,
        metadata={keys.DOC_ID: paper.paper_id, keys.FORMAT: "markdown", "title": paper.title},
    )
