"""The FTS5 term index's postings, kept in memory: its ``bm25()`` ranking, computed in numpy.

Across a collection a question's common words match most sections, and FTS5 calls its
``bm25()`` function once per matching row: 6.9 ms a query at 1,169 QASPER papers (13,064
sections), growing with the collection. The ranking needs little: each query term's postings
(row id, occurrences), each row's length in tokens, and the row's parent id. Those are read
from the postings each write stores (:mod:`~.stored_postings`; FTS5's ``fts5vocab`` view for
an index written before them) and FTS5's ``docsize`` table, kept decoded for the index's
current version (:class:`~.read_cache.ReadCache`), and scored with FTS5's formula: a term's
weight in each of its rows is worked out once, when its postings are read, so a warm query
adds one array per term and ranks exactly as ``bm25()`` does.

A process that opens the index reads only the terms its questions use. A term's first read
in a version is one statement, on the reading thread's own SQLite connection
(:mod:`~.statements`), and a question's new words are stemmed in one; warm, a query reads
nothing and costs about a tenth of a millisecond there. Postings take 16 bytes
each in memory, a row id and a weight (15.5 MB for the 963 terms of QASPER dev's questions at
1,169 papers; see ``benchmarks/term_search.py``).
"""

from __future__ import annotations

import functools
import math
import sqlite3
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_gated_parent.stores.read_cache import ReadCache
from langchain_gated_parent.stores.statements import statement_runner
from langchain_gated_parent.stores.stored_postings import vocabulary_postings

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from langchain_gated_parent.stores.journal import Stamp
    from langchain_gated_parent.stores.stored_postings import StoredPostings

__all__ = ["DEFAULT_POSTINGS_BYTES", "FTS5_TOKENIZER", "CachedPostings"]

DEFAULT_POSTINGS_BYTES = 128 * 2**20
"""Postings a process keeps (besides the one row table, about 17 bytes and a parent id a
section): 15.5 MB held the 963 terms of QASPER dev's questions at 1,169 papers, and a term's
postings grow with the sections that use it, so the bound is in bytes."""
FTS5_TOKENIZER = "porter unicode61"
K1 = 1.2
B = 0.75
"""FTS5's ``bm25()`` defaults."""
MIN_IDF = 1e-6
"""FTS5 gives a term in over half the rows this weight instead of a negative one."""
STEMS_KEPT = 65536
"""Words whose stems are remembered (then forgotten all at once: a bound, not a policy)."""
ROWS_KEY = ""
"""The rows entry's key (no term is empty)."""


@dataclass(frozen=True)
class _Rows:
    """What BM25 needs of every row: its length and its parent, both by FTS5 row id."""

    norm: NDArray[np.float64]
    """BM25's length term, ``k1 * (1 - b + b * length / average length)``, by row id."""
    live: NDArray[np.bool_]
    """Whether the row id is a row with a parent."""
    parent_ids: NDArray[np.object_]
    count: int
    stored: bool
    """Whether every row's postings are stored (:mod:`~.stored_postings`), to read them there."""


@dataclass(frozen=True)
class _Postings:
    """One term's rows and what it adds to each row's score (its BM25 term, worked out once).

    The weights depend on the rows entry (lengths, row count) of the same version of the
    index, which is read first and kept as long as the postings are.
    """

    rows: NDArray[np.int64]
    """Row ids, numpy's index type: an index of another type is converted on every search."""
    weights: NDArray[np.float64]

    @classmethod
    def of(cls, found: NDArray[np.int64], counts: NDArray[np.float64], rows: _Rows) -> _Postings:
        """BM25's term for each row the term occurs in (``counts`` times), as FTS5 weighs it.

        Postings of rows deleted before the rows entry was read are dropped (stored postings
        keep them until a merge).
        """
        inside = found < len(rows.live)
        alive = ~inside
        alive[inside] = rows.live[found[inside]]
        found, counts = found[alive], counts[alive]
        known = found < len(rows.live)  # rows added after the rows entry was read
        hits, tf = found[known], counts[known]
        hit_rows = len(found)  # postings read after the rows entry may outnumber it
        idf = math.log((max(rows.count, hit_rows) - hit_rows + 0.5) / (hit_rows + 0.5))
        return cls(hits, max(idf, MIN_IDF) * tf * (K1 + 1.0) / (tf + rows.norm[hits]))

    def nbytes(self) -> int:
        """What the arrays hold, the cache's weight."""
        return int(self.rows.nbytes + self.weights.nbytes)


class _Stemmer:
    """Words as FTS5's tokenizer indexes them, from an in-memory FTS5 table (cached)."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        # Contentless, emptied with one 'delete-all': a DELETE re-reads and re-tokenizes each row
        # (a QASPER dev question's new words: 0.08 ms mean against 0.10).
        self._db.execute(
            f"CREATE VIRTUAL TABLE s USING fts5(body, content='', tokenize = '{FTS5_TOKENIZER}')"
        )
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(s, 'instance')")
        self._lock = threading.Lock()
        self._stems: dict[str, list[str]] = {}

    def __call__(self, words: Sequence[str]) -> list[list[str]]:
        """Each word's distinct terms, sorted (a question's new words stemmed in one go)."""
        with self._lock:
            new = [w for w in dict.fromkeys(words) if w not in self._stems]
            if new:
                self._db.executemany("INSERT INTO s (rowid, body) VALUES (?, ?)", enumerate(new))
                found: list[set[str]] = [set() for _ in new]
                for row, term in self._db.execute("SELECT doc, term FROM v"):
                    found[row].add(str(term))
                self._db.execute("INSERT INTO s (s) VALUES ('delete-all')")
                if len(self._stems) + len(new) > STEMS_KEPT:
                    self._stems.clear()
                self._stems.update(zip(new, (sorted(terms) for terms in found), strict=True))
            return [self._stems[w] for w in words]


@functools.cache
def _stemmer() -> _Stemmer:
    return _Stemmer()


def _varint(blob: bytes) -> int:
    """The first SQLite varint of ``blob`` (FTS5 stores a row's token count as one)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:  # noqa: PLR2004 (a ninth byte carries 8 bits)
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:  # noqa: PLR2004
            break
    return value


class CachedPostings:
    """Ranks an FTS5 table's rows for OR-ed terms as its ``bm25()`` does, from cached postings.

    Postings of up to ``budget`` bytes are kept, least recently used out (a term's postings
    grow with the collection, so the bound is in bytes); :meth:`search` is for when
    :attr:`ready`.
    """

    def __init__(  # noqa: PLR0913 (the tables read, and the bound)
        self,
        engine: Any,
        *,
        fts: str,
        ids: str,
        vocab: str,
        stored: StoredPostings,
        budget: int,
    ) -> None:
        """Read ``stored`` (or ``fts``'s ``vocab`` instance table) and ``ids`` (row to parent)."""
        self._run = statement_runner(engine)
        self._fts = fts
        self._ids = ids
        self._vocab = vocab
        self._stored = stored
        self._terms: ReadCache[_Postings] = ReadCache(budget, weigh=_Postings.nbytes)
        self._rows: ReadCache[_Rows] = ReadCache(1 if budget else 0)

    @property
    def ready(self) -> bool:
        """Whether postings can be kept: some capacity, and a quiet version of the index seen.

        While a write is under way nothing read could be kept, and each search would read the
        row table and its terms' postings afresh: FTS5 ranking in SQL costs less.
        """
        return bool(self._terms.capacity) and self._terms.version is not None

    def kept(self) -> tuple[int, int]:
        """How many terms' postings are kept, and their bytes."""
        entries = self._terms.values()
        return len(entries), sum(p.nbytes() for p in entries)

    def observe(self, stamp: Stamp) -> None:
        """The index's version just seen: another one drops what was kept."""
        self._terms.observe(stamp)
        self._rows.observe(stamp)

    def search(self, words: Sequence[str], n: int) -> list[tuple[str, float]]:
        """The ``n`` best ``(parent_id, score)`` for any of ``words`` (each a phrase, as FTS5)."""
        terms = [term for stems in _stemmer()(words) for term in stems[:1]]
        version = self._terms.version
        rows = self._rows.get([ROWS_KEY]).get(ROWS_KEY)
        postings = self._terms.get(terms)
        unread = [t for t in dict.fromkeys(terms) if t not in postings]
        if rows is None or unread:  # warm, a search reads nothing
            if rows is None:
                rows = self._read_rows()
                self._rows.put({ROWS_KEY: rows}, version)
            missing = {t: _Postings.of(*self._read_postings(t, rows), rows) for t in unread}
            self._terms.put(missing, version)
            postings |= missing
        scores = np.zeros(len(rows.live))
        for term in terms:
            found = postings[term]
            scores[found.rows] += found.weights
        hit = np.flatnonzero((scores > 0) & rows.live)
        hit_scores = scores[hit]
        if len(hit) > n:  # the n best, and every row that ties the n-th
            best = hit_scores >= np.partition(hit_scores, len(hit) - n)[len(hit) - n]
            hit, hit_scores = hit[best], hit_scores[best]
        # Ties by parent id, as the PostgreSQL term index ranks: the same content ranks the
        # same whatever order its rows were written in.
        kept = zip(rows.parent_ids[hit].tolist(), hit_scores.tolist(), strict=True)
        ranked = sorted(kept, key=lambda parent_score: (-parent_score[1], parent_score[0]))
        return [(str(parent_id), score) for parent_id, score in ranked[:n]]

    def _read_rows(self) -> _Rows:
        stored = self._stored.complete(self._run)
        sizes = self._run(f"SELECT id, sz FROM {self._fts}_docsize", ())  # noqa: S608
        parents = self._run(f"SELECT id, parent_id FROM {self._ids}", ())  # noqa: S608
        top = max([r for r, _ in sizes] + [r for r, _ in parents], default=0)
        lengths = np.zeros(top + 1)
        for row, size in sizes:
            lengths[row] = _varint(size)
        parent_ids = np.full(top + 1, None, dtype=object)
        live = np.zeros(top + 1, dtype=bool)
        for row, parent_id in parents:
            parent_ids[row] = parent_id
            live[row] = True
        count = len(sizes)
        average = float(lengths.sum() / count) if count else 0.0
        norm = K1 * (1.0 - B + B * lengths / (average or 1.0))
        return _Rows(norm, live, parent_ids, count, stored)

    def _read_postings(
        self, term: str, rows: _Rows
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """The rows ``term`` occurs in, and how often in each."""
        if rows.stored:
            return self._stored.read(self._run, term)
        return vocabulary_postings(self._run, self._vocab, term)
