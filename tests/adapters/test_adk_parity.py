"""``adk_policy`` compacts on the same invocations as ADK's own ``EventsCompactionConfig``.

The same agent runs the same conversation twice: once on ADK's
``InMemorySessionService`` with ``App(events_compaction_config=...)`` (ADK's
compaction, with a fixed summarizer), once on ``CompactionSessionService``
with ``adk_policy`` of the same settings. Each model request is reduced to
what matters for the comparison — whether it carries a summary, and which of
the user's questions it carries verbatim — and the two runs must agree
request by request, on one-line turns and on tool-calling turns.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.base_events_summarizer import BaseEventsSummarizer
from google.adk.events.event import Event as AdkEvent
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types
from pydantic import Field

from sidecar.adapters.adk import CompactionSessionService, adk_policy
from sidecar.client import AsyncClient
from sidecar.summarizer.prompts import DEFAULT_SHADOW_PROMPT

APP = "parity"
USER = "u"
TURNS = 11
ADK_SUMMARY = "ADK summary"


class FixedSummarizer(BaseEventsSummarizer):
    """ADK's summarizer contract with a fixed answer (the model is not the point here)."""

    async def maybe_summarize_events(self, *, events: list[AdkEvent]) -> AdkEvent | None:
        content = types.Content(role="model", parts=[types.Part(text=ADK_SUMMARY)])
        compaction = EventCompaction(
            start_timestamp=events[0].timestamp,
            end_timestamp=events[-1].timestamp,
            compacted_content=content,
        )
        return AdkEvent(
            author="user", actions=EventActions(compaction=compaction), invocation_id="summary"
        )


class RecordingLlm(BaseLlm):
    """Answers in one line, or (``tools``) calls ``lookup`` first; records every request."""

    model: str = "recording"
    tools: bool = False
    requests: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append([c.model_copy(deep=True) for c in llm_request.contents])
        last = llm_request.contents[-1]
        answered = any(p.function_response for p in last.parts or [])
        if self.tools and not answered:
            call = types.FunctionCall(name="lookup", args={"q": "x"})
            part = types.Part(function_call=call)
        else:
            part = types.Part(text="Noted.")
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def lookup(q: str) -> dict[str, str]:
    """Looks something up."""
    return {"q": q, "found": "a long answer " * 20}


def agent(llm: RecordingLlm) -> LlmAgent:
    return LlmAgent(
        name="helper", model=llm, instruction="Be brief.", tools=[lookup] if llm.tools else []
    )


def seen(contents: list[types.Content]) -> tuple[bool, tuple[int, ...]]:
    """A request as the comparison sees it: carries a summary?, the questions sent verbatim."""
    texts = ["".join(p.text or "" for p in c.parts or []) for c in contents]
    summary_at = {i for i, t in enumerate(texts) if ADK_SUMMARY in t}
    summary_at |= {i + j for i, t in enumerate(texts) if t == DEFAULT_SHADOW_PROMPT for j in (0, 1)}
    verbatim = " ".join(t for i, t in enumerate(texts) if i not in summary_at)
    return bool(summary_at), tuple(int(n) for n in re.findall(r"Question (\d+)\.", verbatim))


async def run(runner: Runner, service: BaseSessionService, llm: RecordingLlm) -> list[list[str]]:
    await service.create_session(app_name=APP, user_id=USER, session_id="s")
    per_invocation = []
    for turn in range(TURNS):
        before = len(llm.requests)
        message = types.Content(role="user", parts=[types.Part(text=f"Question {turn}.")])
        async for _ in runner.run_async(user_id=USER, session_id="s", new_message=message):
            pass
        per_invocation.append([repr(seen(r)) for r in llm.requests[before:]])
    return per_invocation


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


@pytest.mark.parametrize("tools", [False, True], ids=["one-line turns", "tool turns"])
async def test_adk_policy_compacts_on_the_invocations_adk_does(
    client: AsyncClient, tools: bool
) -> None:
    interval, overlap = 3, 1
    theirs = RecordingLlm(tools=tools)
    config = EventsCompactionConfig(
        compaction_interval=interval, overlap_size=overlap, summarizer=FixedSummarizer()
    )
    adk_sessions = InMemorySessionService()
    adk_app = App(name=APP, root_agent=agent(theirs), events_compaction_config=config)
    expected = await run(Runner(app=adk_app, session_service=adk_sessions), adk_sessions, theirs)

    ours = RecordingLlm(tools=tools)
    service = CompactionSessionService(
        client,
        namespace=f"parity-{tools}",
        policy=adk_policy(compaction_interval=interval, overlap_size=overlap),
    )
    runner = Runner(app_name=APP, agent=agent(ours), session_service=service)
    actual = await run(runner, service, ours)

    assert actual == expected
    # ADK compacts after invocations 3, 6 and 9; the calls of the next ones carry the
    # summary and, verbatim, only the questions asked since.
    since = [tuple(range(3 * (n // 3), n + 1)) for n in range(TURNS)]
    assert [calls[0] for calls in expected] == [repr((n >= 3, since[n])) for n in range(TURNS)]
