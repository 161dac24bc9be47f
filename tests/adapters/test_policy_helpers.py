"""The adapters' policy helpers for clearing: LangChain's ClearToolUsesEdit, ADK plus clearing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from google.adk.events import Event as AdkEvent
from google.genai import types
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from sidecar.adapters.adk import adk_policy, event_from_sidecar, event_to_sidecar
from sidecar.adapters.adk_mapping import META_CONTENT
from sidecar.adapters.langchain import (
    SessionCompactionMiddleware,
    clear_tool_uses_policy,
    policy_from_clear_tool_uses_edit,
)
from sidecar.client import AsyncClient
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import policy_from_dict
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Event, Role, ToolCall, ToolResult
from tests.adapters.test_langchain import SYSTEM, ScriptedChatModel, get_weather, question


def test_langchain_defaults_are_clear_tool_uses_edit_defaults() -> None:
    policy = policy_from_clear_tool_uses_edit(ClearToolUsesEdit())
    assert policy == clear_tool_uses_policy()
    assert policy.trigger == TokenCount(100_000)
    assert policy.strategy == ClearToolResults(keep_tool_uses=3, placeholder="[cleared]")


def test_langchain_settings_map_one_to_one() -> None:
    edit = ClearToolUsesEdit(
        trigger=8000,
        clear_at_least=500,
        keep=2,
        clear_tool_inputs=True,
        exclude_tools=["read_file"],
        placeholder="[gone]",
    )
    assert policy_from_clear_tool_uses_edit(edit).strategy == ClearToolResults(
        keep_tool_uses=2,
        exclude_tools=("read_file",),
        clear_tool_inputs=True,
        min_cleared_tokens=500,
        placeholder="[gone]",
    )


def test_then_summarize_makes_a_pipeline_that_round_trips() -> None:
    policy = clear_tool_uses_policy(trigger=8000, then_summarize=Summarize(max_events_to_keep=6))
    assert isinstance(policy.strategy, Pipeline)
    assert [s.name for s in policy.strategy.steps] == ["clear_tool_results", "summarize"]
    assert policy_from_dict(policy.to_dict()) == policy


def test_adk_policy_clears_before_it_summarizes() -> None:
    clear = ClearToolResults(keep_tool_uses=2)
    policy = adk_policy(token_threshold=8000, event_retention_size=4, clear_tool_results=clear)
    assert isinstance(policy.strategy, Pipeline)
    assert policy.strategy.steps[0] == clear
    assert (
        policy.strategy.steps[1]
        == adk_policy(token_threshold=8000, event_retention_size=4).strategy
    )


async def test_the_langchain_policy_clears_on_the_server(sidecar_address: str) -> None:
    page = "kubectl describe pod checkout-7f9: OOMKilled, limit 512Mi, 4 restarts. " * 8
    events = [Event(id="u1", role=Role.USER, text="why is checkout down?")]
    for n in range(1, 5):
        events.append(
            Event(id=f"a{n}", role=Role.ASSISTANT, tool_calls=(ToolCall(f"c{n}", "kubectl"),))
        )
        events.append(
            Event(id=f"t{n}", role=Role.TOOL, tool_results=(ToolResult(f"c{n}", "kubectl", page),))
        )
    async with AsyncClient(sidecar_address) as client:
        await client.create_session("lc-policy", clear_tool_uses_policy(trigger=200, keep=1))
        appended = await client.session("lc-policy").append(events)
        assert appended.compaction is not None
        assert appended.compaction.cleared_ids == ("t1", "t2", "t3")
        context = await client.session("lc-policy").context()
        placeholder = context.events[2].tool_results[0].content
        # LangChain's placeholder, then the pointers the server keeps (keep_identifiers)
        assert placeholder.startswith("[cleared] \N{RIGHTWARDS ARROW} ")
        assert "checkout-7f9" in placeholder
        assert "4 restarts" not in placeholder


async def test_the_langchain_middleware_sends_cleared_results_as_placeholders(
    sidecar_address: str,
) -> None:
    model = ScriptedChatModel()
    async with AsyncClient(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(
            client, policy=clear_tool_uses_policy(trigger=300, keep=1), session_id="lc-clear"
        )
        agent = create_agent(
            model,
            [get_weather],
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t-clear"}}
        for turn in range(4):
            await agent.ainvoke(question(turn), config)
        last = model.seen[-1]
        results = [m for m in last if isinstance(m, ToolMessage)]
        assert [m.content for m in results[:-1]] == ["[cleared]"] * (len(results) - 1)
        assert "sunny" in str(results[-1].content)  # the newest tool use is kept verbatim
        # The graph's state keeps every original result.
        state = await agent.aget_state(config)
        kept = [m for m in state.values["messages"] if isinstance(m, ToolMessage)]
        assert all("sunny" in str(m.content) for m in kept)


def test_a_cleared_adk_event_renders_its_placeholder_not_its_stored_content() -> None:
    response = types.FunctionResponse(id="c1", name="lookup", response={"rows": ["a" * 400]})
    adk = AdkEvent(
        author="agent",
        invocation_id="i1",
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
    )
    ours = event_to_sidecar(adk)
    assert adk.content is not None
    # As when the field mapping loses something: the verbatim content is stored beside it.
    verbatim = {**ours.metadata, META_CONTENT: adk.content.model_dump_json(exclude_none=True)}
    cleared = ours.evolve(
        tool_results=(replace(ours.tool_results[0], content="[cleared]"),),
        metadata=verbatim,
        cleared=True,
    )
    assert event_from_sidecar(cleared.evolve(cleared=False), author="agent").content == adk.content
    rendered = event_from_sidecar(cleared, author="agent")
    assert rendered.content is not None
    assert rendered.content.parts is not None
    part = rendered.content.parts[0].function_response
    assert part is not None
    assert part.response == {"result": "[cleared]"}
