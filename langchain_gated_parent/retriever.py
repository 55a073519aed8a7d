"""The gated retriever: embed once, gate on parents, rank children inside, fuse, dedupe.

The pipeline is written once, as a generator that *yields* its I/O steps (embed the query,
search parents, fetch the opened parents with their children) and receives their results. A
sync driver and an async driver run the same generator, so ``invoke`` and ``ainvoke`` share
every line of logic.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Interval
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from langchain_core.runnables import ConfigurableFieldSpec
from pydantic import ConfigDict, Field, model_validator
from typing_extensions import override

from langchain_gated_parent import keys, scoring
from langchain_gated_parent.index import ChildRows, GatedParentIndex, ParentHits, model_name_of
from langchain_gated_parent.lexical import bm25

if TYPE_CHECKING:
    from collections.abc import Generator, Mapping, Sequence

    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.runnables import RunnableConfig

Alpha = float | Literal["auto"]


@dataclass(frozen=True)
class _Embed:
    query: str


@dataclass(frozen=True)
class _SearchParents:
    vector: list[float]
    n: int
    where: dict[str, Any] | None


@dataclass(frozen=True)
class _FetchChildren:
    child_counts: dict[str, int]
    """Parent id → how many children it has."""


_Step = _Embed | _SearchParents | _FetchChildren


@dataclass(frozen=True)
class Params:
    """The settings of one call: the retriever's fields with per-call overrides applied."""

    k: int
    alpha: Alpha
    parent_top_k: int
    child_per_parent: int
    gate_margin: float
    fill: bool
    lexical_weight: float
    title_weight: float
    return_parents: bool
    dedupe: bool
    near_duplicate: float | None
    filter: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        """Refuse out-of-range settings, naming the value and the fix."""
        for name in ("k", "parent_top_k", "child_per_parent"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"{name} must be an integer >= 1, got {value!r}"
                raise ValueError(msg)
        if self.alpha != "auto":
            if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float)):
                msg = f"alpha must be a number in [0, 1] or 'auto', got {self.alpha!r}"
                raise ValueError(msg)
            scoring.check_alpha(float(self.alpha))
        if self.gate_margin < 0:
            msg = f"gate_margin must be >= 0, got {self.gate_margin!r}"
            raise ValueError(msg)
        for name in ("lexical_weight", "title_weight"):
            weight = getattr(self, name)
            is_number = isinstance(weight, (int, float)) and not isinstance(weight, bool)
            if not is_number or not 0.0 <= weight <= 1.0:
                msg = f"{name} must be a number in [0, 1], got {weight!r}"
                raise ValueError(msg)


@dataclass(frozen=True)
class Explanation:
    """What the gate did for one query, to see and tune its failures.

    ``parents`` are the opened parents (metadata ``parent_score`` and ``gate_rank``);
    ``considered`` every child scored inside them; ``documents`` what the retriever returned.
    When the evidence is in none of ``parents``, the gate missed ("parent recall all misses,
    child recall zero"): widen ``parent_top_k`` or ``gate_margin``, or use smaller parents.
    """

    query: str
    alpha: float
    parents: list[Document] = field(default_factory=list)
    considered: list[Document] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)


def _lexical_texts(rows: ChildRows) -> list[str]:
    """What BM25 reads for a child: its heading path, then its text."""
    return [
        " ".join([*(meta.get(keys.SECTION_PATH) or []), text])
        for meta, text in zip(rows.metadatas, rows.texts, strict=True)
    ]


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


def _validate_query(query: object) -> str:
    if not isinstance(query, str):
        msg = f"query must be a string, got {type(query).__name__}"
        raise TypeError(msg)
    if not query.strip():
        msg = "query is empty; pass the question text to search for"
        raise ValueError(msg)
    return query


class GatedParentRetriever(BaseRetriever):
    """Section parents gate paragraph children; results carry fused scores.

    For a query: embed it once; score parents (the parent vector's cosine, blended with BM25
    over their heading titles by ``title_weight``) and open the ``parent_top_k`` best (the gate),
    then further ones in order while fewer than ``k`` children are available (``fill``); score
    the children inside the opened parents only (cosine, blended with BM25 over heading path and
    text by ``lexical_weight``), at most ``child_per_parent`` each; fuse
    ``score = alpha * s_parent + (1 - alpha) * s_child``; drop duplicates; return the top ``k``
    children, each with ``chunk_id``, ``parent_id``, ``score``, ``parent_score``,
    ``child_score`` and ``gate_rank`` in its metadata.

    The defaults were chosen on QASPER dev (see BENCHMARKS.md): with ``title_weight=0``,
    ``lexical_weight=0`` and ``fill=False`` this is the method as published.

    Setup:
        .. code-block:: bash

            pip install langchain-gated-parent

    Instantiate:
        .. code-block:: python

            from langchain_gated_parent import GatedParentIndex

            index = GatedParentIndex(directory="./my-index")
            retriever = index.as_retriever(k=4, alpha=0.4)

    Usage:
        .. code-block:: python

            docs = retriever.invoke("48 h RNA extraction", filter={"doc_id": "P-GAPDH-01"})
            docs[0].metadata["chunk_id"], docs[0].metadata["score"]

    Use within a chain:
        .. code-block:: python

            from langchain_core.runnables import RunnablePassthrough

            chain = {"context": retriever, "question": RunnablePassthrough()} | prompt | llm
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: GatedParentIndex
    """The index to search."""
    k: int = 8
    """How many results to return."""
    alpha: Alpha = 0.4
    """Weight of the parent's score in the fused score; ``"auto"`` picks it per question."""
    parent_top_k: int = 3
    """How many parents the gate opens."""
    child_per_parent: int = 6
    """At most this many children from one parent."""
    gate_margin: float = 0.0
    """Also open parents scoring within this margin of the last one kept (0: hard gate)."""
    fill: bool = True
    """Open further parents, best first, until the opened ones can supply ``k`` children."""
    lexical_weight: float = 0.3
    """Share of BM25 in the child score (over the gated candidates' heading path and text)."""
    title_weight: float = 0.3
    """Share of BM25 over heading titles in the parent score ("What datasets?" → "Datasets")."""
    return_parents: bool = False
    """Return the parents of the best children instead (each with its best child's score)."""
    dedupe: bool = True
    """Drop children repeating a span, a text or (see ``near_duplicate``) a vector."""
    near_duplicate: float | None = Field(default=0.95)
    """Cosine above which two children count as the same fact; ``None`` turns it off."""

    @model_validator(mode="after")
    def _check_fields(self) -> GatedParentRetriever:
        """Refuse bad settings when the retriever is made, not at its first query."""
        self._params({})
        return self

    def _params(self, overrides: dict[str, Any]) -> Params:
        allowed = set(Params.__dataclass_fields__)
        unknown = sorted(set(overrides) - allowed)
        if unknown:
            msg = (
                f"unknown argument(s) {', '.join(unknown)}; "
                f"per-call arguments are {', '.join(sorted(allowed))}"
            )
            raise TypeError(msg)
        values = {name: getattr(self, name) for name in allowed if name != "filter"}
        return Params(**{**values, **overrides})

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        params = super()._get_ls_params(**kwargs)
        params["ls_vector_store_provider"] = "Chroma"
        params["ls_embedding_provider"] = model_name_of(self.index.embeddings)
        return params

    # ------------------------------------------------------------------ the pipeline
    def _plan(
        self,
        query: str,
        params: Params,
        vector: list[float] | None = None,
        *,
        explain: bool = False,
    ) -> Generator[_Step, Any, Explanation]:
        """The whole retrieval, as a generator of I/O steps (see the module docstring).

        ``explain`` also keeps every child scored (``Explanation.considered``), which a plain
        query does not pay for.
        """
        alpha = scoring.route_alpha(query) if params.alpha == "auto" else float(params.alpha)
        explanation = Explanation(query=query, alpha=alpha)
        if vector is None:
            vector = yield _Embed(query)
        self.index.check_dimension(vector)
        wide = params.gate_margin > 0 or params.fill or params.title_weight > 0
        # Filling needs about k / child_per_parent parents; search twice that, never fewer
        # than 4 gates' worth, so the title signal can promote a parent the vectors ranked low.
        need = -(-2 * params.k // params.child_per_parent) if params.fill else 0
        n = max(4 * params.parent_top_k, need) if wide else params.parent_top_k
        hits: ParentHits = yield _SearchParents(vector, n, params.filter)
        parent_scores = scoring.blend(
            hits.scores,
            bm25(query, [str(m.get(keys.HEADINGS, "")) for m in hits.metadatas]),
            params.title_weight,
        )
        gate = scoring.select_gate(
            hits.ids, parent_scores, params.parent_top_k, margin=params.gate_margin
        )
        counts = [int(m.get(keys.CHILD_COUNT, 0)) for m in hits.metadatas]
        if params.fill:
            gate = scoring.fill_gate(
                gate,
                hits.ids,
                parent_scores,
                counts,
                need=params.k,
                child_per_parent=params.child_per_parent,
            )
        count_of = dict(zip(hits.ids, counts, strict=True))
        rows: ChildRows = yield _FetchChildren({g.parent_id: count_of[g.parent_id] for g in gate})
        if not rows.ids:
            return explanation
        child_scores = scoring.similarity(rows.vectors @ np.asarray(vector, dtype=np.float32))
        if params.lexical_weight:
            child_scores = scoring.blend(
                child_scores, bm25(query, _lexical_texts(rows)), params.lexical_weight
            )
        ranked = scoring.rank_children(
            [m[keys.PARENT_ID] for m in rows.metadatas],
            rows.ids,
            child_scores,
            gate,
            child_per_parent=params.child_per_parent,
            alpha=alpha,
        )
        fused = dict(ranked)
        order = [row for row, _ in ranked]
        if params.dedupe:
            order = scoring.dedupe(
                order,
                [(m[keys.DOC_ID], m[keys.START_INDEX], m[keys.END_INDEX]) for m in rows.metadatas],
                rows.texts,
                rows.vectors,
                near_duplicate=params.near_duplicate,
                limit=None if params.return_parents else params.k,
            )
        by_parent = {g.parent_id: g for g in gate}
        meta_of = dict(zip(hits.ids, hits.metadatas, strict=True))

        def child_doc(row: int) -> Document:
            gated = by_parent[rows.metadatas[row][keys.PARENT_ID]]
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

        explanation.parents.extend(
            Document(
                page_content="",
                id=g.parent_id,
                metadata={
                    **meta_of[g.parent_id],
                    keys.PARENT_SCORE: g.score,
                    keys.GATE_RANK: g.rank,
                },
            )
            for g in gate
        )
        if explain:
            explanation.considered.extend(child_doc(row) for row, _ in ranked)
        children = [child_doc(row) for row in order]
        if params.return_parents:
            explanation.documents.extend(_parents_of(children, rows.parents, params.k))
        else:
            explanation.documents.extend(children[: params.k])
        return explanation

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
                if isinstance(step, _Embed):
                    result = await self.index.embeddings.aembed_query(step.query)
                else:  # chromadb's local client is synchronous: keep it off the event loop
                    result = await asyncio.get_running_loop().run_in_executor(None, self._do, step)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _do(self, step: _Step) -> Any:
        if isinstance(step, _Embed):
            return self.index.embeddings.embed_query(step.query)
        if isinstance(step, _SearchParents):
            return self.index.search_parents(step.vector, step.n, step.where)
        return self.index.children_of(step.child_counts)

    def _start(self, query: object, kwargs: dict[str, Any]) -> tuple[str, Params, Any]:
        query = _validate_query(query)
        vector = kwargs.pop("query_vector", None)
        params = self._params(kwargs)
        self.index.check_filter(params.filter)
        return query, params, vector

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,  # noqa: ARG002 (callbacks: the base class)
        **kwargs: Any,
    ) -> list[Document]:
        query, params, vector = self._start(query, kwargs)
        return self._run(self._plan(query, params, vector)).documents

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,  # noqa: ARG002 (the base class's)
        **kwargs: Any,
    ) -> list[Document]:
        query, params, vector = self._start(query, kwargs)
        return (await self._arun(self._plan(query, params, vector))).documents

    def explain(self, query: str, **kwargs: Any) -> Explanation:
        """Run the retrieval and return what the gate opened and every child it scored."""
        query, params, vector = self._start(query, kwargs)
        return self._run(self._plan(query, params, vector, explain=True))

    # ------------------------------------------------------------------ per-request settings
    _BATCH_VECTORS: ClassVar[str] = "_batch_query_vectors"
    """Keyword through which ``batch`` hands each ``invoke`` the vectors of all its queries."""

    @property
    @override
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The settings one call may take from ``config["configurable"]``.

        Declared so that LangServe's config schema accepts and forwards them (a key not
        declared here is dropped by the server) and the playground shows their ranges. Every
        default is ``None``, meaning "this retriever's own field": the specs are then the same
        for every instance, so two retrievers can sit in one chain without a conflict. In a
        chain the ids are shared, so ``{"k": 3}`` applies to each retriever of this class.
        """
        positive = Annotated[int, Ge(1)] | None
        return [
            ConfigurableFieldSpec(
                id="k", annotation=positive, name="k", description="How many results to return."
            ),
            ConfigurableFieldSpec(
                id="alpha",
                annotation=Annotated[float, Interval(ge=0, le=1)] | Literal["auto"] | None,
                name="alpha",
                description="Weight of the parent's score in the fused score, or 'auto'.",
            ),
            ConfigurableFieldSpec(
                id="parent_top_k",
                annotation=positive,
                name="parent_top_k",
                description="How many parents the gate opens.",
            ),
            ConfigurableFieldSpec(
                id="child_per_parent",
                annotation=positive,
                name="child_per_parent",
                description="At most this many children from one parent.",
            ),
            ConfigurableFieldSpec(
                id="return_parents",
                annotation=bool | None,
                name="return_parents",
                description="Return the parents of the best children instead.",
            ),
            ConfigurableFieldSpec(
                id="filter",
                annotation=dict[str, Any] | None,
                name="filter",
                description='Chroma metadata filter, e.g. {"doc_id": "P-GAPDH-01"}.',
            ),
        ]

    def _call_kwargs(
        self, query: object, config: RunnableConfig | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """Per-call arguments: the declared ``configurable`` settings, then explicit kwargs.

        ``None`` in ``configurable`` keeps the field (LangServe sends every declared key, unset
        ones as ``None``). A vector precomputed by ``batch`` becomes ``query_vector``.
        """
        configurable = (config or {}).get("configurable") or {}
        ids = {spec.id for spec in self.config_specs}
        merged = {k: v for k, v in configurable.items() if k in ids and v is not None}
        merged.update(kwargs)
        vectors = merged.pop(self._BATCH_VECTORS, None)
        if vectors and isinstance(query, str) and query in vectors:
            merged.setdefault("query_vector", vectors[query])
        return merged

    def _to_embed(self, inputs: Sequence[object], kwargs: dict[str, Any]) -> list[str]:
        """The distinct queries of a batch worth embedding (invalid ones fail in ``invoke``)."""
        if "query_vector" in kwargs:
            return []
        return list(dict.fromkeys(q for q in inputs if isinstance(q, str) and q.strip()))

    @override
    def invoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Retrieve for one query; ``config["configurable"]`` may change this call's settings.

        So a chain or a LangServe client tunes ``alpha``, ``k``, ``parent_top_k``,
        ``child_per_parent``, ``return_parents`` or ``filter`` per request without a new
        retriever (see :attr:`config_specs`); explicit keyword arguments win over ``config``.
        """
        return super().invoke(input, config, **self._call_kwargs(input, config, kwargs))

    @override
    async def ainvoke(
        self, input: str, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async :meth:`invoke`, with the same per-request settings."""
        return await super().ainvoke(input, config, **self._call_kwargs(input, config, kwargs))

    @override
    def batch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[list[Document]]:
        """Retrieve for many queries, embedding all of them in one ``embed_documents`` call.

        One batched model call is much cheaper than one call per query. It assumes queries
        and documents share one encoder (``embed_query(q) == embed_documents([q])[0]``), as
        :class:`~langchain_gated_parent.embeddings.MiniLMEmbeddings` does.
        """
        queries = self._to_embed(inputs, kwargs)
        if queries:
            vectors = self.index.embeddings.embed_documents(queries)
            kwargs[self._BATCH_VECTORS] = dict(zip(queries, vectors, strict=True))
        return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)

    @override
    async def abatch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[list[Document]]:
        """Async :meth:`batch`: one ``aembed_documents`` call for all the queries."""
        queries = self._to_embed(inputs, kwargs)
        if queries:
            vectors = await self.index.embeddings.aembed_documents(queries)
            kwargs[self._BATCH_VECTORS] = dict(zip(queries, vectors, strict=True))
        return await super().abatch(inputs, config, return_exceptions=return_exceptions, **kwargs)
