"""Load QASPER-format jsonl and render each paper to Markdown with exact paragraph spans.

The file format is described in ``/work/shared/data/qasper/README.md``: one paper per line, with
``doc_id``, ``title``, ``sections`` (``id``, ``title``, ``paragraphs``) and ``questions`` (``qid``,
``question``, ``evidence`` = list of ``{"section_id", "paragraph_index"}``).

Rendering (what every retriever indexes, so character spans agree across retrievers):

* The paper title is **not** part of the Markdown; it travels in metadata (``title``). Putting it
  in as ``# title`` would make it a sibling of the top-level sections (which are also ``#``).
* Each section becomes an ATX heading whose depth is the number of `` ::: ``-separated parts of
  its title (``Model ::: Encoder`` -> ``## Encoder``); only the last part is written, the path is
  carried by the heading hierarchy. An empty title is written as ``Untitled``.
* The heading is followed by a blank line, then the section's paragraphs verbatim, separated by
  blank lines. Sections are separated by a blank line.

Paragraph text is written verbatim, so ``markdown[start:end] == paragraph text`` for every
paragraph; :func:`render_paper` asserts it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

HEADING_SEPARATOR = " ::: "
"""Separator of the heading path in QASPER section titles."""

ParagraphKey = tuple[str, int]
"""An evidence unit: ``(section_id, paragraph_index)``."""


@dataclass(frozen=True)
class ParagraphSpan:
    """One paragraph of a rendered paper.

    Attributes:
        key: ``(section_id, paragraph_index)``, the evidence unit.
        paper_id: The paper the paragraph belongs to.
        start: Character offset of the paragraph in the paper's Markdown.
        end: End offset (exclusive).
        text: The paragraph text, verbatim.
    """

    key: ParagraphKey
    paper_id: str
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class SectionSpan:
    """One section of a rendered paper.

    Attributes:
        section_id: QASPER section id (``<paper>:s<n>``).
        paper_id: The paper the section belongs to.
        title: The full heading path as in the data (``Parent ::: Child``).
        depth: Heading depth (number of `` ::: `` parts).
        start: Offset of the heading line in the Markdown.
        body_start: Offset of the first paragraph (the heading's end for an empty section).
        end: End offset (exclusive) of the last paragraph (the heading's end if none).
    """

    section_id: str
    paper_id: str
    title: str
    depth: int
    start: int
    body_start: int
    end: int


@dataclass(frozen=True)
class Question:
    """One question with its evidence set.

    Attributes:
        qid: QASPER question id.
        paper_id: The paper the question was asked about.
        question: The question text.
        evidence: The union of the annotators' evidence paragraphs.
    """

    qid: str
    paper_id: str
    question: str
    evidence: frozenset[ParagraphKey]


@dataclass(frozen=True)
class Paper:
    """A rendered paper.

    Attributes:
        paper_id: QASPER paper id (arXiv id).
        title: Paper title.
        markdown: The rendered Markdown text; all spans index into it.
        sections: Section spans in document order.
        paragraphs: Paragraph spans in document order.
        questions: Questions with non-empty evidence.
    """

    paper_id: str
    title: str
    markdown: str
    sections: tuple[SectionSpan, ...]
    paragraphs: tuple[ParagraphSpan, ...]
    questions: tuple[Question, ...] = field(default=())

    def paragraph(self, key: ParagraphKey) -> ParagraphSpan:
        """Return the paragraph span for an evidence key.

        Raises:
            KeyError: If the key names no paragraph of this paper.
        """
        for para in self.paragraphs:
            if para.key == key:
                return para
        msg = f"paper {self.paper_id} has no paragraph {key}"
        raise KeyError(msg)

    def section_text(self, section: SectionSpan) -> str:
        """Return a section's Markdown (heading line and paragraphs)."""
        return self.markdown[section.start : section.end]


def render_paper(raw: dict[str, Any]) -> Paper:
    """Render one QASPER paper record to Markdown, recording exact spans.

    Args:
        raw: One parsed line of a QASPER-format jsonl file.

    Returns:
        The rendered paper with its questions (questions without evidence are dropped).

    Raises:
        ValueError: If an evidence entry names a paragraph that does not exist.
    """
    paper_id = str(raw["doc_id"])
    title = str(raw.get("title") or "")
    parts: list[str] = []
    offset = 0
    sections: list[SectionSpan] = []
    paragraphs: list[ParagraphSpan] = []

    def emit(text: str) -> int:
        nonlocal offset
        start = offset
        parts.append(text)
        offset += len(text)
        return start

    open_path: list[str] = []
    for sec in raw["sections"]:
        full_title = str(sec.get("title") or "")
        path = [part.strip() for part in full_title.split(HEADING_SEPARATOR)]
        path[-1] = path[-1] or "Untitled"
        depth = len(path)
        # A nested section whose parent heading has no section of its own ("A ::: B" right
        # after "Introduction") gets its missing ancestors written, so it does not nest
        # under whatever section came before.
        shared = 0
        while shared < min(len(open_path), depth - 1) and open_path[shared] == path[shared]:
            shared += 1
        for level in range(shared, depth - 1):
            if offset:
                emit("\n\n")
            emit("#" * (level + 1) + " " + (path[level] or "Untitled"))
        open_path = path
        if offset:
            emit("\n\n")
        sec_start = emit("#" * depth + " " + path[-1])
        body_start = offset
        sec_end = offset
        for p_index, text in enumerate(sec.get("paragraphs") or []):
            emit("\n\n")
            p_start = emit(text)
            if p_index == 0:
                body_start = p_start
            sec_end = offset
            paragraphs.append(
                ParagraphSpan(
                    key=(str(sec["id"]), p_index),
                    paper_id=paper_id,
                    start=p_start,
                    end=offset,
                    text=text,
                )
            )
        sections.append(
            SectionSpan(
                section_id=str(sec["id"]),
                paper_id=paper_id,
                title=full_title,
                depth=depth,
                start=sec_start,
                body_start=body_start,
                end=sec_end,
            )
        )
    markdown = "".join(parts)
    keys = {para.key for para in paragraphs}
    if any(markdown[para.start : para.end] != para.text for para in paragraphs):
        msg = f"rendering of paper {paper_id} lost a paragraph span (a bug in render_paper)"
        raise RuntimeError(msg)

    questions: list[Question] = []
    for q in raw.get("questions") or []:
        evidence = frozenset(
            (str(e["section_id"]), int(e["paragraph_index"])) for e in q.get("evidence") or []
        )
        missing = evidence - keys
        if missing:
            msg = f"question {q['qid']} of paper {paper_id} names missing paragraphs {missing}"
            raise ValueError(msg)
        if evidence:
            questions.append(
                Question(
                    qid=str(q["qid"]),
                    paper_id=paper_id,
                    question=str(q["question"]),
                    evidence=evidence,
                )
            )
    return Paper(
        paper_id=paper_id,
        title=title,
        markdown=markdown,
        sections=tuple(sections),
        paragraphs=tuple(paragraphs),
        questions=tuple(questions),
    )


def load_papers(path: Path, limit: int | None = None) -> list[Paper]:
    """Load and render a QASPER-format jsonl file.

    Args:
        path: The jsonl file, one paper per line.
        limit: Keep only the first ``limit`` papers (``None`` keeps all).

    Returns:
        Rendered papers in file order.
    """
    papers: list[Paper] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            papers.append(render_paper(json.loads(line)))
            if limit is not None and len(papers) >= limit:
                break
    return papers
