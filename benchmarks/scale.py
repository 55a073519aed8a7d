"""How cost grows with the collection: corpus-setting runs of several sizes, as a table and a plot.

Usage:
    .. code-block:: bash

        python -m benchmarks.qasper --data ../shared/data/qasper/dev.jsonl --setting corpus \\
            --limit-papers 100 --retrievers flat-para,bm25-para,flat-hybrid,gated \\
            --out bench-out/c100
        python -m benchmarks.scale bench-out/c100/results.json bench-out/corpus/results.json \\
            --out docs/scale.png

Prints one Markdown row per (size, retriever): build time, vectors, bytes on disk, peak RSS,
p50/p95, nDCG@10 and EvidenceRecall@2048; plots p50 and bytes on disk against the number of
papers, one line per retriever.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

RETRIEVERS = ("flat-para", "bm25-para", "flat-hybrid", "gated")


def load(paths: list[Path]) -> list[dict[str, Any]]:
    """The runs, smallest collection first."""
    runs = [json.loads(path.read_text()) for path in paths]
    return sorted(runs, key=lambda run: run["papers"])


def table(runs: list[dict[str, Any]]) -> str:
    """One Markdown row per collection size and retriever."""
    lines = [
        (
            "| papers | retriever | build s | vectors | disk MB | peak RSS MB | p50 ms | p95 ms "
            "| nDCG@10 | EvR@2048 |"
        ),
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        for name in RETRIEVERS:
            r = run["retrievers"].get(name)
            if r is None or "error" in r:
                continue
            lines.append(
                f"| {run['papers']:,} | {name} | {r['build_s']:.1f} | {r['vectors']:,} "
                f"| {r['disk_bytes'] / 2**20:.1f} | {r['peak_rss_mb']:.0f} | {r['p50_ms']:.1f} "
                f"| {r['p95_ms']:.1f} | {r['ndcg@10']:.3f} | {r['evr@2048']:.3f} |"
            )
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], out: Path) -> None:
    """p50 and bytes on disk against the number of papers."""
    import matplotlib as mpl  # noqa: PLC0415

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name in RETRIEVERS:
        points = [
            (run["papers"], run["retrievers"][name])
            for run in runs
            if name in run["retrievers"] and "error" not in run["retrievers"][name]
        ]
        if not points:
            continue
        sizes = [n for n, _ in points]
        left.plot(sizes, [r["p50_ms"] for _, r in points], marker="o", label=name)
        right.plot(sizes, [r["disk_bytes"] / 2**20 for _, r in points], marker="o", label=name)
    left.set(xlabel="papers in the index", ylabel="query p50 (ms)", title="Latency")
    right.set(xlabel="papers in the index", ylabel="bytes on disk (MB)", title="Disk")
    left.legend()
    fig.suptitle("QASPER corpus setting: cost against collection size")
    fig.savefig(out, dpi=120, bbox_inches="tight")


def main() -> None:
    """Print the table and write the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+", help="corpus-setting results.json files")
    parser.add_argument("--out", type=Path, required=True, help="the plot (PNG)")
    args = parser.parse_args()
    runs = load(args.results)
    print(table(runs))
    plot(runs, args.out)


if __name__ == "__main__":
    main()
