"""The in-memory postings rank as FTS5's ``bm25()`` does, and never outlive their version.

A real SQLite file and a real FTS5 table; the two rankings compared are FTS5's own (a sparse
index keeping no terms) and the cached one, over the same rows.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import numpy as np
import pytest
from sqlalchemy import create_engine

from langchain_gated_parent.stores.journal import Stamp
from langchain_gated_parent.stores.postings import _Stemmer
from langchain_gated_parent.stores.sparse import SparseRow, SqliteSparseIndex
from langchain_gated_parent.stores.stored_postings import MAX_ROW_ID

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from sqlalchemy import Engine

WORDS = [
    *("model", "models", "modelling", "language", "languages", "dataset", "datasets", "train"),
    *("training", "trained", "accuracy", "baseline", "baselines", "annotator", "annotators"),
    *("corpus", "corpora", "2019", "f1", "bleu", "transformer", "attention", "embedding"),
    *("embeddings", "running", "runs", "evaluation", "evaluate"),
]
"""Words with plurals and inflections, so FTS5's stemming matters."""


def _rows(count: int, seed: int = 7) -> list[SparseRow]:
    rng = random.Random(seed)  # noqa: S311 (test texts, not secrets)
    rows = []
    for n in range(count):
        length = rng.randint(3, 60)
        text = " ".join(rng.choice(WORDS) for _ in range(length))
        rows.append(SparseRow(f"P-d{n % 17}:s{n}", f"d{n % 17}", text))
    return rows


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = create_engine(f"sqlite:///{tmp_path / 'sparse.sqlite'}")
    yield made
    made.dispose()


def _pair(engine: Engine) -> tuple[SqliteSparseIndex, SqliteSparseIndex]:
    """Two views of one table: one ranks from cached postings, one asks FTS5 every time."""
    cached = SqliteSparseIndex(engine, "ns", postings_bytes=1 << 20)
    cached.observe(Stamp(seq=1))
    return cached, SqliteSparseIndex(engine, "ns", postings_bytes=0)


@pytest.mark.parametrize(
    "query",
    [
        "models",
        "language model accuracy",
        "Which datasets did the annotators train on in 2019?",
        "transformer attention embeddings bleu f1 running evaluation",
        "models modelling model: one stem, three phrases",
        "unseen words only",
    ],
)
@pytest.mark.filterwarnings("error::DeprecationWarning")  # the postings are parsed from text
def test_cached_postings_rank_as_fts5_bm25(engine: Engine, query: str) -> None:
    cached, fts5 = _pair(engine)
    fts5.upsert(_rows(300))
    fts5.delete([f"P-d3:s{n}" for n in range(3, 300, 17)])  # deleted rows leave gaps in row ids
    for n in (5, 40, 400):
        expected = fts5.search(query, n)
        got = cached.search(query, n)
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9)
        # Rows of equal score may come in either order, and the last score may be cut anywhere.
        last = expected[-1][1] if expected else 0.0
        above = {p: pytest.approx(s, rel=1e-9) for p, s in expected if s > last * (1 + 1e-9)}
        assert {p: s for p, s in got if p in above} == above
        assert len(above) == sum(s > last * (1 + 1e-9) for _, s in got)
        assert cached.search(query, n) == got  # warm: from memory, same answer
    terms, _ = cached._postings.kept()  # the postings ranked, not FTS5
    assert terms > 0


def test_the_postings_kept_stay_within_their_bytes_and_still_rank(engine: Engine) -> None:
    """A budget smaller than the postings asked for: the oldest go, the ranking is unchanged."""
    everything, fts5 = _pair(engine)
    fts5.upsert(_rows(300))
    queries = ["language model accuracy", "transformer attention", "bleu f1 evaluation"]
    for query in queries:
        everything.search(query, 40)
    _, all_bytes = everything._postings.kept()
    budget = all_bytes // 2
    small = SqliteSparseIndex(engine, "ns", postings_bytes=budget)
    small.observe(Stamp(seq=1))
    for query in [*queries, *queries]:
        expected = [score for _, score in fts5.search(query, 40)]
        assert [score for _, score in small.search(query, 40)] == pytest.approx(expected, rel=1e-9)
        terms, held = small._postings.kept()
        assert terms > 0
        assert held <= budget


def test_a_new_version_drops_the_postings_kept(engine: Engine) -> None:
    cached, fts5 = _pair(engine)
    fts5.upsert(_rows(50))
    assert cached.search("zyzzogeton", 5) == []  # an empty posting list, now kept
    fts5.upsert([SparseRow("P-new:s0", "new", "the zyzzogeton response")])
    cached.observe(Stamp(seq=2))
    assert [p for p, _ in cached.search("zyzzogeton", 5)] == ["P-new:s0"]
    cached.observe(Stamp(seq=3, writing=True))  # a write under way: FTS5 ranks what it holds
    fts5.delete(["P-new:s0"])
    assert cached.search("zyzzogeton", 5) == []


def test_postings_newer_than_the_rows_read_are_ranked_without_their_new_rows(
    engine: Engine,
) -> None:
    """A write between two reads of one version: the rows entry predates a term's postings."""
    cached, fts5 = _pair(engine)
    fts5.upsert(_rows(20))
    cached.search("model", 5)  # keeps the rows entry of 20 rows
    fts5.upsert([SparseRow(f"P-x:s{n}", "x", "bleu " * 3) for n in range(200)])
    found = cached.search("bleu", 500)
    assert found
    assert {p for p, _ in found} <= {r.parent_id for r in _rows(20)}
    assert all(score > 0 for _, score in found)


def test_a_question_s_new_words_stemmed_together_as_one_at_a_time() -> None:
    """Words stemmed in one statement get the terms FTS5 gives each word alone."""
    words = ["models", "running", "models", "f1", "corpora", "evaluation", "2019", "annotators"]
    alone = [_Stemmer()([word])[0] for word in words]
    together = _Stemmer()
    together(words[1:4])  # some words known before the batch, some new in it
    assert together(words) == alone
    assert alone[:3] == [["model"], ["run"], ["model"]]


def _stored(index: SqliteSparseIndex, engine: Engine) -> dict[str, dict[int, int]]:
    """The stored postings of the rows that exist: term -> {row id: occurrences}."""
    stored = index._stored
    with engine.connect() as conn:
        live = {i for (i,) in conn.exec_driver_sql(f"SELECT id FROM {index._ids}")}  # noqa: S608
        table = conn.exec_driver_sql(f"SELECT term, rows, counts FROM {stored.postings}").all()  # noqa: S608
    found: dict[str, dict[int, int]] = {}
    for term, rows, counts in table:
        pairs = zip(
            np.frombuffer(rows, "<u4").tolist(), np.frombuffer(counts, "<u4").tolist(), strict=True
        )
        for row, count in pairs:
            if row in live:
                assert row not in found.get(term, {})  # a row's postings are stored once
                found.setdefault(term, {})[row] = count
    return found


def _fts5_postings(index: SqliteSparseIndex, engine: Engine) -> dict[str, dict[int, int]]:
    """The same, as FTS5's own index lists them (its ``fts5vocab`` instance view)."""
    vocab = index._postings._vocab
    found: dict[str, dict[int, int]] = {}
    with engine.connect() as conn:
        for term, row, count in conn.exec_driver_sql(
            f"SELECT term, doc, count(*) FROM {vocab} GROUP BY term, doc"  # noqa: S608
        ):
            found.setdefault(term, {})[row] = count
    return found


def test_stored_postings_are_fts5_s_through_writes_deletes_and_merges(engine: Engine) -> None:
    cached, fts5 = _pair(engine)
    rows = _rows(240, seed=11)
    for start in range(0, 200, 10):  # twenty writes: the batches merge as they come
        fts5.upsert(rows[start : start + 10])
    fts5.delete([r.parent_id for r in rows[::7]])
    fts5.upsert([SparseRow(r.parent_id, r.doc_id, r.text + " bleu") for r in rows[:30]])  # updates
    for start in range(200, 240, 1):  # single-row writes
        fts5.upsert(rows[start : start + 1])
    assert _stored(fts5, engine) == _fts5_postings(fts5, engine)
    with engine.connect() as conn:
        batches = conn.exec_driver_sql(f"SELECT count(*) FROM {fts5._stored.batches}").scalar()  # noqa: S608
    assert batches is not None
    assert batches <= 8  # 61 writes, merged to about log2 of them
    cached.observe(Stamp(seq=2))
    assert cached._postings._read_rows().stored
    for query in ["language model accuracy bleu", "annotators corpora 2019 f1"]:
        expected = fts5.search(query, 50)
        got = cached.search(query, 50)
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-9)


def test_a_row_id_is_never_given_twice(engine: Engine) -> None:
    """A deleted row's postings stay until a merge, so its id must not name a new row."""
    _, fts5 = _pair(engine)
    fts5.upsert(_rows(5))
    with engine.connect() as conn:
        (top,) = conn.exec_driver_sql(f"SELECT max(id) FROM {fts5._ids}").one()  # noqa: S608
    fts5.delete(["P-d4:s4"])  # the newest row
    fts5.upsert([SparseRow("P-new:s0", "new", "zyzzogeton")])
    with engine.connect() as conn:
        (new,) = conn.exec_driver_sql(
            f"SELECT id FROM {fts5._ids} WHERE parent_id = 'P-new:s0'"  # noqa: S608
        ).one()
    assert new > top
    assert [p for p, _ in fts5.search("zyzzogeton", 5)] == ["P-new:s0"]


def test_an_index_written_before_stored_postings_gets_them_at_its_next_write(
    engine: Engine,
) -> None:
    cached, fts5 = _pair(engine)
    fts5.upsert(_rows(60))
    with engine.begin() as conn:  # as an index written before postings were stored
        for table in (fts5._stored.postings, fts5._stored.batches, fts5._stored.state):
            conn.exec_driver_sql(f"DELETE FROM {table}")  # noqa: S608
    assert not cached._postings._read_rows().stored  # read from FTS5's vocab meanwhile
    query = "language model accuracy"
    assert [s for _, s in cached.search(query, 20)] == pytest.approx(
        [s for _, s in fts5.search(query, 20)], rel=1e-9
    )
    fts5.upsert([SparseRow("P-new:s0", "new", "language model")])
    assert _stored(fts5, engine) == _fts5_postings(fts5, engine)
    cached.observe(Stamp(seq=2))
    assert [s for _, s in cached.search(query, 20)] == pytest.approx(
        [s for _, s in fts5.search(query, 20)], rel=1e-9
    )


def test_row_ids_beyond_what_postings_hold_are_refused_and_nothing_is_lost(
    engine: Engine,
) -> None:
    _, fts5 = _pair(engine)
    fts5.upsert(_rows(5))
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE {fts5._stored.state} SET value = ? WHERE key = 'next_row'",  # noqa: S608
            (MAX_ROW_ID,),
        )
    with pytest.raises(ValueError, match="rebuild the index into a new directory"):
        fts5.upsert([SparseRow("P-d0:s0", "d0", "bleu"), SparseRow("P-x:s1", "x", "bleu")])
    assert fts5.rows() == sorted((r.parent_id, r.doc_id, r.text) for r in _rows(5))


def test_stored_postings_out_of_step_with_fts5_are_named(engine: Engine) -> None:
    _, fts5 = _pair(engine)
    fts5.upsert(_rows(80))
    fts5.delete([r.parent_id for r in _rows(80)[::5]])  # dead postings are not a difference
    assert fts5.out_of_step_terms() == []
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"DELETE FROM {fts5._stored.postings} WHERE term IN ('bleu', 'corpora')"  # noqa: S608
        )
    assert fts5.out_of_step_terms() == ["bleu", "corpora"]


def test_rows_all_deleted_leave_postings_that_merge_and_check_empty(engine: Engine) -> None:
    """Every row deleted: merges write empty batches, and nothing is out of step."""
    _, fts5 = _pair(engine)
    rows = _rows(12)
    fts5.upsert(rows[:3])
    fts5.delete([r.parent_id for r in rows[:3]])
    assert fts5.out_of_step_terms() == []
    for row in rows[3:]:  # single-row writes: batches of one size class merge
        fts5.upsert([row])
        fts5.delete([row.parent_id])
    assert fts5.count() == 0
    assert fts5.out_of_step_terms() == []
    assert fts5.search("model language", 5) == []
