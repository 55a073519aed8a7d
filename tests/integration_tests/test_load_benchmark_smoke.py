"""Smoke test of ``python -m benchmarks.load``: two papers, one worker, one second per level."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("QASPER_DEV", "/work/shared/data/qasper/dev.jsonl"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DATA.exists(), reason=f"QASPER data not found at {DATA}"),
]


def test_load_benchmark_prints_its_tables(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "benchmarks.load", "--data", str(DATA), "--papers", "2"]
    options = ["--workers", "1", "--clients", "1", "2", "--seconds", "1", "--rounds", "1"]
    done = subprocess.run(
        [*command, *options, "--index", str(tmp_path / "index")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| 1 |")]
    assert len(rows) == 3
    for row in rows[:2]:
        errors = int(row.split("|")[4])
        assert errors == 0, row
    assert "load average before" in done.stdout
