"""Quality against p50 latency per retriever, from the benchmark's ``results.json`` files.

Usage:
    .. code-block:: bash

        python -m benchmarks.plots bench-out/paper/results.json bench-out/corpus/results.json \\
            --out docs/quality_vs_latency.png

One panel per results file: EvidenceRecall@2048 (every retriever has it) against p50 query
latency, with nDCG@10 in the label where the retriever returns paragraph-sized results. The
ablation variants (``ABLATIONS``) sit next to ``gated`` and are drawn as small unlabelled dots.
"""

# ruff: noqa: PLC0415

from __future__ import annotations

import argparse
import json
from pathlib import Path

ABLATIONS = frozenset({"gated-text", "gated-auto", "gated-dense", "gated-parents"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    import matplotlib as mpl

    mpl.use("Agg")
    import matplotlib.pyplot as plt

    runs = [json.loads(path.read_text()) for path in args.results]
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4.8), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        for name, row in run["retrievers"].items():
            ours = name.startswith("gated")
            ax.scatter(
                row["p50_ms"],
                row["evr@2048"],
                s=15 if name in ABLATIONS else 60 if ours else 40,
                marker="o" if ours else "s",
                color="tab:red" if ours else "tab:blue",
                alpha=0.5 if name in ABLATIONS else 1.0,
            )
            if name in ABLATIONS:
                continue
            ndcg = row.get("ndcg@10")
            label = name if ndcg is None else f"{name}\nnDCG@10 {ndcg:.3f}"
            ax.annotate(
                label,
                (row["p50_ms"], row["evr@2048"]),
                fontsize=7,
                xytext=(4, 3),
                textcoords="offset points",
            )
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(mpl.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(mpl.ticker.NullFormatter())
        ax.set_xlabel("p50 query latency, ms (log scale; query embedded live)")
        ax.set_ylabel("EvidenceRecall@2048")
        ax.set_title(f"QASPER dev, {run['setting']} setting ({run['questions']} questions)")
        ax.grid(alpha=0.3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120, bbox_inches="tight")


if __name__ == "__main__":
    main()
