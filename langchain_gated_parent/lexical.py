"""BM25 over the gated candidates: a lexical signal beside the dense one, with no extra index.

Dense and lexical retrieval fail on different questions (an exact figure, a dataset name or an
acronym is a word match before it is a meaning). The gate leaves only a few dozen candidate
children, so BM25 can be computed exactly over them at query time: no inverted index to build,
store or keep consistent. Statistics (document frequencies, average length) come from the
candidates themselves. A child's terms are counted when it is written and kept in its section
record (:func:`child_terms`), so a query does not tokenize the children it opens.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_gated_parent import keys

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from numpy.typing import NDArray

_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "did",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "our",
        "paper",
        "that",
        "the",
        "their",
        "they",
        "this",
        "to",
        "use",
        "used",
        "using",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
    ]
)
_MIN_STEM = 4
"""Words shorter than this keep a final ``s`` ("gas", "bus")."""
TERMS_RULE = 1
"""Names the rules of :func:`tokenize`: terms kept under other rules are counted afresh."""


@functools.lru_cache(maxsize=16384)
def term_counts(text: str) -> Counter[str]:
    """The terms of ``text`` with their counts (read-only: the result is cached).

    The same heading titles recur across queries, so their terms are counted once per process.
    """
    return Counter(tokenize(text))


def child_terms(own: Mapping[str, Any], text: str) -> list[str]:
    """What BM25 reads of a child (its own metadata and text): its heading path, then its text."""
    return tokenize(" ".join([*(own.get(keys.SECTION_PATH) or []), text]))


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric words, stopwords dropped, a plural ``s`` stripped."""
    words = _TOKEN.findall(text.lower())
    return [
        w[:-1] if len(w) >= _MIN_STEM and w.endswith("s") and not w.endswith("ss") else w
        for w in words
        if w not in _STOPWORDS
    ]


def bm25(
    query: str, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75
) -> NDArray[np.float64]:
    """BM25 scores of ``texts`` for ``query``, scaled so the best candidate scores 1.

    Scaling by the maximum puts the lexical signal on the [0, 1] scale of the dense scores, so
    the two can be blended with one weight. All zeros when no query word occurs.
    """
    return bm25_of_counts(query, [term_counts(t) for t in texts], k1=k1, b=b)


def bm25_of_counts(
    query: str, docs: Sequence[Mapping[str, int]], *, k1: float = 1.2, b: float = 0.75
) -> NDArray[np.float64]:
    """:func:`bm25` of candidates whose terms are already counted (:func:`child_terms`)."""
    terms = set(tokenize(query))
    if not docs or not terms:
        return np.zeros(len(docs))
    lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
    average = float(lengths.mean()) or 1.0
    scores = np.zeros(len(docs))
    for term in terms:
        tf = np.array([d.get(term, 0) for d in docs], dtype=np.float64)
        df = int(np.count_nonzero(tf))
        if df == 0:
            continue
        idf = math.log(1.0 + (len(docs) - df + 0.5) / (df + 0.5))
        scores += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths / average))
    best = float(scores.max())
    return scores / best if best > 0 else scores
