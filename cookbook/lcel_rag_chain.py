"""A RAG chain in LCEL: retriever -> prompt -> chat model -> parser, with per-request settings.

The retriever is itself a runnable, so it composes with ``|``. Settings such as ``alpha`` and
``k`` reach it through the chain's ``config["configurable"]``, per request.

The chat model is a fake one (offline, deterministic) unless ``OPENAI_API_KEY`` is set and
``langchain-openai`` is installed; then it is ``ChatOpenAI`` (model from ``OPENAI_MODEL``,
default ``gpt-4o-mini``).

Run:
    python cookbook/lcel_rag_chain.py [--index DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, format_document
from langchain_core.runnables import RunnablePassthrough

from langchain_gated_parent import GatedParentIndex
from langchain_gated_parent.demo import demo_documents
from langchain_gated_parent.tools import ScoredResultPrompt

if TYPE_CHECKING:
    from langchain_core.documents import Document
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableConfig

PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            (
                "Answer from the context only and cite the section you used. Each passage "
                "is headed by document > section path and its relevance score.\n\n{context}"
            ),
        ),
        ("human", "{question}"),
    ]
)
QUESTION = "Is Arabic one of the 11 languages in CoVoST?"


def chat_model() -> BaseChatModel:
    """ChatOpenAI when configured, else a fake model that answers deterministically."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI  # noqa: PLC0415 (optional)
        except ImportError:
            print(
                "OPENAI_API_KEY is set but langchain-openai is not installed "
                "(pip install langchain-openai): using the fake chat model\n"
            )
        else:
            model: BaseChatModel = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
            return model
    return FakeListChatModel(
        responses=[
            (
                "(fake model) No. CoVoST's 11 languages are French, German, Dutch, Russian, "
                "Spanish, Italian, Turkish, Persian, Swedish, Mongolian and Chinese "
                "(2002.01320 > Data Collection and Processing > Common Voice (CoVo))."
            ),
        ]
    )


def format_context(docs: list[Document]) -> str:
    # The same per-result format as the agent tool: where, scores, text.
    return "\n\n".join(format_document(doc, ScoredResultPrompt()) for doc in docs)


def run(directory: Path) -> None:
    index = GatedParentIndex(directory=directory)
    index.add_documents(demo_documents())
    retriever = index.as_retriever(k=3)

    chain = (
        {"context": retriever | format_context, "question": RunnablePassthrough()}
        | PROMPT
        | chat_model()
        | StrOutputParser()
    )
    print(f"question: {QUESTION}\n")
    print("context the model sees:")
    print(format_context(retriever.invoke(QUESTION)), "\n")
    print(f"answer: {chain.invoke(QUESTION)}\n")

    # One request with other settings: the chain passes config down to the retriever.
    config: RunnableConfig = {
        "configurable": {"alpha": 0.0, "k": 1, "filter": {"doc_id": "2002.01320"}}
    }
    print("the context with alpha 0 (children's own scores), k 1, scoped to 2002.01320:")
    print(format_context(retriever.invoke(QUESTION, config=config)))
    print(f"\nanswer: {chain.invoke(QUESTION, config=config)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index folder (default: a temporary one)")
    args = parser.parse_args()
    if args.index is not None:
        run(args.index)
        return
    with tempfile.TemporaryDirectory(prefix="gated-rag-") as tmp:
        run(Path(tmp))


if __name__ == "__main__":
    main()
