"""The ADK adapters report each model call's prompt tokens: the session's estimates calibrate.

A scripted model (a ``BaseLlm``) reports, for every call, three times the
tokens we estimated the window it was given at (read from the service as
the call is made), as Gemini's ``usage_metadata.prompt_token_count``. A
report sent for any other version than the call's own would not come out at
exactly 3, so the factor checks the version as well as the count.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types
from pydantic import Field

from sidecar.adapters.adk import CompactingModelCallback, CompactionSessionService
from sidecar.adapters.adk_mapping import session_key
from sidecar.client import AsyncClient, TokenCalibration
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import TokenCount
from tests.counting import exact_tokens

FACTOR = 3
Strategy = SlidingWindow | Summarize
WINDOW = SlidingWindow(max_events=2)
SUMMARY = Summarize(max_events_to_keep=2, overlap=0, max_summary_tokens=64)
CITIES = ["Oslo", "Lima", "Perth", "Quito", "Riga", "Cork"]


def get_weather(city: str) -> dict[str, str]:
    """Returns today's weather report for a city."""
    return {"city": city, "report": f"{city}: sunny, 21 C, light wind from the west. " * 4}


Estimate = Callable[[], Awaitable[int]]


class ReportingLlm(BaseLlm):
    """Calls ``get_weather`` for a question, answers a result; reports FACTOR times our estimate
    of the call's window (``estimate``), or no usage at all without one."""

    model: str = "reporting"
    estimate: Estimate | None = None
    calls: int = 0
    sizes: list[int] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls += 1
        self.sizes.append(len(llm_request.contents))
        usage = None
        if self.estimate is not None:
            prompt = FACTOR * await self.estimate()
            usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=prompt)
        last = llm_request.contents[-1].parts or []
        if any(p.function_response for p in last):
            part = types.Part(text="Sunny, 21 C.")
        else:
            city = (last[-1].text or "").rsplit(" ", 1)[-1].rstrip("?")
            part = types.Part(
                function_call=types.FunctionCall(name="get_weather", args={"city": city})
            )
        yield LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


def window_tokens(client: AsyncClient, key: str) -> Estimate:
    async def estimate() -> int:
        return exact_tokens(await client.session(key).context())

    return estimate


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


async def converse(
    service: BaseSessionService, llm: ReportingLlm, turns: int, **agent_options: Any
) -> None:
    """``turns`` weather questions (two model calls each) to a forecaster on ``service``."""
    agent = LlmAgent(name="forecaster", model=llm, tools=[get_weather], **agent_options)
    runner = Runner(app_name="usage", agent=agent, session_service=service)
    if await service.get_session(app_name="usage", user_id="u", session_id="s") is None:
        await service.create_session(app_name="usage", user_id="u", session_id="s")
    for turn in range(turns):
        text = f"Turn {turn}: what is the weather in {CITIES[turn % len(CITIES)]}?"
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
            pass


async def calibration(client: AsyncClient, key: str) -> TokenCalibration:
    return (await client.get_session(key)).calibration


async def test_every_model_call_of_the_runner_calibrates_the_session(client: AsyncClient) -> None:
    key = session_key("usage-runner", "usage", "u", "s")
    llm = ReportingLlm(estimate=window_tokens(client, key))
    await converse(CompactionSessionService(client, namespace="usage-runner"), llm, turns=3)

    assert llm.calls == 6
    calibrated = await calibration(client, key)
    assert calibrated.samples == llm.calls
    assert calibrated.factor == pytest.approx(FACTOR)


async def test_a_model_that_reports_no_usage_leaves_the_session_uncalibrated(
    client: AsyncClient,
) -> None:
    llm = ReportingLlm()
    await converse(CompactionSessionService(client, namespace="usage-none"), llm, turns=2)

    key = session_key("usage-none", "usage", "u", "s")
    assert await calibration(client, key) == TokenCalibration(1.0, 0)


async def test_a_resent_answer_is_not_counted_twice(client: AsyncClient) -> None:
    service = CompactionSessionService(client, namespace="usage-resent")
    key = session_key("usage-resent", "usage", "u", "s")
    llm = ReportingLlm(estimate=window_tokens(client, key))
    await converse(service, llm, turns=2)
    session = await service.get_session(app_name="usage", user_id="u", session_id="s")
    assert session is not None
    answer = session.events[-1]
    assert answer.usage_metadata is not None

    # The Runner re-sending the answer (or a retry of its append) stores nothing, counts nothing.
    await service.append_event(session, answer)
    await service.append_event(session, answer.model_copy(deep=True))
    calibrated = await calibration(client, key)
    assert calibrated.samples == llm.calls == 4
    assert calibrated.factor == pytest.approx(FACTOR)


async def test_the_callback_reports_each_call_with_the_next_mirror(client: AsyncClient) -> None:
    callback = CompactingModelCallback(client, namespace="usage-mirror")
    key = session_key("usage-mirror", "usage", "u", "s")
    llm = ReportingLlm(estimate=window_tokens(client, key))
    sessions = InMemorySessionService()
    await converse(sessions, llm, turns=3, before_model_callback=callback)

    # The invocation's last answer waits for the next mirror: the next invocation's first call.
    calibrated = await calibration(client, key)
    assert calibrated.samples == llm.calls - 1 == 5
    assert calibrated.factor == pytest.approx(FACTOR)
    await converse(sessions, llm, turns=1, before_model_callback=callback)
    assert (await calibration(client, key)).samples == llm.calls - 1 == 7


async def compacted_run(
    client: AsyncClient,
    namespace: str,
    threshold: int | None,
    reports: bool,
    strategy: Strategy = WINDOW,
) -> tuple[ReportingLlm, str]:
    """A conversation on a session compacted at ``threshold`` tokens by ``strategy``; the
    model, with its record, and the session's key."""
    key = session_key(namespace, "usage", "u", "s")
    llm = ReportingLlm(estimate=window_tokens(client, key) if reports else None)
    policy = None
    if threshold is not None:
        policy = CompactionPolicy(trigger=TokenCount(threshold), strategy=strategy)
    service = CompactionSessionService(client, policy=policy, namespace=namespace)
    await converse(service, llm, turns=len(CITIES))
    return llm, key


@pytest.mark.parametrize("strategy", [WINDOW, SUMMARY], ids=["window", "summary"])
async def test_a_token_trigger_fires_on_the_calibrated_count(
    client: AsyncClient, strategy: Strategy
) -> None:
    namespace = f"usage-{strategy.name}"
    _, measured = await compacted_run(client, f"{namespace}-measure", None, reports=False)
    # Uncalibrated, the window never reaches the threshold: it holds at most these tokens.
    threshold = exact_tokens(await client.session(measured).context()) + 1

    plain, key = await compacted_run(
        client, f"{namespace}-plain", threshold, reports=False, strategy=strategy
    )
    assert not (await client.get_session(key)).last_compaction_id
    assert plain.sizes == sorted(plain.sizes)

    reported, key = await compacted_run(
        client, f"{namespace}-calibrated", threshold, reports=True, strategy=strategy
    )
    assert (await client.get_session(key)).last_compaction_id
    # A later call was given a shorter window than the one before it: the compaction landed
    # mid-conversation, on calibrated tokens, and the reports after it named the version of
    # the window each call was given (a summary's too, which lands after its append).
    assert reported.sizes != sorted(reported.sizes)
    calibrated = await calibration(client, key)
    assert calibrated.samples == reported.calls
    assert calibrated.factor == pytest.approx(FACTOR)
