"""Pure scoring: score normalization, the gate, fusion, per-parent caps, dedupe, alpha routing.

Nothing here does I/O, so every rule the retriever applies can be tested against a brute-force
reference on random data and reasoned about on its own.

Scores: every similarity the package reports is a cosine similarity clipped to [0, 1]
(:func:`similarity`). Chroma reports cosine *distances* (``1 - cos``); the retriever converts
them here and nowhere else, so parent and child scores live on one scale and fuse meaningfully.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike, NDArray


def similarity(cosine: ArrayLike) -> NDArray[np.float64]:
    """Map cosine similarities to scores in [0, 1].

    Negative cosines mean "unrelated" for sentence embeddings; clipping them to 0 keeps every
    reported score in [0, 1] (unlike relevance functions that go negative).
    """
    return np.clip(np.asarray(cosine, dtype=np.float64), 0.0, 1.0)


def similarity_from_distance(cosine_distance: ArrayLike) -> NDArray[np.float64]:
    """Convert Chroma's cosine distances (``1 - cos``) to scores in [0, 1]."""
    return similarity(1.0 - np.asarray(cosine_distance, dtype=np.float64))


def unit(vectors: ArrayLike) -> NDArray[np.float32]:
    """A vector (or each row of a matrix) scaled to length 1; a zero vector stays zero.

    Stored vectors and the query are both scaled to length 1, so a dot product is a cosine, on
    the scale of Chroma's cosine distances, whether or not the embedding model normalizes.
    """
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=-1, keepdims=True)
    return (array / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def nearest(
    ids: Sequence[str], matrix: NDArray[np.float32], vector: ArrayLike, n: int
) -> list[tuple[str, float]]:
    """The ``n`` rows of ``matrix`` (L2-normalized) most similar to ``vector``, exactly.

    The same ``(id, score in [0, 1])`` a vector store's search gives, for a set small enough
    to score whole (the sections and children of a few documents).
    """
    if not len(ids) or n < 1:
        return []
    scores = similarity(matrix @ np.asarray(vector, dtype=np.float32))
    top = np.argsort(-scores, kind="stable")[:n]
    return [(ids[i], float(scores[i])) for i in top]


def fuse(parent_score: ArrayLike, child_score: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """The fused score ``alpha * s_parent + (1 - alpha) * s_child``.

    Example: the method's worked example, s_parent 0.72 and s_child 0.91 at alpha 0.4:

    >>> round(float(fuse(0.72, 0.91, 0.4)), 3)
    0.834
    """
    check_alpha(alpha)
    return alpha * np.asarray(parent_score, dtype=np.float64) + (1.0 - alpha) * np.asarray(
        child_score, dtype=np.float64
    )


def blend(dense: ArrayLike, lexical: ArrayLike, weight: float) -> NDArray[np.float64]:
    """``(1 - weight) * dense + weight * lexical``: one score from two signals on [0, 1]."""
    return (1.0 - weight) * np.asarray(dense, dtype=np.float64) + weight * np.asarray(
        lexical, dtype=np.float64
    )


def check_alpha(alpha: float) -> None:
    """Reject an alpha outside [0, 1], naming the value and the fix."""
    if not 0.0 <= alpha <= 1.0:
        msg = f"alpha must be in [0, 1] (or 'auto', 'learned'), got {alpha!r}; pass e.g. alpha=0.4"
        raise ValueError(msg)


@dataclass(frozen=True)
class GatedParent:
    """A parent the gate opened."""

    parent_id: str
    score: float
    rank: int
    """1-based rank among the opened parents."""


def select_gate(
    parent_ids: Sequence[str],
    parent_scores: ArrayLike,
    parent_top_k: int,
    *,
    margin: float = 0.0,
) -> list[GatedParent]:
    """Open the best ``parent_top_k`` parents, widened by ``margin``.

    A parent whose score is within ``margin`` of the last one kept opens too: when parent scores
    are flat, the embedding cannot tell those sections apart, and cutting between near-equal
    scores is what makes a hard gate miss the right section. ``margin=0`` is the published hard
    gate (ties at the cut still open, so the result never depends on input order).
    Order: score descending, then parent id, so results are deterministic.
    """
    scores: list[float] = np.asarray(parent_scores, dtype=np.float64).tolist()
    order = sorted(range(len(parent_ids)), key=lambda i: (-scores[i], parent_ids[i]))
    if not order or parent_top_k < 1:
        return []
    cut = scores[order[min(parent_top_k, len(order)) - 1]] - margin
    return [
        GatedParent(parent_ids[i], scores[i], rank)
        for rank, i in enumerate((i for i in order if scores[i] >= cut), start=1)
    ]


def fill_gate(  # noqa: PLR0913 (parallel arrays of one parent list, plus two limits)
    gate: Sequence[GatedParent],
    parent_ids: Sequence[str],
    parent_scores: ArrayLike,
    child_counts: Sequence[int],
    *,
    need: int,
    child_per_parent: int,
) -> list[GatedParent]:
    """Keep opening parents, best first, until the opened ones can supply ``need`` children.

    A hard gate caps what it can return at ``parent_top_k * child_per_parent`` children, so a
    caller asking for a full context window gets a short one. Filling opens the next-best
    parents only as far as the request needs; a parent is still never opened out of order.
    """
    scores: list[float] = np.asarray(parent_scores, dtype=np.float64).tolist()
    count = dict(zip(parent_ids, child_counts, strict=True))
    opened = list(gate)
    supply = sum(min(count.get(g.parent_id, 0), child_per_parent) for g in opened)
    taken = {g.parent_id for g in opened}
    order = sorted(range(len(parent_ids)), key=lambda i: (-scores[i], parent_ids[i]))
    for i in order:
        if supply >= need:
            break
        if parent_ids[i] in taken:
            continue
        opened.append(GatedParent(parent_ids[i], scores[i], len(opened) + 1))
        taken.add(parent_ids[i])
        supply += min(count[parent_ids[i]], child_per_parent)
    return opened


def rank_children(  # noqa: PLR0913 (parallel arrays of one child list, plus the knobs)
    child_parent_ids: Sequence[str],
    child_ids: Sequence[str],
    child_scores: ArrayLike,
    gate: Sequence[GatedParent],
    *,
    child_per_parent: int,
    alpha: float,
) -> list[tuple[int, float]]:
    """Fuse and rank the children of the opened parents.

    Only children whose parent is in ``gate`` count (a parent that is not hit never opens), at
    most ``child_per_parent`` of them per parent (the best by child score). Returns
    ``(row, fused score)`` pairs, best first; equal fused scores (all of a parent's children
    at ``alpha=1``) go by child score, then by chunk id.
    """
    parent_score = {g.parent_id: g.score for g in gate}
    scores = np.asarray(child_scores, dtype=np.float64)
    by_parent: dict[str, list[int]] = {}
    for row, pid in enumerate(child_parent_ids):
        if pid in parent_score:
            by_parent.setdefault(pid, []).append(row)
    kept: list[tuple[int, float]] = []
    for pid, rows in by_parent.items():
        best = sorted(rows, key=lambda r: (-scores[r], child_ids[r]))[:child_per_parent]
        fused = fuse(parent_score[pid], scores[best], alpha)
        kept.extend(zip(best, fused.tolist(), strict=True))
    return sorted(kept, key=lambda pair: (-pair[1], -scores[pair[0]], child_ids[pair[0]]))


@functools.lru_cache(maxsize=16384)
def normalize_text(text: str) -> str:
    """Case- and whitespace-folded text, the key for exact-duplicate detection.

    Cached: the same children recur across queries (as in :func:`~.lexical.term_counts`).
    """
    return " ".join(text.split()).casefold()


def dedupe(  # noqa: PLR0913 (parallel arrays of one candidate list, plus two knobs)
    ranked_rows: Sequence[int],
    spans: Sequence[tuple[str, int, int]],
    texts: Sequence[str],
    vectors: NDArray[np.float32] | None = None,
    *,
    near_duplicate: float | None = 0.95,
    limit: int | None = None,
) -> list[int]:
    """Keep the best of children that repeat one span, one text or (nearly) one vector.

    ``ranked_rows`` is best first, so the first occurrence of a duplicate is the one kept;
    with ``limit``, the scan stops once that many are kept (the rest would not be returned).
    Duplicates: the same ``(doc_id, start, end)`` span, the same normalized text, or, with
    ``vectors`` (L2-normalized rows) and ``near_duplicate`` set, a cosine above that threshold to
    a child already kept. This stops one fact, repeated across fragments, from filling the top-k.
    """
    seen_spans: set[tuple[str, int, int]] = set()
    seen_texts: set[str] = set()
    near = (
        None
        if vectors is None or near_duplicate is None
        else _NearDuplicates(vectors[list(ranked_rows)], near_duplicate, limit)
    )
    kept: list[int] = []
    kept_at: set[int] = set()  # the kept children's places in ``ranked_rows``
    for place, row in enumerate(ranked_rows):
        if limit is not None and len(kept) >= limit:
            break
        text_key = normalize_text(texts[row])
        if spans[row] in seen_spans or text_key in seen_texts:
            continue
        if near is not None and not kept_at.isdisjoint(near.before(place)):
            continue
        seen_spans.add(spans[row])
        seen_texts.add(text_key)
        kept.append(row)
        kept_at.add(place)
    return kept


class _NearDuplicates:
    """For each candidate, the better-ranked candidates it nearly repeats (cosine > threshold).

    Worked out in blocks of growing size as the scan reaches them, since with a small ``limit``
    it stops after a few candidates. Each candidate is compared with the better-ranked ones
    only, by products of a few rows each, small enough that OpenBLAS runs them on the calling
    thread: a product of a whole block (84 x 84 at k 60) goes to BLAS threads, which then spin
    beside onnxruntime's and slowed every query of the process (flat-para's too:
    BENCHMARKS.md, "What a query reads"). One product per kept child, called from Python, made
    the whole dedupe cost 0.44 ms a query against 0.28 for a stack of matrix-vector products
    over the whole block; these row products take about half that stack's time.
    """

    ONE_THREAD = 1 << 18
    """Multiply-adds of a product OpenBLAS runs on the calling thread (65,536 times its
    default ``GEMM_MULTITHREAD_THRESHOLD``, 4)."""

    FIRST_BLOCK = 16
    """Candidates worked out at first, or the ``limit`` and :data:`PAST_LIMIT` more if more."""
    PAST_LIMIT = 8
    """Duplicates are rare (0.13 a query on QASPER dev at k 60, 1,169 papers: the scan keeps
    60 of the first 60 to 64), so the first block stops a few past the ``limit``, not at twice
    it: 68 x 68 products instead of all 88 x 88 (0.22 against 0.30 ms a query)."""

    def __init__(self, ordered: NDArray[np.float32], threshold: float, limit: int | None) -> None:
        self._ordered = ordered
        self._threshold = threshold
        self._known = 0  # candidates whose near duplicates are worked out
        self._first = max(self.FIRST_BLOCK, limit + self.PAST_LIMIT if limit else 0)
        self._earlier: dict[int, list[int]] = {}

    def before(self, place: int) -> list[int]:
        """The places, before ``place``, of the candidates it nearly repeats."""
        if place >= self._known:
            self._work_out(min(len(self._ordered), max(self._first, 2 * self._known)))
        return self._earlier.get(place, [])

    def _work_out(self, upto: int) -> None:
        start, ordered = self._known, self._ordered
        similar = np.zeros((upto - start, upto), dtype=ordered.dtype)  # row: a place, from start
        rows = max(1, self.ONE_THREAD // (upto * ordered.shape[1]))
        for first in range(start, upto, rows):
            last = min(first + rows, upto)
            similar[first - start : last - start, :last] = ordered[first:last] @ ordered[:last].T
        places, others = np.nonzero(similar > self._threshold)
        places += start
        earlier = others < places  # not itself, nor a worse-ranked one
        for place, other in zip(places[earlier].tolist(), others[earlier].tolist(), strict=True):
            self._earlier.setdefault(place, []).append(other)
        self._known = upto


class QuestionKind(str, Enum):
    """What ``alpha="auto"`` recognizes in a question."""

    NUMERIC = "numeric"
    DEFINITION = "definition"
    OTHER = "other"


_NUMERIC = re.compile(
    r"\b(how (many|much|long|large|big|often|fast)|what (percentage|proportion|fraction|number|"
    r"size|amount|score|accuracy|rate)|number of|by how|how well)\b|\d",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"^\s*(what (is|are|does) (an? |the )?[\w\- ]{1,40}\??$|define\b|what (do|does) .{1,40} "
    r"(mean|stand for)\b|meaning of\b)",
    re.IGNORECASE,
)


def classify_question(query: str) -> QuestionKind:
    """Tell numeric/measurement questions and definition questions from the rest.

    A handful of surface patterns, deliberately simple and inspectable: "how many", "what
    percentage", digits → numeric; "what is X?", "define", "what does X stand for" → definition.
    """
    if _NUMERIC.search(query):
        return QuestionKind.NUMERIC
    if _DEFINITION.search(query):
        return QuestionKind.DEFINITION
    return QuestionKind.OTHER


AUTO_ALPHA: dict[QuestionKind, float] = {
    QuestionKind.NUMERIC: 0.2,
    QuestionKind.DEFINITION: 0.6,
    QuestionKind.OTHER: 0.4,
}
"""alpha per question kind for ``alpha="auto"``: the exact figure or step lives in the child, so
numeric questions trust the child more; a definition is a section's topic, so they trust the
parent more."""


def route_alpha(query: str) -> float:
    """The alpha that ``alpha="auto"`` uses for ``query``."""
    return AUTO_ALPHA[classify_question(query)]


def max_scaled(scores: ArrayLike) -> NDArray[np.float64]:
    """Scores divided by the best one, so the best is 1; all zeros when none is positive.

    Puts a raw term score (BM25, ``ts_rank``), whose range depends on the query and the
    collection, on the [0, 1] scale of the cosine scores before they are blended.
    """
    values = np.asarray(scores, dtype=np.float64)
    best = float(values.max()) if values.size else 0.0
    return values / best if best > 0 else np.zeros_like(values)


class GateSource(str, Enum):
    """A search that can put a parent among the gate's candidates."""

    DENSE = "dense"
    """The parent-vector search (across a collection, over the other searches' candidates)."""
    SPARSE = "sparse"
    """The term search over parents (heading path and text)."""
    CHILDREN = "children"
    """The child-vector search: the parents of the children nearest the query."""


@dataclass(frozen=True)
class GateCandidates:
    """The union of the gate's searches, one fused parent score per candidate."""

    ids: list[str]
    scores: list[float]
    sources: list[list[GateSource]]
    """Which searches found each candidate, in :class:`GateSource` order."""
    parts: list[tuple[float, float, float, float]] = field(default_factory=list)
    """Each candidate's ``(d, title, c, s)``: its dense score (before the title blend), title
    score, best-child score and scaled term score, as :func:`fuse_gate_sources` fused them."""


def fuse_gate_sources(  # noqa: PLR0913 (three sources, the title signal and three weights)
    candidate_ids: Sequence[str],
    dense: Sequence[tuple[str, float]],
    sparse: Sequence[tuple[str, float]],
    children: Sequence[tuple[str, float]],
    *,
    title: ArrayLike | None = None,
    title_weight: float = 0.0,
    sparse_weight: float,
    child_weight: float,
) -> GateCandidates:
    """One parent score from three searches, on the cosine scale of the dense score.

    Per candidate: ``d`` its dense score (cosine, blended by ``title_weight`` with ``title``,
    its heading-title score aligned with ``candidate_ids``), ``c`` the best
    cosine of its children among the child-search hits, ``s`` its term score divided by the
    best term score of the query (:func:`max_scaled`). A candidate a vector search did not
    return gets that search's lowest returned score (its own is at most that), one the term
    search did not return gets 0. Then
    ``s_p = (1 - sparse_weight) * ((1 - child_weight) * d + child_weight * c)
    + sparse_weight * s``: every term lies in [0, 1], so ``s_p`` does too and fuses with the
    child scores as before. Both weights 0 give ``d`` unchanged.
    """
    dense_of = dict(dense)
    child_of: dict[str, float] = {}
    for pid, score in children:
        child_of[pid] = max(score, child_of.get(pid, score))
    sparse_scaled = max_scaled([s for _, s in sparse])
    sparse_of = {pid: float(s) for (pid, _), s in zip(sparse, sparse_scaled, strict=True)}
    dense_floor = min(dense_of.values(), default=0.0)
    titles = np.zeros(len(candidate_ids)) if title is None else np.asarray(title, np.float64)
    child_floor = min(child_of.values(), default=0.0)
    scores: list[float] = []
    sources: list[list[GateSource]] = []
    parts: list[tuple[float, float, float, float]] = []
    for pid, title_score in zip(candidate_ids, titles.tolist(), strict=True):
        dense_score = dense_of.get(pid, dense_floor)
        d = (1.0 - title_weight) * dense_score + title_weight * title_score
        c = child_of.get(pid, child_floor)
        s = sparse_of.get(pid, 0.0)
        scores.append(
            (1.0 - sparse_weight) * ((1.0 - child_weight) * d + child_weight * c)
            + sparse_weight * s
        )
        found = (
            (GateSource.DENSE, pid in dense_of),
            (GateSource.SPARSE, pid in sparse_of),
            (GateSource.CHILDREN, pid in child_of),
        )
        sources.append([source for source, hit in found if hit])
        parts.append((dense_score, title_score, c, s))
    return GateCandidates(list(candidate_ids), scores, sources, parts)


LEARNED_FEATURES: tuple[str, ...] = (
    "cosine",
    "lexical",
    "parent_score",
    "parent_dense",
    "parent_title",
    "parent_best_child",
    "log_gate_rank",
    "log_rank_in_parent",
    "best_in_parent",
    "parent_from_terms",
    "parent_from_children",
    "position_in_section",
    "log_characters",
    "log_offset_k",
    "log_cosine_rank",
    "numeric_x_cosine",
)
"""The learned child ranker's features, in :data:`LEARNED_WEIGHTS` order (see
:func:`learned_child_scores`)."""
LEARNED_WEIGHTS: tuple[float, ...] = (
    1.6937,
    1.6124,
    1.7684,
    -0.3774,
    0.4169,
    2.9530,
    -0.2321,
    -0.4679,
    -0.3600,
    0.9873,
    0.5330,
    -0.1816,
    0.5565,
    0.1751,
    -0.1664,
    2.3407,
)
"""A linear listwise (softmax) ranker fitted on QASPER train, both settings, over every child of
the parents a gate filled to twice ``k`` opens (``benchmarks/learn_fusion.py``). It ranks the
children of the gate the fused score opens (filled to ``k``): on train that ranks as well
(paper nDCG@10 0.4895 against 0.4893 at twice ``k``, corpus 0.1468 against 0.1452) and opens
fewer sections."""
LEARNED_BIAS = -5.1774
"""Added before the logistic squashing, so a score reads roughly as a probability."""
_LEARNED_BLEND = 0.3
"""The lexical share of the child score that orders children inside a parent (as fitted)."""


_COLUMN = {name: column for column, name in enumerate(LEARNED_FEATURES)}
_PARENT_FEATURES = (
    "parent_score",
    "parent_dense",
    "parent_title",
    "parent_best_child",
    "log_gate_rank",
    "parent_from_terms",
    "parent_from_children",
)
"""The features a parent's children share, in :func:`_parent_features`' column order."""
_PARENT_COLUMNS = [_COLUMN[name] for name in _PARENT_FEATURES]


def learned_child_scores(  # noqa: PLR0913 (parallel arrays of one child list)
    *,
    cosine: ArrayLike,
    lexical: ArrayLike,
    child_ids: Sequence[str],
    child_parent_ids: Sequence[str],
    starts: Sequence[int],
    ends: Sequence[int],
    child_counts: Sequence[int],
    gate: Sequence[GatedParent],
    candidates: GateCandidates,
    numeric: bool,
) -> NDArray[np.float64]:
    """Score every child of the opened parents with the learned linear ranker, in (0, 1).

    Per child (``cosine``, ``lexical``: its similarity and max-scaled BM25 over the scored
    children): the parent's gate score, rank and fused parts (:class:`GateCandidates`), the
    child's rank inside its parent (by ``0.7 cosine + 0.3 lexical``), its position in the
    section (``C-<sid>-<n>``: ``n`` of ``child_counts``), its length and its offset in the
    document (``ends - starts`` and ``starts``, characters), its cosine rank among all scored
    children, and ``numeric`` (a numeric question, :func:`classify_question`) times its cosine.
    The score is ``sigmoid(features @ LEARNED_WEIGHTS + LEARNED_BIAS)``; only its order matters.
    """
    n = len(child_ids)
    if n == 0:
        return np.zeros(0)
    cos = np.asarray(cosine, dtype=np.float64)
    lex = np.asarray(lexical, dtype=np.float64)
    features = np.empty((n, len(LEARNED_FEATURES)))
    features[:, _COLUMN["cosine"]] = cos
    features[:, _COLUMN["lexical"]] = lex
    # What the children of one opened parent share is worked out once per parent.
    of_gate = {g.parent_id: row for row, g in enumerate(gate)}
    gate_rows = np.array([of_gate[pid] for pid in child_parent_ids])
    features[:, _PARENT_COLUMNS] = _parent_features(gate, candidates)[gate_rows]
    # Each child's rank inside its parent, by blended score, ties by id.
    blended = blend(cos, lex, _LEARNED_BLEND)
    order = np.lexsort((np.array(child_ids), -blended, gate_rows))
    grouped = gate_rows[order]
    rank_in_parent = np.empty(n)
    rank_in_parent[order] = np.arange(1, n + 1) - np.searchsorted(grouped, grouped)
    features[:, _COLUMN["log_rank_in_parent"]] = np.log(rank_in_parent)
    features[:, _COLUMN["best_in_parent"]] = rank_in_parent == 1
    index = np.array([int(c.rsplit("-", 1)[1]) for c in child_ids], dtype=np.float64)
    counts = np.asarray(child_counts, dtype=np.float64)
    features[:, _COLUMN["position_in_section"]] = (index - 1) / np.maximum(counts - 1, 1)
    begin = np.asarray(starts, dtype=np.float64)
    features[:, _COLUMN["log_characters"]] = np.log1p(np.asarray(ends, dtype=np.float64) - begin)
    features[:, _COLUMN["log_offset_k"]] = np.log1p(begin / 1000)
    cos_rank = np.empty(n)
    cos_rank[np.argsort(-cos, kind="stable")] = np.arange(1, n + 1)
    features[:, _COLUMN["log_cosine_rank"]] = np.log(cos_rank)
    features[:, _COLUMN["numeric_x_cosine"]] = float(numeric) * cos
    logits: NDArray[np.float64] = features @ np.asarray(LEARNED_WEIGHTS) + LEARNED_BIAS
    squashed: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-logits))
    return squashed


def _parent_features(
    gate: Sequence[GatedParent], candidates: GateCandidates
) -> NDArray[np.float64]:
    """One row of :data:`_PARENT_FEATURES` per opened parent, in gate order."""
    at = {pid: row for row, pid in enumerate(candidates.ids)}
    shared = np.empty((len(gate), len(_PARENT_FEATURES)))
    for row, g in enumerate(gate):
        found = candidates.sources[at[g.parent_id]]
        dense, title, child = candidates.parts[at[g.parent_id]][:3]
        in_terms, in_children = GateSource.SPARSE in found, GateSource.CHILDREN in found
        shared[row] = (g.score, dense, title, child, g.rank, in_terms, in_children)
    rank = _PARENT_FEATURES.index("log_gate_rank")
    shared[:, rank] = np.log(shared[:, rank])
    return shared
