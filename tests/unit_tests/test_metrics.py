"""Unit tests of the QASPER benchmark metrics, against hand-computed values."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pytest

from benchmarks import metrics
from benchmarks.qasper_data import render_paper

if TYPE_CHECKING:
    from collections.abc import Sequence

A, B, C = ("p:s1", 0), ("p:s1", 1), ("p:s2", 0)
X1, X2, X3 = ("p:s3", 0), ("p:s3", 1), ("p:s3", 2)


class CharEncoding:
    """One token per character: budgets are character counts, easy to compute by hand."""

    def encode_ordinary(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, tokens: Sequence[int]) -> str:
        return "".join(chr(t) for t in tokens)


@pytest.fixture
def locator() -> metrics.ParagraphLocator:
    # Paragraph spans of paper "p": A [0, 10), B [12, 20), C [22, 30); gaps are separators.
    return metrics.ParagraphLocator({"p": [(C, 22, 30), (A, 0, 10), (B, 12, 20)]})


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        (("p", 0, 10), [A]),
        (("p", 5, 15), [A, B]),
        (("p", 10, 12), []),  # only the separator between A and B
        (("p", 9, 10), [A]),  # one character of A
        (("p", 20, 22), []),  # end is exclusive: B ends at 20, C starts at 22
        (("p", 19, 23), [B, C]),
        (("p", 0, 100), [A, B, C]),
        (("q", 0, 10), []),  # another paper
        (("p", 5, 5), []),  # empty span
    ],
)
def test_overlapping(
    locator: metrics.ParagraphLocator, span: metrics.Span, expected: list[metrics.ParagraphKey]
) -> None:
    assert locator.overlapping(span) == expected


def test_ranked_paragraphs_first_occurrence(locator: metrics.ParagraphLocator) -> None:
    # The second chunk covers A, B and C; B was already ranked, so A and C follow in doc order.
    spans = [("p", 12, 20), ("p", 0, 25), ("p", 22, 30), ("q", 0, 5)]
    assert locator.ranked_paragraphs(spans) == [B, A, C]


def test_ranking_metrics_hand_computed() -> None:
    ranked = [X1, A, X2, B, X3]
    evidence = frozenset({A, B, C})
    # Ranks of relevant items: 2 and 4.
    dcg = 1 / math.log2(3) + 1 / math.log2(5)  # 0.63093 + 0.43068
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # three relevant: 2.13093
    got = metrics.ranking_metrics(ranked, evidence)
    assert got["recall@8"] == pytest.approx(2 / 3)
    assert got["hit@8"] == 1.0
    assert got["mrr@10"] == pytest.approx(0.5)
    assert got["ndcg@10"] == pytest.approx(dcg / idcg)
    assert got["ndcg@10"] == pytest.approx(0.498189, abs=1e-6)


def test_cutoffs_8_and_10() -> None:
    filler = [("f", i) for i in range(8)]
    ranked = [*filler, A]  # A at rank 9: outside @8, inside @10
    evidence = frozenset({A})
    got = metrics.ranking_metrics(ranked, evidence)
    assert got["recall@8"] == 0.0
    assert got["hit@8"] == 0.0
    assert got["mrr@10"] == pytest.approx(1 / 9)
    assert got["ndcg@10"] == pytest.approx(1 / math.log2(10))  # 0.30103
    ranked11 = [*filler, ("f", 8), ("f", 9), A]  # rank 11: outside @10 too
    assert metrics.mrr_at_k(ranked11, evidence, 10) == 0.0
    assert metrics.ndcg_at_k(ranked11, evidence, 10) == 0.0


def test_ndcg_ideal_is_min_of_evidence_and_10() -> None:
    evidence = frozenset(("e", i) for i in range(12))
    ranked = [("e", i) for i in range(10)]
    # Ten relevant in the top 10 is perfect even though |E| = 12.
    assert metrics.ndcg_at_k(ranked, evidence, 10) == pytest.approx(1.0)
    # Recall counts against all 12.
    assert metrics.recall_at_k(ranked, evidence, 8) == pytest.approx(8 / 12)


def test_metrics_on_empty_ranking() -> None:
    got = metrics.ranking_metrics([], frozenset({A}))
    assert got == {"recall@8": 0.0, "hit@8": 0.0, "mrr@10": 0.0, "ndcg@10": 0.0}


def test_empty_evidence_raises() -> None:
    with pytest.raises(ValueError, match="evidence"):
        metrics.recall_at_k([A], frozenset(), 8)
    with pytest.raises(ValueError, match="evidence"):
        metrics.evidence_recall(["x"], [], 512, CharEncoding())
    with pytest.raises(ValueError, match="evidence"):
        metrics.gate_recall([], [("p", 0, 1)])


def test_normalize_whitespace() -> None:
    assert metrics.normalize_whitespace("  a\n\n b\t\tc \u00a0d ") == "a b c d"


def test_pack_context_cuts_at_budget() -> None:
    enc = CharEncoding()
    # "aa bb" + "\n\n" + "cc" = 9 characters = 9 tokens.
    assert metrics.pack_context(["aa bb", "cc"], 9, enc) == "aa bb\n\ncc"
    assert metrics.pack_context(["aa bb", "cc"], 100, enc) == "aa bb\n\ncc"
    assert metrics.pack_context(["aa bb", "cc"], 8, enc) == "aa bb\n\nc"
    assert metrics.pack_context([], 8, enc) == ""


def test_evidence_recall_hand_computed() -> None:
    enc = CharEncoding()
    texts = ["aa  bb", "cc dd"]  # packed: "aa  bb\n\ncc dd" (13 tokens)
    evidence = ["aa\nbb", "cc dd"]  # whitespace differs from the returned text: still covered
    assert metrics.evidence_recall(texts, evidence, 13, enc) == 1.0
    assert metrics.evidence_recall(texts, evidence, 12, enc) == 0.5  # "cc d" cut
    assert metrics.evidence_recall(texts, evidence, 5, enc) == 0.0  # "aa  b"
    # A paragraph spanning two returned texts (joined by the separator) counts once normalized.
    assert metrics.evidence_recall(["x aa", "bb y"], ["aa bb"], 100, enc) == 1.0
    # Duplicate evidence texts count per paragraph.
    assert metrics.evidence_recall(["aa"], ["aa", "zz", "aa"], 100, enc) == pytest.approx(2 / 3)


def test_evidence_recall_with_cl100k() -> None:
    from langchain_gated_parent.tokens import get_encoding

    enc = get_encoding("cl100k_base")
    first = "The quick brown fox jumps over the lazy dog."
    second = "Retrieval is evaluated on QASPER evidence paragraphs."
    n_first = len(enc.encode_ordinary(first + "\n\n"))
    assert metrics.evidence_recall([first, second], [first, second], n_first, enc) == 0.5
    assert metrics.evidence_recall([first, second], [first, second], 2048, enc) == 1.0
    # Special-token text inside a paper is ordinary text, not an error.
    assert metrics.evidence_recall(["a <|endoftext|> b"], ["<|endoftext|>"], 512, enc) == 1.0


def test_gate_recall_hand_computed() -> None:
    evidence = [("p", 0, 10), ("p", 22, 30), ("q", 0, 10)]
    assert metrics.gate_recall(evidence, [("p", 0, 20)]) == pytest.approx(1 / 3)
    assert metrics.gate_recall(evidence, [("p", 0, 20), ("q", 0, 50)]) == pytest.approx(2 / 3)
    # A paragraph covered by two adjacent opened parents (a cut section) lies inside them.
    assert metrics.gate_recall([("p", 15, 30)], [("p", 21, 40), ("p", 0, 21)]) == 1.0
    # Partly inside is not inside.
    assert metrics.gate_recall([("p", 15, 30)], [("p", 0, 21)]) == 0.0
    assert metrics.gate_recall([("p", 15, 30)], []) == 0.0


def test_mean_and_percentile() -> None:
    assert metrics.mean([1.0, None, 3.0]) == 2.0
    assert metrics.mean([None]) is None
    assert metrics.percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert metrics.percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert metrics.percentile([7.0], 95) == 7.0


def test_rendered_spans_feed_the_locator() -> None:
    raw = {
        "doc_id": "p",
        "title": "T",
        "sections": [
            {"id": "p:s0", "title": "Abstract", "paragraphs": ["Abs one."]},
            {"id": "p:s1", "title": "Model ::: Encoder", "paragraphs": ["Enc a.", "Enc b."]},
            {"id": "p:s2", "title": "", "paragraphs": []},
        ],
        "questions": [
            {
                "qid": "q1",
                "question": "?",
                "evidence": [{"section_id": "p:s1", "paragraph_index": 1}],
            },
            {"qid": "q2", "question": "?", "evidence": []},
        ],
    }
    paper = render_paper(raw)
    # "Model" has no section of its own: its heading is written so "Encoder" nests under it.
    assert paper.markdown == (
        "# Abstract\n\nAbs one.\n\n# Model\n\n## Encoder\n\nEnc a.\n\nEnc b.\n\n# Untitled"
    )
    assert [q.qid for q in paper.questions] == ["q1"]
    enc_b = paper.paragraph(("p:s1", 1))
    assert paper.markdown[enc_b.start : enc_b.end] == "Enc b."
    sec = paper.sections[1]
    assert paper.section_text(sec) == "## Encoder\n\nEnc a.\n\nEnc b."
    assert sec.depth == 2
    locator = metrics.ParagraphLocator(
        {"p": [(para.key, para.start, para.end) for para in paper.paragraphs]}
    )
    # A chunk covering the whole section maps to both of its paragraphs, not the heading.
    assert locator.ranked_paragraphs([("p", sec.start, sec.end)]) == [("p:s1", 0), ("p:s1", 1)]
    with pytest.raises(ValueError, match="missing paragraphs"):
        render_paper(
            {
                **raw,
                "questions": [
                    {
                        "qid": "x",
                        "question": "?",
                        "evidence": [{"section_id": "p:s9", "paragraph_index": 0}],
                    }
                ],
            }
        )
