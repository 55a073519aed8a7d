"""The ``gated-parent`` command: build, query, inspect and demo a persistent gated index.

Subcommands (``gated-parent COMMAND --help`` for each):

* ``index PATH... --index DIR``: add Markdown, HTML, text and structured JSON files, or folders
  of them (recursively), to the index in ``DIR``. A changed file replaces its old version.
* ``query "TEXT" --index DIR``: the ranked children with their fused scores, as a table or
  (``--json``) a JSON list.
* ``delete DOC_ID... --index DIR``, ``stats --index DIR``, ``verify --index DIR``.
* ``demo``: index the bundled demo corpus and run a few example questions.
* ``serve --index DIR``: serve the retriever over HTTP with LangServe (``[serve]`` extra).

Document ids are stable, so re-running ``index`` on the same files skips or replaces them: a
structured JSON file's ``doc_id``, else a Markdown file's front matter ``doc_id``, else the
file's path relative to the folder given on the command line (or its name, for a file given
directly). A Markdown file may start with a front matter block of ``key: value`` lines between
``---`` lines; its keys become document metadata (``title``, ``doc_id``, or any key to
``--filter`` on) and the block is not indexed, so ``start_index``/``end_index`` count from the
first character after it.

Exit status: 0 on success, 1 when the work fails (no index in the folder, an unreadable or
invalid file, stores that disagree), 2 for a usage mistake or a bad option value. Every failure
is one ``gated-parent: error: ...`` line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from langchain_core.documents import Document
from tqdm import tqdm

from langchain_gated_parent import keys
from langchain_gated_parent.index import GatedParentIndex
from langchain_gated_parent.sections import parse_document

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    Subparsers = argparse._SubParsersAction["_Parser"]  # noqa: SLF001

PROG = "gated-parent"
EXIT_FAILURE = 1
"""Exit status when the work fails: a missing index, a bad file, stores that disagree."""
EXIT_USAGE = 2
"""Exit status for a usage mistake or an option value the library refuses (argparse's code)."""

FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
    ".json": "structured",
    ".jsonl": "structured",
}
"""File suffixes ``gated-parent index`` reads, and the ``format`` hint each one gets."""

RESULT_KEYS = (
    keys.CHUNK_ID,
    keys.PARENT_ID,
    keys.DOC_ID,
    keys.SCORE,
    keys.PARENT_SCORE,
    keys.CHILD_SCORE,
    keys.GATE_RANK,
    keys.SECTION_PATH,
    keys.START_INDEX,
    keys.END_INDEX,
)
"""The metadata of a result that ``query --json`` emits, with ``text``: the output contract."""

DEFAULT_BATCH_SIZE = 16
DEFAULT_DEMO_INDEX = Path("demo-index")
_BINARY_PROBE = 8192
_MAX_PORT = 65535
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")


class CliError(Exception):
    """A failure the user can fix: printed as one line on stderr, never as a traceback."""

    def __init__(self, message: str, status: int = EXIT_FAILURE) -> None:
        """Keep the exit status beside the message; see ``EXIT_FAILURE`` and ``EXIT_USAGE``."""
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one error line (no usage block), as every other error."""

    def error(self, message: str) -> NoReturn:
        msg = f"{message} (see '{self.prog} --help')"
        raise CliError(msg, EXIT_USAGE)


def _echo(text: str = "", *, err: bool = False) -> None:
    """Write a line to stdout (results, summaries) or stderr (errors): the CLI's only output."""
    (sys.stderr if err else sys.stdout).write(f"{text}\n")


@contextmanager
def _refused(status: int, *errors: type[Exception]) -> Iterator[None]:
    """Report the library's refusals (their messages name the value and the fix) as CliError."""
    try:
        yield
    except errors as error:
        raise CliError(str(error), status) from error


# ---------------------------------------------------------------------------------- reading files
def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """Split a leading ``---`` block of ``key: value`` lines from Markdown.

    Only flat ``key: value`` lines are read (the subset of YAML that note tools write); other
    lines in the block are ignored, and one pair of matching quotes around a value is removed.

    Args:
        text: The Markdown file's text.

    Returns:
        The fields (empty when the text has no front matter) and the text after the block.
    """
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines():
        field = _FIELD.match(line)
        if field and field.group(2):
            value = field.group(2)
            if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            fields[field.group(1)] = value
    return fields, text[match.end() :]


def _structured(line: str, name: str, metadata: dict[str, Any], where: str) -> Document:
    """One structured JSON document; its own ``doc_id`` wins over the file name."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as error:
        msg = f"{where} is not valid JSON ({error})"
        raise CliError(msg) from error
    if not isinstance(data, dict):
        msg = (
            f"{where} must be a JSON object with 'doc_id' and 'sections', got {type(data).__name__}"
        )
        raise CliError(msg)
    doc_id = data.get("doc_id")
    return Document(
        page_content=line,
        metadata={keys.DOC_ID: doc_id if isinstance(doc_id, str) and doc_id else name, **metadata},
    )


def documents_from_text(text: str, name: str, suffix: str, source: str) -> list[Document]:
    """Turn one file's text into the Documents ``gated-parent index`` adds.

    Args:
        text: The file's text.
        name: The fallback document id: the file's path relative to the folder being indexed.
        suffix: The file's suffix (a key of :data:`FORMATS`), which decides the format.
        source: Where the text came from, kept as ``source`` metadata.

    Returns:
        One Document, or one per non-blank line of a ``.jsonl`` file (id ``name:line`` when
        the line's JSON has no ``doc_id``).

    Raises:
        CliError: The JSON is invalid or not an object.
    """
    suffix = suffix.lower()
    metadata: dict[str, Any] = {keys.SOURCE: source, keys.FORMAT: FORMATS[suffix]}
    if suffix == ".jsonl":
        return [
            _structured(line, f"{name}:{number}", metadata, f"{source} line {number}")
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip()
        ]
    if suffix == ".json":
        return [_structured(text, name, metadata, source)]
    fields: dict[str, str] = {}
    if metadata[keys.FORMAT] == "markdown":
        fields, text = split_front_matter(text)
    return [Document(page_content=text, metadata={keys.DOC_ID: name, **fields, **metadata})]


def _read_text(path: Path) -> str:
    """A file's text, refusing binary and non-UTF-8 files by name instead of indexing noise."""
    try:
        data = path.read_bytes()
    except OSError as error:
        msg = f"cannot read {path}: {error.strerror or error}"
        raise CliError(msg) from error
    if b"\x00" in data[:_BINARY_PROBE]:
        msg = f"{path} is a binary file, not text; remove it or index its folder without it"
        raise CliError(msg)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        msg = (
            f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); "
            "convert it, e.g. iconv -f latin1 -t utf-8"
        )
        raise CliError(msg) from error


def _files(paths: Sequence[Path]) -> list[tuple[Path, str]]:
    """The files to index with their fallback ids, folders walked in sorted order.

    Hidden files and folders (``.git``...) are skipped, and so are other suffixes inside a
    folder; a file named directly must have a supported suffix.
    """
    found: list[tuple[Path, str]] = []
    supported = ", ".join(FORMATS)
    for path in paths:
        if path.is_dir():
            inside = [
                (file, file.relative_to(path).as_posix())
                for file in sorted(path.rglob("*"))
                if file.is_file()
                and file.suffix.lower() in FORMATS
                and not any(part.startswith(".") for part in file.relative_to(path).parts)
            ]
            if not inside:
                msg = f"no files to index under {path} (looked for {supported})"
                raise CliError(msg, EXIT_USAGE)
            found.extend(inside)
        elif path.is_file():
            if path.suffix.lower() not in FORMATS:
                msg = f"cannot index {path}: unsupported file type (use {supported})"
                raise CliError(msg, EXIT_USAGE)
            found.append((path, path.name))
        else:
            msg = f"{path} does not exist"
            raise CliError(msg, EXIT_USAGE)
    return found


def _check_parses(document: Document, path: Path) -> None:
    """Parse a document as the index will, so a malformed one fails by its file's name."""
    try:
        tree = parse_document(document)
    except ValueError as error:
        msg = f"{path}: {error}"
        raise CliError(msg) from error
    if not tree.text.strip():
        msg = f"{path}: no text to index (empty or whitespace only); leave the file out"
        raise CliError(msg)


def load_documents(paths: Sequence[Path]) -> list[Document]:
    """Read and check every file before anything is embedded or written.

    Each document is parsed once here so that a malformed file fails the command by name,
    before the model loads and before a partial ingest, and two files claiming one id are
    refused (the index would silently keep only the later one).

    Args:
        paths: Files and folders from the command line.

    Returns:
        The documents, in file order.

    Raises:
        CliError: A path is missing or unsupported, a file is unreadable, binary, not UTF-8 or
            malformed, or two documents share an id.
    """
    documents: list[Document] = []
    origin: dict[str, str] = {}
    for path, name in _files(paths):
        for document in documents_from_text(_read_text(path), name, path.suffix, str(path)):
            doc_id = document.metadata[keys.DOC_ID]
            if doc_id in origin:
                msg = (
                    f"{path} and {origin[doc_id]} both give document id {doc_id!r}; "
                    "index their common parent folder, or give each a unique doc_id"
                )
                raise CliError(msg)
            origin[doc_id] = str(path)
            _check_parses(document, path)
            documents.append(document)
    return documents


# ---------------------------------------------------------------------------------- the index
def _open_index(directory: Path, *, create: bool = False) -> GatedParentIndex:
    """Open the index in ``directory``; unless ``create``, refuse a folder that has none.

    Opening a folder creates an empty index in it, so the read-only commands check first: a
    mistyped ``--index`` must fail, not leave a new empty index behind.
    """
    if not create and not GatedParentIndex.exists(directory):
        msg = f"no index in {directory}; build one with '{PROG} index PATH... --index {directory}'"
        raise CliError(msg)
    with _refused(EXIT_FAILURE, ValueError):
        return GatedParentIndex(directory=directory)


@dataclass
class _Totals:
    """What an ingest did, summed over its batches."""

    documents: int = 0
    unchanged: int = 0
    parents: int = 0
    children: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        """One line: counts, seconds and rates (children/s is the embedding throughput)."""
        seen = self.documents + self.unchanged
        seconds = max(self.seconds, 1e-9)
        return (
            f"indexed {seen} documents ({self.documents} new or changed, {self.unchanged} "
            f"unchanged): {self.parents} parents, {self.children} children in "
            f"{self.seconds:.1f} s ({seen / seconds:.3g} documents/s, "
            f"{self.children / seconds:.3g} children/s)"
        )


def _ingest(index: GatedParentIndex, documents: Sequence[Document], batch_size: int) -> _Totals:
    """Add documents in batches, with a progress bar on stderr when it is a terminal."""
    totals = _Totals()
    started = time.perf_counter()
    with tqdm(
        total=len(documents), desc="indexing", unit="doc", file=sys.stderr, disable=None
    ) as bar:
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            with _refused(EXIT_FAILURE, ValueError):
                report = index.add_documents(batch)
            totals.documents += report.documents
            totals.unchanged += report.unchanged
            totals.parents += report.parents
            totals.children += report.children
            bar.set_postfix(parents=totals.parents, children=totals.children, refresh=False)
            bar.update(len(batch))
    totals.seconds = time.perf_counter() - started
    return totals


def result_record(document: Document) -> dict[str, Any]:
    """A result as the JSON contract: :data:`RESULT_KEYS` from its metadata, plus ``text``."""
    return {
        **{key: document.metadata.get(key) for key in RESULT_KEYS},
        "text": document.page_content,
    }


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _location(metadata: dict[str, Any], width: int | None = None) -> str:
    """``doc > section > subsection``; past ``width``, the middle of the path goes first."""
    doc, path = str(metadata.get(keys.DOC_ID, "")), metadata.get(keys.SECTION_PATH, [])
    full = " > ".join([doc, *path])
    if width is None:
        return full
    if len(full) > width and len(path) > 1:
        full = f"{doc} > ... > {path[-1]}"
    return _shorten(full, width)


def _table(documents: Sequence[Document], indent: str = "") -> str:
    """Results as rows of rank, fused score, parent and child scores, where, and text.

    The text is cut to fit the terminal (``COLUMNS``, else 120 columns) and at least 30
    characters; ``--json`` gives the full text.
    """
    if not documents:
        return f"{indent}(no results)"
    place = min(40, max(len(_location(d.metadata)) for d in documents))
    rows = [
        (f"{indent}{'#':>2}  {'score':>5}  {'s_p':>5}  {'s_c':>5}  {'where':<{place}}  ", "text")
    ]
    for rank, document in enumerate(documents, start=1):
        meta = document.metadata
        scores = "  ".join(
            f"{meta[k]:5.3f}" for k in (keys.SCORE, keys.PARENT_SCORE, keys.CHILD_SCORE)
        )
        where = _location(meta, place)
        rows.append((f"{indent}{rank:>2}  {scores}  {where:<{place}}  ", document.page_content))
    text_width = max(shutil.get_terminal_size((120, 24)).columns - len(rows[0][0]), 30)
    return "\n".join(prefix + _shorten(text, text_width) for prefix, text in rows)


# ---------------------------------------------------------------------------------- commands
def _run_index(args: argparse.Namespace) -> int:
    documents = load_documents(args.paths)
    index = _open_index(args.index, create=True)
    _echo(_ingest(index, documents, args.batch_size).summary())
    return 0


def _where(filters: Sequence[tuple[str, str]]) -> dict[str, Any] | None:
    """``--filter`` pairs as a Chroma filter: a repeated key matches any of its values."""
    values: dict[str, list[str]] = {}
    for key, value in filters:
        values.setdefault(key, []).append(value)
    clauses = [{k: v[0] if len(v) == 1 else {"$in": v}} for k, v in values.items()]
    if len(clauses) > 1:
        return {"$and": clauses}
    return clauses[0] if clauses else None


def _run_query(args: argparse.Namespace) -> int:
    index = _open_index(args.index)
    options = {
        name: getattr(args, name)
        for name in ("k", "alpha", "parent_top_k", "child_per_parent")
        if getattr(args, name) is not None
    }
    where = _where(args.filter)
    if where is not None:
        options["filter"] = where
    with _refused(EXIT_USAGE, ValueError, TypeError):
        documents = index.as_retriever().invoke(args.text, **options)
    if args.json:
        _echo(json.dumps([result_record(d) for d in documents], indent=2, ensure_ascii=False))
    else:
        _echo(_table(documents))
    return 0


def _run_delete(args: argparse.Namespace) -> int:
    index = _open_index(args.index)
    missing = [doc_id for doc_id in args.doc_ids if not index.delete([doc_id])]
    deleted = [doc_id for doc_id in args.doc_ids if doc_id not in missing]
    if deleted:
        _echo(f"deleted {len(deleted)} document(s): {', '.join(deleted)}")
    if missing:
        msg = f"not in the index: {', '.join(missing)}"
        raise CliError(msg)
    return 0


def _run_stats(args: argparse.Namespace) -> int:
    stats = _open_index(args.index).stats()
    if args.json:
        _echo(json.dumps(stats, indent=2))
        return 0
    label = max(len(key) for key in stats) + 2
    for key, value in stats.items():
        shown = f"{value / 1e6:.1f} MB ({value} bytes)" if key == "bytes_on_disk" else value
        _echo(f"{key.replace('_', ' '):<{label}}{shown}")
    return 0


def _run_verify(args: argparse.Namespace) -> int:
    report = _open_index(args.index).verify()
    counts = f"{report.documents} documents, {report.parents} parents, {report.children} children"
    if report.ok:
        _echo(f"ok: {counts}; the docstore, parent vectors and child vectors agree")
        return 0
    for problem in report.problems:
        _echo(problem)
    msg = (
        f"{len(report.problems)} problem(s) in {args.index} ({counts}); re-index the documents "
        "named above, or rebuild the index"
    )
    raise CliError(msg)


def _run_demo(args: argparse.Namespace) -> int:
    # demo.py reads its files with this module's loader, so it is imported here, not on top.
    from langchain_gated_parent.demo import DEMO_QUERIES, demo_documents  # noqa: PLC0415

    index = _open_index(args.index, create=True)
    _echo(f"demo index: {args.index}")
    _echo(_ingest(index, demo_documents(), DEFAULT_BATCH_SIZE).summary())
    retriever = index.as_retriever(k=args.k)
    for demo in DEMO_QUERIES:
        explanation = retriever.explain(demo.question, filter=demo.filter)
        _echo(f"\nquestion: {demo.question}")
        if demo.filter is not None:
            _echo(f"  filter: {', '.join(f'{k}={v}' for k, v in demo.filter.items())}")
        _echo(f"  answer in: {demo.doc_id} > {' > '.join(demo.section_path)}")
        _echo(f"  gate opened (alpha {explanation.alpha:.2f}):")
        for parent in explanation.parents:
            meta = parent.metadata
            _echo(
                f"    {meta[keys.GATE_RANK]}. s_p {meta[keys.PARENT_SCORE]:.3f}  {_location(meta)}"
            )
        _echo(_table(explanation.documents, indent="  "))
    _echo(f'\ntry your own: {PROG} query "..." --index {args.index}')
    return 0


def _run_serve(args: argparse.Namespace) -> int:
    index = _open_index(args.index)
    with _refused(EXIT_FAILURE, ImportError):  # the message names the pip install command
        from langchain_gated_parent.server import RETRIEVER_PATH, serve  # noqa: PLC0415

    base = f"http://{args.host}:{args.port}"
    _echo(f"serving {args.index} at {base}{RETRIEVER_PATH}/ (Ctrl+C stops)")
    _echo(f"playground: {base}{RETRIEVER_PATH}/playground/  health: {base}/health")
    serve(index, host=args.host, port=args.port)
    return 0


# ---------------------------------------------------------------------------------- the parser
def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        msg = f"expected an integer >= 1, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return number


def _alpha(value: str) -> float | str:
    """A number or ``auto``; the range is the library's to check (one message, one place)."""
    if value == "auto":
        return value
    try:
        return float(value)
    except ValueError:
        msg = f"expected a number in [0, 1] or 'auto', got {value!r}"
        raise argparse.ArgumentTypeError(msg) from None


def _filter_pair(value: str) -> tuple[str, str]:
    key, sep, wanted = value.partition("=")
    if not sep or not key.strip():
        msg = f"expected KEY=VALUE (e.g. doc_id=P-GAPDH-01), got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return key.strip(), wanted


def _index_option(parser: argparse.ArgumentParser, default: Path | None = None) -> None:
    if default is None:
        parser.add_argument(
            "--index", type=Path, required=True, metavar="DIR", help="the index folder"
        )
    else:
        parser.add_argument(
            "--index",
            type=Path,
            default=default,
            metavar="DIR",
            help=f"the index folder (default: ./{default})",
        )


def _add_index(commands: Subparsers) -> None:
    parser = commands.add_parser(
        "index",
        help="add files or folders to an index",
        description="Add Markdown (.md), HTML (.html), text (.txt) and structured JSON "
        "(.json, .jsonl: one document per line) files, or folders of them (recursively), to "
        "the index; unchanged documents are skipped, changed ones replaced.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="file or folder")
    _index_option(parser)
    parser.add_argument(
        "--batch-size",
        type=_positive_int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"documents per write (default {DEFAULT_BATCH_SIZE})",
    )
    parser.set_defaults(run=_run_index)


def _add_query(commands: Subparsers) -> None:
    parser = commands.add_parser(
        "query",
        help="search the index",
        description="Search the index: the gate opens the best parents (sections), then the "
        "best children (paragraphs) inside them are ranked by the fused score "
        "alpha * s_p + (1 - alpha) * s_c. Omitted options take the retriever's defaults.",
    )
    parser.add_argument("text", help="the question or keywords")
    _index_option(parser)
    parser.add_argument("--k", type=_positive_int, metavar="N", help="results to return")
    parser.add_argument(
        "--alpha", type=_alpha, metavar="A", help="parent weight in [0, 1], or 'auto'"
    )
    parser.add_argument("--parent-top-k", type=_positive_int, metavar="N", help="parents opened")
    parser.add_argument(
        "--child-per-parent", type=_positive_int, metavar="N", help="children kept per parent"
    )
    parser.add_argument(
        "--filter",
        type=_filter_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata filter (repeatable; repeated keys match any value, keys must all match)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of results")
    parser.set_defaults(run=_run_query)


def _add_delete(commands: Subparsers) -> None:
    parser = commands.add_parser("delete", help="remove documents from the index")
    parser.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    _index_option(parser)
    parser.set_defaults(run=_run_delete)


def _add_stats(commands: Subparsers) -> None:
    parser = commands.add_parser("stats", help="counts, size and model of the index")
    _index_option(parser)
    parser.add_argument("--json", action="store_true", help="print the stats as JSON")
    parser.set_defaults(run=_run_stats)


def _add_verify(commands: Subparsers) -> None:
    parser = commands.add_parser(
        "verify",
        help="check that the index's stores agree",
        description="Check that the docstore, the parent vectors and the child vectors agree; "
        "exit 1 and list the problems when they do not.",
    )
    _index_option(parser)
    parser.set_defaults(run=_run_verify)


def _add_demo(commands: Subparsers) -> None:
    parser = commands.add_parser(
        "demo",
        help="index the bundled demo corpus and run example questions",
        description="Index five QASPER papers and a structured methods note (bundled with the "
        "package) and show, for a few questions, what the gate opened and the ranked children.",
    )
    _index_option(parser, DEFAULT_DEMO_INDEX)
    parser.add_argument(
        "--k", type=_positive_int, default=3, metavar="N", help="results per question (default 3)"
    )
    parser.set_defaults(run=_run_demo)


def _port(value: str) -> int:
    number = _positive_int(value)
    if number > _MAX_PORT:
        msg = f"expected a port in 1..{_MAX_PORT}, got {value!r}"
        raise argparse.ArgumentTypeError(msg)
    return number


def _add_serve(commands: Subparsers) -> None:
    parser = commands.add_parser(
        "serve",
        help="serve the retriever over HTTP (LangServe)",
        description="Serve the index's retriever with LangServe: /retriever/invoke, /batch, "
        "/stream, /playground/ and /health. A request's config may set alpha, k, "
        "parent_top_k, child_per_parent, return_parents and filter for that request. "
        'Needs pip install "langchain-gated-parent[serve]".',
    )
    _index_option(parser)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on (default 127.0.0.1: this machine only)",
    )
    parser.add_argument(
        "--port", type=_port, default=8000, metavar="N", help="TCP port (default 8000)"
    )
    parser.set_defaults(run=_run_serve)


SUBCOMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    _add_index,
    _add_query,
    _add_delete,
    _add_stats,
    _add_verify,
    _add_demo,
    _add_serve,
)
"""Each function adds one subcommand to the subparsers and sets its ``run`` handler.

A new subcommand is one more function here: ``run(args) -> int`` returns the exit status and
raises :class:`CliError` for failures the user can fix.
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``gated-parent`` argument parser with every subcommand of :data:`SUBCOMMANDS`."""
    parser = _Parser(
        prog=PROG,
        description="Small-to-big retrieval: section parents gate paragraph children.",
        epilog="exit status: 0 ok, 1 failure, 2 usage or bad option value",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress of the library (stderr)"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``gated-parent``; returns the exit status (the console script exits with it).

    Args:
        argv: Arguments without the program name; ``None`` reads ``sys.argv``.

    Returns:
        0 on success, 1 when the work failed, 2 for a usage mistake or bad option value.
    """
    try:
        args = build_parser().parse_args(argv)
        logging.basicConfig(
            level=logging.INFO if args.verbose else logging.WARNING,
            format=f"{PROG}: %(levelname)s: %(name)s: %(message)s",
            stream=sys.stderr,
        )
        status: int = args.run(args)
    except CliError as error:
        _echo(f"{PROG}: error: {error}", err=True)
        return error.status
    except KeyboardInterrupt:
        _echo(f"{PROG}: interrupted", err=True)
        return 130
    return status


if __name__ == "__main__":
    raise SystemExit(main())
