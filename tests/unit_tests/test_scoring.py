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
    return sorted(out, key=lambda p: (-p[1], ids[p[0]]))


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
    n = int(rng.integers(0, 30))
    base = rng.normal(size=(6, 8))
    vectors = base[rng.integers(0, 6, n)] + rng.normal(scale=0.05, size=(n, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    spans = [("d", int(s), int(s) + 5) for s in rng.integers(0, 10, n)]
    texts = [rng.choice(["48 h  before", "48 H before", "20 nM", "other"]) for _ in range(n)]
    order = [int(i) for i in rng.permutation(n)]
    got = scoring.dedupe(order, spans, texts, vectors.astype(np.float32), near_duplicate=0.99)
    want = _brute_dedupe(order, spans, texts, vectors, 0.99)
    assert got == want
    limit = int(rng.integers(1, 5))
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
