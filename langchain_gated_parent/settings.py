"""What an index is built with: everything that changes how a document is split or embedded.

The settings are recorded with the index (in its journal) by its first write. Reopening with
other settings would mix two ways of splitting or embedding in one index, so it is refused
with the difference named; settings the caller leaves out are taken from the record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.embeddings import Embeddings

    from langchain_gated_parent.splitters import ParagraphSplitter, SectionSplitter

ParentRepresentation = Literal["centroid", "text"]
PARENT_REPRESENTATIONS: tuple[str, ...] = ("centroid", "text")
DEFAULT_PARENT_REPRESENTATION: ParentRepresentation = "centroid"
SPLITTERS = ("parent_splitter", "child_splitter")
_DEFAULT_COUNTING = {"encoding_name": "cl100k_base"}
"""How sizes were counted by an index recorded before the counting was: the default encoding."""


def model_name_of(embeddings: Embeddings) -> str:
    """A stable name for an embeddings object, recorded in the index to refuse a mismatch."""
    for attr in ("model_name", "model"):
        value = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(embeddings).__name__


def check_parent_representation(value: str | None) -> None:
    """Refuse a parent representation the index does not know."""
    if value is not None and value not in PARENT_REPRESENTATIONS:
        msg = (
            f"parent_representation must be one of {', '.join(PARENT_REPRESENTATIONS)}, "
            f"got {value!r}"
        )
        raise ValueError(msg)


def index_settings(
    embeddings: Embeddings,
    parent_representation: str,
    parent_splitter: SectionSplitter,
    child_splitter: ParagraphSplitter,
) -> dict[str, Any]:
    """The settings an index built with these parts records."""
    return {
        "embedding_model": model_name_of(embeddings),
        "parent_representation": parent_representation,
        "parent_splitter": parent_splitter.settings(),
        "child_splitter": child_splitter.settings(),
    }


def recorded(config: Mapping[str, Any]) -> dict[str, Any]:
    """A stored config with the settings older records left implicit made explicit."""
    out = dict(config)
    for part in SPLITTERS:
        counting = {k: v for k, v in out[part].items() if k in {"encoding_name", "length_function"}}
        out[part] = {**out[part], **({} if counting else _DEFAULT_COUNTING)}
    return out


def differences(stored: Mapping[str, Any], wanted: Mapping[str, Any], part: str) -> list[str]:
    """Each setting of ``part`` that differs, as ``name=stored (index) vs given``."""
    old, new = stored[part], wanted[part]
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [] if old == new else [f"{part}={old!r} (index) vs {new!r}"]
    names = sorted(set(old) | set(new))
    return [
        f"{part}.{name}={old.get(name)!r} (index) vs {new.get(name)!r}"
        for name in names
        if old.get(name) != new.get(name)
    ]
