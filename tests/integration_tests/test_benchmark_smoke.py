"""Smoke test of ``python -m benchmarks.qasper`` on three QASPER papers, both settings.

Embeds a few hundred texts on a cold cache (about a minute on a quiet 2-core machine); set
``QASPER_BENCH_CACHE`` to a cache directory to reuse vectors across runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("QASPER_DEV", "/work/shared/data/qasper/dev.jsonl"))
N_PAPERS = 3

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DATA.exists(), reason=f"QASPER data not found at {DATA}"),
]

METRIC_KEYS = {"recall@8", "hit@8", "mrr@10", "ndcg@10", "evr@512", "evr@2048"}
COST_KEYS = {"p50_ms", "p95_ms", "build_s", "vectors", "disk_bytes", "peak_rss_mb"}
TOP_KEYS = {
    "retrievers",
    "questions",
    "papers",
    "setting",
    "data",
    "embeddings",
    "machine",
    "versions",
    "date",
}


def _retrievers() -> list[str]:
    names = ["flat-para", "bm25-para"]
    if importlib.util.find_spec("langchain_gated_parent.index") is not None:
        names.append("gated")
    return names


def _questions_in_first_papers(n: int) -> int:
    count = 0
    with DATA.open() as fh:
        for _, line in zip(range(n), fh, strict=False):
            paper = json.loads(line)
            count += sum(1 for q in paper["questions"] if q["evidence"])
    return count


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("QASPER_BENCH_CACHE")
    return Path(env) if env else tmp_path_factory.mktemp("bench-cache")


@pytest.mark.parametrize("setting", ["paper", "corpus"])
def test_cli_writes_results(setting: str, cache_dir: Path, tmp_path: Path) -> None:
    retrievers = _retrievers()
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.qasper",
        "--data",
        str(DATA),
        "--setting",
        setting,
        "--out",
        str(out),
        "--retrievers",
        ",".join(retrievers),
        "--limit-papers",
        str(N_PAPERS),
        "--cache-dir",
        str(cache_dir),
    ]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "flat-para" in proc.stdout  # the table

    report = json.loads((out / "results.json").read_text())
    assert set(report) >= TOP_KEYS
    assert report["setting"] == setting
    assert report["papers"] == N_PAPERS
    n_questions = _questions_in_first_papers(N_PAPERS)
    assert report["questions"] == n_questions
    assert report["embeddings"]
    assert set(report["retrievers"]) == set(retrievers)
    for name, row in report["retrievers"].items():
        assert "error" not in row, (name, row)
        assert set(row) >= METRIC_KEYS | COST_KEYS, name
        for key in METRIC_KEYS:
            assert row[key] is not None, (name, key)
            assert 0.0 <= row[key] <= 1.0, (name, key)
        assert row["p50_ms"] > 0
        assert row["p95_ms"] >= row["p50_ms"]
        assert row["build_s"] > 0
        assert row["disk_bytes"] > 0
        assert row["peak_rss_mb"] > 0
    assert report["retrievers"]["flat-para"]["vectors"] > 0
    if "gated" in report["retrievers"]:
        assert 0.0 <= report["retrievers"]["gated"]["gate_recall"] <= 1.0
    else:
        assert all("gate_recall" not in row for row in report["retrievers"].values())

    rows = [json.loads(line) for line in (out / "per_question.jsonl").read_text().splitlines()]
    assert len(rows) == n_questions * len(retrievers)
    assert {"qid", "retriever", "ndcg", "evr@2048", "gate_recall"} <= set(rows[0])


def test_a_view_of_a_gated_build_answers_as_that_build(cache_dir: Path, tmp_path: Path) -> None:
    """``benchmarks.latency`` times gated variants with one build settings through views."""
    from benchmarks.embedding_cache import CachedEmbeddings
    from benchmarks.peers import PEERS, GatedPeer
    from benchmarks.qasper import load_corpus
    from langchain_gated_parent.embeddings import MiniLMEmbeddings

    papers = load_corpus([str(DATA)], N_PAPERS)
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), cache_dir / "embeddings.sqlite")
    built, view, alpha = (PEERS[name]() for name in ("gated", "gated", "gated-alpha"))
    assert isinstance(built, GatedPeer)
    assert isinstance(view, GatedPeer)
    assert isinstance(alpha, GatedPeer)
    built.setting = view.setting = alpha.setting = "corpus"
    built.build(papers, tmp_path, embeddings)
    view.view(built)
    alpha.view(built)
    assert view._index is not built._index  # its own read caches
    assert view._index.directory == built._index.directory
    questions = [q.question for p in papers for q in p.questions][:5]
    for question in questions:
        assert view.search(question, None) == built.search(question, None)
    assert any(
        alpha._retriever.invoke(q)[0].metadata != built._retriever.invoke(q)[0].metadata
        for q in questions
    )  # a view queries with its own variant's settings
    for peer in (alpha, view, built):
        peer.close()


@pytest.mark.parametrize("setting", ["paper", "corpus"])
def test_flat_para_through_langchain_finds_what_flat_para_finds(
    setting: str, cache_dir: Path, tmp_path: Path
) -> None:
    """``flat-para-retriever`` times LangChain's retriever over flat-para's collection."""
    from benchmarks.embedding_cache import CachedEmbeddings
    from benchmarks.peers import PEERS, FlatParagraphs
    from benchmarks.qasper import load_corpus
    from langchain_gated_parent.embeddings import MiniLMEmbeddings

    papers = load_corpus([str(DATA)], N_PAPERS)
    embeddings = CachedEmbeddings(MiniLMEmbeddings(), cache_dir / "embeddings.sqlite")
    peer = PEERS["flat-para-retriever"]()
    assert isinstance(peer, FlatParagraphs)
    peer.setting = setting
    peer.build(papers, tmp_path, embeddings)
    asked = [(q.question, p.paper_id) for p in papers for q in p.questions][:5]
    for question, paper_id in asked:
        scope = paper_id if setting == "paper" else None
        found = peer.search(question, scope)
        assert found.texts
        assert found == FlatParagraphs.search(peer, question, scope)  # the raw client's answer
        assert setting == "corpus" or {span[0] for span in found.spans} == {paper_id}
    peer.close()


def _printed(module: str, cache_dir: Path, *args: str) -> list[str]:
    """What ``python -m benchmarks.<module>`` prints over the first papers (it must exit 0)."""
    cmd = [
        *(sys.executable, "-m", f"benchmarks.{module}", "--data", str(DATA)),
        *("--limit-papers", str(N_PAPERS), "--cache-dir", str(cache_dir), *args),
    ]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout.splitlines()


def test_latency_prints_each_round_apart(cache_dir: Path) -> None:
    """``benchmarks.latency --rounds 2``: each round's medians apart, flat-para their base."""
    lines = _printed(
        "latency", cache_dir, "--setting", "corpus", "--retrievers", "gated", "--rounds", "2"
    )
    assert lines[0].startswith(f"corpus setting, {N_PAPERS} papers")
    firsts = [line.split()[0] for line in lines[1:]]
    assert firsts == ["round", "flat-para", "gated", "round", "flat-para", "gated"]
    assert [line for line in lines if line.startswith("round")] == ["round 1", "round 2"]
    assert all(line.endswith("1.00x") for line in lines if line.startswith("flat-para"))


def test_read_cache_prints_memory_kept_per_section(cache_dir: Path) -> None:
    """``benchmarks.read_cache``: what one pass keeps, and what a kept entry costs."""
    lines = _printed("read_cache", cache_dir, "--cached-sections", "64")
    assert lines[0].startswith(f"{N_PAPERS} papers, ")
    assert lines[1].startswith("cached_sections 64: ")
    assert lines[1].endswith(" MB kept after one pass over the questions")
    found = re.fullmatch(
        r"kept per section \(\d+ measured\): opened ([\d.]+) KB, header ([\d.]+) KB; "
        r"([\d.]+) children a section, so ([\d.]+) KB a child",
        lines[2],
    )
    assert found is not None, lines[2]
    opened, header, children, per_child = (float(group) for group in found.groups())
    assert opened > header > 0  # a kept section holds its children, a header only its vector
    assert children > 0
    assert per_child == pytest.approx(opened / children, abs=0.1)


def test_query_steps_times_each_read_on_the_first_pass_and_asked_again(cache_dir: Path) -> None:
    """``benchmarks.query_steps``: each read's first-pass and asked-again times, apart."""
    lines = _printed("query_steps", cache_dir)
    assert lines[0].startswith(f"{N_PAPERS} papers, ")
    assert lines[1].startswith("the index's reads, per call: the first pass, then asked again")
    end = next(n for n, line in enumerate(lines) if line.startswith("query "))
    reads = lines[2:end]
    timed = {line.split()[0]: line for line in reads}
    assert {"check_filter", "children_of"} <= set(timed)  # a small index is scored exactly
    for line in timed.values():
        assert re.fullmatch(
            r"\w+ +mean +[\d.]+ ms first, +[\d.]+ asked again \(p50 +[\d.]+, +[\d.]+\)", line
        ), line
    collections = next(line for line in lines if line.startswith("garbage collections"))
    assert re.fullmatch(
        r"garbage collections in the first pass: (none|gen0 \d+ .*); "
        r"[\d.]+ ms a query on the mean",
        collections,
    ), collections


def test_build_time_prints_each_build_and_their_ratio(cache_dir: Path) -> None:
    """``benchmarks.build_time``: both builds each round, each in a process of its own."""
    lines = _printed("build_time", cache_dir, "--rounds", "2")
    assert lines[0] == f"{N_PAPERS} papers, 2 rounds, alternating, embedding cache warm"
    ratios = {}
    for line, name in zip(lines[1:3], ("flat-para", "gated"), strict=True):
        found = re.fullmatch(
            rf"{name} +build +[\d.]+ s  / flat-para ([\d.]+)x  \(rounds: [\d.]+ [\d.]+\)", line
        )
        assert found is not None, line
        ratios[name] = found.group(1)
    assert ratios["flat-para"] == "1.00"
    assert re.fullmatch(
        r"gated / flat-para, round by round: median [\d.]+x \([\d.]+ [\d.]+\)", lines[3]
    )


def test_build_steps_prints_gated_steps_inside_its_build(cache_dir: Path) -> None:
    """``benchmarks.build_steps``: each step's total, none longer than the step that holds it."""
    lines = _printed("build_steps", cache_dir)
    assert (
        lines[0] == f"{N_PAPERS} papers, one process, embedding cache warm, one paper built first"
    )
    seconds = {
        line.rsplit(None, 2)[0].strip(): float(line.rsplit(None, 2)[1]) for line in lines[1:]
    }
    assert {"flat-para build", "gated build", "write (every store below)"} <= set(seconds)
    steps = [name for name in seconds if not name.endswith(" build")]
    assert len(steps) == 11
    # Printed to 0.01 s, so a step of a three-paper build may show 0.00; the write never does.
    assert seconds["write (every store below)"] > 0
    assert all(0 <= seconds[name] <= seconds["gated build"] for name in steps)
    stores = [
        name for name in steps if name.startswith(("section records, stored", "sparse", "Chroma"))
    ]
    assert all(seconds[name] <= seconds["write (every store below)"] for name in stores)


def test_same_answers_compares_each_process_with_the_first(cache_dir: Path) -> None:
    """``benchmarks.same_answers``: every process after the first compared, for both indexes."""
    lines = _printed("same_answers", cache_dir, "--processes", "3")
    found = re.fullmatch(
        rf"{N_PAPERS} papers, (\d+) questions, top 10, 3 processes, each opening the index anew",
        lines[0],
    )
    assert found is not None, lines[0]
    questions = found.group(1)
    for name, compared, opened in zip(
        ("flat-para", "gated"), lines[1::2], lines[2::2], strict=True
    ):
        assert re.fullmatch(
            rf"{name} +process 2: \d+ differ \(\d+ as sets\); "
            rf"process 3: \d+ differ \(\d+ as sets\), of {questions}",
            compared,
        ), compared
        assert re.fullmatch(rf"{name} +opening to first answer: median \d+ ms", opened), opened


def test_small_writes_times_each_write_and_replace_of_one_paper(cache_dir: Path) -> None:
    """``benchmarks.small_writes``: the last papers added one a write, then replaced, timed."""
    lines = _printed("small_writes", cache_dir, "--writes", "2")
    assert re.fullmatch(r"\d+ papers built, then 2 added one a write, then replaced", lines[0])
    for line, kind in zip(lines[1::2], ("write", "replace"), strict=True):
        assert re.fullmatch(rf"each {kind}: [\d.]+ [\d.]+ s", line), line
    for line, kind in zip(lines[2::2], ("write", "replace"), strict=True):
        assert re.fullmatch(rf"median {kind} [\d.]+ s", line), line


def test_edits_embed_only_the_edited_paragraph_of_a_replaced_paper(cache_dir: Path) -> None:
    """``benchmarks.edits``: a replace with one paragraph edited embeds one text; as new, all."""
    lines = _printed("edits", cache_dir, "--edits", "2")
    assert re.fullmatch(
        r"\d+ papers built; 2 written again with one paragraph edited, one a write, "
        r"embedding live",
        lines[0],
    )
    for line, kind in zip(lines[1:5:2], ("replace", "as new"), strict=True):
        assert re.fullmatch(rf"each {kind}: [\d.]+ s/\d+ [\d.]+ s/\d+ \(texts\)", line), line
    replaced = re.fullmatch(r"median replace [\d.]+ s, (\d+) texts embedded", lines[2])
    as_new = re.fullmatch(r"median as new [\d.]+ s, (\d+) texts embedded", lines[4])
    assert replaced is not None, lines[2]
    assert as_new is not None, lines[4]
    assert int(replaced.group(1)) == 1  # the edited paragraph; its section is its mean
    assert int(as_new.group(1)) > 1
    assert re.fullmatch(r"replace / as new, paper by paper: median [\d.]+x", lines[5]), lines[5]


def test_reads_during_writes_counts_the_readers_reopens(cache_dir: Path) -> None:
    """``benchmarks.reads_during_writes``: a writer process's writes reopen the reader's view."""
    lines = _printed("reads_during_writes", cache_dir, "--writes", "2", "--idle", "0.5")
    assert re.fullmatch(r"\d+ papers built; a writer process adds 2, one a write", lines[0])
    for line, phase in zip(lines[1:4], ("before", "during", "after"), strict=True):
        assert line.startswith(phase), line
    assert "queries  p50" in lines[1]
    assert "queries  p50" in lines[3]
    reopens = re.fullmatch(
        r"reopens of the reader's Chroma view once the writer started: (\d+)", lines[4]
    )
    assert reopens is not None, lines[4]
    assert int(reopens.group(1)) >= 1  # at least for the last write, in the "after" phase
