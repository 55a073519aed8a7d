"""Quickstart: index the bundled demo corpus, ask questions, read the scores, see the gate.

Run:
    python cookbook/quickstart.py [--index DIR]

Without ``--index`` the index lives in a temporary folder and is deleted at the end.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.demo import demo_documents


def where(metadata: dict[str, object]) -> str:
    path = metadata[keys.SECTION_PATH]
    assert isinstance(path, list)
    return " > ".join([str(metadata[keys.DOC_ID]), *path])


def run(directory: Path) -> None:
    # 1. A persistent index: parents (sections) in a docstore, parent and child vectors in
    #    Chroma, embedded by the bundled offline all-MiniLM-L6-v2 model.
    index = GatedParentIndex(directory=directory)

    # 2. Add documents. Ids are stable, so re-adding an unchanged document is skipped.
    report = index.add_documents(demo_documents())
    print(f"indexed: {report}")
    print(f"stats:   {index.stats()}\n")

    # 3. Ask. Each result is a paragraph (a child) with its scores in metadata. By default
    #    the score is the learned ranker's; with a number for alpha it is the fused score:
    #    alpha times the parent's score plus (1 - alpha) times the child's own.
    retriever = index.as_retriever(k=3, alpha=0.4)
    question = "What is the GhostVLAD approach?"
    print(f"question: {question}")
    for doc in retriever.invoke(question):
        meta = doc.metadata
        print(
            f"  {meta[keys.SCORE]:.3f} = 0.4 * {meta[keys.PARENT_SCORE]:.3f} + "
            f"0.6 * {meta[keys.CHILD_SCORE]:.3f}  {where(meta)}: {doc.page_content[:60]}..."
        )

    # 4. Settings per call: as keyword arguments, or through config["configurable"] (what a
    #    chain or a LangServe client sends). A filter narrows the gate to one document.
    docs = retriever.invoke(
        "How many documents are in the new corpus?",
        config={"configurable": {"alpha": 0.2, "k": 2, "filter": {"doc_id": "2003.13032"}}},
    )
    print("\nscoped to 2003.13032, alpha 0.2:")
    for doc in docs:
        print(f"  {doc.metadata[keys.SCORE]:.3f}  {where(doc.metadata)}")

    # 5. explain(): which parents the gate opened, to see why a result is (not) there.
    explanation = retriever.explain("48 h RNA extraction")
    print(f"\ngate for '48 h RNA extraction' (alpha {explanation.alpha:.2f}):")
    for parent in explanation.parents:
        meta = parent.metadata
        print(f"  {meta[keys.GATE_RANK]}. {meta[keys.PARENT_SCORE]:.3f}  {where(meta)}")
    print(f"  best child: {explanation.documents[0].page_content!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index folder (default: a temporary one)")
    args = parser.parse_args()
    if args.index is not None:
        run(args.index)
        return
    with tempfile.TemporaryDirectory(prefix="gated-quickstart-") as tmp:
        run(Path(tmp))


if __name__ == "__main__":
    main()
