"""The ADK adapters pass the stable prefix on: temp state, and OpenAI's key through LiteLlm.

A real Runner on a real server, with a scripted model that calls a tool for
each question and answers its result, and records what each call's request
carries in ``extra_body`` (what ``LiteLlm`` sends along) and the window the
service gave that call (read as the call is made: nothing is appended in
between). The session keeps the newest turn once it holds more than two, so
every other question lands a compaction.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types
from pydantic import Field

from sidecar.adapters.adk import (
    CompactingModelCallback,
    CompactionSessionService,
    cache_prefix_hints,
    session_key,
)
from sidecar.adapters.adk_cache import STATE_CACHE_PREFIX_ID, STATE_STABLE_PREFIX_EVENTS
from sidecar.client import AsyncClient, SessionContext
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.triggers import TurnCount
from sidecar.compaction.turn_window import TurnWindow
from tests.adapters.cache_prefix import assert_key_moves_only_with_compactions

POLICY = CompactionPolicy(trigger=TurnCount(2), strategy=TurnWindow(max_turns=1))
TURNS = 6
Window = Callable[[], Awaitable[SessionContext]]


def lookup(order: str) -> dict[str, str]:
    """Returns an order's status."""
    return {"order": order, "status": "shipped, arriving Tuesday"}


class Calls:
    """What each model call carried: its request's ``extra_body``, the window the service
    held for it, and the prefix the agent's temp state showed."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.bodies: list[dict[str, Any] | None] = []
        self.windows: list[SessionContext] = []
        self.state: list[tuple[Any, Any]] = []

    async def answer(self, llm_request: LlmRequest) -> LlmResponse:
        options = llm_request.config.http_options
        self.bodies.append(options.extra_body if options is not None else None)
        self.windows.append(await self.window())
        last = llm_request.contents[-1].parts or []
        if any(p.function_response for p in last):
            part = types.Part(text="It ships Tuesday.")
        else:
            call = types.FunctionCall(name="lookup", args={"order": "A1"})
            part = types.Part(function_call=call)
        return LlmResponse(content=types.Content(role="model", parts=[part]))

    def seen(self, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        state = callback_context.state
        self.state.append((state.get(STATE_CACHE_PREFIX_ID), state.get(STATE_STABLE_PREFIX_EVENTS)))

    def keys(self) -> list[Any]:
        return [(b or {}).get("prompt_cache_key") for b in self.bodies]


class ScriptedLlm(BaseLlm):
    model: str = "scripted"
    calls: Any = Field(default=None, exclude=True)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield await self.calls.answer(llm_request)


class ScriptedGemini(Gemini):
    """A ``Gemini`` model (as the hints tell models apart) that never calls the API."""

    calls: Any = Field(default=None, exclude=True)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield await self.calls.answer(llm_request)


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


def window_of(client: AsyncClient, key: str) -> Window:
    return lambda: client.session(key).context()


async def converse(service: BaseSessionService, llm: BaseLlm, callbacks: list[Any]) -> None:
    agent = LlmAgent(name="clerk", model=llm, tools=[lookup], before_model_callback=callbacks)
    runner = Runner(app_name="cache", agent=agent, session_service=service)
    await service.create_session(app_name="cache", user_id="u", session_id="s")
    for turn in range(TURNS):
        text = f"Turn {turn}: where is order A{turn}?"
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
            pass


async def test_the_session_service_passes_the_prefix_id_on_until_a_compaction(
    client: AsyncClient,
) -> None:
    service = CompactionSessionService(client, policy=POLICY, namespace="cache-service")
    calls = Calls(window_of(client, session_key("cache-service", "cache", "u", "s")))
    await converse(service, ScriptedLlm(calls=calls), [cache_prefix_hints(service), calls.seen])

    assert_key_moves_only_with_compactions(calls.keys(), calls.windows)
    assert calls.state == [(w.cache_prefix_id, w.stable_prefix_events) for w in calls.windows]
    assert any(events for _, events in calls.state)
    stored = await service.get_session(app_name="cache", user_id="u", session_id="s")
    assert stored is not None
    assert not any(k.startswith("temp:") for k in stored.state)  # temp state is never stored


async def test_the_callback_passes_its_windows_prefix_id_on(client: AsyncClient) -> None:
    callback = CompactingModelCallback(client, policy=POLICY, namespace="cache-callback")
    calls = Calls(window_of(client, session_key("cache-callback", "cache", "u", "s")))
    hints = [callback, cache_prefix_hints(callback), calls.seen]
    await converse(InMemorySessionService(), ScriptedLlm(calls=calls), hints)

    assert_key_moves_only_with_compactions(calls.keys(), calls.windows)
    assert [s[0] for s in calls.state] == calls.keys()


async def test_a_gemini_model_gets_the_state_but_no_request_field(client: AsyncClient) -> None:
    service = CompactionSessionService(client, policy=POLICY, namespace="cache-gemini")
    calls = Calls(window_of(client, session_key("cache-gemini", "cache", "u", "s")))
    llm = ScriptedGemini(model="gemini-2.5-flash", calls=calls)
    await converse(service, llm, [cache_prefix_hints(service), calls.seen])

    assert calls.bodies == [None] * len(calls.windows)
    assert [s[0] for s in calls.state] == [w.cache_prefix_id for w in calls.windows]
