"""Metadata keys, defined once.

Every Document this package produces or stores carries its identity and provenance under these
keys, so splitters, the index, the retriever, the CLI and the server agree on one spelling.
"""

from __future__ import annotations

DOC_ID = "doc_id"
"""The document a parent or child belongs to (from ``doc_id`` / ``source`` metadata)."""
PARENT_ID = "parent_id"
"""Parent id, ``P-<section id>`` (with ``-partN`` for the parts of a cut section)."""
CHUNK_ID = "chunk_id"
"""Child id, ``C-<section id>-<n>``, 1-based within its parent's section."""
SECTION_ID = "section_id"
"""The section a parent was built from."""
SECTION_PATH = "section_path"
"""Heading titles from the top of the document down to the section, as a list of strings."""
LEVEL = "level"
"""Heading depth of a parent's section (1 for top-level; 0 for a preamble)."""
START_INDEX = "start_index"
"""Character offset where the text starts in the document's text."""
END_INDEX = "end_index"
"""Character offset where the text ends (exclusive) in the document's text."""
TOKENS = "tokens"
"""Length of the text in tokens of the splitter's encoding."""
CHILD_COUNT = "child_count"
"""How many children a parent has (lets the gate know how far to open without fetching)."""
HEADINGS = "headings"
"""Every heading title inside a parent (its path and its subsections'), for the title signal."""
TITLE = "title"
"""The document's title, when it has one."""
SOURCE = "source"
"""Where the document came from (a path or URL), as LangChain loaders set it."""
FORMAT = "format"
"""Input format hint: ``markdown``, ``structured``, ``html`` or ``text``."""

SCORE = "score"
"""Fused score, ``alpha * parent_score + (1 - alpha) * child_score``."""
PARENT_SCORE = "parent_score"
"""The gate's similarity for the child's parent, in [0, 1]."""
CHILD_SCORE = "child_score"
"""The child's own similarity to the query, in [0, 1]."""
GATE_RANK = "gate_rank"
"""1-based rank of the child's parent among the parents the gate opened."""
GATE_SOURCES = "gate_sources"
"""In ``explain()``: the searches that found an opened parent (``dense``, ``sparse``,
``children``)."""
