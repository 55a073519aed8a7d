"""BM25 over listed terms scores as textbook BM25 over counted terms."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from langchain_gated_parent import lexical
from langchain_gated_parent.lexical import bm25, bm25_of_terms, searchable, tokenize

if TYPE_CHECKING:
    import pytest

VOCABULARY = ["rat", "rats", "pirat", "cell", "cellular", "grow", "48", "h", "a1"]
"""Terms that contain one another, so a word found inside a longer term would show."""


def textbook_bm25(
    query: str, docs: list[list[str]], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """The reference: each candidate's terms counted, then BM25, scaled to a best of 1."""
    counts = [Counter(d) for d in docs]
    average = sum(len(d) for d in docs) / len(docs) or 1.0
    scores = [0.0] * len(docs)
    for word in set(tokenize(query)):
        df = sum(1 for c in counts if c[word])
        if not df:
            continue
        idf = math.log(1.0 + (len(docs) - df + 0.5) / (df + 0.5))
        for n, c in enumerate(counts):
            tf = c[word]
            scores[n] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(docs[n]) / average))
    best = max(scores)
    return [s / best for s in scores] if best > 0 else scores


@given(
    st.lists(st.lists(st.sampled_from(VOCABULARY), max_size=8), min_size=1, max_size=12),
    st.lists(st.sampled_from([*VOCABULARY, "absent"]), min_size=1, max_size=4),
)
def test_listed_terms_score_as_counted_terms(docs: list[list[str]], words: list[str]) -> None:
    query = " ".join(words)
    got = bm25_of_terms(query, [searchable(" ".join(d)) for d in docs])
    assert np.allclose(got, textbook_bm25(query, docs), rtol=1e-12, atol=0)


def test_a_word_matches_whole_terms_only_and_counts_each_repeat() -> None:
    scores = bm25_of_terms(
        "rat", [searchable(t) for t in ["pirat rats", "rat rat", "rat cell", ""]]
    )
    assert scores.tolist()[2:] == [scores[2], 0.0]
    assert scores[0] == 0.0
    assert scores[1] == 1.0
    assert 0.0 < scores[2] < 1.0


def test_texts_are_tokenized_and_no_match_scores_zero() -> None:
    assert bm25("What rats?", ["The rats grew.", "Cells grew."]).tolist() == [1.0, 0.0]
    assert bm25("absent word", ["The rats grew."]).tolist() == [0.0]
    assert bm25_of_terms("rat", []).tolist() == []


def reference_tokenize(text: str) -> list[str]:
    """The rules, word by word: lower-cased, stopwords dropped, a plural ``s`` stripped."""
    return [
        w[:-1] if len(w) >= 4 and w.endswith("s") and not w.endswith("ss") else w
        for w in re.findall(r"[a-z0-9]+", text.lower())
        if w not in lexical._STOPWORDS
    ]


WORDY = st.text(
    alphabet=st.sampled_from("abcsS 9-.\nTHE the is of a and this was gas bus"), max_size=80
)


@given(WORDY)
def test_tokenize_applies_its_rules_to_every_word(text: str) -> None:
    assert tokenize(text) == reference_tokenize(text)


def test_the_words_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexical, "TERM_CACHE", 3)
    monkeypatch.setattr(lexical, "_TERMS", lexical._TermOfWord())
    words = "cells grew for 48 hours in the dishes"
    assert tokenize(words) == reference_tokenize(words)
    assert tokenize(words) == ["cell", "grew", "48", "hour", "dishe"]
    assert 0 < len(lexical._TERMS) <= 3
