"""Every cookbook script runs offline and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_gated_parent.demo import CORPUS_FOLDER

REPO = Path(__file__).resolve().parents[2]
COOKBOOK = REPO / "cookbook"
QASPER = REPO.parent / "shared" / "data" / "qasper" / "dev.jsonl"
EXPECTED = {
    "quickstart.py": "0.4 * ",
    "lcel_rag_chain.py": "answer: (fake model)",
    "langserve_server_client.py": "422: Input should be less than or equal to 1",
    "agent_tool.py": "tool artifact",
}
"""Each script run on the demo index, and a line its output must contain."""
TIMEOUT = 900  # seconds; the machine is shared, each script normally takes well under a minute


def run(script: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}  # the fake model
    done = subprocess.run(
        [sys.executable, str(COOKBOOK / script), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus indexed once, by the CLI in its own process; each script re-adds it
    (all unchanged, so skipped) and never shares the folder with another process at once."""
    import langchain_gated_parent

    directory = tmp_path_factory.mktemp("cookbook") / "index"
    corpus = Path(langchain_gated_parent.__file__).parent / CORPUS_FOLDER
    command = [sys.executable, "-m", "langchain_gated_parent.cli", "index", str(corpus)]
    subprocess.run(
        [*command, "--index", str(directory)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )
    return directory


def test_every_script_is_tested_and_listed() -> None:
    scripts = {path.name for path in COOKBOOK.glob("*.py")}
    assert scripts == set(EXPECTED) | {"tune_alpha.py", "serve_tenants.py"}
    readme = (COOKBOOK / "README.md").read_text()
    assert all(f"`{name}`" in readme for name in scripts)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_script_runs(script: str, demo_index: Path) -> None:
    out = run(script, "--index", str(demo_index))
    assert EXPECTED[script] in out


@pytest.mark.slow
@pytest.mark.skipif(not QASPER.exists(), reason=f"needs the QASPER dev file at {QASPER}")
def test_tune_alpha_writes_a_heatmap(tmp_path: Path) -> None:
    out = tmp_path / "heatmap.png"
    printed = run("tune_alpha.py", "--papers", "2", "--out", str(out))
    assert "best: alpha" in printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_serve_tenants_keeps_tenants_apart() -> None:
    """Run on its own tenant-tagged index (not the shared demo index, which it would change)."""
    printed = run("serve_tenants.py")
    assert "documents of other tenants returned: 0" in printed
    assert "no key: 401" in printed
    assert "wrong key: 403" in printed
    assert "k 500: 422 configurable.k = 500 is above this server's max_k (10)" in printed
    assert (
        "speech-lab asks 'Which dataset do they use?': documents 2002.01320, 2002.01664" in printed
    )
