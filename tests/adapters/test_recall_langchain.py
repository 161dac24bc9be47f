"""The LangChain recall tool end to end: a real ``create_agent`` graph, a scripted model, a server.

The user gives an order number, talks of other things until compaction
moves that turn out of the context, then asks for the number. The scripted
model, not seeing it, calls ``recall`` with words naming it; the tool's
answer must reach the model's next call, holding the number. The graph's
state keeps every message: only the model's context was compacted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver

from sidecar.adapters.langchain import SessionCompactionMiddleware
from sidecar.adapters.langchain_recall import recall_tool
from sidecar.client import AsyncClient, Client
from tests.adapters.chat_models import RecordingModel
from tests.adapters.test_recall_adk import ORDER, POLICY, TURNS  # the same story, told to LangChain


class RecallingChatModel(RecordingModel):
    """Answers "ok", except that a question about the order number it cannot see is a
    ``recall`` call, and a tool result is answered by quoting it."""

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        self.seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"From the history: {last.content}")
        elif "order number again" in str(last.content) and ORDER not in text(messages):
            call = {"id": f"call-{len(self.seen)}", "name": "recall", "args": {"query": "order"}}
            reply = AIMessage(content="", tool_calls=[call])
        else:
            reply = AIMessage(content="ok")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def text(messages: Sequence[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


def assert_recalled(model: RecallingChatModel, state: dict[str, Any]) -> None:
    """The call that asked for the order did not see it; the call after the tool did."""
    asking = next(i for i, m in enumerate(model.seen) if "order number again" in text(m))
    assert ORDER not in text(model.seen[asking])  # compaction moved it out
    after = model.seen[asking + 1]
    result = after[-1]
    assert isinstance(result, ToolMessage)
    assert result.name == "recall"
    assert str(result.content).startswith(
        'From this session\'s archived history, matching "order" (best first):'
    )
    assert f"user: My **order** number is {ORDER}" in str(result.content)
    assert len(model.seen) == asking + 2
    # The graph's state still has the whole conversation; only the model's context shrank.
    assert ORDER in str(state["messages"][0].content)


def test_sync_agent_recalls_a_fact_compaction_moved_out(sidecar_address: str) -> None:
    model = RecallingChatModel()
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, policy=POLICY)
        agent = create_agent(
            model, [recall_tool(middleware)], middleware=[middleware], checkpointer=InMemorySaver()
        )
        config: Any = {"configurable": {"thread_id": "order-sync"}}
        for turn in TURNS:
            state = agent.invoke({"messages": [HumanMessage(turn)]}, config)

    assert_recalled(model, state)


async def test_async_agent_recalls_a_fact_compaction_moved_out(sidecar_address: str) -> None:
    model = RecallingChatModel()
    async with AsyncClient(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, policy=POLICY)
        agent = create_agent(
            model, [recall_tool(middleware)], middleware=[middleware], checkpointer=InMemorySaver()
        )
        config: Any = {"configurable": {"thread_id": "order-async"}}
        for turn in TURNS:
            state = await agent.ainvoke({"messages": [HumanMessage(turn)]}, config)

    assert_recalled(model, state)


def test_a_fixed_session_id_is_searched_where_the_middleware_mirrors(sidecar_address: str) -> None:
    model = RecallingChatModel()
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(
            client, policy=POLICY, session_id=lambda runtime: "customer 7", namespace="shop"
        )
        agent = create_agent(
            model, [recall_tool(middleware)], middleware=[middleware], checkpointer=InMemorySaver()
        )
        config: Any = {"configurable": {"thread_id": "ignored"}}
        for turn in TURNS:
            state = agent.invoke({"messages": [HumanMessage(turn)]}, config)
        hits = list(client.search("order", session_id="shop/customer:207"))

    assert [h.event.text for h in hits] == [TURNS[0]]
    assert_recalled(model, state)
