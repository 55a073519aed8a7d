"""QASPER section -> paragraph retrieval benchmark.

Usage:
    .. code-block:: bash

        python -m benchmarks.qasper --data /work/shared/data/qasper/dev.jsonl \\
            --setting paper --out bench-out/paper [--retrievers flat-para,gated] \\
            [--limit-papers 3] [--cache-dir .bench-cache]

        python -m benchmarks.qasper --data ../shared/data/qasper-pdf/truth.jsonl \\
            --pdf-dir ../shared/data/qasper-pdf/pdf --setting paper --out bench-out/pdf-paper

With ``--pdf-dir`` the retrievers read ``<pdf-dir>/<paper_id>.pdf`` instead of the truth text
(:mod:`benchmarks.pdf_peers`), every retriever's returned texts are mapped to the truth
paragraphs by normalised text (:class:`benchmarks.metrics.TextLocator`,
:func:`benchmarks.metrics.evidence_recall_text`), and ``gated-markdown`` (``gated`` on the truth
text) is also scored by spans (the ``_span`` keys), which validates the text mapping. PDF
parsing speed (pages per CPU second, one process) is reported.

Each retriever runs in its own subprocess (``--worker``), so its peak RSS is its own: first a
*warm* pass that builds the index once to fill the on-disk embedding cache (skipped when this
retriever was already warmed on the same data and model), then a *measure* pass that builds
again with the cache warm (``build_s`` is therefore a warm-cache build time: vectors are read
from the cache, not computed), runs a few warm-up queries, then times every question with its
query embedded live. The parent process collects each worker's JSON and writes
``OUT/results.json`` and ``OUT/per_question.jsonl``, and prints a table with ratios to
``flat-para``.

The metric specification is ``/work/shared/data/qasper/README.md``; see
:mod:`benchmarks.metrics`.
"""

# Heavy dependencies are imported where used, so each worker process loads (and is charged
# peak memory for) only the retriever it runs.
# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import gc
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import metrics
from benchmarks.qasper_data import Paper, load_papers

logger = logging.getLogger("benchmarks.qasper")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE_DIR = REPO_ROOT / ".bench-cache"
BUDGETS = (512, 2048)
WARMUP_QUERIES = 5
RANKING_KEYS = ("recall@8", "hit@8", "mrr@10", "ndcg@10")
VERSIONED_PACKAGES = (
    "langchain-gated-parent",
    "langchain-core",
    "langchain-classic",
    "langchain-chroma",
    "langchain-text-splitters",
    "chromadb",
    "llama-index-core",
    "rank-bm25",
    "tiktoken",
    "onnxruntime",
    "tokenizers",
    "numpy",
)


# --------------------------------------------------------------------------- worker


def _du_bytes(path: Path) -> int:
    """Return the disk usage of a directory tree in bytes (allocated blocks, like ``du``)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = (Path(root) / name).lstat()
            except FileNotFoundError:
                continue
            total += st.st_blocks * 512
    return total


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _score_question(  # noqa: PLR0917 (one question's inputs)
    paper: Paper,
    evidence: frozenset[tuple[str, int]],
    result: Any,
    locator: metrics.ParagraphLocator,
    encoding: metrics.TokenEncoding,
    text_locator: metrics.TextLocator | None = None,
) -> dict[str, float | None]:
    """Ranking metrics and EvR; with ``text_locator`` (``--pdf-dir``), by normalised text.

    By text, span-based figures are kept beside (``<key>_span``) for results that have spans.
    """
    row: dict[str, float | None] = dict.fromkeys(RANKING_KEYS)
    evidence_texts = [paper.paragraph(key).text for key in sorted(evidence)]
    if text_locator is None:
        if result.spans is not None:
            row.update(metrics.ranking_metrics(locator.ranked_paragraphs(result.spans), evidence))
        for budget in BUDGETS:
            row[f"evr@{budget}"] = metrics.evidence_recall(
                result.texts, evidence_texts, budget, encoding
            )
        return row
    papers = result.papers()
    if papers is not None:
        ranked = text_locator.ranked_paragraphs(zip(papers, result.texts, strict=True))
        row.update(metrics.ranking_metrics(ranked, evidence))
    for budget in BUDGETS:
        row[f"evr@{budget}"] = metrics.evidence_recall_text(
            result.texts, evidence_texts, budget, encoding
        )
    if result.spans is not None:
        spans = metrics.ranking_metrics(locator.ranked_paragraphs(result.spans), evidence)
        row.update({f"{key}_span": value for key, value in spans.items()})
        for budget in BUDGETS:
            row[f"evr@{budget}_span"] = metrics.evidence_recall(
                result.texts, evidence_texts, budget, encoding
            )
    return row


def run_worker(args: argparse.Namespace) -> dict[str, Any]:
    """Build one retriever and (in the measure phase) score every question; return JSON data."""
    from benchmarks.embedding_cache import CachedEmbeddings
    from benchmarks.peers import make_peer, quiet_third_party

    quiet_third_party()
    from langchain_gated_parent.embeddings import MiniLMEmbeddings
    from langchain_gated_parent.tokens import get_encoding

    papers = load_corpus(args.data, args.limit_papers)
    embeddings = CachedEmbeddings(
        MiniLMEmbeddings(), Path(args.cache_dir) / "embeddings.sqlite", batch_size=512
    )
    if args.pdf_dir is not None:
        from benchmarks.pdf_peers import make_pdf_peer

        peer = make_pdf_peer(args.worker, Path(args.pdf_dir))
    else:
        peer = make_peer(args.worker)
    peer.setting = args.setting
    workdir = Path(tempfile.mkdtemp(prefix=f"qasper-{args.worker}-"))
    try:
        t0 = time.perf_counter()
        vectors = peer.build(papers, workdir, embeddings)
        build_s = time.perf_counter() - t0
        out: dict[str, Any] = {
            "name": args.worker,
            "phase": args.phase,
            "build_s": build_s,
            "vectors": vectors,
            "cache_misses": embeddings.misses,
            "cache_hits": embeddings.hits,
            "pdf_pages": getattr(peer, "pages", None),
            "pdf_parse_s": getattr(peer, "parse_s", None),
        }
        if args.phase == "warm":
            peer.close()
            return out

        encoding = get_encoding("cl100k_base")
        locator = metrics.ParagraphLocator(
            {p.paper_id: [(q.key, q.start, q.end) for q in p.paragraphs] for p in papers}
        )
        text_locator = (
            metrics.TextLocator(
                {p.paper_id: [(q.key, q.text) for q in p.paragraphs] for p in papers}
            )
            if args.pdf_dir is not None
            else None
        )
        by_id = {p.paper_id: p for p in papers}
        questions = [q for p in papers for q in p.questions]
        paper_setting = args.setting == "paper"

        def target(q: Any) -> str | None:
            return q.paper_id if paper_setting else None

        for q in questions[:WARMUP_QUERIES]:
            peer.search(q.question, target(q))

        latencies: list[float] = []
        rows: list[dict[str, Any]] = []
        for q in questions:
            t = time.perf_counter()
            result = peer.search(q.question, target(q))
            latencies.append((time.perf_counter() - t) * 1000.0)
            paper = by_id[q.paper_id]
            row: dict[str, Any] = {
                "qid": q.qid,
                "paper_id": q.paper_id,
                "n_evidence": len(q.evidence),
            }
            row.update(_score_question(paper, q.evidence, result, locator, encoding, text_locator))
            row["results"] = len(result.texts)
            gate_spans = peer.gate(q.question, target(q))
            if gate_spans is not None:
                evidence_spans = [
                    (q.paper_id, paper.paragraph(k).start, paper.paragraph(k).end)
                    for k in sorted(q.evidence)
                ]
                row["gate_recall"] = metrics.gate_recall(evidence_spans, gate_spans)
            rows.append(row)
        peer.close()
        del peer
        gc.collect()
        out.update(
            {
                "ranking": any(r["recall@8"] is not None for r in rows),
                "gate": any("gate_recall" in r for r in rows),
                "latencies_ms": latencies,
                "per_question": rows,
                "disk_bytes": _du_bytes(workdir),
                "peak_rss_mb": _peak_rss_mb(),
                "model": embeddings.model_name,
            }
        )
        return out
    finally:
        embeddings.close()
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- orchestration


def load_corpus(paths: list[str], limit: int | None) -> list[Paper]:
    """The papers of every file, the questions of the last one only.

    ``--data train.jsonl --data dev.jsonl`` indexes train and dev together (a bigger corpus)
    and asks dev's questions; ``limit`` keeps the first ``limit`` papers of each file.
    """
    papers: list[Paper] = []
    seen: set[str] = set()
    for n, path in enumerate(paths, start=1):
        for paper in load_papers(Path(path), limit):
            if paper.paper_id in seen:
                continue
            seen.add(paper.paper_id)
            papers.append(paper if n == len(paths) else dataclasses.replace(paper, questions=()))
    return papers


def _data_fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _spawn_worker(args: argparse.Namespace, name: str, phase: str, out_file: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.qasper",
        "--worker",
        name,
        "--phase",
        phase,
        *(arg for path in args.data for arg in ("--data", str(path))),
        "--setting",
        args.setting,
        "--cache-dir",
        str(args.cache_dir),
        "--worker-out",
        str(out_file),
    ]
    if args.pdf_dir is not None:
        cmd += ["--pdf-dir", str(args.pdf_dir)]
    if args.limit_papers is not None:
        cmd += ["--limit-papers", str(args.limit_papers)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH", "")])]
    )
    subprocess.run(cmd, check=True, cwd=REPO_ROOT, env=env)


def _warm_markers(cache_dir: Path) -> tuple[Path, set[str]]:
    path = cache_dir / "warmed.json"
    try:
        return path, set(json.loads(path.read_text()))
    except (FileNotFoundError, ValueError):
        return path, set()


def _gated_available() -> bool:
    try:
        importlib.import_module("langchain_gated_parent.index")
    except ImportError:
        return False
    return True


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        found[name] = _version(name)
    return found


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        import psutil

        mem = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        pass
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores{mem}"


def _summarize(worker: dict[str, Any]) -> dict[str, Any]:
    rows = worker["per_question"]
    summary: dict[str, Any] = {}
    for key in (*RANKING_KEYS, *(f"evr@{b}" for b in BUDGETS)):
        summary[key] = metrics.mean(r.get(key) for r in rows)
        if any(f"{key}_span" in r for r in rows):
            summary[f"{key}_span"] = metrics.mean(r.get(f"{key}_span") for r in rows)
    if worker.get("pdf_parse_s"):
        summary["pdf_pages"] = worker["pdf_pages"]
        summary["pdf_parse_s"] = worker["pdf_parse_s"]
        summary["pdf_pages_per_s"] = worker["pdf_pages"] / worker["pdf_parse_s"]
    if worker["gate"]:
        summary["gate_recall"] = metrics.mean(r.get("gate_recall") for r in rows)
    lat = worker["latencies_ms"]
    summary["p50_ms"] = metrics.percentile(lat, 50) if lat else None
    summary["p95_ms"] = metrics.percentile(lat, 95) if lat else None
    summary["build_s"] = worker["build_s"]
    summary["vectors"] = worker["vectors"]
    summary["disk_bytes"] = worker["disk_bytes"]
    summary["peak_rss_mb"] = worker["peak_rss_mb"]
    summary["mean_results"] = metrics.mean(r["results"] for r in rows)
    summary["cache_misses_in_build"] = worker["cache_misses"]
    return summary


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return ""
    return f" ({value / base:.2f}x)"


def format_table(results: dict[str, dict[str, Any]]) -> str:
    """Return a plain-text table of the results with cost ratios to ``flat-para``."""
    base = results.get("flat-para", {})
    header = (
        f"{'retriever':<24}{'R@8':>7}{'Hit@8':>7}{'MRR@10':>8}{'nDCG@10':>8}{'EvR@512':>8}"
        f"{'EvR@2k':>8}{'gate':>7}  {'p50 ms':<17}{'p95 ms':<17}{'build s':<17}"
        f"{'vectors':<18}{'disk MB':<17}{'RSS MB':<16}"
    )
    lines = [header, "-" * len(header)]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"{name:<24}ERROR: {r['error']}")
            continue
        disk_mb = r["disk_bytes"] / 2**20
        base_disk = base.get("disk_bytes", 0) / 2**20 if base else None
        cells = [
            f"{name:<24}",
            f"{_fmt(r['recall@8']):>7}{_fmt(r['hit@8']):>7}{_fmt(r['mrr@10']):>8}",
            f"{_fmt(r['ndcg@10']):>8}{_fmt(r['evr@512']):>8}{_fmt(r['evr@2048']):>8}",
            f"{_fmt(r.get('gate_recall')):>7}  ",
            f"{_fmt(r['p50_ms'], 1) + _ratio(r['p50_ms'], base.get('p50_ms')):<17}",
            f"{_fmt(r['p95_ms'], 1) + _ratio(r['p95_ms'], base.get('p95_ms')):<17}",
            f"{_fmt(r['build_s'], 1) + _ratio(r['build_s'], base.get('build_s')):<17}",
            f"{str(r['vectors']) + _ratio(r['vectors'], base.get('vectors')):<18}",
            f"{_fmt(disk_mb, 1) + _ratio(disk_mb, base_disk):<17}",
            f"{_fmt(r['peak_rss_mb'], 0) + _ratio(r['peak_rss_mb'], base.get('peak_rss_mb')):<16}",
        ]
        lines.append("".join(cells))
    return "\n".join(lines)


def format_pdf_lines(results: dict[str, dict[str, Any]]) -> str:
    """Parsing speed, the text-vs-span check and the targets of a ``--pdf-dir`` run."""
    lines = [""]
    for name, r in results.items():
        if "pdf_pages_per_s" in r:
            lines.append(
                f"{name}: read {r['pdf_pages']} PDF pages in {r['pdf_parse_s']:.1f} CPU s "
                f"({r['pdf_pages_per_s']:.1f} pages/s)"
            )
    markdown = results.get("gated-markdown", {})
    if "ndcg@10_span" in markdown:
        lines.extend(
            f"gated-markdown {key}: by text {_fmt(markdown[key])}, by spans "
            f"{_fmt(markdown[f'{key}_span'])} (difference "
            f"{abs(markdown[key] - markdown[f'{key}_span']):.4f})"
            for key in ("ndcg@10", "evr@2048")
        )
    pdf, flat = results.get("gated", {}), results.get("flat-chunk-pdf", {})
    lines.extend(
        f"gated (PDF) {key}: {pdf[key] / markdown[key]:.3f} x gated-markdown "
        f"(target 0.95), {pdf[key] / flat[key]:.2f} x flat-chunk-pdf (target 1.3)"
        for key in ("ndcg@10", "evr@2048")
        if pdf.get(key) and markdown.get(key) and flat.get(key)
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run every requested retriever in its own subprocess and write the result files."""
    from benchmarks.pdf_peers import PDF_RETRIEVERS
    from benchmarks.peers import DEFAULT_RETRIEVERS, GATED_VARIANTS, PEERS

    started = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = Path(args.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    known = PDF_RETRIEVERS if args.pdf_dir is not None else tuple(PEERS)
    if args.retrievers:
        names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
        unknown = [n for n in names if n not in known]
        if unknown:
            msg = f"unknown retrievers {unknown}; choose from {', '.join(known)}"
            raise SystemExit(msg)
    elif args.pdf_dir is not None:
        names = list(PDF_RETRIEVERS)
    else:
        names = list(DEFAULT_RETRIEVERS)
        if not _gated_available():
            logger.warning("langchain_gated_parent.index is not importable: skipping gated")
            names = [n for n in names if n not in GATED_VARIANTS]

    papers = load_corpus(args.data, args.limit_papers)
    n_questions = sum(len(p.questions) for p in papers)
    fingerprint = "+".join(_data_fingerprint(Path(d)) for d in args.data)
    fingerprint = f"{fingerprint}:{args.limit_papers}"
    if args.pdf_dir is not None:
        fingerprint += ":pdf"
    markers_path, markers = _warm_markers(cache_dir)

    results: dict[str, dict[str, Any]] = {}
    per_question: list[dict[str, Any]] = []
    model = None
    with tempfile.TemporaryDirectory(prefix="qasper-json-") as tmp:
        for name in names:
            marker = f"{name}:{fingerprint}"
            out_file = Path(tmp) / f"{name}.json"
            try:
                if marker not in markers:
                    print(f"[{name}] warming the embedding cache", file=sys.stderr, flush=True)
                    _spawn_worker(args, name, "warm", out_file)
                    markers.add(marker)
                    markers_path.write_text(json.dumps(sorted(markers)))
                print(f"[{name}] building (warm cache) and querying", file=sys.stderr, flush=True)
                _spawn_worker(args, name, "measure", out_file)
            except subprocess.CalledProcessError as exc:
                results[name] = {"error": f"worker exited with {exc.returncode}"}
                continue
            worker = json.loads(out_file.read_text())
            model = worker["model"]
            results[name] = _summarize(worker)
            per_question.extend(
                {
                    "qid": row["qid"],
                    "retriever": name,
                    "paper_id": row["paper_id"],
                    "n_evidence": row["n_evidence"],
                    "ndcg": row["ndcg@10"],
                    "recall@8": row["recall@8"],
                    "evr@2048": row["evr@2048"],
                    "gate_recall": row.get("gate_recall"),
                }
                for row in worker["per_question"]
            )
            print(
                f"[{name}] nDCG@10 {_fmt(results[name]['ndcg@10'])} "
                f"EvR@2048 {_fmt(results[name]['evr@2048'])} p50 {results[name]['p50_ms']:.1f} ms",
                file=sys.stderr,
                flush=True,
            )

    report: dict[str, Any] = {
        "retrievers": results,
        "questions": n_questions,
        "papers": len(papers),
        "setting": args.setting,
        "data": args.data[0] if len(args.data) == 1 else args.data,
        "embeddings": model,
        "machine": _machine(),
        "versions": _versions(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "notes": (
            "build_s is measured with the embedding cache warm (document vectors read from "
            "disk, not computed); queries are embedded live. Each retriever is built and "
            "queried in its own process (peak_rss_mb is that process's peak). disk_bytes is "
            "the allocated size of the retriever's persistent directory. Ranking metrics are "
            "null for retrievers returning sections or merged nodes."
        ),
        "wall_s": time.perf_counter() - started,
    }
    if args.pdf_dir is not None:
        report["pdf_dir"] = str(args.pdf_dir)
        report["notes"] += (
            " With pdf_dir, retrievers read the PDFs, results are mapped to truth paragraphs by "
            "normalised text; _span keys are the span-based figures of gated-markdown; "
            "pdf_pages_per_s is pages per CPU second of the PDF reading, one process."
        )
    (out_dir / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    with (out_dir / "per_question.jsonl").open("w") as fh:
        for row in per_question:
            fh.write(json.dumps(row) + "\n")
    print(
        f"\nQASPER {args.setting} setting: {len(papers)} papers, {n_questions} questions, "
        f"embeddings {model}"
    )
    print(format_table(results))
    if args.pdf_dir is not None:
        print(format_pdf_lines(results))
    print(f"\nwrote {out_dir / 'results.json'} ({report['wall_s']:.0f} s)")
    return report


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.qasper", description=__doc__)
    parser.add_argument(
        "--data",
        required=True,
        action="append",
        help="QASPER-format jsonl (one paper a line); given twice, the papers of both are "
        "indexed and the questions of the last are asked",
    )
    parser.add_argument("--setting", choices=("paper", "corpus"), default="paper")
    parser.add_argument("--out", help="output directory (results.json, per_question.jsonl)")
    parser.add_argument("--retrievers", help="comma-separated names (default: all available)")
    parser.add_argument("--limit-papers", type=int, default=None, help="use the first N papers")
    parser.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR), help="embedding cache dir")
    parser.add_argument(
        "--pdf-dir", help="read <pdf-dir>/<paper_id>.pdf instead of the text (PDF retrievers)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=("warm", "measure"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is None and args.out is None:
        parser.error("--out is required")
    return args


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m benchmarks.qasper``."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    if args.worker is not None:
        out = run_worker(args)
        Path(args.worker_out).write_text(json.dumps(out))
        return
    run(args)


if __name__ == "__main__":
    main()
