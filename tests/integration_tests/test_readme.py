"""The README's quickstarts run as written and print what the README says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration_tests import pdfs

README = Path(__file__).resolve().parents[2] / "README.md"


def test_quickstart_prints_what_the_readme_shows(tmp_path: Path) -> None:
    quickstart = re.search(r"## Quickstart.*?```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert quickstart is not None
    code = quickstart.group(1)
    shown = [line[2:] for line in code.splitlines() if re.match(r"# C-", line)]
    script = tmp_path / "quickstart.py"
    script.write_text(code)
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert run.stdout.splitlines() == shown


def test_pdf_quickstart_prints_what_the_readme_shows(tmp_path: Path) -> None:
    block = re.search(r"### PDF quickstart.*?```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert block is not None
    code = block.group(1)
    shown = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    papers = tmp_path / "papers"
    papers.mkdir()
    pdfs.write_pdf(papers / "knockdown.pdf")
    pdfs.write_pdf(papers / "observatory.pdf", pdfs.OTHER_PAGES)
    script = tmp_path / "pdf_quickstart.py"
    script.write_text(code)
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert shown
    assert run.stdout.splitlines() == shown
