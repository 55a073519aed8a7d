"""The retriever tool inside a tool-calling agent loop, driven by a fake chat model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from pydantic import Field

from langchain_gated_parent import keys
from langchain_gated_parent.tools import DEFAULT_TOOL_NAME, create_gated_retriever_tool

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.language_models import LanguageModelInput
    from langchain_core.runnables import Runnable

    from langchain_gated_parent import GatedParentIndex

QUESTION = "How long before RNA extraction were the cells treated?"


class FakeToolCaller(GenericFakeChatModel):
    """Replays scripted messages; accepts tools as a real tool-calling model does."""

    bound: list[str] = Field(default_factory=list)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.bound = [tool.name for tool in tools if isinstance(tool, BaseTool)]
        return self


def run_agent(model: Any, tools: dict[str, Any], question: str) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage(question)]
    for _ in range(4):
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return messages
        messages.extend(tools[call["name"]].invoke(call) for call in reply.tool_calls)
    pytest.fail("the agent did not finish in 4 turns")


def test_agent_calls_the_tool_and_gets_scored_documents(index: GatedParentIndex) -> None:
    tool = create_gated_retriever_tool(index.as_retriever(k=3))
    script = iter(
        [
            AIMessage(
                "",
                tool_calls=[{"name": DEFAULT_TOOL_NAME, "args": {"query": "48 h RNA"}, "id": "c1"}],
            ),
            AIMessage("48 h (P-GAPDH-01 > Methods)."),
        ]
    )
    model = FakeToolCaller(messages=script)
    messages = run_agent(model.bind_tools([tool]), {tool.name: tool}, QUESTION)
    assert model.bound == [DEFAULT_TOOL_NAME]
    [result] = [m for m in messages if isinstance(m, ToolMessage)]
    assert result.tool_call_id == "c1"
    docs = result.artifact
    assert len(docs) == 3
    assert all(isinstance(d, Document) for d in docs)
    assert "C-S-methods-2" in [d.metadata[keys.CHUNK_ID] for d in docs]
    for doc in docs:
        assert {keys.SCORE, keys.PARENT_SCORE, keys.CHILD_SCORE} <= set(doc.metadata)
    assert isinstance(result.content, str)
    blocks = result.content.split("\n\n")
    assert len(blocks) == 3
    for block, doc in zip(blocks, docs, strict=True):
        meta = doc.metadata
        where = " > ".join([meta[keys.DOC_ID], *meta[keys.SECTION_PATH]])
        assert block == (
            f"{where} (score {meta[keys.SCORE]:.3f}: section {meta[keys.PARENT_SCORE]:.3f}, "
            f"paragraph {meta[keys.CHILD_SCORE]:.3f})\n{doc.page_content}"
        )
    assert "P-GAPDH-01 > Methods (score" in result.content
    assert messages[-1].content == "48 h (P-GAPDH-01 > Methods)."


async def test_tool_runs_async_and_with_parents(index: GatedParentIndex) -> None:
    tool = create_gated_retriever_tool(
        index.as_retriever(k=2, return_parents=True), name="sections", description="Sections."
    )
    assert (tool.name, tool.description) == ("sections", "Sections.")
    call = {"type": "tool_call", "name": "sections", "args": {"query": "siRNA"}, "id": "c2"}
    message = await tool.ainvoke(call)
    assert isinstance(message, ToolMessage)
    assert all(d.id == d.metadata[keys.PARENT_ID] for d in message.artifact)
    assert " > " in message.content
    assert tool.args == {
        "query": {
            "description": "query to look up in retriever",
            "title": "Query",
            "type": "string",
        }
    }
