"""``gated-parent sections FILE... [--json]``: the section tree the index would build.

What to look at first when a section never opens: whether its heading was found at all, at
which level, on which page, and how much text it holds. Files are read exactly as ``index``
reads them (PDFs included), and nothing is indexed.
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_gated_parent import keys
from langchain_gated_parent.cli.common import EXIT_FAILURE, EXIT_USAGE, PROG, echo, refused
from langchain_gated_parent.cli.output import shorten
from langchain_gated_parent.loaders import LoadError, PathError, files_to_load, load_file
from langchain_gated_parent.sections import parse_document
from langchain_gated_parent.structure import flat_structure_advice

if TYPE_CHECKING:
    import argparse

    from langchain_core.documents import Document

    from langchain_gated_parent.cli.common import Subparsers
    from langchain_gated_parent.sections import Section, SectionTree


def section_records(tree: SectionTree, page_starts: list[int] | None) -> list[dict[str, Any]]:
    """Each section of ``tree`` as a record: id, heading path, level, page, span, paragraphs.

    ``start``/``end`` span the section with its subsections in the document's text (the
    Markdown a PDF was read into); ``page`` is the 1-based page where the section starts, for
    a document read from a PDF (``None`` otherwise).
    """
    sections = tree.sections
    own = [_own_end(section) for section in sections]
    records: list[dict[str, Any]] = []
    for position, section in enumerate(sections):
        end, after = own[position], position + 1
        while section.level and after < len(sections) and sections[after].level > section.level:
            end, after = max(end, own[after]), after + 1
        page = bisect.bisect_right(page_starts, section.start) if page_starts else None
        records.append(
            {
                "section_id": section.section_id,
                "path": list(section.path),
                "level": section.level,
                "page": page,
                "start": section.start,
                "end": end,
                "paragraphs": len(section.paragraphs),
            }
        )
    return records


def _own_end(section: Section) -> int:
    """Where a section's own text ends: its last paragraph, else its heading."""
    if section.paragraphs:
        return section.paragraphs[-1][1]
    return section.heading[1] if section.heading is not None else section.start


def document_record(document: Document) -> dict[str, Any]:
    """One document's tree, with its id, title, source, page count and a structure warning."""
    tree = parse_document(document)
    starts = document.metadata.get(keys.PAGE_STARTS)
    sections = section_records(tree, starts if isinstance(starts, list) else None)
    return {
        "doc_id": tree.doc_id,
        "title": tree.title,
        "source": document.metadata.get(keys.SOURCE),
        "pages": len(starts) if isinstance(starts, list) else None,
        "characters": len(tree.text),
        "warning": flat_structure_advice(
            tree.doc_id,
            (s.level for s in tree.sections),
            len(tree.text),
            document.metadata.get(keys.SOURCE),
        ),
        "sections": sections,
    }


def _file_records(path: Path, name: str) -> list[dict[str, Any]] | str:
    """The records of one file's documents, or the one-line error naming it."""
    try:
        return [document_record(d) for d in load_file(path, name)]
    except LoadError as error:
        return str(error)
    except ValueError as error:  # a structured file that does not parse
        return f"{path}: {error}"


def _print_tree(record: dict[str, Any]) -> None:
    """A document as an indented outline: page, span, heading (or ``(preamble)``)."""
    title = f" ({record['title']})" if record["title"] else ""
    pages = f", {record['pages']} pages" if record["pages"] is not None else ""
    echo(f"{record['doc_id']}{title}: {len(record['sections'])} sections{pages}")
    for section in record["sections"]:
        page = f"p.{section['page']:<4} " if section["page"] is not None else ""
        span = f"[{section['start']}:{section['end']}]"
        heading = section["path"][-1] if section["path"] else "(preamble)"
        indent = "  " * max(section["level"] - 1, 0)
        echo(f"  {page}{span:<16} {indent}{shorten(heading, 70)}  ({section['paragraphs']} para)")
    if record["warning"]:
        echo(f"  warning: {record['warning']}")


def run(args: argparse.Namespace) -> int:
    """Print each file's section tree; a file that cannot be read is named on stderr (exit 1).

    Unlike ``index``, two files may give the same document id (nothing is stored).
    """
    failed = 0
    records: list[dict[str, Any]] = []
    with refused(EXIT_FAILURE, ImportError), refused(EXIT_USAGE, PathError):
        for path, name in files_to_load(args.paths):
            found = _file_records(path, name)
            if isinstance(found, str):
                failed += 1
                echo(f"{PROG}: error: {found}", err=True)
            else:
                records.extend(found)
    if args.json:
        echo(json.dumps(records, indent=2, ensure_ascii=False))
    else:
        for record in records:
            _print_tree(record)
    return EXIT_FAILURE if failed else 0


def add(commands: Subparsers) -> None:
    """Add the ``sections`` subcommand."""
    parser = commands.add_parser(
        "sections",
        help="show the section tree recovered from files (PDFs included)",
        description="Print the section tree the index would build from each file: heading "
        "path, level, page (PDFs), character span and paragraph count. Nothing is indexed. "
        "Use it when a section never opens: a heading missing here is a heading the gate "
        "cannot choose.",
        epilog="--json prints a list with one object per document: doc_id, title, source, "
        "pages, characters, warning (no headings found, or null) and sections, each with "
        "section_id, path, level, page (null outside PDFs), start, end (the span in the "
        "document's text, subsections included) and paragraphs.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="FILE", help="file or folder")
    parser.add_argument("--json", action="store_true", help="print the trees as JSON")
    parser.set_defaults(run=run)
