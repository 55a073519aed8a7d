"""Where a gated query's time goes, across the collection: its reads timed one by one.

Builds the gated index over the papers (embeddings from the benchmark's disk cache), asks every
question once through ``invoke`` (the query embedded live) with the index's reads timed, and
prints each read's mean and median beside the whole query's and the embedding's alone. Then,
on the same questions asked again with their vectors given, ``invoke`` against the retriever's
own ``_get_relevant_documents``, in alternating order (what LangChain's run tracking costs),
with the reads timed apart from the first pass's: a read's first-pass mean less its
asked-again mean is what a process pays for reading sections and terms for the first time.
Last, each question asked for the first time, with its vector, of two pairs of fresh views of
the index in alternating order: one reads the children's terms from their section records,
the other counts them from the children's texts, as for records a previous release wrote;
one opens a section with the parent its record holds, the other reads the parent from the
docstore, as for records of format 4. The first pass also counts Python's garbage collections
(``gc.callbacks``) and their time, by generation: the objects a query allocates set them off,
and a collection's time lands on whichever step allocated last.

Usage:
    .. code-block:: bash

        python -m benchmarks.query_steps --data ../shared/data/qasper/dev.jsonl
        python -m benchmarks.query_steps --data ../shared/data/qasper/train.jsonl \\
            --data ../shared/data/qasper/dev.jsonl
"""

from __future__ import annotations

import gc
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from benchmarks.corpus_index import built, corpus_parser

if TYPE_CHECKING:
    from collections.abc import Iterator

READS = ("check_filter", "search_children", "search_sparse", "sections", "children_of")
"""The index's methods a query across the collection calls (its ``SearchStore`` reads)."""
K = 60


def _timed(index: Any, timings: dict[str, list[float]]) -> None:
    """Wrap the index's reads so each call's time lands in ``timings``."""
    for name in READS:
        read = getattr(index, name)

        def timed(*args: Any, _read: Any = read, _name: str = name, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _read(*args, **kwargs)
            finally:
                timings[_name].append(1000 * (time.perf_counter() - started))

        setattr(index, name, timed)


@contextmanager
def _collections(spent: dict[int, list[float]]) -> Iterator[None]:
    """Each garbage collection's time (ms) meanwhile, by generation, lands in ``spent``."""
    started = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            spent[info["generation"]].append(1000 * (time.perf_counter() - started[0]))

    gc.callbacks.append(timed)
    try:
        yield
    finally:
        gc.callbacks.remove(timed)


def _without_terms(index: Any) -> Any:
    """``index``, reading its section records without their children's terms."""
    store = index.section_store
    get = store.get

    def get_without_terms(parent_ids: Any, **options: Any) -> dict[str, Any]:
        found = get(parent_ids, **options)
        return {p: replace(section, child_terms=None) for p, section in found.items()}

    store.get = get_without_terms
    return index


def _parents_from_docstore(index: Any) -> Any:
    """``index``, reading its section records without their parents' copies (format 4's)."""
    store = index.section_store
    get = store.get

    def get_without_parents(parent_ids: Any, **options: Any) -> Any:
        return get(parent_ids, **{**options, "parent": False})

    store.get = get_without_parents
    return index


def _alternating(
    calls: dict[str, Any], questions: list[str], vectors: list[Any], timings: dict[str, list[float]]
) -> dict[str, list[list[tuple[str, float]]]]:
    """Each question of each call, which goes first alternating (a query repeated at once
    finds the CPU caches warm); returns each call's answers, ``(id, score)`` pairs."""
    answers: dict[str, list[list[tuple[str, float]]]] = {name: [] for name in calls}
    for name in calls:
        timings.setdefault(name, [])
    for n, (question, vector) in enumerate(zip(questions, vectors, strict=True)):
        for name in list(calls)[:: 1 if n % 2 else -1]:
            started = time.perf_counter()
            found = calls[name](question, query_vector=vector)
            timings[name].append(1000 * (time.perf_counter() - started))
            answers[name].append([(d.id, d.metadata["score"]) for d in found])
    return answers


def _line(name: str, values: list[float]) -> str:
    p50, mean = statistics.median(values), statistics.mean(values)
    return f"{name:26s} p50 {p50:6.2f} ms  mean {mean:6.2f} ms"


def _reads_line(name: str, first: list[float], again: list[float]) -> str:
    means = statistics.mean(first), statistics.mean(again)
    return (
        f"{name:26s} mean {means[0]:6.3f} ms first, {means[1]:6.3f} asked again "
        f"(p50 {statistics.median(first):6.3f}, {statistics.median(again):6.3f})"
    )


def main() -> None:
    args = corpus_parser(__doc__.splitlines()[0]).parse_args()
    with built(args) as corpus:
        papers, questions, embeddings = corpus.papers, corpus.questions, corpus.embeddings
        index = corpus.open()
        retriever = index.as_retriever(k=K)
        timings: dict[str, list[float]] = defaultdict(list)
        reads: dict[str, list[float]] = defaultdict(list)
        _timed(index, reads)
        collected: dict[int, list[float]] = defaultdict(list)
        with _collections(collected):
            for question in questions:
                started = time.perf_counter()
                retriever.invoke(question)
                timings["query (invoke)"].append(1000 * (time.perf_counter() - started))
        for question in questions:
            started = time.perf_counter()
            embeddings.embed_query(question)
            timings["embedding alone"].append(1000 * (time.perf_counter() - started))
        vectors = [embeddings.embed_query(q) for q in questions]
        calls = {
            "warm, vector given: invoke": retriever.invoke,
            "... _get_relevant_documents": lambda q, **kw: retriever._get_relevant_documents(  # noqa: SLF001
                q, run_manager=None, **kw
            ),
        }
        first = dict(reads)  # the first pass's; the lists asked again start empty
        reads.clear()
        _alternating(calls, questions, vectors, timings)
        again = dict(reads)
        fresh = {
            "first, terms read: invoke": corpus.open().as_retriever(k=K).invoke,
            "... terms counted": _without_terms(corpus.open()).as_retriever(k=K).invoke,
        }
        read, counted = _alternating(fresh, questions, vectors, timings).values()
        opened = {
            "first, parents in records": corpus.open().as_retriever(k=K).invoke,
            "... parents from docstore": _parents_from_docstore(corpus.open())
            .as_retriever(k=K)
            .invoke,
        }
        in_records, in_docstore = _alternating(opened, questions, vectors, timings).values()
    print(f"{len(papers)} papers, {len(questions)} questions asked once each, k={K}")
    print("the index's reads, per call: the first pass, then asked again (twice per question)")
    for name in [r for r in READS if r in first and r in again]:  # a small index searches none
        print(_reads_line(name, first[name], again[name]))
    for name, values in timings.items():
        print(_line(name, values))
    gens = ", ".join(
        f"gen{g} {len(ms)} ({sum(ms):.1f} ms, longest {max(ms):.1f})"
        for g, ms in sorted(collected.items())
    )
    total = sum(sum(ms) for ms in collected.values())
    print(
        f"garbage collections in the first pass: {gens or 'none'}; "
        f"{total / len(questions):.3f} ms a query on the mean"
    )
    same = sum(a == b for a, b in zip(read, counted, strict=True))
    print(f"terms read or counted: the same ids and scores for {same} of {len(questions)}")
    same = sum(a == b for a, b in zip(in_records, in_docstore, strict=True))
    print(f"parents in records or read: the same ids and scores for {same} of {len(questions)}")


if __name__ == "__main__":
    main()
