"""Section parents and paragraph children, cut by exact spans of a section tree.

:class:`SectionSplitter` turns a document into parents (whole sections, or their parts when a
section exceeds ``max_parent_tokens``); :class:`ParagraphSplitter` turns it into children
(paragraphs or sentences) that never cross a parent; :func:`split_document` does both at once
and returns them with the canonical text all spans index into.

Every chunk is exactly ``text[start_index:end_index]`` of the document's canonical text (see
:mod:`langchain_gated_parent.sections`), and ids are deterministic (``P-<section id>``,
``C-<section id>-<n>``), so re-ingesting a document replaces its chunks instead of adding new
ones. Sizes are tiktoken token counts (offline, see :mod:`langchain_gated_parent.tokens`), each
paragraph and chunk encoded once per call.

Example:
    .. code-block:: python

        from langchain_core.documents import Document
        from langchain_gated_parent.splitters import split_document

        doc = Document(
            page_content='{"doc_id": "P-GAPDH-01", "sections": [{"id": "S-methods", '
            '"title": "Methods", "paras": ["20 nM siRNA targeting GAPDH", '
            '"48 h before RNA extraction"]}]}'
        )
        split = split_document(doc)
        [p.metadata["parent_id"] for p in split.parents]  # ['P-S-methods']
        [(c.metadata["chunk_id"], c.page_content) for c in split.children]
        # [('C-S-methods-1', '20 nM siRNA targeting GAPDH'),
        #  ('C-S-methods-2', '48 h before RNA extraction')]
"""

from __future__ import annotations

import copy
import re
import sys
from dataclasses import dataclass
from enum import Enum
from itertools import groupby
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_gated_parent.keys import (
    CHUNK_ID,
    DOC_ID,
    END_INDEX,
    LEVEL,
    PARENT_ID,
    SECTION_ID,
    SECTION_PATH,
    START_INDEX,
    TITLE,
    TOKENS,
)
from langchain_gated_parent.sections import Section, SectionTree, Span, parse_document, strip_span
from langchain_gated_parent.tokens import token_counter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from typing_extensions import Self

_Level = TypeVar("_Level", bound=Enum)


class ParentChunkLevel(str, Enum):
    """What a parent is."""

    SECTION = "section"
    """A top-level section with all its subsections folded in."""
    SUBSECTION = "subsection"
    """Every section with paragraphs of its own (or a leaf heading), without its subsections."""


class ChildChunkLevel(str, Enum):
    """What a child is."""

    PARAGRAPH = "paragraph"
    """One paragraph (cut at sentence boundaries when longer than ``max_child_tokens``)."""
    SENTENCE = "sentence"
    """One sentence (cut at word boundaries when longer than ``max_child_tokens``)."""


def _choice(value: str | Enum, choices: type[_Level], name: str) -> _Level:
    """Convert ``value`` to the enum ``choices`` or raise a ValueError listing them."""
    try:
        return choices(value)
    except ValueError as err:
        allowed = ", ".join(repr(choice.value) for choice in choices)
        msg = f"unknown {name} {value!r}; choose one of {allowed}"
        raise ValueError(msg) from err


def _length_setting(
    encoding_name: str, length_function: Callable[[str], int] | None
) -> dict[str, str]:
    """How a splitter counts sizes, as an index records it: an encoding, or a function's name.

    A function is recorded by a name that finds it again: ``"len"``, or ``"module:qualname"``
    of a module-level function. A lambda, a closure or a bound method has no such name and is
    refused: an index built with it could not be reopened with the same counting.
    """
    if length_function is None:
        return {"encoding_name": encoding_name}
    if length_function is len:
        return {"length_function": "len"}
    module = getattr(length_function, "__module__", None)
    qualname = getattr(length_function, "__qualname__", "")
    if (
        module
        and "<" not in qualname
        and _named_function(f"{module}:{qualname}") is length_function
    ):
        return {"length_function": f"{module}:{qualname}"}
    msg = (
        f"length_function {length_function!r} cannot be recorded with an index (it has no "
        "importable name, so a reopened index could not count sizes the same way); pass "
        "length_function=len, a module-level function, or encoding_name=... instead"
    )
    raise ValueError(msg)


def _named_function(name: str) -> Callable[[str], int] | None:
    """The function a recorded name refers to, in a module this process has imported."""
    if name == "len":
        return len
    module, _, qualname = name.partition(":")
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if callable(found) else None


def _options_from_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A splitter's keyword arguments from its recorded settings (see ``settings()``)."""
    options = dict(settings)
    name = options.pop("length_function", None)
    if name is not None:
        function = _named_function(name)
        if function is None:
            msg = (
                f"the splitter counts sizes with {name!r}, which is not loaded in this "
                f"process; import its module first, or pass the splitter built with it"
            )
            raise ValueError(msg)
        options["length_function"] = function
    return options


def _check_limit(value: int | None, name: str) -> None:
    """Reject a token limit that is zero or negative (``None`` means unlimited)."""
    if value is not None and value <= 0:
        msg = f"{name} must be a positive number of tokens or None for no limit, got {value}"
        raise ValueError(msg)


class _SpanCounter:
    """Token counts of spans of one text, memoized for one split call."""

    def __init__(self, text: str, length_function: Callable[[str], int]) -> None:
        self._text = text
        self._length_function = length_function
        self._counts: dict[Span, int] = {}

    @property
    def length_function(self) -> Callable[[str], int]:
        """The function counting a text's size."""
        return self._length_function

    def __call__(self, span: Span) -> int:
        if span not in self._counts:
            self._counts[span] = self._length_function(self._text[span[0] : span[1]])
        return self._counts[span]


@dataclass(frozen=True)
class _Parent:
    """A parent's identity, span and the paragraphs (with their sections) it contains."""

    parent_id: str
    section: Section
    span: Span
    tokens: int
    paragraphs: tuple[tuple[Section, Span], ...]


@dataclass(frozen=True)
class _Child:
    """A child's identity, parent, own section and span."""

    chunk_id: str
    parent: _Parent
    section: Section
    span: Span
    tokens: int


def _pack(
    units: Sequence[Span],
    counts: Sequence[int],
    limit: int,
    count: _SpanCounter,
    overlap: int = 0,
) -> list[tuple[int, int]]:
    """Group consecutive units into ranges of at most ``limit`` tokens.

    Greedy on the summed unit counts, then each range is checked with an exact count of its span
    (token counts are not additive across boundaries) and shrunk until it fits. A single unit over
    the limit stays whole in its own range. With ``overlap``, a range after the first starts with
    the trailing units of the previous range worth at most ``overlap`` tokens, as long as the
    range still advances past the previous one.

    Args:
        units: Spans in document order.
        counts: Token count of each unit.
        limit: Maximum tokens per range.
        count: Exact counter for spans of the same text.
        overlap: Tokens of trailing units to repeat at the start of the next range.

    Returns:
        Half-open index ranges ``(i, j)`` into ``units``.
    """
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < len(units):
        stop, total = start + 1, counts[start]
        while stop < len(units) and total + counts[stop] <= limit:
            total += counts[stop]
            stop += 1
        while stop - start > 1 and count((units[start][0], units[stop - 1][1])) > limit:
            stop -= 1
        ranges.append((start, stop))
        if stop == len(units):
            break
        start, repeated = stop, 0
        while start - 1 > ranges[-1][0] and repeated + counts[start - 1] <= overlap:
            start -= 1
            repeated += counts[start]
        while start < stop and repeated + counts[stop] > limit:
            repeated -= counts[start]
            start += 1
    return ranges


def _groups(tree: SectionTree, level: ParentChunkLevel) -> list[list[Section]]:
    """Sections forming each parent: a top-level section and its descendants, or one section."""
    if level is ParentChunkLevel.SECTION:
        groups: list[list[Section]] = []
        for section in tree.sections:
            if section.parent_id is None:
                groups.append([section])
            else:
                groups[-1].append(section)
        return groups
    enclosing = {section.parent_id for section in tree.sections}
    return [
        [section]
        for section in tree.sections
        if section.paragraphs or section.section_id not in enclosing
    ]


def _build_parents(
    tree: SectionTree, level: ParentChunkLevel, max_tokens: int | None, count: _SpanCounter
) -> list[_Parent]:
    """Parents of ``tree``, in document order, cut into parts where over ``max_tokens``.

    A part after the first starts at the heading(s) right before its first paragraph, if any, so
    no subsection heading falls between two parts; the last part runs to the end of the group.
    """
    parents: list[_Parent] = []
    for group in _groups(tree, level):
        top = group[0]
        paragraphs = [(section, span) for section in group for span in section.paragraphs]
        headings = [section.heading for section in group if section.heading is not None]
        start = top.start
        end = max(span[1] for span in [*headings, *(span for _, span in paragraphs)])
        if max_tokens is None or len(paragraphs) < 2 or count((start, end)) <= max_tokens:  # noqa: PLR2004
            parent = _Parent(
                f"P-{top.section_id}", top, (start, end), count((start, end)), tuple(paragraphs)
            )
            parents.append(parent)
            continue
        units: list[Span] = []
        counts: list[int] = []
        next_heading = 0
        for _, span in paragraphs:
            unit_start, unit_count = span[0], count(span)
            while next_heading < len(headings) and headings[next_heading][0] < span[0]:
                unit_start = min(unit_start, headings[next_heading][0])
                unit_count += count(headings[next_heading])
                next_heading += 1
            units.append((unit_start, span[1]))
            counts.append(unit_count)
        units[0], units[-1] = (start, units[0][1]), (units[-1][0], end)
        for part, (first, last) in enumerate(_pack(units, counts, max_tokens, count), start=1):
            span = (units[first][0], units[last - 1][1])
            parent_id = f"P-{top.section_id}-part{part}"
            parents.append(
                _Parent(parent_id, top, span, count(span), tuple(paragraphs[first:last]))
            )
    return parents


_SENTENCE_BREAK = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    (
        *("al.", "approx.", "cf.", "dr.", "e.g.", "eq.", "eqs.", "etc.", "fig.", "figs."),
        *("i.e.", "mr.", "mrs.", "ms.", "no.", "sec.", "tab.", "vs."),
    )
)
_WORD = re.compile(r"\S+")


def _sentences(text: str, span: Span) -> list[Span]:
    """Sentence spans inside ``span``: breaks after ``.!?`` followed by a capital or digit.

    A heuristic, not a linguistic sentence splitter: common abbreviations (``e.g.``, ``et al.``,
    ``Fig.``) and initials (``J.``) do not end a sentence.
    """
    sentences: list[Span] = []
    begin = span[0]
    for match in _SENTENCE_BREAK.finditer(text, span[0], span[1]):
        last_word = text[begin : match.start() + 1].rsplit(maxsplit=1)[-1].lower()
        is_initial = len(last_word) == 2 and last_word[0].isalpha()  # noqa: PLR2004
        if last_word in _ABBREVIATIONS or is_initial:
            continue
        sentences.append(strip_span(text, begin, match.end()))
        begin = match.end()
    sentences.append(strip_span(text, begin, span[1]))
    return [sentence for sentence in sentences if sentence[0] < sentence[1]]


def _pieces(
    text: str, span: Span, max_tokens: int | None, overlap: int, count: _SpanCounter
) -> list[Span]:
    """Cut ``span`` into pieces of at most ``max_tokens`` tokens, if it is longer.

    Pieces are runs of sentences (words, inside a sentence that alone is too long), with
    ``overlap`` tokens repeated between consecutive pieces.
    """
    if max_tokens is None or count(span) <= max_tokens:
        return [span]
    units: list[Span] = []
    for sentence in _sentences(text, span):
        if count(sentence) <= max_tokens:
            units.append(sentence)
        else:
            units.extend(match.span() for match in _WORD.finditer(text, sentence[0], sentence[1]))
    counts = [count(unit) for unit in units]
    ranges = _pack(units, counts, max_tokens, count, overlap)
    return [(units[first][0], units[last - 1][1]) for first, last in ranges]


def _merge(
    spans: list[Span], min_tokens: int, max_tokens: int | None, count: _SpanCounter
) -> list[Span]:
    """Merge spans under ``min_tokens`` with their neighbours while the result fits ``max_tokens``.

    Left to right, a chunk under ``min_tokens`` absorbs the next one; a trailing chunk still under
    ``min_tokens`` joins its predecessor. A merged span covers both (and the gap between them).
    """
    if not min_tokens:
        return spans

    def fits(span: Span) -> bool:
        return max_tokens is None or count(span) <= max_tokens

    merged: list[Span] = []
    for span in spans:
        if merged and count(merged[-1]) < min_tokens and fits((merged[-1][0], span[1])):
            merged[-1] = (merged[-1][0], span[1])
        else:
            merged.append(span)
    if len(merged) > 1 and count(merged[-1]) < min_tokens and fits((merged[-2][0], merged[-1][1])):
        merged[-2:] = [(merged[-2][0], merged[-1][1])]
    return merged


_SCALARS = (str, int, float, bool, type(None))


def _base_metadata(tree: SectionTree, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the source document's metadata with the document id and title set.

    Deep when a value can change in place (a list, a dict), so no two Documents share one;
    a plain copy otherwise (deep-copying scalars took a sixth of a split, profiled).
    """
    plain = all(isinstance(value, _SCALARS) for value in metadata.values())
    base = dict(metadata) if plain else copy.deepcopy(dict(metadata))
    base[DOC_ID] = tree.doc_id
    if tree.title is not None:
        base[TITLE] = tree.title
    return base


def _parent_documents(
    tree: SectionTree, parents: Iterable[_Parent], metadata: Mapping[str, Any]
) -> list[Document]:
    """LangChain Documents for ``parents``, carrying ids, path, level, span and size."""
    documents = []
    for parent in parents:
        start, end = parent.span
        fields = {
            PARENT_ID: parent.parent_id,
            SECTION_ID: parent.section.section_id,
            SECTION_PATH: list(parent.section.path),
            LEVEL: parent.section.level,
            START_INDEX: start,
            END_INDEX: end,
            TOKENS: parent.tokens,
        }
        page_content = tree.text[start:end]
        documents.append(
            Document(page_content, metadata={**_base_metadata(tree, metadata), **fields})
        )
    return documents


def _child_documents(
    tree: SectionTree, children: Iterable[_Child], metadata: Mapping[str, Any]
) -> list[Document]:
    """LangChain Documents for ``children``, carrying ids, path, span and size."""
    documents = []
    for child in children:
        start, end = child.span
        fields = {
            CHUNK_ID: child.chunk_id,
            PARENT_ID: child.parent.parent_id,
            SECTION_ID: child.section.section_id,
            SECTION_PATH: list(child.section.path),
            START_INDEX: start,
            END_INDEX: end,
            TOKENS: child.tokens,
        }
        page_content = tree.text[start:end]
        documents.append(
            Document(page_content, metadata={**_base_metadata(tree, metadata), **fields})
        )
    return documents


def child_id(parent_id: str, number: int) -> str:
    """The ``number``-th (1-based) child id of a parent: ``P-<sid>`` → ``C-<sid>-<number>``.

    Children are numbered 1..n within their parent, so a parent's id and child count name all
    its children: the index fetches them by id, the cheapest read a vector store has.
    """
    return f"C-{parent_id.removeprefix('P-')}-{number}"


class _TreeSplitter(TextSplitter):
    """What both splitters share: texts and metadata go through ``split_documents``.

    ``split_text`` returns strings, as ``TextSplitter`` promises; ids, spans and heading paths
    arrive as metadata through ``create_documents`` / ``split_documents``.
    """

    def split_text(self, text: str) -> list[str]:
        """Split ``text`` (any supported format, detected) into chunk texts.

        Args:
            text: The document text.

        Returns:
            The chunks' texts, in document order.
        """
        return [document.page_content for document in self.create_documents([text])]

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """Split texts into Documents; metadata may carry ``doc_id`` and ``gp_format``.

        Args:
            texts: Document texts.
            metadatas: Metadata per text, copied into each of its chunks.

        Returns:
            Documents with ids, heading path and span in their metadata.
        """
        metadatas = metadatas or [{} for _ in texts]
        return self.split_documents(
            Document(text, metadata=metadata)
            for text, metadata in zip(texts, metadatas, strict=True)
        )


class SectionSplitter(_TreeSplitter):
    r"""Split documents into section parents with exact spans and deterministic ids.

    A parent is a top-level section with its subsections folded in (``"section"``) or each
    section with paragraphs of its own (``"subsection"``). A section over ``max_parent_tokens``
    is cut on paragraph boundaries into consecutive parts ``P-<sid>-part1``, ``-part2``...; no
    paragraph is lost or repeated, and a single paragraph over the limit stays whole.

    Setup:
        .. code-block:: bash

            pip install langchain-gated-parent

    Key init args:
        parent_chunk_level: ``"section"`` (default) or ``"subsection"``.
        max_parent_tokens: Token limit per parent (default 2048); ``None`` for no limit.
        encoding_name: tiktoken encoding counting tokens (default ``"cl100k_base"``).
        length_function: Counts a text's size instead of the encoding when given.

    Instantiate:
        .. code-block:: python

            from langchain_gated_parent.splitters import SectionSplitter

            splitter = SectionSplitter(max_parent_tokens=1024)

    Usage:
        .. code-block:: python

            splitter.split_text("# A\n\nOne.\n\n# B\n\nTwo.")
            # ['# A\n\nOne.', '# B\n\nTwo.']
            docs = splitter.create_documents(["# A\n\nOne."], [{"doc_id": "d1"}])
            docs[0].metadata["parent_id"], docs[0].metadata["gp_section_path"]
            # ('P-d1:s0', ['A'])
    """

    def __init__(
        self,
        *,
        parent_chunk_level: ParentChunkLevel | str = ParentChunkLevel.SECTION,
        max_parent_tokens: int | None = 2048,
        encoding_name: str = "cl100k_base",
        length_function: Callable[[str], int] | None = None,
    ) -> None:
        """Create a section splitter.

        Args:
            parent_chunk_level: ``"section"`` or ``"subsection"``.
            max_parent_tokens: Token limit per parent; ``None`` for no limit.
            encoding_name: tiktoken encoding counting tokens, used unless ``length_function``.
            length_function: Counts a text's size; overrides ``encoding_name``.

        Raises:
            ValueError: If the level or encoding is unknown, or the limit is not positive.
        """
        level = _choice(parent_chunk_level, ParentChunkLevel, "parent_chunk_level")
        _check_limit(max_parent_tokens, "max_parent_tokens")
        super().__init__(
            chunk_size=max_parent_tokens or sys.maxsize,
            chunk_overlap=0,
            length_function=length_function or token_counter(encoding_name),
        )
        self._level = level
        self._max_tokens = max_parent_tokens
        self._length_arguments = (encoding_name, length_function)

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this splitter, as plain JSON values.

        An index records them and refuses to be reopened with a splitter whose settings differ.

        Raises:
            ValueError: If the length function has no name to record it by (a lambda).
        """
        return {
            "parent_chunk_level": self._level.value,
            "max_parent_tokens": self._max_tokens,
            **_length_setting(*self._length_arguments),
        }

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Self:
        """The splitter :meth:`settings` describes.

        Raises:
            ValueError: If a recorded length function is not loaded in this process.
        """
        return cls(**_options_from_settings(settings))

    @property
    def parent_chunk_level(self) -> ParentChunkLevel:
        """What a parent is."""
        return self._level

    @property
    def max_parent_tokens(self) -> int | None:
        """Token limit per parent, ``None`` for no limit."""
        return self._max_tokens

    @property
    def length_function(self) -> Callable[[str], int]:
        """The function counting a text's size."""
        return self._length_function

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Split Documents into parent Documents.

        Args:
            documents: Documents of any supported format.

        Returns:
            Parent Documents with ids, heading path and span in their metadata.
        """
        parents: list[Document] = []
        for document in documents:
            tree = parse_document(document)
            count = _SpanCounter(tree.text, self.length_function)
            found = _build_parents(tree, self._level, self._max_tokens, count)
            parents.extend(_parent_documents(tree, found, document.metadata))
        return parents


class ParagraphSplitter(_TreeSplitter):
    r"""Split documents into paragraph (or sentence) children that never cross a parent.

    Children are cut from each parent of a :class:`SectionSplitter`: used alone, the default
    ``SectionSplitter()``; use :func:`split_document` to pair it with a configured one. Child
    ids are ``C-<parent id without "P-">-<n>``, 1-based within the parent, so the children of
    part 2 of a cut section are ``C-<sid>-part2-1``, ``C-<sid>-part2-2``...

    ``min_child_tokens`` defaults to 0 (no merging): a child then is exactly one paragraph,
    which keeps ids and spans predictable and lets evidence be mapped back to paragraphs;
    raise it (e.g. 16) to fold captions and one-liners into a neighbour. Merging stays within
    one section, so each child has one heading path.

    Setup:
        .. code-block:: bash

            pip install langchain-gated-parent

    Key init args:
        child_chunk_level: ``"paragraph"`` (default) or ``"sentence"``.
        min_child_tokens: Adjacent children under this size merge (default 0: never).
        max_child_tokens: Longer paragraphs are cut at sentence boundaries (default 512).
        child_overlap_tokens: Tokens repeated between the pieces of a cut paragraph (default 0).
        encoding_name: tiktoken encoding counting tokens (default ``"cl100k_base"``).
        length_function: Counts a text's size instead of the encoding when given.

    Instantiate:
        .. code-block:: python

            from langchain_gated_parent.splitters import ParagraphSplitter

            splitter = ParagraphSplitter(max_child_tokens=256)

    Usage:
        .. code-block:: python

            splitter.split_text("# A\n\nOne.\n\nTwo.")
            # ['One.', 'Two.']
            docs = splitter.create_documents(["# A\n\nOne."], [{"doc_id": "d1"}])
            docs[0].metadata["chunk_id"], docs[0].metadata["parent_id"]
            # ('C-d1:s0-1', 'P-d1:s0')
    """

    def __init__(  # noqa: PLR0913  # each argument is an independent, documented knob
        self,
        *,
        child_chunk_level: ChildChunkLevel | str = ChildChunkLevel.PARAGRAPH,
        min_child_tokens: int = 0,
        max_child_tokens: int | None = 512,
        child_overlap_tokens: int = 0,
        encoding_name: str = "cl100k_base",
        length_function: Callable[[str], int] | None = None,
    ) -> None:
        """Create a paragraph splitter.

        Args:
            child_chunk_level: ``"paragraph"`` or ``"sentence"``.
            min_child_tokens: Adjacent children under this size merge; 0 disables merging.
            max_child_tokens: Token limit per child; ``None`` for no limit.
            child_overlap_tokens: Overlap between the pieces of a cut paragraph or sentence.
            encoding_name: tiktoken encoding counting tokens, used unless ``length_function``.
            length_function: Counts a text's size; overrides ``encoding_name``.

        Raises:
            ValueError: If the level or encoding is unknown, a size is not positive, the
                minimum is not below the maximum, or the overlap is not below the maximum.
        """
        level = _choice(child_chunk_level, ChildChunkLevel, "child_chunk_level")
        _check_limit(max_child_tokens, "max_child_tokens")
        if min_child_tokens < 0:
            msg = f"min_child_tokens must be 0 (no merging) or positive, got {min_child_tokens}"
            raise ValueError(msg)
        if max_child_tokens is not None and min_child_tokens >= max_child_tokens:
            msg = (
                f"min_child_tokens ({min_child_tokens}) must be smaller than max_child_tokens "
                f"({max_child_tokens}); lower the minimum or raise the maximum"
            )
            raise ValueError(msg)
        if child_overlap_tokens < 0:
            msg = f"child_overlap_tokens must be 0 or positive, got {child_overlap_tokens}"
            raise ValueError(msg)
        if child_overlap_tokens and max_child_tokens is None:
            msg = (
                f"child_overlap_tokens ({child_overlap_tokens}) needs max_child_tokens: "
                "set a limit or set the overlap to 0"
            )
            raise ValueError(msg)
        if max_child_tokens is not None and child_overlap_tokens >= max_child_tokens:
            msg = (
                f"child_overlap_tokens ({child_overlap_tokens}) must be smaller than "
                f"max_child_tokens ({max_child_tokens}); lower the overlap"
            )
            raise ValueError(msg)
        super().__init__(
            chunk_size=max_child_tokens or sys.maxsize,
            chunk_overlap=child_overlap_tokens,
            length_function=length_function or token_counter(encoding_name),
        )
        self._level = level
        self._min_tokens = min_child_tokens
        self._max_tokens = max_child_tokens
        self._length_arguments = (encoding_name, length_function)

    def settings(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this splitter, as plain JSON values.

        An index records them and refuses to be reopened with a splitter whose settings differ.

        Raises:
            ValueError: If the length function has no name to record it by (a lambda).
        """
        return {
            "child_chunk_level": self._level.value,
            "min_child_tokens": self._min_tokens,
            "max_child_tokens": self._max_tokens,
            "child_overlap_tokens": self._chunk_overlap,
            **_length_setting(*self._length_arguments),
        }

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> Self:
        """The splitter :meth:`settings` describes.

        Raises:
            ValueError: If a recorded length function is not loaded in this process.
        """
        return cls(**_options_from_settings(settings))

    @property
    def child_chunk_level(self) -> ChildChunkLevel:
        """What a child is."""
        return self._level

    @property
    def min_child_tokens(self) -> int:
        """Adjacent children under this size merge (0: never)."""
        return self._min_tokens

    @property
    def max_child_tokens(self) -> int | None:
        """Token limit per child, ``None`` for no limit."""
        return self._max_tokens

    @property
    def child_overlap_tokens(self) -> int:
        """Tokens repeated between the pieces of a cut paragraph or sentence."""
        return self._chunk_overlap

    @property
    def length_function(self) -> Callable[[str], int]:
        """The function counting a text's size."""
        return self._length_function

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Split Documents into child Documents, within the default ``SectionSplitter``'s parents.

        Args:
            documents: Documents of any supported format.

        Returns:
            Child Documents with ids, parent id and span in their metadata.
        """
        children: list[Document] = []
        for document in documents:
            split = split_document(document, child_splitter=self)
            children.extend(split.children)
        return children

    def _children(
        self, tree: SectionTree, parents: Iterable[_Parent], count: _SpanCounter
    ) -> list[_Child]:
        """Children of ``parents``, in document order; ``count`` must use this splitter's size."""
        children: list[_Child] = []
        for parent in parents:
            number = 0
            for section, run in groupby(parent.paragraphs, key=lambda item: item[0]):
                spans: list[Span] = []
                for _, paragraph in run:
                    units = (
                        _sentences(tree.text, paragraph)
                        if self._level is ChildChunkLevel.SENTENCE
                        else [paragraph]
                    )
                    for unit in units:
                        spans.extend(
                            _pieces(tree.text, unit, self._max_tokens, self._chunk_overlap, count)
                        )
                for span in _merge(spans, self._min_tokens, self._max_tokens, count):
                    number += 1
                    chunk_id = child_id(parent.parent_id, number)
                    children.append(_Child(chunk_id, parent, section, span, count(span)))
        return children


@dataclass(frozen=True)
class ParentChildSplit:
    """A document split into parents and children.

    Attributes:
        doc_id: The document's id.
        text: The canonical text every ``start_index``/``end_index`` points into.
        parents: Parent Documents in document order.
        children: Child Documents in document order; each one's ``parent_id`` is a parent's.
    """

    doc_id: str
    text: str
    parents: list[Document]
    children: list[Document]


def split_document(
    document: Document,
    *,
    parent_splitter: SectionSplitter | None = None,
    child_splitter: ParagraphSplitter | None = None,
) -> ParentChildSplit:
    """Split one document into section parents and the paragraph children inside them.

    Args:
        document: A Document of any supported format (see
            :func:`langchain_gated_parent.sections.parse_document` for format and id rules).
        parent_splitter: Defines the parents; default ``SectionSplitter()``.
        child_splitter: Defines the children; default ``ParagraphSplitter()``.

    Returns:
        The document id, canonical text, parents and children.

    Raises:
        ValueError: If ``max_child_tokens`` is not smaller than ``max_parent_tokens``, or the
            document cannot be parsed.
    """
    parent_splitter = parent_splitter or SectionSplitter()
    child_splitter = child_splitter or ParagraphSplitter()
    parent_limit, child_limit = parent_splitter.max_parent_tokens, child_splitter.max_child_tokens
    if parent_limit is not None and child_limit is not None and child_limit >= parent_limit:
        msg = (
            f"max_child_tokens ({child_limit}) must be smaller than max_parent_tokens "
            f"({parent_limit}); lower the child size or raise the parent size"
        )
        raise ValueError(msg)
    tree = parse_document(document)
    parent_count = _SpanCounter(tree.text, parent_splitter.length_function)
    child_count = (
        parent_count
        if child_splitter.length_function is parent_splitter.length_function
        else _SpanCounter(tree.text, child_splitter.length_function)
    )
    parents = _build_parents(
        tree, parent_splitter.parent_chunk_level, parent_splitter.max_parent_tokens, parent_count
    )
    children = child_splitter._children(tree, parents, child_count)  # noqa: SLF001  # same module
    return ParentChildSplit(
        doc_id=tree.doc_id,
        text=tree.text,
        parents=_parent_documents(tree, parents, document.metadata),
        children=_child_documents(tree, children, document.metadata),
    )
