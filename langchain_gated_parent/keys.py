"""Metadata keys, defined once.

Every Document this package produces or stores carries its identity and provenance under these
keys, so splitters, the index, the retriever, the CLI and the server agree on one spelling.

Three kinds of keys:

* the output contract (``doc_id``, ``parent_id``, ``chunk_id``, ``score``, ``parent_score``,
  ``child_score``, ``gate_rank``): plain names users filter on and read;
* keys the package writes about structure and reads as hints (``gp_section_path``,
  ``gp_start_index``, ``gp_format``...): prefixed with :data:`PREFIX`, so that keys LangChain
  loaders and splitters set themselves (``format``, ``page``, ``start_index``, ``title``...)
  pass through as the user's own metadata instead of colliding with them;
* loader keys the package reads but never writes (``source``, ``title``, ``page``).
"""

from __future__ import annotations

PREFIX = "gp_"
"""Prefix of the keys the package writes about a document's structure."""

DOC_ID = "doc_id"
"""The document a parent or child belongs to (from ``doc_id`` / ``source`` metadata)."""
PARENT_ID = "parent_id"
"""Parent id, ``P-<section id>`` (with ``-partN`` for the parts of a cut section)."""
CHUNK_ID = "chunk_id"
"""Child id, ``C-<section id>-<n>``, 1-based within its parent's section."""
SECTION_ID = PREFIX + "section_id"
"""The section a parent was built from."""
SECTION_PATH = PREFIX + "section_path"
"""Heading titles from the top of the document down to the section, as a list of strings."""
LEVEL = PREFIX + "level"
"""Heading depth of a parent's section (1 for top-level; 0 for a preamble)."""
START_INDEX = PREFIX + "start_index"
"""Character offset where the text starts in the document's text."""
END_INDEX = PREFIX + "end_index"
"""Character offset where the text ends (exclusive) in the document's text."""
TOKENS = PREFIX + "tokens"
"""Length of the text in tokens of the splitter's encoding."""
CHILD_COUNT = PREFIX + "child_count"
"""How many children a parent has (lets the gate know how far to open without fetching)."""
HEADINGS = PREFIX + "headings"
"""Every heading title inside a parent (its path and its subsections'), for the title signal."""
TITLE = "title"
"""The document's title, when it has one."""
SOURCE = "source"
"""Where the document came from (a path or URL), as LangChain loaders set it."""
FORMAT = PREFIX + "format"
"""Input format hint: ``markdown``, ``structured``, ``html`` or ``text`` (a loader's own
``format``, e.g. ``'PDF 1.7'``, is user metadata)."""
PAGE = "page"
"""A loader's page number (``PyPDFLoader``, ``PyMuPDFLoader``): such Documents are pages of one
source, merged into one document before indexing."""
PAGE_STARTS = PREFIX + "page_starts"
"""Character offset where each page starts in a document read from a PDF (a list, page 1 first)."""

RESERVED = frozenset(
    {
        DOC_ID,
        PARENT_ID,
        CHUNK_ID,
        SECTION_ID,
        SECTION_PATH,
        LEVEL,
        START_INDEX,
        END_INDEX,
        TOKENS,
        FORMAT,
        CHILD_COUNT,
        HEADINGS,
    }
)
"""Metadata keys the index sets itself; every other key is the document's own."""

USER_VALUE_TYPES = (str, int, float, bool)
"""The value types of a document's own metadata that the index copies onto its parents and
children, and that vector-store filters can match (lists, dicts and ``None`` stay out)."""

SCORE = "score"
"""The learned ranker's score in (0, 1) (``alpha="learned"``, the default:
``scoring.learned_child_scores``), or for a number ``alpha`` the fused score
``alpha * parent_score + (1 - alpha) * child_score``."""
PARENT_SCORE = "parent_score"
"""The gate's similarity for the child's parent, in [0, 1]."""
CHILD_SCORE = "child_score"
"""The child's own similarity to the query, in [0, 1]."""
GATE_RANK = "gate_rank"
"""1-based rank of the child's parent among the parents the gate opened."""
GATE_SOURCES = "gate_sources"
"""In ``explain()``: the searches that found an opened parent (``dense``, ``sparse``,
``children``)."""
