"""How results look on the terminal (a table) and in ``--json`` (the output contract)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from langchain_gated_parent import keys

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.documents import Document

RESULT_FIELDS = {
    "chunk_id": keys.CHUNK_ID,
    "parent_id": keys.PARENT_ID,
    "doc_id": keys.DOC_ID,
    "score": keys.SCORE,
    "parent_score": keys.PARENT_SCORE,
    "child_score": keys.CHILD_SCORE,
    "gate_rank": keys.GATE_RANK,
    "section_path": keys.SECTION_PATH,
    "start_index": keys.START_INDEX,
    "end_index": keys.END_INDEX,
}
"""Each field of a ``query --json`` record and the metadata key it is read from.

The fields keep their plain names (the output contract) while the package's structural
metadata keys carry the ``gp_`` prefix (see :mod:`~langchain_gated_parent.keys`).
"""
RESULT_KEYS = tuple(RESULT_FIELDS)
"""The fields ``query --json`` emits for each result, with ``text``: the output contract."""


def result_record(document: Document) -> dict[str, Any]:
    """A result as the JSON contract: :data:`RESULT_KEYS` from its metadata, plus ``text``."""
    return {
        **{field: document.metadata.get(key) for field, key in RESULT_FIELDS.items()},
        "text": document.page_content,
    }


def shorten(text: str, width: int) -> str:
    """Whitespace folded, cut to ``width`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def location(metadata: dict[str, Any], width: int | None = None) -> str:
    """``doc > section > subsection``; past ``width``, the middle of the path goes first."""
    doc, path = str(metadata.get(keys.DOC_ID, "")), metadata.get(keys.SECTION_PATH, [])
    full = " > ".join([doc, *path])
    if width is None:
        return full
    if len(full) > width and len(path) > 1:
        full = f"{doc} > ... > {path[-1]}"
    return shorten(full, width)


def table(documents: Sequence[Document], indent: str = "") -> str:
    """Results as rows of rank, fused score, parent and child scores, where, and text.

    The text is cut to fit the terminal (``COLUMNS``, else 120 columns) and at least 30
    characters; ``--json`` gives the full text.
    """
    if not documents:
        return f"{indent}(no results)"
    place = min(40, max(len(location(d.metadata)) for d in documents))
    rows = [
        (f"{indent}{'#':>2}  {'score':>5}  {'s_p':>5}  {'s_c':>5}  {'where':<{place}}  ", "text")
    ]
    for rank, document in enumerate(documents, start=1):
        meta = document.metadata
        scores = "  ".join(
            f"{meta[k]:5.3f}" for k in (keys.SCORE, keys.PARENT_SCORE, keys.CHILD_SCORE)
        )
        where = location(meta, place)
        rows.append((f"{indent}{rank:>2}  {scores}  {where:<{place}}  ", document.page_content))
    text_width = max(shutil.get_terminal_size((120, 24)).columns - len(rows[0][0]), 30)
    return "\n".join(prefix + shorten(text, text_width) for prefix, text in rows)
