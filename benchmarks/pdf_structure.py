"""Structure recovered from PDFs against the truth: headings, levels, paragraphs, speed.

Corpora (from ``--data``, default ``../shared/data``):
    * ``qasper-pdf``: 281 pdflatex papers; truth = ``truth.jsonl`` (section titles are heading
      paths ``A ::: B``, so the level is the path length; paragraphs as typeset).
    * ``real-pdf``: four R manuals with bookmarks; truth = ``outlines.json``.
    * ``real-pdf/no-outline``: the same manuals without bookmarks; same truth.

Every file is also checked: ``parse_markdown`` of the Markdown must find exactly the reader's
headings (title, level, span), and page offsets must rise with the pages and bracket each
heading on its page, else the run stops.

Heading precision/recall: predicted and true titles are compared after numbering, case and
whitespace are normalised, matched one to one in document order (greedy, each true heading used
once). Level accuracy: share of matched headings whose level equals the true one. Paragraph
boundary F1 (qasper-pdf only): each paragraph's start is keyed by the first 40 letters/digits of
its text; predicted and true starts are matched as multisets. Pages/second: pages read per CPU
second of this process (one core; the machine's other load does not count), beside pypdf's
plain text extraction of the same files in the same run (the baseline: what ``PyPDFLoader``
does; pypdf is in the ``test`` extra).

Run: ``python -m benchmarks.pdf_structure [--limit N] [--corpus qasper-pdf real-pdf no-outline]``.
"""

from __future__ import annotations

import argparse
import json
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pypdf import PdfReader

from langchain_gated_parent.pdf import PdfText, read_pdf
from langchain_gated_parent.sections import parse_markdown

if TYPE_CHECKING:
    from collections.abc import Iterable

_NUMBER = re.compile(
    r"^(?:appendix\s+[a-z]\s+|\d{1,2}(?:\.\d{1,2})*\.?\s+|[a-z]\.\d{1,2}(?:\.\d{1,2})*\.?\s+)"
)
_LETTER = re.compile(r"^[a-z]\s+(?=\S)")
_QUOTES = str.maketrans(dict.fromkeys("'\"\u2018\u2019\u201c\u201d`"))
_KEY_CHARS = 40


def normalise_title(title: str) -> str:
    """Title lowercased, whitespace collapsed, quote marks dropped, numbering dropped."""
    title = " ".join(unicodedata.normalize("NFKC", title).split()).lower().translate(_QUOTES)
    return _NUMBER.sub("", title, count=1)


def title_keys(title: str) -> set[str]:
    """The normalised title, and the same without a leading letter that may be a number.

    Appendix chapters are numbered by a letter ('A References'), but 'R basics' starts with
    a word: both readings are kept and two titles match when any reading is shared.
    """
    key = normalise_title(title)
    return {key, _LETTER.sub("", key, count=1)}


def true_headings(paths: Iterable[str]) -> list[tuple[str, int]]:
    """Every heading a paper prints: each new prefix of its section paths, in order.

    QASPER lists only sections with paragraphs, so a parent heading directly followed by its
    first subsection ('Background' before 'Background ::: Data') appears only inside the path.
    A prefix is new where it differs from the previous section's path, so a title used twice
    ('Background' in the body and in an appendix) counts twice.
    """
    headings = []
    previous: tuple[str, ...] = ()
    for path in paths:
        parts = tuple(path.split(" ::: "))
        same = 0
        while same < min(len(parts), len(previous)) and parts[same] == previous[same]:
            same += 1
        if same == len(parts):  # the same path again: a new section of the same title
            same -= 1
        headings += [(parts[depth], depth + 1) for depth in range(same, len(parts))]
        previous = parts
    return headings


def _paragraph_key(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"[^0-9a-z]+", "", text)[:_KEY_CHARS]


@dataclass
class Score:
    predicted: int = 0
    true: int = 0
    matched: int = 0
    level_ok: int = 0
    para_predicted: int = 0
    para_true: int = 0
    para_matched: int = 0
    pages: int = 0
    seconds: float = 0.0
    baseline_seconds: float = 0.0

    def add(self, other: Score) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self, name: str, docs: int) -> str:
        precision = self.matched / self.predicted if self.predicted else 0.0
        recall = self.matched / self.true if self.true else 0.0
        levels = self.level_ok / self.matched if self.matched else 0.0
        para = ""
        if self.para_true:
            p = self.para_matched / self.para_predicted if self.para_predicted else 0.0
            r = self.para_matched / self.para_true
            para = f"{2 * p * r / (p + r) if p + r else 0.0:.3f}"
        speed = self.pages / self.seconds if self.seconds else 0.0
        baseline = self.pages / self.baseline_seconds if self.baseline_seconds else 0.0
        return (
            f"| {name} | {docs} | {self.pages} | {self.true} | {self.predicted} "
            f"| {precision:.3f} | {recall:.3f} | {levels:.3f} "
            f"| {para or 'n/a'} | {speed:.0f} | {baseline:.0f} | {speed / baseline:.1f}x |"
        )


def match_headings(
    predicted: list[tuple[str, int]], true: list[tuple[str, int]]
) -> tuple[int, int, list[str], list[str]]:
    """Greedy in-order one-to-one matching on normalised titles.

    Returns:
        ``(matched, level_ok, unmatched predicted titles, unmatched true titles)``.
    """
    used = [False] * len(true)
    matched = level_ok = 0
    cursor = 0
    true_keys = [title_keys(t) for t, _ in true]
    extra = []
    for title, level in predicted:
        keys = title_keys(title)
        for index in [*range(cursor, len(true)), *range(cursor)]:
            if not used[index] and keys & true_keys[index]:
                used[index] = True
                matched += 1
                level_ok += level == true[index][1]
                cursor = index + 1
                break
        else:
            extra.append(title)
    missing = [title for (title, _), hit in zip(true, used, strict=True) if not hit]
    return matched, level_ok, extra, missing


def _paragraph_score(text: PdfText, true_paragraphs: list[str], score: Score) -> None:
    tree = parse_markdown(text.markdown)
    predicted = Counter(
        _paragraph_key(tree.text[start:end])
        for section in tree.sections
        for start, end in section.paragraphs
    )
    truth = Counter(_paragraph_key(p) for p in true_paragraphs)
    score.para_predicted += sum(predicted.values())
    score.para_true += sum(truth.values())
    score.para_matched += sum((predicted & truth).values())


def _timed_read(path: Path) -> tuple[PdfText, float]:
    """Read ``path``; the CPU seconds this process spent (one core: pdfium is single-threaded)."""
    start = time.process_time()
    text = read_pdf(path)
    seconds = time.process_time() - start
    tree = parse_markdown(text.markdown)
    found = [(s.title, s.level, s.heading) for s in tree.sections if s.heading is not None]
    if found != [(h.title, h.level, (h.start, h.end)) for h in text.headings]:
        msg = f"{path}: parse_markdown does not find the reader's headings"
        raise AssertionError(msg)
    starts = [*text.page_starts, len(text.markdown)]
    if starts != sorted(starts) or any(
        not starts[h.page - 1] <= h.start <= starts[h.page] for h in text.headings
    ):
        msg = f"{path}: page offsets out of order or not matching the headings' pages"
        raise AssertionError(msg)
    return text, seconds


def _baseline_seconds(path: Path) -> float:
    """CPU seconds pypdf (what LangChain's PyPDFLoader uses) takes to extract every page's text."""
    start = time.process_time()
    for page in PdfReader(path).pages:
        page.extract_text()
    return time.process_time() - start


def run_qasper(data: Path, limit: int | None, *, verbose: bool) -> tuple[Score, int]:
    folder = data / "qasper-pdf"
    total = Score()
    docs = 0
    with (folder / "truth.jsonl").open() as handle:
        for number, row in enumerate(handle):
            if limit is not None and number >= limit:
                break
            paper = json.loads(row)
            text, seconds = _timed_read(folder / "pdf" / f"{paper['doc_id']}.pdf")
            true = true_headings(s["title"] for s in paper["sections"])
            predicted = [(h.title, h.level) for h in text.headings]
            score = Score(predicted=len(predicted), true=len(true), pages=text.pages)
            score.seconds = seconds
            score.baseline_seconds = _baseline_seconds(folder / "pdf" / f"{paper['doc_id']}.pdf")
            score.matched, score.level_ok, extra, missing = match_headings(predicted, true)
            _paragraph_score(text, [p for s in paper["sections"] for p in s["paragraphs"]], score)
            if verbose and (extra or missing):
                print(f"# {paper['doc_id']}: extra {extra} missing {missing}")
            total.add(score)
            docs += 1
    return total, docs


def run_manuals(data: Path, *, outline: bool, verbose: bool) -> tuple[Score, int]:
    folder = data / "real-pdf"
    truth = json.loads((folder / "outlines.json").read_text())
    total = Score()
    for name, entry in sorted(truth.items()):
        path = folder / name if outline else folder / "no-outline" / name
        text, seconds = _timed_read(path)
        true = [(e["title"], e["depth"] + 1) for e in entry["outline"]]
        predicted = [(h.title, h.level) for h in text.headings]
        score = Score(predicted=len(predicted), true=len(true), pages=text.pages)
        score.seconds = seconds
        score.baseline_seconds = _baseline_seconds(path)
        score.matched, score.level_ok, extra, missing = match_headings(predicted, true)
        if verbose:
            print(f"# {name}: extra {extra} missing {missing}")
        total.add(score)
    return total, len(truth)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=None, help="first N papers of qasper-pdf")
    parser.add_argument(
        "--corpus",
        nargs="+",
        default=["qasper-pdf", "real-pdf", "no-outline"],
        choices=["qasper-pdf", "real-pdf", "no-outline"],
    )
    parser.add_argument("--verbose", action="store_true", help="print unmatched titles")
    args = parser.parse_args(argv)
    rows = []
    for corpus in args.corpus:
        if corpus == "qasper-pdf":
            score, docs = run_qasper(args.data, args.limit, verbose=args.verbose)
        else:
            score, docs = run_manuals(args.data, outline=corpus == "real-pdf", verbose=args.verbose)
        rows.append(score.row(corpus, docs))
    print(
        "| corpus | docs | pages | true headings | found | heading precision | heading recall "
        "| level accuracy "
        "| paragraph-boundary F1 | pages/s | pypdf pages/s | speed ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()


__all__ = ["Score", "main", "match_headings", "normalise_title", "title_keys", "true_headings"]
