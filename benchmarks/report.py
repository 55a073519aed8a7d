"""A benchmark ``results.json`` as a Markdown table, with cost ratios to flat-para.

Usage:
    .. code-block:: bash

        python -m benchmarks.report bench-out/paper/results.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

QUALITY = ("recall@8", "hit@8", "mrr@10", "ndcg@10", "evr@512", "evr@2048", "gate_recall")
COST = ("p50_ms", "p95_ms", "build_s", "vectors", "disk_bytes", "peak_rss_mb")
BASELINE = "flat-para"


def table(results: dict[str, Any]) -> str:
    """Rows per retriever: quality figures, then costs with their ratio to flat-para."""
    rows = results["retrievers"]
    base = rows.get(BASELINE, {})
    head = ["retriever", *QUALITY, *COST]
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for name, row in rows.items():
        cells = [f"**{name}**" if name.startswith("gated") else name]
        cells += ["-" if row.get(key) is None else f"{row[key]:.3f}" for key in QUALITY]
        for key in COST:
            value = row.get(key)
            if value is None:
                cells.append("-")
                continue
            shown = f"{value / 2**20:.1f} MB" if key == "disk_bytes" else f"{value:,.1f}"
            shown = shown.removesuffix(".0") if key == "vectors" else shown
            ratio = value / base[key] if base.get(key) else None
            cells.append(shown if ratio is None else f"{shown} ({ratio:.2f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    print(
        f"{results['setting']} setting: {results['papers']} papers, "
        f"{results['questions']} questions\n"
    )
    print(table(results))


if __name__ == "__main__":
    main()
