"""Runs the adapters' documented snippets, as printed, inside the agent code they assume.

Each snippet is one line changed in an existing agent: it names that agent's
``Runner``, ``root_agent``, ``model``, ``tools``... This script defines them (a
scripted model, the weather tool of tests/adapters), runs each snippet's text
with ``exec`` exactly as printed (the texts come as arguments), then makes one
agent turn through what the snippet built, against the server on 127.0.0.1:50051.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.runners import InMemoryRunner, Runner
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from sidecar.adapters.adk import CompactionSessionService
from sidecar.compaction.policy import policy_from_dict
from tests.adapters.chat_models import RecordingModel
from tests.adapters.test_adk import INSTRUCTION, USER, Script, ScriptedLlm, get_weather, question

SYSTEM = "You are a helpful assistant."


def agent_context(kind: str) -> dict[str, Any]:
    """The names the snippets take from the agent around them."""
    # an ADK model, or a LangChain chat model for the middleware
    model = RecordingModel() if kind.endswith("middleware") else ScriptedLlm(script=Script())
    return {
        "Runner": Runner,
        "LlmAgent": LlmAgent,
        "create_agent": create_agent,
        "root_agent": LlmAgent(
            name="weather",
            model=ScriptedLlm(script=Script()),
            instruction=INSTRUCTION,
            tools=[get_weather],
        ),
        "model": model,
        "INSTRUCTION": INSTRUCTION,
        "get_weather": get_weather,
        "tools": [],
        "SYSTEM": SYSTEM,
        "checkpointer": InMemorySaver(),
        "policy": policy_from_dict(
            {"trigger": {"turn_count": 20}, "strategy": {"turn_window": {"max_turns": 10}}}
        ),
    }


async def one_adk_turn(runner: Any) -> int:
    service = runner.session_service
    session = await service.create_session(app_name=runner.app_name, user_id=USER)
    async for _ in runner.run_async(user_id=USER, session_id=session.id, new_message=question(0)):
        pass
    stored = await service.get_session(
        app_name=runner.app_name, user_id=USER, session_id=session.id
    )
    return len(stored.events)


def tool_names(names: dict[str, Any]) -> str:
    """The tools the snippet's agent offers the model, by the names the model sees."""
    agent = names["agent"]
    if isinstance(agent, LlmAgent):
        return ",".join(getattr(t, "name", getattr(t, "__name__", "?")) for t in agent.tools)
    bound = agent.get_graph().nodes["tools"].data.tools_by_name  # the graph's ToolNode
    return ",".join(sorted(bound))


def run(kind: str, snippet: str) -> str:
    names = agent_context(kind)
    exec(compile(snippet, f"<{kind}>", "exec"), names)
    if kind == "session-service":
        return f"{asyncio.run(one_adk_turn(names['runner']))} events in the service's session"
    if kind == "callback":
        runner = InMemoryRunner(agent=names["agent"], app_name="weather")
        asyncio.run(one_adk_turn(runner))
        return f"{len(names['model'].script.calls)} model calls through the callback"
    if kind == "middleware":
        names["agent"].invoke(
            {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "readme"}}
        )
        return f"{len(names['model'].seen)} model calls through the middleware"
    if kind == "recall-adk":
        service = CompactionSessionService("127.0.0.1:50051")
        asyncio.run(
            one_adk_turn(Runner(app_name="weather", agent=names["agent"], session_service=service))
        )
        return f"{len(names['model'].script.calls)} model calls, tools {tool_names(names)}"
    if kind == "recall-middleware":
        names["agent"].invoke(
            {"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "recall"}}
        )
        return f"{len(names['model'].seen)} model calls, tools {tool_names(names)}"
    raise ValueError(kind)


if __name__ == "__main__":
    for kind, snippet in json.loads(sys.stdin.read()):
        print(kind, "->", run(kind, snippet), flush=True)
