"""Section records as format 6 wrote them (layout 2: float32 vectors), for tests.

A frozen copy of that writer: the package reads such records, but no longer writes them.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING

import numpy as np

from langchain_gated_parent.lexical import TERMS_RULE
from langchain_gated_parent.stores.sections import _by_column

if TYPE_CHECKING:
    from langchain_gated_parent.records import Section


def encode_layout_2(section: Section) -> bytes:
    """``section`` as layout 2: layout 3 with its vectors as float32."""
    assert section.parent is not None
    assert section.child_terms is not None
    strings = [s.encode() for s in (section.parent_id, section.doc_id, section.headings)]
    own = {"id": section.parent.id, "metadata": section.parent.metadata}
    blobs = [
        json.dumps(_by_column(section.children), ensure_ascii=False).encode(),
        json.dumps(own, ensure_ascii=False).encode(),
        section.parent.page_content.encode("utf-8", "surrogatepass"),
        "\n".join(section.child_terms).encode(),
    ]
    fields = struct.pack(
        "<12I",
        0xFFFFFFFF,
        2,
        int(section.vector.shape[0]),
        section.child_count,
        TERMS_RULE,
        *map(len, strings),
        *map(len, blobs),
    )
    head = fields + b"".join(strings)
    vectors = np.vstack([section.vector[None, :], section.child_vectors]).astype("<f4")
    return b"".join([head, bytes(-len(head) % 4), vectors.tobytes(), *blobs])
