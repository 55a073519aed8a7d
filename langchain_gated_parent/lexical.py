"""BM25 over the gated candidates: a lexical signal beside the dense one, with no extra index.

Dense and lexical retrieval fail on different questions (an exact figure, a dataset name or an
acronym is a word match before it is a meaning). The gate leaves only a few dozen candidate
children, so BM25 can be computed exactly over them at query time: no inverted index to build,
store or keep consistent. Statistics (document frequencies, average length) come from the
candidates themselves. A child's terms are listed when it is written and kept in its section
record (:func:`child_terms`), so a query does not tokenize the children it opens.
"""

from __future__ import annotations

import functools
import math
import re
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
def terms_of(text: str) -> str:
    """The terms of ``text``, :func:`searchable`.

    Cached: the same heading titles recur across queries, so they are tokenized once per process.
    """
    return searchable(" ".join(tokenize(text)))


def searchable(terms: str) -> str:
    """Space-separated terms as :func:`bm25_of_terms` reads them.

    Each term stands between two spaces of its own (``" t1  t2 "``), so counting ``" word "``
    counts each whole term equal to the word, repeats included, and no term that merely
    contains it.
    """
    return f" {terms.replace(' ', '  ')} " if terms else ""


def child_terms(own: Mapping[str, Any], text: str) -> list[str]:
    """What BM25 reads of a child (its own metadata and text): its heading path, then its text."""
    return tokenize(" ".join([*(own.get(keys.SECTION_PATH) or []), text]))


def tokenize(text: str) -> list[str]:
    """Lower-cased alphanumeric words, stopwords dropped, a plural ``s`` stripped."""
    return [term for term in map(_TERMS.__getitem__, _TOKEN.findall(text.lower())) if term]


def _term(word: str) -> str:
    """The term a word counts as (empty for a stopword): :func:`tokenize`'s rules."""
    if word in _STOPWORDS:
        return ""
    if len(word) >= _MIN_STEM and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


class _TermOfWord(dict[str, str]):
    """Each word's term, worked out once: a write tokenizes every child, mostly known words.

    Looking a word up (in C, through ``map``) costs half of applying the rules to it in a
    comprehension. Forgotten past :data:`TERM_CACHE` words, so an unending stream of new
    words holds bounded memory.
    """

    def __missing__(self, word: str) -> str:
        if len(self) >= TERM_CACHE:
            self.clear()
        term = self[word] = _term(word)
        return term


TERM_CACHE = 1 << 18
"""Words whose terms are kept (the 281 QASPER dev papers hold 22,332 distinct words)."""
_TERMS = _TermOfWord()


def bm25(
    query: str, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75
) -> NDArray[np.float64]:
    """BM25 scores of ``texts`` for ``query``, scaled so the best candidate scores 1.

    Scaling by the maximum puts the lexical signal on the [0, 1] scale of the dense scores, so
    the two can be blended with one weight. All zeros when no query word occurs.
    """
    return bm25_of_terms(query, [terms_of(t) for t in texts], k1=k1, b=b)


def term_lengths(terms: Sequence[str]) -> NDArray[np.float64]:
    """How many terms each of these :func:`searchable` strings holds (BM25's lengths)."""
    return np.array([t.count(" ") // 2 for t in terms], dtype=np.float64)


def bm25_of_terms(
    query: str,
    terms: Sequence[str],
    *,
    lengths: NDArray[np.float64] | None = None,
    k1: float = 1.2,
    b: float = 0.75,
) -> NDArray[np.float64]:
    """:func:`bm25` of candidates whose terms are already listed (each :func:`searchable`).

    Each query word is counted in each candidate's string of terms (``str.count``, in C),
    instead of counting every candidate's terms into a dict first: a question has a handful of
    words and a candidate dozens of terms, and counting them all cost ~20 µs a child, most of
    what a query paid to open a section for the first time. ``lengths`` are the candidates'
    :func:`term_lengths`, if known (a section's are kept with it once it is opened).
    """
    words = set(tokenize(query))
    if not terms or not words:
        return np.zeros(len(terms))
    lengths = term_lengths(terms) if lengths is None else lengths
    average = float(lengths.mean()) or 1.0
    everything = "".join(terms)
    scores = np.zeros(len(terms))
    for word in words:
        pattern = f" {word} "
        if pattern not in everything:
            continue
        tf = np.array([t.count(pattern) for t in terms], dtype=np.float64)
        df = int(np.count_nonzero(tf))
        idf = math.log(1.0 + (len(terms) - df + 0.5) / (df + 0.5))
        scores += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths / average))
    best = float(scores.max())
    return scores / best if best > 0 else scores
