r"""Parse a document into a section tree with exact character spans.

Every supported input (Markdown, structured JSON, HTML, plain text, or a LangChain ``Document``
holding any of them) becomes one :class:`SectionTree`: a canonical ``text`` plus its sections in
document order, each with its heading span and paragraph spans into that text. Splitters then cut
by spans only, so every chunk they emit is exactly ``text[start:end]`` and can be located again.

Canonical text per format:
    * Markdown and plain text: the input itself.
    * Structured JSON and HTML: a rendered Markdown-like text (``#`` headings by depth, paragraphs
      separated by blank lines), because the input has no single text to point into.

Section ids are the given ids for structured input and ``<doc_id>:s<ordinal>`` otherwise
(ordinal in document order, 0-based, a preamble included), so they are unique per document id.

Example:
    .. code-block:: python

        from langchain_gated_parent.sections import parse_markdown

        tree = parse_markdown("Intro.\n\n# Methods\n\n20 nM siRNA.", doc_id="d1")
        [(s.section_id, s.title, s.level) for s in tree.sections]
        # [('d1:s0', '', 0), ('d1:s1', 'Methods', 1)]
        start, end = tree.sections[1].paragraphs[0]
        tree.text[start:end]  # '20 nM siRNA.'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

from bs4 import BeautifulSoup
from bs4.element import NavigableString, PageElement, PreformattedString, Tag

from langchain_gated_parent.keys import DOC_ID, FORMAT, SOURCE, TITLE

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_core.documents import Document

Span = tuple[int, int]
"""A ``(start, end)`` character range into a :class:`SectionTree`'s ``text``."""


class DocumentFormat(str, Enum):
    """Input formats :func:`parse_document` understands (the ``gp_format`` metadata hint)."""

    MARKDOWN = "markdown"
    STRUCTURED = "structured"
    HTML = "html"
    TEXT = "text"


@dataclass(frozen=True)
class Section:
    """One heading and the paragraphs directly under it (not those of its subsections).

    Attributes:
        section_id: Given id (structured input) or ``<doc_id>:s<ordinal>``.
        title: Heading text without markup; ``""`` for the preamble.
        path: Titles from the top of the document down to this section (``()`` for a preamble).
        level: Heading depth, 1 for top level; 0 for the preamble (text before any heading).
        heading: Span of the heading line(s) including markup; ``None`` for the preamble.
        paragraphs: Spans of the section's own paragraphs, stripped of surrounding whitespace.
        parent_id: Id of the enclosing section, ``None`` for top-level sections and preamble.
    """

    section_id: str
    title: str
    path: tuple[str, ...]
    level: int
    heading: Span | None
    paragraphs: tuple[Span, ...]
    parent_id: str | None

    @property
    def start(self) -> int:
        """Where the section starts: its heading, else its first paragraph."""
        return self.heading[0] if self.heading is not None else self.paragraphs[0][0]


@dataclass(frozen=True)
class SectionTree:
    """A document's canonical text and its sections in document order (pre-order).

    Attributes:
        doc_id: Document id every section id and chunk id derives from.
        text: The canonical text all spans index into.
        sections: Sections in document order; a section's subsections follow it.
        title: The document's title, when it has one.
    """

    doc_id: str
    text: str
    sections: tuple[Section, ...]
    title: str | None = None


@dataclass
class _Draft:
    """A section while it is being filled."""

    section_id: str
    title: str
    path: tuple[str, ...]
    level: int
    heading: Span | None
    parent_id: str | None
    paragraphs: list[Span] = field(default_factory=list)


class _Builder:
    """Turns a stream of headings and paragraphs into sections with paths and parents.

    Nesting follows heading levels: a heading closes every open section of the same or deeper
    level, and its parent is the nearest open section above it. The preamble is never a parent.
    """

    def __init__(self, doc_id: str) -> None:
        self._doc_id = doc_id
        self._drafts: list[_Draft] = []
        self._open: list[_Draft] = []

    def heading(self, title: str, level: int, span: Span, section_id: str | None = None) -> None:
        """Open a section at ``level`` whose heading occupies ``span``."""
        while self._open and self._open[-1].level >= level:
            self._open.pop()
        parent = self._open[-1] if self._open else None
        draft = _Draft(
            section_id=section_id or f"{self._doc_id}:s{len(self._drafts)}",
            title=title,
            path=(*(parent.path if parent else ()), title),
            level=level,
            heading=span,
            parent_id=parent.section_id if parent else None,
        )
        self._drafts.append(draft)
        self._open.append(draft)

    def paragraph(self, span: Span) -> None:
        """Add a paragraph to the current section, opening a preamble if there is none yet."""
        if not self._drafts:
            preamble = _Draft(f"{self._doc_id}:s0", "", (), 0, None, None)
            self._drafts.append(preamble)
        self._drafts[-1].paragraphs.append(span)

    def build(self, text: str, title: str | None = None) -> SectionTree:
        """Freeze the sections into a :class:`SectionTree` over ``text``."""
        sections = tuple(
            Section(
                d.section_id, d.title, d.path, d.level, d.heading, tuple(d.paragraphs), d.parent_id
            )
            for d in self._drafts
        )
        return SectionTree(self._doc_id, text, sections, title)


class _Writer:
    """Renders blocks into a canonical text, separated by blank lines, and returns their spans."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0

    def block(self, content: str) -> Span:
        """Append ``content`` (already stripped) as a block and return its span."""
        if self._parts:
            self._parts.append("\n\n")
            self._length += 2
        start = self._length
        self._parts.append(content)
        self._length += len(content)
        return start, self._length

    def heading(self, title: str, level: int) -> Span:
        """Append a Markdown heading (``#`` repeated by depth, at most 6) and return its span."""
        return self.block(f"{'#' * min(max(level, 1), 6)} {title}".rstrip())

    def text(self) -> str:
        """The rendered text."""
        return "".join(self._parts)


def strip_span(text: str, start: int, end: int) -> Span:
    """Shrink ``[start, end)`` so that ``text[start:end] == text[start:end].strip()``."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


BYTE_ORDER_MARK = "\ufeff"
"""Opens a file read with ``encoding="utf-8"`` (not ``"utf-8-sig"``) that starts with one."""


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield each line of ``text`` (without its line break) with its start offset.

    A byte-order mark opening the text is not part of the first line, so a heading there is
    still one.
    """
    offset = len(BYTE_ORDER_MARK) if text.startswith(BYTE_ORDER_MARK) else 0
    for line in text[offset:].splitlines(keepends=True):
        yield offset, line.rstrip("\r\n")
        offset += len(line)


def _hash_doc_id(text: str) -> str:
    """Stable document id for unnamed input: ``doc-`` + the first 16 hex of sha256(text)."""
    return "doc-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Markdown

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _fence_end(lines: list[tuple[int, str]], index: int, fence: str) -> int:
    """Index of the line closing the fence opened at ``index`` (the last line if unclosed)."""
    closing = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    for end in range(index + 1, len(lines)):
        if closing.match(lines[end][1]):
            return end
    return len(lines) - 1


def parse_markdown(text: str, doc_id: str | None = None, title: str | None = None) -> SectionTree:
    """Parse Markdown into sections: ATX and setext headings, fenced code kept whole.

    A paragraph is a run of non-blank lines; a fenced code block (```` ``` ```` or ``~~~``) is
    one paragraph even across blank lines, and ``# x`` inside it is not a heading. A run of text
    lines directly followed by ``===`` or ``---`` is a setext heading (level 1 or 2). Text before
    the first heading becomes a preamble section (level 0).

    Args:
        text: The Markdown; it is also the tree's canonical text.
        doc_id: Document id; defaults to a hash of ``text``.
        title: The document's title, if known.

    Returns:
        The section tree.
    """
    builder = _Builder(doc_id or _hash_doc_id(text))
    lines = list(_lines(text))
    run: list[tuple[int, str]] = []

    def flush() -> None:
        if run:
            builder.paragraph(strip_span(text, run[0][0], run[-1][0] + len(run[-1][1])))
            run.clear()

    index = 0
    while index < len(lines):
        offset, line = lines[index]
        fence = _FENCE.match(line)
        atx = _ATX.match(line)
        if fence:
            flush()
            end = _fence_end(lines, index, fence.group(1))
            last_offset, last_line = lines[end]
            builder.paragraph(strip_span(text, offset, last_offset + len(last_line)))
            index = end
        elif atx:
            flush()
            builder.heading(
                (atx.group(2) or "").strip(),
                len(atx.group(1)),
                strip_span(text, offset, offset + len(line)),
            )
        elif run and _SETEXT.match(line):
            heading_title = " ".join(part.strip() for _, part in run)
            span = strip_span(text, run[0][0], offset + len(line))
            run.clear()
            builder.heading(heading_title, 1 if line.strip()[0] == "=" else 2, span)
        elif line.strip():
            run.append((offset, line))
        else:
            flush()
        index += 1
    flush()
    return builder.build(text, title)


# --------------------------------------------------------------------------------------------
# Structured JSON


def _expect(value: object, kind: type | tuple[type, ...], where: str, wanted: str) -> None:
    """Raise a ValueError naming ``where`` unless ``value`` is an instance of ``kind``."""
    if not isinstance(value, kind) or isinstance(value, bool):
        msg = f"{where} must be {wanted}, got {type(value).__name__}"
        raise ValueError(msg)  # noqa: TRY004  # malformed documents are ValueErrors, as promised


def _section_paragraphs(section: Mapping[str, Any], where: str) -> list[str]:
    """Validate and return a structured section's ``paras`` (alias ``paragraphs``)."""
    if "paras" in section and "paragraphs" in section:
        msg = f"{where} has both 'paras' and 'paragraphs'; keep one of them"
        raise ValueError(msg)
    key = "paragraphs" if "paragraphs" in section else "paras"
    if key not in section:
        msg = f"{where}.paras is missing; give a list of paragraph strings (may be empty)"
        raise ValueError(msg)
    paragraphs = section[key]
    _expect(paragraphs, list, f"{where}.{key}", "a list of strings")
    for index, paragraph in enumerate(paragraphs):
        _expect(paragraph, str, f"{where}.{key}[{index}]", "a string")
        if not paragraph.strip():
            msg = f"{where}.{key}[{index}] is blank; remove it or give it text"
            raise ValueError(msg)
    return list(paragraphs)


class _StructuredRenderer:
    """Validates structured sections and renders them depth-first into one text and tree."""

    def __init__(self, doc_id: str) -> None:
        self.writer = _Writer()
        self.builder = _Builder(doc_id)
        self._seen: set[str] = set()

    def sections(self, sections: object, where: str, depth: int) -> None:
        """Render the list ``sections`` found at field path ``where`` at heading ``depth``."""
        _expect(sections, list, where, "a list of section objects")
        for index, section in enumerate(cast("list[object]", sections)):
            self._section(section, f"{where}[{index}]", depth)

    def _section(self, section: object, where: str, depth: int) -> None:
        _expect(section, Mapping, where, "an object")
        fields = cast("Mapping[str, Any]", section)
        for key in ("id", "title"):
            if key not in fields:
                msg = f"{where}.{key} is missing; every section needs an id and a title"
                raise ValueError(msg)
            _expect(fields[key], str, f"{where}.{key}", "a string")
        section_id = fields["id"]
        if not section_id or section_id in self._seen:
            problem = "empty" if not section_id else f"a duplicate of {section_id!r}"
            msg = f"{where}.id is {problem}; section ids must be unique and non-empty"
            raise ValueError(msg)
        self._seen.add(section_id)
        paragraphs = _section_paragraphs(fields, where)
        title = " ".join(fields["title"].split())
        self.builder.heading(title, depth, self.writer.heading(title, depth), section_id)
        for paragraph in paragraphs:
            self.builder.paragraph(self.writer.block(paragraph.strip()))
        if "sections" in fields:
            self.sections(fields["sections"], f"{where}.sections", depth + 1)


def parse_structured(data: Mapping[str, Any] | str, doc_id: str | None = None) -> SectionTree:
    """Parse structured JSON (a mapping or a JSON string) into a section tree.

    Shape: ``{"doc_id": str?, "title": str?, "sections": [{"id": str, "title": str,
    "paras": [str, ...], "sections": [...]?}, ...]}``; ``paragraphs`` is accepted for ``paras``.
    The canonical text is a Markdown rendering (a ``#`` heading per section, by depth, capped
    at 6 marks; paragraphs stripped; blank lines between blocks). The document title is kept as
    :attr:`SectionTree.title`, not rendered, so it does not become a section.

    Args:
        data: The structured document.
        doc_id: Document id; defaults to the JSON's ``doc_id``, else a hash of the JSON text.

    Returns:
        The section tree, with the given section ids.

    Raises:
        ValueError: If the input is malformed; the message names the field path, for example
            ``sections[1].paras must be a list of strings, got int``.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as err:
            msg = f"structured input is not valid JSON ({err}); pass a JSON object or a dict"
            raise ValueError(msg) from err
    if not isinstance(data, Mapping):
        msg = f"structured input must be an object with 'sections', got {type(data).__name__}"
        raise ValueError(msg)  # noqa: TRY004  # malformed documents are ValueErrors, as promised
    if "sections" not in data:
        msg = "structured input has no 'sections'; give a list of section objects"
        raise ValueError(msg)
    for key in ("doc_id", "title"):
        if data.get(key) is not None:
            _expect(data[key], str, key, "a string")
    doc_id = (
        doc_id or data.get("doc_id") or _hash_doc_id(json.dumps(data, sort_keys=True, default=str))
    )
    renderer = _StructuredRenderer(doc_id)
    renderer.sections(data["sections"], "sections", 1)
    return renderer.builder.build(renderer.writer.text(), data.get("title"))


# --------------------------------------------------------------------------------------------
# HTML

_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_INLINE = frozenset(
    (
        *("a", "abbr", "b", "bdi", "bdo", "cite", "code", "data", "del", "dfn", "em"),
        *("font", "i", "img", "ins", "kbd", "label", "mark", "q", "s", "samp", "small"),
        *("span", "strong", "sub", "sup", "time", "u", "var", "wbr"),
    )
)
_SKIPPED = ("script", "style", "head", "template", "noscript")


def _inline_text(element: PageElement) -> str | None:
    """The text ``element`` adds to the current paragraph, ``None`` if it is a block."""
    if isinstance(element, PreformattedString):  # comments, doctypes, declarations
        return ""
    if isinstance(element, NavigableString):
        return str(element)
    if isinstance(element, Tag):
        if element.name in _INLINE and not element.find(lambda tag: tag.name not in _INLINE):
            return element.get_text()
        return None
    return ""


def _html_blocks(node: Tag) -> Iterator[tuple[int, str]]:
    """Yield ``(heading level or 0 for a paragraph, text)`` for the blocks under ``node``.

    Inline content (text and inline tags without block descendants) accumulates into the current
    paragraph; any other tag (p, li, td, blockquote, div, ...) ends it, so each innermost block's
    text is one paragraph. ``pre`` keeps its line breaks; other text has whitespace collapsed.
    """
    inline: list[str] = []
    for child in node.children:
        text = _inline_text(child)
        if text is not None:
            inline.append(text)
            continue
        block = cast("Tag", child)
        if paragraph := " ".join("".join(inline).split()):
            yield 0, paragraph
        inline.clear()
        if block.name in _HEADINGS:
            if title := " ".join(block.get_text(" ").split()):
                yield _HEADINGS[block.name], title
        elif block.name == "pre":
            if code := block.get_text().strip():
                yield 0, code
        else:
            yield from _html_blocks(block)
    if paragraph := " ".join("".join(inline).split()):
        yield 0, paragraph


def parse_html(html: str, doc_id: str | None = None, title: str | None = None) -> SectionTree:
    """Parse HTML into sections with beautifulsoup4 (``html.parser``).

    ``h1``-``h6`` open sections; the text of each innermost block element (p, li, td, pre,
    blockquote, div, ...) is a paragraph. The canonical text is a Markdown-like rendering
    (``#`` headings, paragraphs separated by blank lines); ``script``/``style``/``head`` are
    dropped, ``<br>`` separates words, and ``<title>`` becomes the document title.

    Args:
        html: The HTML.
        doc_id: Document id; defaults to a hash of ``html``.
        title: The document's title; defaults to the ``<title>`` element's text.

    Returns:
        The section tree.
    """
    soup = BeautifulSoup(html, "html.parser")
    if title is None and soup.title is not None:
        title = " ".join(soup.title.get_text(" ").split()) or None
    for tag in soup(_SKIPPED):
        tag.decompose()
    for line_break in soup("br"):
        line_break.replace_with(" ")
    writer, builder = _Writer(), _Builder(doc_id or _hash_doc_id(html))
    for level, content in _html_blocks(soup):
        if level:
            builder.heading(content, level, writer.heading(content, level))
        else:
            builder.paragraph(writer.block(content))
    return builder.build(writer.text(), title)


# --------------------------------------------------------------------------------------------
# Plain text

_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2})*)\.?[ \t]+\S.*$")
_CAPS = re.compile(r"^[^a-z]*[A-Z][^a-z]*$")
_SENTENCE_END = (".", "!", "?", ";", ",")
_MAX_HEADING_WORDS = 12


def _text_heading_level(line: str) -> int:
    """Heading level of a plain-text line, 0 if it is not a heading.

    Numbered lines ("2.1 Cell culture") are headings at their numbering depth when the text after
    the number starts with a capital and the line is short and not a sentence; short ALL-CAPS
    lines ("METHODS") are level 1.
    """
    words = line.split()
    if not words or len(words) > _MAX_HEADING_WORDS or line.endswith(_SENTENCE_END):
        return 0
    numbered = _NUMBERED.match(line)
    if numbered and len(words) > 1 and words[1][0].isupper():
        return numbered.group(1).count(".") + 1
    if _CAPS.match(line) and sum(char.isalpha() for char in line) > 1:
        return 1
    return 0


def parse_text(text: str, doc_id: str | None = None, title: str | None = None) -> SectionTree:
    """Parse plain text: paragraphs split on blank lines, heading lines open sections.

    The first line of a block opens a section when :func:`_text_heading_level` says it is a
    heading; the rest of that block is the section's first paragraph. Text without any
    heading is a single preamble section.

    Args:
        text: The text; it is also the tree's canonical text.
        doc_id: Document id; defaults to a hash of ``text``.
        title: The document's title, if known.

    Returns:
        The section tree.
    """
    builder = _Builder(doc_id or _hash_doc_id(text))
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if not block:
            return
        first_offset, first = block[0]
        level = _text_heading_level(first.strip())
        if level:
            builder.heading(
                first.strip(), level, strip_span(text, first_offset, first_offset + len(first))
            )
            del block[0]
        if block:
            builder.paragraph(strip_span(text, block[0][0], block[-1][0] + len(block[-1][1])))
        block.clear()

    for offset, line in _lines(text):
        if line.strip():
            block.append((offset, line))
        else:
            flush()
    flush()
    return builder.build(text, title)


# --------------------------------------------------------------------------------------------
# Detection and Documents

_HTML_TAG = re.compile(
    r"<(?:html|body|h[1-6]|p|div|li|ul|ol|table|pre|blockquote|section|article)\b[^>]*>",
    re.IGNORECASE,
)
_MD_HEADING = re.compile(
    r"^ {0,3}#{1,6}(?:[ \t]|$)|^[^\n]*\S[^\n]*\n {0,3}(?:=+|-+)[ \t]*$", re.MULTILINE
)


def _is_structured(text: str) -> bool:
    """Whether ``text`` is a JSON object with a ``sections`` key."""
    if not text.lstrip().startswith("{"):
        return False
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and "sections" in data


def detect_format(text: str) -> DocumentFormat:
    """Guess the format of ``text``.

    In order: a JSON object with ``sections`` is structured; text starting with a tag (``<`` and
    a letter or ``!``) or containing common block tags is HTML; text with ATX or setext headings
    is Markdown; anything else is plain text.

    Args:
        text: The document text.

    Returns:
        The detected format.
    """
    text = text.removeprefix(BYTE_ORDER_MARK)
    if _is_structured(text):
        return DocumentFormat.STRUCTURED
    stripped = text.lstrip()
    if re.match(r"<[A-Za-z!]", stripped) or _HTML_TAG.search(text):
        return DocumentFormat.HTML
    if _MD_HEADING.search(text):
        return DocumentFormat.MARKDOWN
    return DocumentFormat.TEXT


def parse_document(document: Document) -> SectionTree:
    """Parse a LangChain ``Document`` of any supported format into a section tree.

    The format comes from ``metadata["gp_format"]`` (:data:`~langchain_gated_parent.keys.FORMAT`)
    when present, else :func:`detect_format`; a loader's own ``format`` key is not read. The
    document id is ``metadata["doc_id"]``, else ``metadata["source"]``, else (structured) the
    JSON's ``doc_id``, else ``doc-`` plus the first 16 hex digits of the sha256 of the text, so
    re-ingesting the same unnamed text gives the same ids. ``metadata["title"]`` overrides a
    title found in the document.

    Args:
        document: The document.

    Returns:
        The section tree.

    Raises:
        ValueError: If the format hint is unknown, or structured input is malformed.
    """
    metadata = document.metadata
    hint = metadata.get(FORMAT)
    try:
        fmt = DocumentFormat(hint) if hint is not None else detect_format(document.page_content)
    except ValueError as err:
        choices = ", ".join(f.value for f in DocumentFormat)
        msg = f"unknown metadata format {hint!r}; use one of {choices} or leave it out to detect"
        raise ValueError(msg) from err
    named = metadata.get(DOC_ID) or metadata.get(SOURCE)
    doc_id = str(named) if named else None
    title = metadata.get(TITLE)
    text = document.page_content
    if fmt is DocumentFormat.STRUCTURED:
        tree = parse_structured(text, doc_id)
        return tree if title is None else SectionTree(tree.doc_id, tree.text, tree.sections, title)
    parser = {
        DocumentFormat.MARKDOWN: parse_markdown,
        DocumentFormat.HTML: parse_html,
        DocumentFormat.TEXT: parse_text,
    }[fmt]
    return parser(text, doc_id, title)
