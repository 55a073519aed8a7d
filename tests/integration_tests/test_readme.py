"""The README's quickstart runs as written and prints what the README says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
