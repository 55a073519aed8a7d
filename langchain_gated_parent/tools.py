r"""The retriever as an agent tool: the model reads where each result is and how well it scored.

Built on LangChain's ``create_retriever_tool`` with ``response_format="content_and_artifact"``:
the ``ToolMessage`` content is text for the model (per result: document, section path, fused
score and its two parts, then the paragraph), and its ``artifact`` is the list of scored
Documents, for the application to cite or show without parsing the text back.

Example:
    .. code-block:: python

        from langchain_gated_parent.tools import create_gated_retriever_tool

        tool = create_gated_retriever_tool(index.as_retriever(k=3))  # the demo corpus
        query = "How many documents are in the new corpus of medical case reports?"
        message = tool.invoke(
            {"type": "tool_call", "name": tool.name, "id": "1", "args": {"query": query}}
        )
        print(message.content.split("\n\n")[0])
        # 2003.13032 > A Corpus of Medical Case Reports with Medical Entity Annotation >
        #   Corpus Overview (score 0.998: section 0.733, paragraph 0.606)  [one line]
        # The corpus consists of 53 documents, which contain an average number of ...
        message.artifact[0].metadata["chunk_id"]  # 'C-2003.13032:s2-16'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.prompts import StringPromptTemplate
from langchain_core.tools import create_retriever_tool
from pydantic import Field
from typing_extensions import override

from langchain_gated_parent import keys

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool

    from langchain_gated_parent.retriever import GatedParentRetriever

DEFAULT_TOOL_NAME = "search_sections"
DEFAULT_TOOL_DESCRIPTION = (
    "Search the indexed documents. Give a standalone question or keywords. Returns the "
    "best-matching paragraphs, each headed by its document and section path and its relevance "
    "score in [0, 1] (the ranking score, then the section's and the paragraph's own similarity)."
)
"""Tells the model what it gets back, so it can weigh results by score and cite sections."""


class ScoredResultPrompt(StringPromptTemplate):
    """Formats one result as ``doc > section path (score ...)`` followed by its text.

    A ``PromptTemplate`` cannot join the ``section_path`` list or round the scores, which is
    why this is a class; the same fields exist on children and on ``return_parents`` results.
    """

    input_variables: list[str] = Field(
        default=[
            "page_content",
            keys.DOC_ID,
            keys.SECTION_PATH,
            keys.SCORE,
            keys.PARENT_SCORE,
            keys.CHILD_SCORE,
        ]
    )
    """The Document fields the format reads (``page_content`` and metadata keys)."""

    @override
    def format(self, **kwargs: Any) -> str:
        where = " > ".join([str(kwargs[keys.DOC_ID]), *kwargs[keys.SECTION_PATH]])
        return (
            f"{where} (score {kwargs[keys.SCORE]:.3f}: section {kwargs[keys.PARENT_SCORE]:.3f}, "
            f"paragraph {kwargs[keys.CHILD_SCORE]:.3f})\n{kwargs['page_content']}"
        )


def create_gated_retriever_tool(
    retriever: GatedParentRetriever,
    name: str = DEFAULT_TOOL_NAME,
    description: str = DEFAULT_TOOL_DESCRIPTION,
) -> StructuredTool:
    """Wrap a :class:`GatedParentRetriever` as a tool for a tool-calling model.

    Args:
        retriever: The retriever; its fields (``k``, ``alpha``...) apply to every call.
        name: The tool's name, as the model sees it.
        description: What the tool does and returns, as the model sees it.

    Returns:
        A tool taking ``{"query": str}``. Called with a tool call, it returns a ``ToolMessage``
        whose content lists the results for the model (blank-line separated) and whose
        ``artifact`` is the list of scored Documents.
    """
    return create_retriever_tool(
        retriever,
        name,
        description,
        document_prompt=ScoredResultPrompt(),
        response_format="content_and_artifact",
    )
