"""The ADK recall tool end to end: a real Runner and agent, a scripted model, a real server.

The user gives an order number, talks of other things until compaction
moves that turn out of the context, then asks for the number. The scripted
model, not seeing it, calls ``recall`` with words naming it; the tool's
answer must reach the model's next call, holding the number.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

from sidecar.adapters.adk import CompactingModelCallback, CompactionSessionService
from sidecar.adapters.adk_recall import recall_tool
from sidecar.client import AsyncClient
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.triggers import TurnCount
from sidecar.compaction.turn_window import TurnWindow

APP = "shop"
USER = "ana@example.com"
ORDER = "4417-XK"
# More than two turns in the window: keep only the newest, so the order's turn leaves.
POLICY = CompactionPolicy(trigger=TurnCount(2), strategy=TurnWindow(max_turns=1))
TURNS = [
    f"My order number is {ORDER}, please keep it in mind.",
    "Which colours does the lamp come in?",
    "What was my order number again?",
]


@dataclass
class Script:
    requests: list[list[types.Content]] = field(default_factory=list)


class RecallingLlm(BaseLlm):
    """Answers "ok", except that a question about the order number it cannot see is a
    ``recall`` call, and a tool result is answered by quoting it."""

    model: str = "scripted"
    script: Script

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = [c.model_copy(deep=True) for c in llm_request.contents]
        self.script.requests.append(contents)
        last = contents[-1].parts or []
        responses = [p.function_response for p in last if p.function_response]
        asked = "".join(p.text or "" for p in last)
        if responses:
            part = types.Part(text=f"From the history: {json.dumps(responses[0].response)}")
        elif "order number again" in asked and ORDER not in dump(contents):
            call = types.FunctionCall(name="recall", args={"query": "order number"})
            part = types.Part(function_call=call)
        else:
            part = types.Part(text="ok")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def dump(contents: list[types.Content]) -> str:
    return json.dumps([c.model_dump(mode="json", exclude_none=True) for c in contents])


async def run(runner: Runner, session_id: str) -> None:
    for text in TURNS:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
            pass


def assert_recalled(script: Script) -> None:
    """The call that asked for the order did not see it; the call after the tool did."""
    asking = next(i for i, r in enumerate(script.requests) if "order number again" in dump(r))
    assert ORDER not in dump(script.requests[asking])  # compaction moved it out
    after = script.requests[asking + 1]
    response = after[-1].parts[0].function_response  # type: ignore[index]
    assert response is not None
    assert response.name == "recall"
    answer = str((response.response or {})["result"])
    assert f"user: My **order** **number** is {ORDER}" in answer
    assert answer.startswith('From this session\'s archived history, matching "order number"')
    assert len(script.requests) == asking + 2


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


async def test_a_fact_compaction_moved_out_is_recalled_into_the_next_model_call(
    client: AsyncClient,
) -> None:
    script = Script()
    service = CompactionSessionService(client, policy=POLICY)
    agent = LlmAgent(name="shop", model=RecallingLlm(script=script), tools=[recall_tool(client)])
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(app_name=APP, user_id=USER, session_id="order-s1")

    await run(runner, "order-s1")

    assert_recalled(script)


async def test_with_the_callback_the_tool_searches_the_mirrored_session(
    client: AsyncClient, sidecar_address: str
) -> None:
    script = Script()
    callback = CompactingModelCallback(client, policy=POLICY)
    agent = LlmAgent(
        name="shop",
        model=RecallingLlm(script=script),
        tools=[recall_tool(sidecar_address, namespace="adk-mirror")],  # an address: its own client
        before_model_callback=callback,
    )
    sessions = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=sessions)
    await sessions.create_session(app_name=APP, user_id=USER, session_id="order-own")

    await run(runner, "order-own")

    assert_recalled(script)


async def test_a_session_with_nothing_archived_recalls_nothing(client: AsyncClient) -> None:
    script = Script()
    service = CompactionSessionService(client)  # no policy: nothing is ever archived
    agent = LlmAgent(name="shop", model=RecallingLlm(script=script), tools=[recall_tool(client)])
    runner = Runner(app_name=APP, agent=agent, session_service=service)
    await service.create_session(app_name=APP, user_id=USER, session_id="order-none")
    message = types.Content(role="user", parts=[types.Part(text="What was my order number again?")])

    async for _ in runner.run_async(user_id=USER, session_id="order-none", new_message=message):
        pass

    response = script.requests[-1][-1].parts[0].function_response  # type: ignore[index]
    assert response is not None
    assert (response.response or {})["result"] == (
        'Nothing in this session\'s archived history matches "order number".'
    )
