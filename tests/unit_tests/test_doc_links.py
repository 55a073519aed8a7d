"""Every relative link in the project's Markdown resolves: the file exists, and so does its heading.

The benchmark pages cite each other by heading (BENCHMARKS.md keeps the current figures,
benchmarks/HISTORY.md the ones later runs replaced); a heading renamed in one would otherwise
leave a link that lands at the top of the page.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    p
    for pattern in ("*.md", "docs/*.md", "benchmarks/*.md", "cookbook/*.md")
    for p in ROOT.glob(pattern)
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for a page's headings (a repeated heading gets ``-1``, ``-2``...)."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", markdown), re.MULTILINE):
        slug = "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_")
        slug = slug.replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return found


def test_anchors_follow_github_rules() -> None:
    page = "# Serving under load\n## Build time, disk and memory\n## `k` filled\n## Setup\n"
    page += "## Setup\n```\n# not a heading\n```\n"
    assert anchors(page) == {
        "serving-under-load",
        "build-time-disk-and-memory",
        "k-filled",
        "setup",
        "setup-1",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no file {destination}")
        elif (
            fragment
            and destination.suffix == ".md"
            and fragment not in anchors(destination.read_text(encoding="utf-8"))
        ):
            broken.append(f"{target}: no heading #{fragment} in {destination.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
