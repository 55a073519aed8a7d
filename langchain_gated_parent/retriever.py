"""The gated retriever: embed once, gate on parents, rank children inside, fuse, dedupe.

The pipeline is written once, as a generator that *yields* its I/O steps (embed the query,
search parents, fetch the opened parents with their children) and receives their results. A
sync driver and an async driver run the same generator, so ``invoke`` and ``ainvoke`` share
every line of logic. The retriever reads storage through :class:`~.records.SearchStore` only,
and takes its knobs from :mod:`~langchain_gated_parent.params`.
"""

from __future__ import annotations

import asyncio
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict
from typing_extensions import override

from langchain_gated_parent import keys, params, scoring
from langchain_gated_parent.lexical import bm25, bm25_of_terms
from langchain_gated_parent.params import SearchFields, SearchParams
from langchain_gated_parent.records import ChildRows, Explanation, SearchStore, Section

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Mapping, Sequence

    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.runnables import ConfigurableFieldSpec, RunnableConfig

__all__ = ["Explanation", "GatedParentRetriever"]

SEARCH_TYPES = ("similarity",)
"""The ``search_type`` values :meth:`GatedParentRetriever.from_store` accepts."""
PASSED_THROUGH = ("tags", "metadata")
"""Runnable settings ``from_store`` hands to the retriever besides the knobs."""


@dataclass(frozen=True)
class _Begin:
    """Embed the query; then, or meanwhile, read the sections to score exactly, if any.

    Those of the few documents a filter names (read beside the embedding), or of a small
    index with no filter (known at once, read after it).
    """

    query: str
    embed: bool
    """Whether to embed the query (``False``: the caller gave its vector)."""
    where: dict[str, Any] | None


@dataclass(frozen=True)
class _Search:
    """The gate's searches, independent of each other (0 asked: skipped).

    They start once the query is embedded, even the term search, which needs no vector: the
    embedding keeps every core busy, and a search beside it slows it down by as much as the
    search takes. Searches that wait on servers run at once; searches that all run in this
    process run one after the other, which is faster: the vector search lets go of the GIL,
    but must wait to take it back while the term search runs Python beside it.
    """

    query: str
    vector: list[float]
    n: int
    """Parents asked of the dense search."""
    n_sparse: int
    """Parents asked of the term search."""
    n_children: int
    """Children asked of the child-vector search."""
    where: dict[str, Any] | None


@dataclass(frozen=True)
class _Sections:
    ids: list[str]
    where: dict[str, Any] | None
    unchecked: list[str]
    """Candidates found by a search that applies only a ``doc_id`` filter."""


@dataclass(frozen=True)
class _FetchChildren:
    parent_ids: list[str]


_Step = _Begin | _Search | _Sections | _FetchChildren

_SEARCHES = ThreadPoolExecutor(max_workers=3, thread_name_prefix="gated-search")
"""Runs the independent reads of one sync query concurrently (its thread runs the first)."""


def _nothing() -> None:
    return None


def _one_after_another(calls: Sequence[Callable[[], Any]]) -> tuple[Any, ...]:
    return tuple(call() for call in calls)


def _parent_of_child(child: str) -> str:
    """``C-<sid>-<n>`` → ``P-<sid>`` (see :func:`~langchain_gated_parent.splitters.child_id`)."""
    return "P-" + child.removeprefix("C-").rsplit("-", 1)[0]


def _stack(matrices: Sequence[Any]) -> Any:
    """Rows of several matrices (or vectors) as one matrix.

    Joined in C: ``np.vstack`` reshapes each of a query's ~45 candidate vectors in Python first.
    """
    if not len(matrices):
        return np.empty((0, 0), np.float32)
    return np.array(matrices) if np.ndim(matrices[0]) == 1 else np.concatenate(matrices)


def _parents_of(
    children: Sequence[Document], parents: Mapping[str, Document], k: int
) -> list[Document]:
    """Swap children for their parents, deduplicated, each with its best child's scores."""
    best: dict[str, Document] = {}
    for child in children:
        best.setdefault(child.metadata[keys.PARENT_ID], child)
    out = []
    for pid in list(best)[:k]:
        parent, child = parents[pid], best[pid]
        scores = {
            key: child.metadata[key]
            for key in (keys.SCORE, keys.PARENT_SCORE, keys.CHILD_SCORE, keys.GATE_RANK)
        }
        metadata = {**parent.metadata, **scores}
        out.append(Document(id=pid, page_content=parent.page_content, metadata=metadata))
    return out


def _alpha_of(query: str, alpha: float | str) -> float:
    """The fused score's alpha for ``query``; ``nan`` for the learned ranker (no alpha)."""
    if alpha == "learned":
        return math.nan
    return scoring.route_alpha(query) if alpha == "auto" else float(alpha)


def _learned_ranking(  # noqa: PLR0913 (the scored children and what the gate knew of them)
    query: str,
    rows: ChildRows,
    sections: Mapping[str, Section],
    *,
    cosine: Any,
    lexical: Any,
    gate: Sequence[scoring.GatedParent],
    candidates: scoring.GateCandidates,
) -> list[tuple[int, float]]:
    """Every child of the opened parents, ranked by the learned ranker (no per-parent cap)."""
    parent_ids = rows.parent_ids
    spans = rows.spans
    scores = scoring.learned_child_scores(
        cosine=cosine,
        lexical=lexical,
        child_ids=rows.ids,
        child_parent_ids=parent_ids,
        starts=[start for _, start, _ in spans],
        ends=[end for _, _, end in spans],
        child_counts=[sections[p].child_count for p in parent_ids],
        gate=gate,
        candidates=candidates,
        numeric=scoring.classify_question(query) is scoring.QuestionKind.NUMERIC,
    )
    ranked = [(row, float(score)) for row, score in enumerate(scores.tolist())]
    return sorted(ranked, key=lambda pair: (-pair[1], rows.ids[pair[0]]))


def _validate_query(query: object) -> str:
    if not isinstance(query, str):
        msg = f"query must be a string, got {type(query).__name__}"
        raise TypeError(msg)
    if not query.strip():
        msg = "query is empty; pass the question text to search for"
        raise ValueError(msg)
    return query


class GatedParentRetriever(BaseRetriever, SearchFields):
    """Section parents gate paragraph children; results carry their scores.

    For a query: embed it once; score parents (the parent vector's cosine, blended with BM25
    over their heading titles by ``title_weight``) and open the ``parent_top_k`` best (the gate),
    then further ones in order while fewer than ``k`` children are available (``fill``); score
    the children inside the opened parents only (cosine, blended with BM25 over heading path and
    text by ``lexical_weight``); rank them with the learned ranker (the default) or, for a
    number ``alpha``, by ``score = alpha * s_parent + (1 - alpha) * s_child`` with at most
    ``child_per_parent`` each; drop duplicates; return the top ``k`` children, each with
    ``chunk_id``, ``parent_id``, ``score``, ``parent_score``, ``child_score`` and ``gate_rank``
    in its metadata.

    Its knobs (``k``, ``alpha``, ``parent_top_k``...) are the fields of
    :class:`~langchain_gated_parent.params.SearchFields`: checked when set
    (``retriever.k = 0`` raises at once), overridable per call (``invoke(q, k=3)``) and per
    request (``config={"configurable": {"k": 3}}``, see :attr:`config_specs`).

    Setup:
        .. code-block:: bash

            pip install langchain-gated-parent

    Instantiate:
        .. code-block:: python

            from langchain_gated_parent import GatedParentIndex

            index = GatedParentIndex(directory="./my-index")
            retriever = index.as_retriever(search_kwargs={"k": 4, "alpha": 0.4})

    Usage:
        .. code-block:: python

            docs = retriever.invoke("48 h RNA extraction", filter={"doc_id": "P-GAPDH-01"})
            docs[0].metadata["chunk_id"], docs[0].metadata["score"]

    Use within a chain:
        .. code-block:: python

            from langchain_core.runnables import RunnablePassthrough

            chain = {"context": retriever, "question": RunnablePassthrough()} | prompt | llm
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    index: SearchStore
    """The index to search (a :class:`~langchain_gated_parent.GatedParentIndex`)."""

    @classmethod
    def from_store(
        cls,
        store: SearchStore,
        *,
        search_type: str = "similarity",
        search_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> GatedParentRetriever:
        """Build a retriever the way ``VectorStore.as_retriever`` does.

        Args:
            store: The index to search.
            search_type: ``"similarity"``, the only kind this retriever does.
            search_kwargs: Knobs, e.g. ``{"k": 3, "filter": {"doc_id": "a"}}``.
            **kwargs: Knobs too (``k=3``), and ``tags`` / ``metadata`` for tracing.

        Raises:
            ValueError: ``search_type`` is another kind of search, or one knob is given twice.
            TypeError: An argument is neither a knob nor ``tags`` / ``metadata``.
        """
        if search_type not in SEARCH_TYPES:
            msg = (
                f"search_type {search_type!r} is not supported; {cls.__name__} supports "
                f"{', '.join(map(repr, SEARCH_TYPES))} (its gate, fusion and dedupe replace "
                "'mmr' and score thresholds)"
            )
            raise ValueError(msg)
        search_kwargs = dict(search_kwargs or {})
        unknown = sorted({*(set(kwargs) - set(PASSED_THROUGH)), *search_kwargs} - set(params.KNOBS))
        if unknown:
            msg = (
                f"unknown argument(s) {', '.join(unknown)}; as_retriever takes the knobs "
                f"{', '.join(params.KNOBS)} (as keywords or in search_kwargs) and "
                f"{', '.join(PASSED_THROUGH)}"
            )
            raise TypeError(msg)
        twice = sorted(set(kwargs) & set(search_kwargs))
        if twice:
            msg = f"{', '.join(twice)} given both as keyword and in search_kwargs; give it once"
            raise ValueError(msg)
        return cls(index=store, **kwargs, **search_kwargs)

    def _params(self, overrides: Mapping[str, Any]) -> SearchParams:
        return params.resolve({name: getattr(self, name) for name in params.KNOBS}, overrides)

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        ls_params = super()._get_ls_params(**kwargs)
        ls_params["ls_vector_store_provider"] = self.index.vector_store_provider
        ls_params["ls_embedding_provider"] = self.index.embedding_model
        return ls_params

    # ------------------------------------------------------------------ the pipeline
    def _plan(
        self,
        query: str,
        settings: SearchParams,
        vector: list[float] | None = None,
        *,
        explain: bool = False,
    ) -> Generator[_Step, Any, Explanation]:
        """The whole retrieval, as a generator of I/O steps (see the module docstring).

        ``explain`` also keeps every child scored (``Explanation.considered``), which a plain
        query does not pay for.
        """
        learned = settings.alpha == "learned"
        alpha = _alpha_of(query, settings.alpha)
        explanation = Explanation(query=query, alpha=alpha)
        wide = settings.gate_margin > 0 or settings.fill or settings.title_weight > 0
        # Filling needs about k / child_per_parent parents; search twice that, never fewer
        # than 4 gates' worth, so the title signal can promote a parent the vectors ranked low.
        need = -(-2 * settings.k // settings.child_per_parent) if settings.fill else 0
        n = max(4 * settings.parent_top_k, need) if wide else settings.parent_top_k
        embedded, every = yield _Begin(query, vector is None, settings.filter)
        vector = embedded if vector is None else vector
        self.index.check_dimension(vector)
        vector = scoring.unit(vector).tolist()
        sections, sources = yield from self._candidates(query, vector, n, settings, every=every)
        ids = list(sections)
        parent_scores = sources.scores
        gate = scoring.select_gate(
            ids, parent_scores, settings.parent_top_k, margin=settings.gate_margin
        )
        if settings.fill:
            gate = scoring.fill_gate(
                gate,
                ids,
                parent_scores,
                [sections[p].child_count for p in ids],
                need=settings.k,
                child_per_parent=settings.child_per_parent,
            )
        rows: ChildRows = yield _FetchChildren([g.parent_id for g in gate])
        if not rows.ids:
            return explanation
        cosine = scoring.similarity(rows.vectors @ np.asarray(vector, dtype=np.float32))
        lexical = (
            bm25_of_terms(query, rows.bm25_terms, lengths=rows.bm25_lengths)
            if settings.lexical_weight or learned
            else None
        )
        child_scores = cosine
        if settings.lexical_weight and lexical is not None:
            child_scores = scoring.blend(cosine, lexical, settings.lexical_weight)
        parent_ids = rows.parent_ids
        if learned and lexical is not None:
            ranked = _learned_ranking(
                query, rows, sections, cosine=cosine, lexical=lexical, gate=gate, candidates=sources
            )
        else:
            ranked = scoring.rank_children(
                parent_ids,
                rows.ids,
                child_scores,
                gate,
                child_per_parent=settings.child_per_parent,
                alpha=alpha,
            )
        fused = dict(ranked)
        order = [row for row, _ in ranked]
        if settings.dedupe:
            order = scoring.dedupe(
                order,
                rows.spans,
                rows.texts,
                rows.vectors,
                near_duplicate=settings.near_duplicate,
                limit=None if settings.return_parents else settings.k,
            )
        by_parent = {g.parent_id: g for g in gate}

        def child_doc(row: int) -> Document:
            gated = by_parent[parent_ids[row]]
            # Validated, in pydantic-core's compiled code: 3.7 µs a document, against 8.2 µs
            # for model_construct, which skips validation but runs in Python.
            return Document(
                id=rows.ids[row],
                page_content=rows.texts[row],
                metadata={
                    **rows.metadatas[row],
                    keys.SCORE: fused[row],
                    keys.PARENT_SCORE: gated.score,
                    keys.CHILD_SCORE: float(child_scores[row]),
                    keys.GATE_RANK: gated.rank,
                },
            )

        if settings.return_parents:  # any ranked child may name one of the k parents
            chosen = [child_doc(row) for row in order]
            explanation.documents.extend(_parents_of(chosen, rows.parents, settings.k))
        else:
            explanation.documents.extend(child_doc(row) for row in order[: settings.k])
        if not explain:
            return explanation
        source_of = dict(zip(sources.ids, sources.sources, strict=True))
        explanation.parents.extend(
            Document(
                page_content="",
                id=g.parent_id,
                metadata={
                    **rows.parents[g.parent_id].metadata,
                    keys.PARENT_SCORE: g.score,
                    keys.GATE_RANK: g.rank,
                    keys.GATE_SOURCES: [s.value for s in source_of[g.parent_id]],
                },
            )
            for g in gate
            if g.parent_id in rows.parents
        )
        explanation.considered.extend(child_doc(row) for row, _ in ranked)
        return explanation

    def _candidates(
        self,
        query: str,
        vector: list[float],
        n: int,
        settings: SearchParams,
        *,
        every: dict[str, Section] | None,
    ) -> Generator[_Step, Any, tuple[dict[str, Section], scoring.GateCandidates]]:
        """The gate's candidates (their section records) and one fused score each.

        Candidates come from the term search, the parents of the best children (the
        child-vector search) and the dense parent search. For a filter naming a few
        documents, ``every`` holds all their sections, and both vector searches are scored
        exactly from them (only the term search is run). Across the collection, with the
        child search on, the parent-vector search runs over the other two searches'
        candidates only, exactly, from their records: the parents of the nearest children
        already hold the sections whose centroid is near the query (on QASPER dev, 13 of
        8,880 top-10 results came from a section only the collection-wide parent search
        found), so one vector-index query is saved. But a filter the child and term searches
        cannot apply (any but one on ``doc_id`` alone) could leave a matching document that
        neither found out of reach: then the dense search runs in the vector store too, which
        applies it, and adds the matching parents it finds.
        """
        # As many children as parents: twice as many cost 0.19 ms a query at 1,169 papers
        # for little on QASPER train (BENCHMARKS.md, "This release's runs").
        n_children = n if settings.child_weight else 0
        exact = every is not None
        unfiltered = self.index.searches_apply(settings.filter)
        n_dense = 0 if exact or (n_children and unfiltered) else n
        n_sparse = n if settings.sparse_weight else 0
        children, sparse, dense = yield _Search(
            query, vector, n_dense, n_sparse, 0 if exact else n_children, settings.filter
        )
        if every is not None:
            dense = scoring.nearest(
                list(every), _stack([s.vector for s in every.values()]), vector, n
            )
            children = scoring.nearest(
                [str(c[keys.CHUNK_ID]) for s in every.values() for c in s.children],
                _stack([s.child_vectors for s in every.values()]),
                vector,
                n_children,
            )
        child_parents = [(_parent_of_child(c), score) for c, score in children]
        found = list(dict.fromkeys(p for p, _ in [*dense, *sparse, *child_parents]))
        if every is None:
            known = {p for p, _ in dense}
            sections = yield _Sections(found, settings.filter, [p for p in found if p not in known])
        else:
            sections = {p: every[p] for p in found if p in every}
        ids = list(sections)
        if n_children and not exact:  # the dense search, exactly, over the candidates only
            dense = scoring.nearest(ids, _stack([s.vector for s in sections.values()]), vector, n)
        fused = scoring.fuse_gate_sources(
            ids,
            [(p, s) for p, s in dense if p in sections],
            [(p, s) for p, s in sparse if p in sections],
            [(p, s) for p, s in child_parents if p in sections],
            title=bm25(query, [sections[p].headings for p in ids]),
            title_weight=settings.title_weight,
            sparse_weight=settings.sparse_weight,
            child_weight=settings.child_weight,
        )
        return sections, fused

    # ------------------------------------------------------------------ drivers
    def _run(self, plan: Generator[_Step, Any, Explanation]) -> Explanation:
        result: Any = None
        try:
            while True:
                step = plan.send(result)
                result = self._do(step)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _arun(self, plan: Generator[_Step, Any, Explanation]) -> Explanation:
        result: Any = None
        try:
            while True:
                step = plan.send(result)
                # Storage may be synchronous (a local vector store often is): its calls run
                # off the event loop, in threads that see this task's context (tracing).
                storage = self._storage_calls(step)
                if isinstance(step, _Search) and self.index.searches_in_process:
                    result = await run_in_executor(None, _one_after_another, storage)
                    continue
                calls = [run_in_executor(None, call) for call in storage]
                if isinstance(step, _Begin):
                    calls.insert(0, self._aembed(step))
                result = tuple(await asyncio.gather(*calls))
                if not isinstance(step, (_Begin, _Search)):
                    result = result[0]
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _aembed(self, step: _Begin) -> list[float] | None:
        return await self.index.embeddings.aembed_query(step.query) if step.embed else None

    def _do(self, step: _Step) -> Any:
        calls = self._storage_calls(step)
        if isinstance(step, _Begin):
            embed = self.index.embeddings.embed_query
            calls.insert(0, (lambda: embed(step.query)) if step.embed else _nothing)
            if step.where is None:  # a small index's documents: known at once, after the embedding
                return _one_after_another(calls)
        elif not isinstance(step, _Search):
            return calls[0]()
        elif self.index.searches_in_process:
            return _one_after_another(calls)
        futures = [_SEARCHES.submit(call) for call in calls[1:]]
        return (calls[0](), *(future.result() for future in futures))

    def _storage_calls(self, step: _Step) -> list[Callable[[], Any]]:
        """A step's reads, in the order of its result (a skipped search returns ``[]``).

        For :class:`_Begin` they follow the query vector.
        """
        index = self.index
        if isinstance(step, _Begin):
            return [lambda: index.document_sections(step.where)]
        if isinstance(step, _Sections):
            return [lambda: index.sections(step.ids, step.where, unchecked=step.unchecked)]
        if isinstance(step, _FetchChildren):
            return [lambda: index.children_of(step.parent_ids)]
        # The child search, on by default, first: the calling thread runs it, not a worker.
        return [
            (lambda: index.search_children(step.vector, step.n_children, step.where))
            if step.n_children
            else list,
            (lambda: index.search_sparse(step.query, step.n_sparse, step.where))
            if step.n_sparse
            else list,
            (lambda: index.search_parents(step.vector, step.n, step.where)) if step.n else list,
        ]

    def _start(self, query: object, kwargs: dict[str, Any]) -> tuple[str, SearchParams, Any]:
        query = _validate_query(query)
        vector = kwargs.pop("query_vector", None)
        settings = self._params(kwargs)
        self.index.check_filter(settings.filter)
        return query, settings, vector

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,  # noqa: ARG002 (callbacks: the base class)
        **kwargs: Any,
    ) -> list[Document]:
        query, settings, vector = self._start(query, kwargs)
        return self._run(self._plan(query, settings, vector)).documents

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,  # noqa: ARG002 (the base class's)
        **kwargs: Any,
    ) -> list[Document]:
        query, settings, vector = self._start(query, kwargs)
        return (await self._arun(self._plan(query, settings, vector))).documents

    def explain(
        self, query: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Explanation:
        """Run the retrieval and return what the gate opened and every child it scored.

        Takes the per-call settings as :meth:`invoke` does (``config["configurable"]``, then
        keyword arguments), so a query can be explained as it was run.
        """
        query, settings, vector = self._start(query, self._call_kwargs(config, kwargs))
        return self._run(self._plan(query, settings, vector, explain=True))

    # ------------------------------------------------------------------ per-request settings
    @property
    @override
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """Every knob, as a setting one call may take from ``config["configurable"]``.

        Declared so that LangServe's config schema accepts and forwards them (a key not
        declared here is dropped by the server) and the playground shows their ranges. Every
        default is ``None``, meaning "this retriever's own field". In a chain the ids are
        shared, so ``{"k": 3}`` applies to each retriever of this class.
        """
        return params.config_specs()

    @staticmethod
    def _call_kwargs(config: RunnableConfig | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Per-call arguments: the knobs in ``configurable``, then explicit keyword arguments.

        ``None`` in ``configurable`` keeps the field (LangServe sends every declared key, unset
        ones as ``None``); keys that are not knobs belong to other runnables and are ignored.
        """
        configurable = (config or {}).get("configurable") or {}
        merged = {k: v for k, v in configurable.items() if k in params.KNOBS and v is not None}
        merged.update(kwargs)
        return merged

    @override
    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Retrieve for one query; ``config["configurable"]`` may change this call's knobs.

        So a chain or a LangServe client tunes any knob (``alpha``, ``k``, ``filter``...) per
        request without a new retriever (see :attr:`config_specs`); explicit keyword arguments
        win over ``config``. ``batch`` runs this for each input, so it answers the same.
        """
        return super().invoke(input, config, **self._call_kwargs(config, kwargs))

    @override
    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async :meth:`invoke`, with the same per-request settings."""
        return await super().ainvoke(input, config, **self._call_kwargs(config, kwargs))
