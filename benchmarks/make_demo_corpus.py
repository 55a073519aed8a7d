"""Regenerate the QASPER part of the bundled demo corpus from ``dev.jsonl``.

Writes ``langchain_gated_parent/demo_corpus/documents/<paper_id>.md`` for each paper in
:data:`PAPER_IDS`: ``#`` per top-level section, ``##`` for ``A ::: B`` and so on, behind a small
front matter block holding the paper id and title, so the title travels as metadata instead of
becoming a section that every other section nests under. Also rewrites ``ATTRIBUTION.md``, which
must list exactly the shipped papers.

Unlike :func:`benchmarks.qasper_data.render_paper`, a heading whose ancestors QASPER does not
list as sections of their own (``Data Collection ::: Common Voice`` with no ``Data Collection``)
gets those ancestor headings written before it; without them it would nest under whatever
section came before, and its section path would be wrong.

``documents/P-GAPDH-01.json`` is written by hand (it is not from QASPER) and is left alone.

Usage:
    python -m benchmarks.make_demo_corpus --data ../shared/data/qasper/dev.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.qasper_data import HEADING_SEPARATOR

PAPER_IDS = ("1909.02027", "1911.06964", "2002.01320", "2002.01664", "2003.13032")
"""Short papers (20-35 paragraphs) whose QASPER questions have evidence in one section."""

CORPUS = Path(__file__).resolve().parent.parent / "langchain_gated_parent" / "demo_corpus"
DOCUMENTS = CORPUS / "documents"

ATTRIBUTION = """\
# Attribution

The Markdown papers in this folder come from **QASPER v0.3** (dev split), released by the Allen
Institute for AI under the Creative Commons Attribution 4.0 International licence (CC BY 4.0,
https://creativecommons.org/licenses/by/4.0/). The paper text comes from S2ORC. The papers are
rendered to Markdown (one heading per section; nested `A ::: B` titles become `##` headings)
with their id and title in a front matter block; the text is otherwise unchanged.

Cite QASPER as:

> Pradeep Dasigi, Kyle Lo, Iz Beltagy, Arman Cohan, Noah A. Smith, Matt Gardner.
> "A Dataset of Information-Seeking Questions and Answers Anchored in Research Papers."
> NAACL 2021. arXiv:2105.03011.

| file | paper id | title |
|---|---|---|
{rows}

`documents/P-GAPDH-01.json` is not from QASPER: it is a short made-up methods paper written for this
package to show the structured JSON input format. It is released with the package (MIT).

Regenerate the QASPER files with
`python -m benchmarks.make_demo_corpus --data ../shared/data/qasper/dev.jsonl`.
"""


def front_matter(paper_id: str, title: str) -> str:
    """The ``---`` block ``gated-parent index`` reads ``doc_id`` and ``title`` from."""
    return f"---\ndoc_id: {paper_id}\ntitle: {' '.join(title.split())}\n---\n"


def render_markdown(paper: dict[str, Any]) -> str:
    """A QASPER paper as Markdown, one heading per path part not already open."""
    blocks: list[str] = []
    open_path: list[str] = []
    for section in paper["sections"]:
        path = [part.strip() or "Untitled" for part in section["title"].split(HEADING_SEPARATOR)]
        shared = 0
        while shared < min(len(path) - 1, len(open_path)) and open_path[shared] == path[shared]:
            shared += 1
        blocks.extend(f"{'#' * (depth + 1)} {path[depth]}" for depth in range(shared, len(path)))
        blocks.extend(section["paragraphs"])
        open_path = path
    return "\n\n".join(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, required=True, help="QASPER-format dev.jsonl")
    args = parser.parse_args()
    raw = {}
    with args.data.open(encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["doc_id"] in PAPER_IDS:
                raw[record["doc_id"]] = record
    missing = sorted(set(PAPER_IDS) - set(raw))
    if missing:
        msg = f"{args.data} lacks the demo papers {', '.join(missing)}"
        raise SystemExit(msg)
    rows = []
    for paper_id in PAPER_IDS:
        paper = raw[paper_id]
        path = DOCUMENTS / f"{paper_id}.md"
        path.write_text(
            front_matter(paper_id, paper["title"]) + render_markdown(paper) + "\n", "utf-8"
        )
        rows.append(f"| `documents/{path.name}` | {paper_id} | {paper['title']} |")
        print(f"wrote {path}")
    (CORPUS / "ATTRIBUTION.md").write_text(ATTRIBUTION.format(rows="\n".join(rows)), "utf-8")


if __name__ == "__main__":
    main()
