"""The pure scoring rules, checked against brute-force references on random data."""

from __future__ import annotations

import numpy as np
import pytest

from langchain_gated_parent import scoring


def test_worked_example_fused_child_beats_rival_parent() -> None:
    fused = float(scoring.fuse(0.72, 0.91, 0.4))
    assert fused == pytest.approx(0.834)
    # Ranked by parent score alone, the rival paper's section (0.78) would beat Methods (0.72);
    # fused, the Methods child wins.
    gate = [scoring.GatedParent("P-methods", 0.72, 1), scoring.GatedParent("P-rival", 0.78, 2)]
    ranked = scoring.rank_children(
        ["P-methods", "P-rival"],
        ["C-methods-1", "C-rival-1"],
        [0.91, 0.60],
        gate,
        child_per_parent=6,
        alpha=0.4,
    )
    assert [row for row, _ in ranked] == [0, 1]
    assert ranked[0][1] == pytest.approx(0.834)
    assert ranked[1][1] == pytest.approx(0.4 * 0.78 + 0.6 * 0.60)


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan")])
def test_alpha_out_of_range_is_refused(alpha: float) -> None:
    with pytest.raises(ValueError, match="alpha must be in"):
        scoring.fuse(0.5, 0.5, alpha)


def test_similarity_is_clipped_cosine() -> None:
    assert scoring.similarity([-0.3, 0.2, 1.2]).tolist() == [0.0, 0.2, 1.0]
    assert scoring.similarity_from_distance([0.0, 0.25, 1.5]).tolist() == [1.0, 0.75, 0.0]


def _brute_gate(ids: list[str], scores: np.ndarray, top_k: int, margin: float) -> list[str]:
    ranked = sorted(zip(ids, scores, strict=True), key=lambda p: (-p[1], p[0]))
    if not ranked:
        return []
    cut = ranked[min(top_k, len(ranked)) - 1][1] - margin
    return [pid for pid, s in ranked if s >= cut]


@pytest.mark.parametrize("seed", range(20))
def test_gate_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 15))
    ids = [f"P-{i}" for i in rng.permutation(n)]
    scores = np.round(rng.random(n), 2)  # rounding makes ties common
    top_k = int(rng.integers(1, 6))
    margin = float(rng.choice([0.0, 0.05, 0.2]))
    gate = scoring.select_gate(ids, scores, top_k, margin=margin)
    assert [g.parent_id for g in gate] == _brute_gate(ids, scores, top_k, margin)
    assert [g.rank for g in gate] == list(range(1, len(gate) + 1))
    assert len(gate) >= min(top_k, n)


def _brute_rank(  # noqa: PLR0913, PLR0917 (mirrors rank_children's arguments)
    parents: list[str],
    ids: list[str],
    scores: np.ndarray,
    gate: dict[str, float],
    per_parent: int,
    alpha: float,
) -> list[tuple[int, float]]:
    out = []
    for pid, s_p in gate.items():
        rows = [r for r in range(len(ids)) if parents[r] == pid]
        rows.sort(key=lambda r: (-scores[r], ids[r]))
        out.extend((r, alpha * s_p + (1 - alpha) * scores[r]) for r in rows[:per_parent])
    return sorted(out, key=lambda p: (-p[1], -scores[p[0]], ids[p[0]]))


def test_at_alpha_1_a_parents_children_go_by_their_own_score() -> None:
    """Every child of a parent fuses to the parent's score: the better child must come first."""
    ranked = scoring.rank_children(
        ["P-a", "P-a", "P-a"],
        ["C-a-1", "C-a-2", "C-a-3"],
        [0.2, 0.9, 0.5],
        [scoring.GatedParent("P-a", 0.7, 1)],
        child_per_parent=3,
        alpha=1.0,
    )
    assert ranked == [(1, 0.7), (2, 0.7), (0, 0.7)]


@pytest.mark.parametrize("seed", range(20))
def test_rank_children_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_parents, n_children = int(rng.integers(1, 8)), int(rng.integers(0, 60))
    parents = [f"P-{int(rng.integers(0, n_parents))}" for _ in range(n_children)]
    ids = [f"C-{i}" for i in range(n_children)]
    scores = rng.random(n_children)
    opened = {f"P-{i}": float(rng.random()) for i in range(n_parents) if rng.random() < 0.6}
    gate = [scoring.GatedParent(pid, s, r) for r, (pid, s) in enumerate(opened.items(), 1)]
    per_parent, alpha = int(rng.integers(1, 7)), float(rng.random())
    got = scoring.rank_children(
        parents, ids, scores, gate, child_per_parent=per_parent, alpha=alpha
    )
    want = _brute_rank(parents, ids, scores, opened, per_parent, alpha)
    assert [r for r, _ in got] == [r for r, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want])
    assert all(parents[r] in opened for r, _ in got)  # a parent that is not hit never opens


def _brute_dedupe(order, spans, texts, vectors, threshold):  # type: ignore[no-untyped-def]
    kept: list[int] = []
    for row in order:
        duplicate = any(
            spans[row] == spans[k]
            or scoring.normalize_text(texts[row]) == scoring.normalize_text(texts[k])
            or float(vectors[row] @ vectors[k]) > threshold
            for k in kept
        )
        if not duplicate:
            kept.append(row)
    return kept


@pytest.mark.parametrize("seed", range(20))
def test_dedupe_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    # Repeats of all three kinds, and enough distinct children that a limit takes several
    # blocks of candidates to reach.
    base = rng.normal(size=(30, 8))
    vectors = base[rng.integers(0, 30, n)] + rng.normal(scale=0.05, size=(n, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    spans = [("d", int(s), int(s) + 5) for s in rng.integers(0, 80, n)]
    repeated = ["48 h  before", "48 H before", "20 nM", "other"]
    texts = [str(rng.choice(repeated)) if rng.random() < 0.2 else f"t{i}" for i in range(n)]
    order = [int(i) for i in rng.permutation(n)]
    got = scoring.dedupe(order, spans, texts, vectors.astype(np.float32), near_duplicate=0.99)
    want = _brute_dedupe(order, spans, texts, vectors, 0.99)
    assert got == want
    limit = int(rng.integers(1, 25))
    limited = scoring.dedupe(
        order, spans, texts, vectors.astype(np.float32), near_duplicate=0.99, limit=limit
    )
    assert limited == want[:limit]  # stopping early keeps the same first rows


def test_dedupe_keeps_the_best_of_each_duplicate() -> None:
    spans = [("d", 0, 5), ("d", 0, 5), ("d", 6, 9), ("d", 10, 20)]
    texts = ["48 h", "48 h", "48  H", "20 nM"]
    assert scoring.dedupe([1, 0, 2, 3], spans, texts, near_duplicate=None) == [1, 3]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("How many hours before RNA extraction?", scoring.QuestionKind.NUMERIC),
        ("What accuracy does the model reach?", scoring.QuestionKind.NUMERIC),
        ("Which of the 3 datasets is largest?", scoring.QuestionKind.NUMERIC),
        ("What is GAPDH?", scoring.QuestionKind.DEFINITION),
        ("What does BLEU stand for?", scoring.QuestionKind.DEFINITION),
        ("Which baselines do they compare to?", scoring.QuestionKind.OTHER),
    ],
)
def test_question_router(question: str, kind: scoring.QuestionKind) -> None:
    assert scoring.classify_question(question) is kind
    assert scoring.route_alpha(question) == scoring.AUTO_ALPHA[kind]


def test_auto_alpha_trusts_children_for_numbers_and_parents_for_definitions() -> None:
    alpha = scoring.AUTO_ALPHA
    kinds = scoring.QuestionKind
    assert alpha[kinds.NUMERIC] < alpha[kinds.OTHER] < alpha[kinds.DEFINITION]
    assert set(alpha) == set(kinds)


def _brute_gate_sources(  # noqa: PLR0913, PLR0917 (mirrors fuse_gate_sources's arguments)
    ids: list[str],
    dense: list[tuple[str, float]],
    sparse: list[tuple[str, float]],
    children: list[tuple[str, float]],
    title: list[float],
    title_weight: float,
    sparse_weight: float,
    child_weight: float,
) -> list[float]:
    """The fused parent score written out one candidate at a time."""
    out = []
    for pid, t in zip(ids, title, strict=True):
        d_hits = [s for p, s in dense if p == pid]
        d = d_hits[0] if d_hits else min((s for _, s in dense), default=0.0)
        d = (1 - title_weight) * d + title_weight * t
        best_child: dict[str, float] = {}
        for p, s in children:
            best_child[p] = max(best_child.get(p, -1.0), s)
        c = best_child.get(pid, min(best_child.values(), default=0.0))
        top = max((s for _, s in sparse), default=0.0)
        s_hits = [s for p, s in sparse if p == pid]
        s = s_hits[0] / top if s_hits and top > 0 else 0.0
        out.append(
            (1 - sparse_weight) * ((1 - child_weight) * d + child_weight * c) + sparse_weight * s
        )
    return out


@pytest.mark.parametrize("seed", range(40))
def test_fuse_gate_sources_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = [f"P-{i}" for i in range(12)]
    dense = [(p, float(rng.random())) for p in rng.permutation(pool)[: rng.integers(0, 8)]]
    sparse = [(p, float(rng.random() * 20)) for p in rng.permutation(pool)[: rng.integers(0, 8)]]
    children = [(str(rng.choice(pool)), float(rng.random())) for _ in range(rng.integers(0, 15))]
    ids = list(
        dict.fromkeys([p for p, _ in dense] + [p for p, _ in sparse] + [p for p, _ in children])
    )
    title = rng.random(len(ids)).tolist()
    weights = {
        "title_weight": float(rng.random()),
        "sparse_weight": float(rng.random()),
        "child_weight": float(rng.random()),
    }
    fused = scoring.fuse_gate_sources(ids, dense, sparse, children, title=title, **weights)
    expected = _brute_gate_sources(ids, dense, sparse, children, title, **weights)
    assert np.allclose(fused.scores, expected)
    assert all(0.0 <= s <= 1.0 for s in fused.scores)
    for pid, sources in zip(fused.ids, fused.sources, strict=True):
        assert (scoring.GateSource.DENSE in sources) == (pid in dict(dense))
        assert (scoring.GateSource.SPARSE in sources) == (pid in dict(sparse))
        assert (scoring.GateSource.CHILDREN in sources) == (pid in dict(children))


def test_fuse_gate_sources_with_zero_weights_is_the_dense_score() -> None:
    dense = [("a", 0.7), ("b", 0.4)]
    fused = scoring.fuse_gate_sources(
        ["a", "b"], dense, [("b", 9.0)], [("b", 0.9)], sparse_weight=0.0, child_weight=0.0
    )
    assert fused.scores == [0.7, 0.4]


def test_a_term_hit_lifts_a_parent_the_vectors_ranked_last() -> None:
    dense = [("a", 0.6), ("b", 0.5), ("c", 0.2)]
    fused = scoring.fuse_gate_sources(
        ["a", "b", "c"], dense, [("c", 12.0), ("a", 1.0)], [], sparse_weight=0.5, child_weight=0.0
    )
    assert max(zip(fused.scores, fused.ids, strict=True))[1] == "c"


def test_max_scaled() -> None:
    assert scoring.max_scaled([2.0, 1.0, 0.0]).tolist() == [1.0, 0.5, 0.0]
    assert scoring.max_scaled([]).tolist() == []
    assert scoring.max_scaled([0.0, 0.0]).tolist() == [0.0, 0.0]


def test_a_query_vector_is_scaled_to_length_one_and_zero_stays_zero() -> None:
    assert np.allclose(scoring.unit([3.0, 4.0]), [0.6, 0.8])
    assert np.array_equal(scoring.unit([0.0, 0.0]), [0.0, 0.0])


def _learned_reference(  # noqa: PLR0913 (the function's inputs, read one child at a time)
    *,
    cosine: list[float],
    lexical: list[float],
    child_ids: list[str],
    parents: list[str],
    starts: list[int],
    ends: list[int],
    counts: list[int],
    gate: list[scoring.GatedParent],
    candidates: scoring.GateCandidates,
    numeric: bool,
) -> list[float]:
    """The learned score of each child, one child at a time from the features' definitions."""
    out = []
    for row, pid in enumerate(parents):
        g = next(g for g in gate if g.parent_id == pid)
        i = candidates.ids.index(pid)
        siblings = [r for r, p in enumerate(parents) if p == pid]
        blended = [0.7 * cosine[r] + 0.3 * lexical[r] for r in range(len(parents))]
        in_parent = sorted(siblings, key=lambda r: (-blended[r], child_ids[r])).index(row) + 1
        cos_rank = sorted(range(len(parents)), key=lambda r: (-cosine[r], r)).index(row) + 1
        n = int(child_ids[row].rsplit("-", 1)[1])
        d, t, c, _ = candidates.parts[i]
        x = [
            cosine[row],
            lexical[row],
            g.score,
            d,
            t,
            c,
            np.log(g.rank),
            np.log(in_parent),
            float(in_parent == 1),
            float(scoring.GateSource.SPARSE in candidates.sources[i]),
            float(scoring.GateSource.CHILDREN in candidates.sources[i]),
            (n - 1) / max(counts[row] - 1, 1),
            np.log1p(ends[row] - starts[row]),
            np.log1p(starts[row] / 1000),
            np.log(cos_rank),
            float(numeric) * cosine[row],
        ]
        logit = float(np.dot(x, scoring.LEARNED_WEIGHTS)) + scoring.LEARNED_BIAS
        out.append(1 / (1 + np.exp(-logit)))
    return out


@pytest.mark.parametrize("scores", ["distinct", "tied"])
@pytest.mark.parametrize("seed", range(5))
def test_learned_child_scores_match_the_feature_definitions(seed: int, scores: str) -> None:
    rng = np.random.default_rng(seed)
    n_parents = 4
    pids = [f"P-s{i}" for i in range(n_parents)]
    candidates = scoring.fuse_gate_sources(
        pids,
        [(p, float(rng.random())) for p in pids[:3]],
        [(p, float(rng.random() * 5)) for p in pids[1:]],
        [(p, float(rng.random())) for p in pids[::2]],
        title=rng.random(n_parents),
        title_weight=0.3,
        sparse_weight=0.25,
        child_weight=0.25,
    )
    gate = scoring.select_gate(pids, candidates.scores, n_parents)
    sizes = rng.integers(1, 12, n_parents)
    parents = [p for p, size in zip(pids, sizes, strict=True) for _ in range(size)]
    child_ids = [
        f"C-s{p[3:]}-{j + 1}" for p, size in zip(pids, sizes, strict=True) for j in range(size)
    ]
    counts = [int(size) for size in sizes for _ in range(size)]
    n = len(parents)
    cosine = rng.random(n).tolist()
    lexical = rng.random(n).tolist()
    if scores == "tied":  # siblings of equal scores rank by id ("C-s0-10" before "C-s0-2")
        cosine = (rng.integers(0, 2, n) / 2).tolist()
        lexical = [0.5] * n
    starts = rng.integers(0, 50_000, n).tolist()
    ends = [
        start + int(length) for start, length in zip(starts, rng.integers(1, 2000, n), strict=True)
    ]
    for numeric in (False, True):
        got = scoring.learned_child_scores(
            cosine=cosine,
            lexical=lexical,
            child_ids=child_ids,
            child_parent_ids=parents,
            ends=ends,
            starts=starts,
            child_counts=counts,
            gate=gate,
            candidates=candidates,
            numeric=numeric,
        )
        want = _learned_reference(
            cosine=cosine,
            lexical=lexical,
            child_ids=child_ids,
            parents=parents,
            ends=ends,
            starts=starts,
            counts=counts,
            gate=gate,
            candidates=candidates,
            numeric=numeric,
        )
        np.testing.assert_allclose(got, want, rtol=1e-12)
        assert ((got > 0) & (got < 1)).all()


def test_learned_ranker_prefers_the_closer_child_and_has_its_coefficients() -> None:
    assert len(scoring.LEARNED_WEIGHTS) == len(scoring.LEARNED_FEATURES)
    candidates = scoring.fuse_gate_sources(
        ["P-a"], [("P-a", 0.5)], [], [], sparse_weight=0.25, child_weight=0.25
    )
    gate = scoring.select_gate(["P-a"], candidates.scores, 1)
    scores = scoring.learned_child_scores(
        cosine=[0.3, 0.6],
        lexical=[0.2, 0.2],
        child_ids=["C-a-1", "C-a-2"],
        child_parent_ids=["P-a", "P-a"],
        starts=[0, 500],
        ends=[400, 900],
        child_counts=[2, 2],
        gate=gate,
        candidates=candidates,
        numeric=False,
    )
    assert scores[1] > scores[0]
    assert scoring.learned_child_scores(
        cosine=[],
        lexical=[],
        child_ids=[],
        child_parent_ids=[],
        starts=[],
        ends=[],
        child_counts=[],
        gate=[],
        candidates=candidates,
        numeric=False,
    ).shape == (0,)
