"""Files and folders into the Documents the index adds: the one file loader of the package.

:class:`GatedParentLoader` is a LangChain ``BaseLoader``: one Document per file (per line of a
``.jsonl`` file), in the form the splitters read, so it fits any LangChain pipeline. A PDF is
read by :func:`~langchain_gated_parent.pdf.read_pdf` into Markdown whose headings are the
section tree recovered from the page (extra ``[pdf]``). The CLI's ``index`` and ``sections``
commands and the demo corpus all read files through here, so a file reads the same way wherever
it comes from.

Document ids are stable, so re-indexing the same files skips or replaces them: a structured JSON
file's ``doc_id``, else a Markdown file's front matter ``doc_id``, else the file's path relative
to the folder given (or its name, for a file given directly). A Markdown file may start with a
front matter block of ``key: value`` lines between ``---`` lines; its keys become document
metadata (``title``, ``doc_id``, or any key to filter on) and the block is not indexed, so
``gp_start_index``/``gp_end_index`` count from the first character after it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

from langchain_gated_parent import keys
from langchain_gated_parent.sections import parse_document

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
    ".json": "structured",
    ".jsonl": "structured",
    ".pdf": "markdown",
}
"""File suffixes the loader reads, and the format hint (``gp_format``) each one gets.

A PDF is read into Markdown (see :func:`pdf_document`)."""
TOTAL_PAGES = "total_pages"
"""Metadata key of a PDF's page count (the name LangChain's PDF loaders use)."""

_BINARY_PROBE = 8192
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")


class LoadError(ValueError):
    """A file that cannot be indexed (unreadable, binary, malformed); the message names it."""


class PathError(LoadError):
    """A path that does not exist or has an unsupported type: the caller's mistake."""


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
        raise LoadError(msg) from error
    if not isinstance(data, dict):
        msg = (
            f"{where} must be a JSON object with 'doc_id' and 'sections', got {type(data).__name__}"
        )
        raise LoadError(msg)
    doc_id = data.get("doc_id")
    return Document(
        page_content=line,
        metadata={keys.DOC_ID: doc_id if isinstance(doc_id, str) and doc_id else name, **metadata},
    )


def documents_from_text(text: str, name: str, suffix: str, source: str) -> list[Document]:
    """Turn one file's text into the Documents the index adds.

    Args:
        text: The file's text.
        name: The fallback document id: the file's path relative to the folder being indexed.
        suffix: The file's suffix (a key of :data:`FORMATS`), which decides the format.
        source: Where the text came from, kept as ``source`` metadata.

    Returns:
        One Document, or one per non-blank line of a ``.jsonl`` file (id ``name:line`` when
        the line's JSON has no ``doc_id``).

    Raises:
        LoadError: The JSON is invalid or not an object.
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


def pdf_document(path: Path, name: str, password: str | None = None) -> Document:
    """A PDF as one Markdown Document: its headings are the section tree read from the page.

    Metadata: ``doc_id`` (``name``), ``source``, ``title`` (when the PDF has one),
    ``total_pages``, the format hint ``markdown`` and ``gp_page_starts`` (where each page
    starts in the Markdown, page 1 first).

    Raises:
        LoadError: The PDF is encrypted, has no text layer, is truncated or corrupt, or is not a
            PDF; the message names the file and the fix.
        ImportError: The ``[pdf]`` extra is not installed (the message names the command).
    """
    from langchain_gated_parent.pdf import PdfError, read_pdf  # noqa: PLC0415 (extra [pdf])

    try:
        pdf = read_pdf(path, password=password)
    except PdfError as error:
        raise LoadError(str(error)) from error
    metadata: dict[str, Any] = {
        keys.DOC_ID: name,
        keys.SOURCE: str(path),
        keys.FORMAT: FORMATS[".pdf"],
        TOTAL_PAGES: pdf.pages,
        keys.PAGE_STARTS: list(pdf.page_starts),
    }
    if pdf.title:
        metadata[keys.TITLE] = pdf.title
    return Document(page_content=pdf.markdown, metadata=metadata)


def load_file(path: Path, name: str, password: str | None = None) -> list[Document]:
    """One file's Documents (see :func:`documents_from_text` and :func:`pdf_document`).

    Args:
        path: The file.
        name: Its fallback document id (its path relative to the folder being loaded).
        password: The password of an encrypted PDF.

    Raises:
        LoadError: The file is unreadable, binary, not UTF-8, malformed, or a bad PDF.
    """
    if path.suffix.lower() == ".pdf":
        return [pdf_document(path, name, password)]
    return documents_from_text(read_text(path), name, path.suffix, str(path))


class GatedParentLoader(BaseLoader):
    """Files and folders as Documents the section splitters read: one per file.

    Markdown, HTML, text and structured JSON files are read as text with a format hint; a PDF
    is read into Markdown with its section tree recovered from typography (or its bookmarks),
    page offsets in ``gp_page_starts``. Folders are walked recursively in sorted order,
    hidden files and unsupported suffixes skipped. Document ids are stable (see the module
    docstring), so loading the same files again replaces or skips them in an index.

    Setup:
        .. code-block:: bash

            pip install "langchain-gated-parent[pdf]"

    Instantiate:
        .. code-block:: python

            from langchain_gated_parent.loaders import GatedParentLoader

            loader = GatedParentLoader("papers/")  # a folder, a file, or a list of them

    Usage:
        .. code-block:: python

            for document in loader.lazy_load():
                print(document.metadata["doc_id"], document.metadata.get("title"))
            # attention.pdf Attention Is All You Need

    Use with the index:
        .. code-block:: python

            index.add_documents(loader.load())
    """

    def __init__(
        self, paths: str | Path | Sequence[str | Path], *, password: str | None = None
    ) -> None:
        """Load ``paths`` (files or folders); ``password`` opens encrypted PDFs."""
        self.paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
        self.password = password

    def lazy_load(self) -> Iterator[Document]:
        """Read one file at a time; a file that cannot be read raises :class:`LoadError`.

        Raises:
            PathError: A path is missing, a file has an unsupported suffix, or a folder holds
                no supported file.
            LoadError: A file is unreadable, binary, not UTF-8, malformed, or a bad PDF.
        """
        for path, name in files_to_load(self.paths):
            yield from load_file(path, name, self.password)


def read_text(path: Path) -> str:
    """A file's text, refusing binary and non-UTF-8 files by name instead of indexing noise."""
    try:
        data = path.read_bytes()
    except OSError as error:
        msg = f"cannot read {path}: {error.strerror or error}"
        raise LoadError(msg) from error
    if b"\x00" in data[:_BINARY_PROBE]:
        msg = f"{path} is a binary file, not text; remove it or index its folder without it"
        raise LoadError(msg)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        msg = (
            f"{path} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}); "
            "convert it, e.g. iconv -f latin1 -t utf-8"
        )
        raise LoadError(msg) from error


def files_to_load(paths: Sequence[Path]) -> list[tuple[Path, str]]:
    """The files to index with their fallback ids, folders walked in sorted order.

    Hidden files and folders (``.git``...) are skipped, and so are other suffixes inside a
    folder; a file named directly must have a supported suffix.

    Raises:
        PathError: A path does not exist, a file has an unsupported suffix, or a folder holds
            no supported file.
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
                raise PathError(msg)
            found.extend(inside)
        elif path.is_file():
            if path.suffix.lower() not in FORMATS:
                msg = f"cannot index {path}: unsupported file type (use {supported})"
                raise PathError(msg)
            found.append((path, path.name))
        else:
            msg = f"{path} does not exist"
            raise PathError(msg)
    return found


def _check_parses(document: Document, path: Path) -> None:
    """Parse a document as the index will, so a malformed one fails by its file's name."""
    try:
        tree = parse_document(document)
    except ValueError as error:
        msg = f"{path}: {error}"
        raise LoadError(msg) from error
    if not tree.text.strip():
        msg = f"{path}: no text to index (empty or whitespace only); leave the file out"
        raise LoadError(msg)


def load_documents(
    paths: Sequence[Path], *, failed: list[LoadError] | None = None
) -> list[Document]:
    """Read and check every file before anything is embedded or written.

    Each document is parsed once here so that a malformed file fails by name, before the model
    loads and before a partial ingest, and two files claiming one id are refused (the index
    would silently keep only the later one).

    Args:
        paths: Files and folders.
        failed: When given, a file that cannot be loaded is left out and its error appended
            here (the rest is still loaded); otherwise the first such file raises.

    Returns:
        The documents, in file order.

    Raises:
        PathError: A path is missing or unsupported.
        LoadError: A file is unreadable, binary, not UTF-8 or malformed, or two documents share
            an id (only when ``failed`` is not given).
    """
    documents: list[Document] = []
    origin: dict[str, str] = {}
    for path, name in files_to_load(paths):
        try:
            found = _checked(path, name, origin)
        except LoadError as error:
            if failed is None:
                raise
            failed.append(error)
            continue
        documents.extend(found)
    return documents


def _checked(path: Path, name: str, origin: dict[str, str]) -> list[Document]:
    """A file's documents, refused when one fails to parse or takes an id already loaded.

    ``origin`` (document id -> file) gains the file's ids only when the whole file is accepted.
    """
    found = load_file(path, name)
    mine: dict[str, str] = {}
    for document in found:
        doc_id = document.metadata[keys.DOC_ID]
        if doc_id in origin or doc_id in mine:
            msg = (
                f"{path} and {origin.get(doc_id, path)} both give document id {doc_id!r}; "
                "index their common parent folder, or give each a unique doc_id"
            )
            raise LoadError(msg)
        mine[doc_id] = str(path)
        _check_parses(document, path)
    origin.update(mine)
    return found
