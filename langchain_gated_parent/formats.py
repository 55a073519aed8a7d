"""Index formats: the one this version writes, the ones it reads or upgrades, the ones it refuses.

An index records its format in its config. Format 3 lacks the section records of format 4;
everything a record holds is already stored (the parents in the docstore, the vectors and the
children's metadata in the vector store), so the upgrade reads them and writes the records,
once, under the writer lock (:meth:`~langchain_gated_parent.index.GatedParentIndex.recover`,
``gated-parent recover``, or any write). Format 5's records also hold their parent, and
format 6 writes them in layout 2, format 7 in layout 3, whose vectors are float16
(:func:`~.stores.sections.encode`). A record of format 4, 5 or 6 is read as it is (a format-4
record's parent from the docstore), so those upgrades only mark the index format 7 (the same
writes), and the records its later writes make are of this format. An earlier release
reading such a record would misread its bytes: the mark makes it refuse the index instead.
Older formats stored other metadata keys and are refused: they have to be rebuilt.

Within formats 4 to 7, parent vectors written before they carried their own ``parent_id`` lack
it; the same writes add it (``ChromaVectors.name_parents``), and until then a filter naming
``parent_id`` beside other keys, which only the vector store can answer, is refused rather
than left to match nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_gated_parent import keys
from langchain_gated_parent.splitters import child_id
from langchain_gated_parent.stores.chroma import from_chroma, read_racing
from langchain_gated_parent.stores.sections import section_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from langchain_core.documents import Document
    from langchain_core.stores import BaseStore

    from langchain_gated_parent.records import Section
    from langchain_gated_parent.stores.chroma import ChromaVectors
    from langchain_gated_parent.stores.sections import SectionStore

FORMAT_VERSION = 7
"""7: section records are written in layout 3, their vectors as float16
(:func:`~.stores.sections.encode`). 6: in layout 2. 5: a section
record holds its parent. 4: each parent has a section record
(:mod:`~langchain_gated_parent.stores.sections`). 3: structural metadata keys carry the ``gp_``
prefix (see :mod:`~langchain_gated_parent.keys`), and config and manifests live in a journal of
their own, not in the docstore. 2: children are stored without their text (cut from the
parent's)."""
UPGRADABLE = 3
"""The older format whose section records the upgrade writes before it can be queried."""
PARENTLESS_RECORDS = 4
"""The older format whose records lack their parent (read from the docstore instead)."""
LAYOUT_1_RECORDS = 5
"""The older format whose records all have layout 1."""
LAYOUT_2_RECORDS = 6
"""The older format whose records have layout 2 (float32 vectors) or 1."""
READ_AS_IS = (PARENTLESS_RECORDS, LAYOUT_1_RECORDS, LAYOUT_2_RECORDS)
"""The older formats that are read as they are and only marked :data:`FORMAT_VERSION` by a
write."""
UPGRADE_BATCH = 256
"""Parents read and recorded per step of the upgrade."""
INDEX_NAME = "index_name"
"""Config key: the name of the index whose records the docstore holds. Two indexes in one
docstore namespace would overwrite each other's documents, so another name is refused."""
PARENT_IDS_ON_VECTORS = "parent_vectors_carry_parent_id"
"""Config key, true once every parent vector carries its own ``parent_id`` (what a filter
names): set on a new index, and by the upgrade on one written before."""


def check_format(config: Mapping[str, Any]) -> None:
    """Refuse an index whose format this version cannot read or upgrade, naming the fix."""
    version = int(config.get("format_version", 1))
    if version not in (FORMAT_VERSION, *READ_AS_IS, UPGRADABLE):
        msg = (
            f"this index has format version {version}, this version of langchain-gated-parent "
            f"reads formats {UPGRADABLE} to {FORMAT_VERSION} (its metadata keys differ); "
            "rebuild it: index the same documents into a new directory"
        )
        raise ValueError(msg)


def refuse_until_upgraded(config: Mapping[str, Any]) -> None:
    """A query of a format-3 index would find no section records: say how to upgrade it."""
    if int(config.get("format_version", FORMAT_VERSION)) == UPGRADABLE:
        msg = (
            f"this index has format version {UPGRADABLE}; upgrade it to format "
            f"{FORMAT_VERSION} once (nothing is re-embedded or lost): run "
            "`gated-parent recover DIRECTORY`, call index.recover(), or add documents"
        )
        raise ValueError(msg)


def refuse_parent_filter_until_named(config: Mapping[str, Any]) -> None:
    """A compound filter naming ``parent_id`` would match no parent vector: say how to fix it."""
    if not config.get(PARENT_IDS_ON_VECTORS):
        msg = (
            "this index's parent vectors were written before they carried parent_id, so a "
            "filter naming parent_id beside other keys would match no section; add it once "
            "(nothing is re-embedded): run `gated-parent recover DIRECTORY`, call "
            "index.recover(), or add documents. A filter on parent_id alone works as it is"
        )
        raise ValueError(msg)


def add_section_records(
    docstore: BaseStore[str, Document], vectors: ChromaVectors, records: SectionStore
) -> int:
    """Write the section record of every parent from what is stored; returns how many.

    Parents without a stored vector are skipped (the journal's recovery removes what an
    unfinished write left behind before this runs).
    """
    done = 0
    batch: list[str] = []
    for parent_id in docstore.yield_keys():
        batch.append(parent_id)
        if len(batch) == UPGRADE_BATCH:
            done += _record_batch(batch, docstore, vectors, records)
            batch = []
    if batch:
        done += _record_batch(batch, docstore, vectors, records)
    return done


def _record_batch(
    parent_ids: list[str],
    docstore: BaseStore[str, Document],
    vectors: ChromaVectors,
    records: SectionStore,
) -> int:
    parents = dict(zip(parent_ids, docstore.mget(parent_ids), strict=True))
    wanted = [
        child_id(pid, n)
        for pid, parent in parents.items()
        if parent is not None
        for n in range(1, int(parent.metadata.get(keys.CHILD_COUNT, 0)) + 1)
    ]
    with vectors.reading():
        stored = read_racing(lambda: vectors.parents.get(ids=parent_ids, include=["embeddings"]))
        found = read_racing(
            lambda: vectors.children.get(ids=wanted, include=["embeddings", "metadatas"])
        )
    parent_vectors = dict(zip(stored["ids"], _rows(stored["embeddings"]), strict=True))
    children: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for cid, meta, vector in zip(
        found["ids"], found["metadatas"] or [], _rows(found["embeddings"]), strict=True
    ):
        own = from_chroma(meta, chunk_id=cid)
        children.setdefault(own[keys.PARENT_ID], []).append((own, vector))
    out: list[Section] = []
    for pid, parent in parents.items():
        if parent is None or pid not in parent_vectors:
            continue
        mine = sorted(children.get(pid, []), key=lambda pair: int(pair[0][keys.START_INDEX]))
        dimension = len(parent_vectors[pid])
        out.append(
            section_of(
                parent,
                np.asarray(parent_vectors[pid], dtype=np.float32),
                [own for own, _ in mine],
                np.asarray([v for _, v in mine], dtype=np.float32).reshape(len(mine), dimension),
            )
        )
    records.put(out)
    return len(out)


def _rows(embeddings: Any) -> list[Any]:
    """Chroma's ``embeddings`` (an array, a list, or ``None`` when empty) as a list of rows."""
    return [] if embeddings is None else list(embeddings)
