"""The retriever as a tool in a tool-calling agent loop.

The model asks for a search, the tool answers with a ``ToolMessage`` whose content lists the
results (where, score, text) for the model and whose ``artifact`` holds the scored Documents
for the application (citations, UI), and the model answers.

The chat model is a scripted fake (offline) that calls the tool once with the user's question
and answers from the top result; with ``OPENAI_API_KEY`` set and ``langchain-openai``
installed it is ``ChatOpenAI`` (model from ``OPENAI_MODEL``, default ``gpt-4o-mini``). The loop
is ``bind_tools`` plus a few lines; no agent framework is needed.

Run:
    python cookbook/agent_tool.py [--index DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from typing_extensions import override

from langchain_gated_parent import GatedParentIndex, keys
from langchain_gated_parent.demo import demo_documents
from langchain_gated_parent.tools import create_gated_retriever_tool

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.language_models import LanguageModelInput
    from langchain_core.runnables import Runnable

QUESTION = "How many documents are in the new corpus of medical case reports?"
MAX_TURNS = 4


class ScriptedToolCaller(BaseChatModel):
    """A fake tool-calling model: search with the question, then answer from the top result."""

    tool_name: str = ""

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    @override
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        [tool] = tools
        assert isinstance(tool, BaseTool)
        return self.model_copy(update={"tool_name": tool.name})

    @override
    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            first_result = str(last.content).split("\n\n")[0]
            heading, _, text = first_result.partition("\n")
            reply = AIMessage(f"(fake model) From {heading}: {text[:160]}...")
        else:
            call = {"name": self.tool_name, "args": {"query": str(last.content)}, "id": "call-1"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def chat_model() -> BaseChatModel:
    """ChatOpenAI when configured, else the scripted fake."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI  # noqa: PLC0415 (optional)
        except ImportError:
            print(
                "OPENAI_API_KEY is set but langchain-openai is not installed "
                "(pip install langchain-openai): using the scripted fake model\n"
            )
        else:
            model: BaseChatModel = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
            return model
    return ScriptedToolCaller()


def run(directory: Path) -> None:
    index = GatedParentIndex(directory=directory)
    index.add_documents(demo_documents())
    tool = create_gated_retriever_tool(index.as_retriever(k=3))
    model = chat_model().bind_tools([tool])

    messages: list[BaseMessage] = [HumanMessage(QUESTION)]
    print(f"user: {QUESTION}")
    for _ in range(MAX_TURNS):
        reply = model.invoke(messages)
        messages.append(reply)
        if not isinstance(reply, AIMessage) or not reply.tool_calls:
            break
        for call in reply.tool_calls:
            print(f"\nmodel calls {call['name']}({call['args']})")
            result = tool.invoke(call)  # a ToolMessage: content for the model, artifact for us
            messages.append(result)
            print(f"tool content (what the model reads):\n{result.content}\n")
            print("tool artifact (what the application keeps):")
            for doc in result.artifact:
                meta = doc.metadata
                print(
                    f"  {meta[keys.CHUNK_ID]}  score {meta[keys.SCORE]:.3f}  chars "
                    f"{meta[keys.START_INDEX]}-{meta[keys.END_INDEX]} of {meta[keys.DOC_ID]}"
                )
    print(f"\nmodel: {messages[-1].content}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index folder (default: a temporary one)")
    args = parser.parse_args()
    if args.index is not None:
        run(args.index)
        return
    with tempfile.TemporaryDirectory(prefix="gated-agent-") as tmp:
        run(Path(tmp))


if __name__ == "__main__":
    main()
