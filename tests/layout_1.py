"""Section records as releases before layout 2 wrote them (format 5 and earlier), for tests.

A frozen copy of that writer: the package reads such records, but no longer writes them.
"""

from __future__ import annotations

import json
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_gated_parent.lexical import TERMS_RULE

if TYPE_CHECKING:
    from langchain_gated_parent.records import Section


def encode_layout_1(section: Section) -> bytes:
    """``section`` as layout 1: a JSON header, children's JSON, parent, vectors, then terms.

    Terms were kept space-separated (made searchable on every read); a record without a parent
    or without terms is what formats 4 and earlier, or releases before terms were kept, wrote.
    """
    children = json.dumps(section.children, ensure_ascii=False).encode()
    described: dict[str, Any] = {
        "parent_id": section.parent_id,
        "doc_id": section.doc_id,
        "headings": section.headings,
        "child_count": section.child_count,
        "dimension": int(section.vector.shape[0]),
    }
    parent = b""
    if section.parent is not None:
        own = {"id": section.parent.id, "metadata": section.parent.metadata}
        meta = json.dumps(own, ensure_ascii=False).encode()
        text = section.parent.page_content.encode("utf-8", "surrogatepass")
        parent = meta + text
        described["parent"] = [len(meta), len(text)]
    terms = b""
    if section.child_terms is not None:
        described["terms_rule"] = TERMS_RULE
        terms = "\n".join(t[1:-1].replace("  ", " ") for t in section.child_terms).encode()
    header = json.dumps(described, ensure_ascii=False).encode()
    vectors = np.vstack([section.vector[None, :], section.child_vectors]).astype("<f4")
    return (
        struct.pack("<II", len(header), len(children))
        + header
        + children
        + parent
        + vectors.tobytes()
        + terms
    )
