"""Pure metric functions for the QASPER benchmark (no I/O, no models).

Implements the metric specification of ``/work/shared/data/qasper/README.md`` exactly:

* A retrieved chunk ``(paper_id, start, end)`` maps to every paragraph of that paper whose
  character span overlaps ``[start, end)``; the ranked list of distinct paragraphs is formed by
  first occurrence (paragraphs of one chunk in document order).
* Recall@8 = ``|E ∩ top 8| / |E|``, Hit@8, MRR@10, nDCG@10 with binary gains and an ideal of
  ``min(|E|, 10)`` ones.
* EvidenceRecall@B: returned texts joined in rank order with a blank line, cut at ``B``
  cl100k_base tokens; an evidence paragraph is covered when its whitespace-normalized text is a
  substring of the whitespace-normalized packed context.
* Gate recall: the share of evidence paragraphs lying inside the parents the gate opened.
"""

from __future__ import annotations

import bisect
import math
import re
import unicodedata
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

ParagraphKey = tuple[str, int]
"""``(section_id, paragraph_index)``."""

Span = tuple[str, int, int]
"""``(paper_id, start, end)``: a character span in one paper's text."""


class TokenEncoding(Protocol):
    """The part of ``tiktoken.Encoding`` the context metric uses."""

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text, treating special tokens as ordinary text."""
        ...

    def decode(self, tokens: Sequence[int]) -> str:
        """Decode tokens to text."""
        ...


class ParagraphLocator:
    """Map character spans to the paragraphs they overlap, per paper.

    Args:
        paragraphs: For each paper id, ``(key, start, end)`` of its paragraphs (non-overlapping).
    """

    def __init__(self, paragraphs: Mapping[str, Sequence[tuple[ParagraphKey, int, int]]]) -> None:
        """Sort each paper's paragraphs by start offset and index the starts."""
        self._paragraphs = {
            pid: sorted(paras, key=lambda p: p[1]) for pid, paras in paragraphs.items()
        }
        self._starts = {pid: [p[1] for p in paras] for pid, paras in self._paragraphs.items()}

    def overlapping(self, span: Span) -> list[ParagraphKey]:
        """Return the paragraphs whose span overlaps ``span`` (non-empty overlap), in order.

        Args:
            span: ``(paper_id, start, end)``.

        Returns:
            Paragraph keys in document order; empty if the span lies between paragraphs
            (e.g. a heading) or names an unknown paper.
        """
        paper_id, start, end = span
        paras = self._paragraphs.get(paper_id)
        if not paras or end <= start:
            return []
        starts = self._starts[paper_id]
        # Paragraphs starting before `end` are candidates; walk back while they still overlap.
        hi = bisect.bisect_left(starts, end)
        found: list[ParagraphKey] = []
        for key, p_start, p_end in reversed(paras[:hi]):
            if p_end > start and p_start < end:
                found.append(key)
            elif p_end <= start:
                # Paragraphs do not nest or overlap each other, so earlier ones end earlier.
                break
        found.reverse()
        return found

    def ranked_paragraphs(self, spans: Iterable[Span]) -> list[ParagraphKey]:
        """Return the distinct paragraphs overlapped by ranked spans, by first occurrence."""
        seen: set[ParagraphKey] = set()
        ranked: list[ParagraphKey] = []
        for span in spans:
            for key in self.overlapping(span):
                if key not in seen:
                    seen.add(key)
                    ranked.append(key)
        return ranked


def recall_at_k(ranked: Sequence[ParagraphKey], evidence: frozenset[ParagraphKey], k: int) -> float:
    """Return ``|E ∩ top k| / |E|``.

    Raises:
        ValueError: If the evidence set is empty.
    """
    _check_evidence(evidence)
    return len(evidence.intersection(ranked[:k])) / len(evidence)


def hit_at_k(ranked: Sequence[ParagraphKey], evidence: frozenset[ParagraphKey], k: int) -> float:
    """Return 1.0 if any evidence paragraph is in the top ``k``, else 0.0."""
    _check_evidence(evidence)
    return 1.0 if evidence.intersection(ranked[:k]) else 0.0


def mrr_at_k(ranked: Sequence[ParagraphKey], evidence: frozenset[ParagraphKey], k: int) -> float:
    """Return the reciprocal rank of the first evidence paragraph in the top ``k`` (else 0)."""
    _check_evidence(evidence)
    for rank, key in enumerate(ranked[:k], start=1):
        if key in evidence:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[ParagraphKey], evidence: frozenset[ParagraphKey], k: int) -> float:
    """Return nDCG@k with binary gains; the ideal ranking has ``min(|E|, k)`` relevant items."""
    _check_evidence(evidence)
    dcg = sum(
        1.0 / math.log2(rank + 1) for rank, key in enumerate(ranked[:k], start=1) if key in evidence
    )
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(evidence), k) + 1))
    return dcg / ideal


def ranking_metrics(
    ranked: Sequence[ParagraphKey], evidence: frozenset[ParagraphKey]
) -> dict[str, float]:
    """Return ``recall@8``, ``hit@8``, ``mrr@10`` and ``ndcg@10`` for one question."""
    return {
        "recall@8": recall_at_k(ranked, evidence, 8),
        "hit@8": hit_at_k(ranked, evidence, 8),
        "mrr@10": mrr_at_k(ranked, evidence, 10),
        "ndcg@10": ndcg_at_k(ranked, evidence, 10),
    }


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


def pack_context(texts: Sequence[str], budget: int, encoding: TokenEncoding) -> str:
    """Join texts in rank order with a blank line and cut the result at ``budget`` tokens.

    Args:
        texts: Returned texts in rank order.
        budget: Token budget ``B``.
        encoding: The tokenizer (cl100k_base for the benchmark).

    Returns:
        The decoded first ``budget`` tokens of ``"\\n\\n".join(texts)``.
    """
    packed = "\n\n".join(texts)
    # encode_ordinary: text such as "<|endoftext|>" inside a paper is text, not a special token.
    tokens = encoding.encode_ordinary(packed)
    if len(tokens) <= budget:
        return packed
    return encoding.decode(tokens[:budget])


def evidence_recall(
    texts: Sequence[str],
    evidence_texts: Sequence[str],
    budget: int,
    encoding: TokenEncoding,
) -> float:
    """Return the share of evidence paragraphs fully contained in the packed context.

    Args:
        texts: Returned texts in rank order.
        evidence_texts: Full texts of the question's evidence paragraphs (one per paragraph).
        budget: Token budget ``B``.
        encoding: The tokenizer.

    Raises:
        ValueError: If there is no evidence.
    """
    if not evidence_texts:
        msg = "evidence_texts is empty; questions without evidence are not scored"
        raise ValueError(msg)
    context = normalize_whitespace(pack_context(texts, budget, encoding))
    covered = sum(1 for text in evidence_texts if normalize_whitespace(text) in context)
    return covered / len(evidence_texts)


def gate_recall(evidence_spans: Sequence[Span], parent_spans: Sequence[Span]) -> float:
    """Return the share of evidence paragraphs lying inside the parents the gate opened.

    A paragraph lies inside when the union of the opened parents' spans of its paper covers its
    whole span (so a paragraph of a section cut into two opened parts still counts).

    Args:
        evidence_spans: ``(paper_id, start, end)`` of each evidence paragraph.
        parent_spans: ``(paper_id, start, end)`` of each opened parent.

    Raises:
        ValueError: If there is no evidence.
    """
    if not evidence_spans:
        msg = "evidence_spans is empty; questions without evidence are not scored"
        raise ValueError(msg)
    merged = _merge_spans(parent_spans)
    inside = 0
    for paper_id, start, end in evidence_spans:
        for m_start, m_end in merged.get(paper_id, []):
            if m_start <= start and end <= m_end:
                inside += 1
                break
    return inside / len(evidence_spans)


def mean(values: Iterable[float | None]) -> float | None:
    """Return the mean of the non-``None`` values, or ``None`` if there are none."""
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0-100) with linear interpolation (numpy's default).

    Raises:
        ValueError: If ``values`` is empty.
    """
    if not values:
        msg = "percentile of an empty sequence"
        raise ValueError(msg)
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _merge_spans(spans: Sequence[Span]) -> dict[str, list[tuple[int, int]]]:
    """Merge touching or overlapping spans per paper."""
    by_paper: dict[str, list[tuple[int, int]]] = {}
    for paper_id, start, end in sorted(spans):
        runs = by_paper.setdefault(paper_id, [])
        if runs and start <= runs[-1][1]:
            runs[-1] = (runs[-1][0], max(runs[-1][1], end))
        else:
            runs.append((start, end))
    return by_paper


def _check_evidence(evidence: frozenset[ParagraphKey]) -> None:
    if not evidence:
        msg = "the evidence set is empty; questions without evidence are not scored"
        raise ValueError(msg)


# --------------------------------------------------------------------------- text-based mapping
# Retrievers that read PDFs return text in no shared coordinate space with the truth, so their
# results are mapped to truth paragraphs by text. Both sides go through `normalize_text`.

_HYPHEN_BREAK = re.compile(r"-\s*")
_NOT_WORD = re.compile(r"[\W_]+")
SHINGLE = 4
"""Words per shingle (word n-gram) when matching returned text to paragraphs."""
MATCH_SHARE = 0.5
"""Share of the shorter side's shingles a returned text and a paragraph must have in common to
overlap: the paragraph lies mostly inside the text, or the text mostly inside the paragraph. A
few shared phrases or formula fragments between neighbouring paragraphs are not an overlap."""


def normalize_text(text: str) -> str:
    """Fold text for matching extracted text against the truth.

    NFKC (ligatures such as "ﬁ" become "fi"), hyphens removed with the whitespace after them
    (so a line-end break "classi-\\nfication" and "classification" agree, as do "state-of-the-art"
    and a PDF's "state-of-the-\\nart"), case folded, punctuation and symbols turned into
    spaces, whitespace collapsed.
    """
    text = _HYPHEN_BREAK.sub("", unicodedata.normalize("NFKC", text))
    return " ".join(_NOT_WORD.sub(" ", text.casefold()).split())


def _shingles(words: Sequence[str]) -> set[tuple[str, ...]]:
    if len(words) < SHINGLE:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


class TextLocator:
    """Map returned texts to the truth paragraphs they overlap, per paper, by normalised text.

    A text overlaps a paragraph when, after :func:`normalize_text`, they share at least
    :data:`MATCH_SHARE` of the word 4-grams of the shorter of the two. Unlike a span, a text
    that only grazes a paragraph (a chunk ending a few words into it) does not count. Near-
    duplicate paragraphs (a paper repeating a sentence in two sections) compete for the text's
    4-grams: the best-matching paragraph takes them, and another counts only with enough 4-grams
    of its own. Like
    :class:`ParagraphLocator`, ranked texts give the distinct paragraphs by first occurrence,
    the paragraphs of one text in document order.

    Args:
        paragraphs: For each paper id, its paragraph keys and texts in document order.
    """

    def __init__(self, paragraphs: Mapping[str, Sequence[tuple[ParagraphKey, str]]]) -> None:
        """Index each paragraph's shingles by paper."""
        self._paragraphs = {
            pid: [(key, _shingles(normalize_text(text).split())) for key, text in paras]
            for pid, paras in paragraphs.items()
        }

    def overlapping(self, paper_id: str, text: str) -> list[ParagraphKey]:
        """The paragraphs of ``paper_id`` that ``text`` overlaps, in document order."""
        found = _shingles(normalize_text(text).split())
        if not found:
            return []
        candidates = []
        for position, (key, shingles) in enumerate(self._paragraphs.get(paper_id, [])):
            shared = shingles & found
            need = max(1, math.ceil(MATCH_SHARE * min(len(shingles), len(found))))
            if len(shared) >= need:
                candidates.append((len(shared) / len(shingles), position, key, shared, need))
        taken: set[tuple[str, ...]] = set()
        kept: list[tuple[int, ParagraphKey]] = []
        for _, position, key, shared, need in sorted(candidates, key=lambda c: (-c[0], c[1])):
            if len(shared - taken) >= need:
                kept.append((position, key))
                taken |= shared
        return [key for _, key in sorted(kept)]

    def ranked_paragraphs(self, results: Iterable[tuple[str, str]]) -> list[ParagraphKey]:
        """The distinct paragraphs overlapped by ranked ``(paper_id, text)`` results."""
        seen: set[ParagraphKey] = set()
        ranked: list[ParagraphKey] = []
        for paper_id, text in results:
            for key in self.overlapping(paper_id, text):
                if key not in seen:
                    seen.add(key)
                    ranked.append(key)
        return ranked


def evidence_recall_text(
    texts: Sequence[str],
    evidence_texts: Sequence[str],
    budget: int,
    encoding: TokenEncoding,
) -> float:
    """:func:`evidence_recall` on normalised text (:func:`normalize_text`), for extracted text.

    An evidence paragraph is covered when its normalised text is a substring of the normalised
    packed context. When the budget cut the context, its last word is dropped first: the cut
    may fall inside that word or just before the paragraph's final punctuation, which
    normalisation would otherwise hide (a paragraph cut before its last "." is not covered by
    :func:`evidence_recall` either).
    """
    if not evidence_texts:
        msg = "evidence_texts is empty; questions without evidence are not scored"
        raise ValueError(msg)
    packed = pack_context(texts, budget, encoding)
    words = normalize_text(packed).split()
    if packed != "\n\n".join(texts):
        words = words[:-1]
    context = " ".join(words)
    covered = sum(1 for text in evidence_texts if normalize_text(text) in context)
    return covered / len(evidence_texts)
