"""Smoke test of ``python -m benchmarks.pdf_structure`` on a few typeset papers and a manual.

Runs the benchmark as a user would, in its own process, on real PDFs from the shared data, and
reads its Markdown table back.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT.parent / "shared" / "data"


def run_benchmark(*args: str) -> dict[str, list[str]]:
    """Run the benchmark and return its table rows by corpus name."""
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.pdf_structure", "--data", str(DATA), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rows = [line.strip("|").split("|") for line in result.stdout.splitlines()]
    return {row[0].strip(): [cell.strip() for cell in row] for row in rows if len(row) > 10}


def test_structure_benchmark_on_papers_and_a_manual() -> None:
    rows = run_benchmark("--corpus", "qasper-pdf", "real-pdf", "--limit", "3")
    header = rows["corpus"]
    papers = dict(zip(header, rows["qasper-pdf"], strict=True))
    manuals = dict(zip(header, rows["real-pdf"], strict=True))
    assert papers["docs"] == "3"
    assert manuals["docs"] == "4"
    for row in (papers, manuals):
        assert float(row["heading precision"]) >= 0.95
        assert float(row["heading recall"]) >= 0.95
        assert float(row["pages/s"]) > 0
    assert float(papers["paragraph-boundary F1"]) >= 0.9
