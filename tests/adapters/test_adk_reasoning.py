"""Gemini's thoughts and thought signatures on ADK events: mapped to fields, sent back unchanged.

Gemini 3 refuses a multi-turn function-calling exchange whose function calls
come back without their ``thought_signature``; these tests pin that each
signature survives the store, a clearing, and ADK's own Runner.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events.event import Event as AdkEvent
from google.adk.models.base_llm import BaseLlm
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
    event_from_sidecar,
    event_to_sidecar,
)
from sidecar.adapters.adk_mapping import META_CONTENT, session_key
from sidecar.client import AsyncClient
from sidecar.compaction.clear_tool_results import CLEARED_ARGUMENTS, ClearToolResults
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Event, Reasoning

SIG_CALL = b"\x00sig-call\xff"
SIG_TEXT = b"sig-text\x01"
SIG_THOUGHT = b"sig-thought\x02"


def thought(text: str, signature: bytes | None = None) -> types.Part:
    return types.Part(text=text, thought=True, thought_signature=signature)


def call(call_id: str, signature: bytes | None = None, **args: object) -> types.Part:
    fc = types.FunctionCall(id=call_id, name="get_weather", args=dict(args))
    return types.Part(function_call=fc, thought_signature=signature)


def model(*parts: types.Part) -> AdkEvent:
    return AdkEvent(
        invocation_id="inv", author="agent", content=types.Content(role="model", parts=list(parts))
    )


def cleared_inputs(ours: Event) -> Event:
    """``ours`` as a clear_tool_results pass with ``clear_tool_inputs`` leaves it."""
    calls = tuple(replace(c, arguments_json=CLEARED_ARGUMENTS) for c in ours.tool_calls)
    return ours.evolve(tool_calls=calls, cleared=True)


def test_gemini_shapes_map_to_fields_and_back_without_the_verbatim_copy() -> None:
    shapes = [
        model(call("c1", SIG_CALL, city="Oslo"), call("c2", city="Lima")),  # parallel calls
        model(thought("I should look it up"), call("c1", SIG_CALL, city="Oslo")),
        model(thought("plan", SIG_THOUGHT), types.Part(text="Let me check."), call("c1", SIG_CALL)),
        model(types.Part(text="It is sunny.", thought_signature=SIG_TEXT)),
        model(thought("done"), types.Part(text="Sunny.", thought_signature=SIG_TEXT)),
        model(types.Part(text="", thought_signature=SIG_TEXT)),  # a lone streamed signature
    ]
    for event in shapes:
        ours = event_to_sidecar(event)
        assert META_CONTENT not in ours.metadata, event.content
        back = event_from_sidecar(ours, author="unused")
        assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)
    fields = event_to_sidecar(shapes[2])
    assert fields.reasoning == (Reasoning("plan", SIG_THOUGHT),)
    assert fields.text == "Let me check."
    assert [c.signature for c in fields.tool_calls] == [SIG_CALL]
    assert event_to_sidecar(shapes[3]).reasoning == (Reasoning("", SIG_TEXT),)


def test_shapes_the_fields_cannot_rebuild_keep_their_thoughts_verbatim() -> None:
    event = model(types.Part(text="a"), thought("late thought", SIG_THOUGHT), types.Part(text="b"))
    ours = event_to_sidecar(event)
    assert META_CONTENT in ours.metadata
    assert ours.reasoning == (Reasoning("late thought", SIG_THOUGHT),)
    back = event_from_sidecar(ours, author="unused")
    assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)


def test_a_cleared_call_keeps_its_thought_and_signature() -> None:
    event = model(thought("which city?"), call("c1", SIG_CALL, city="Oslo"))
    rendered = event_from_sidecar(cleared_inputs(event_to_sidecar(event)), author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        thought("which city?"),
        call("c1", SIG_CALL, cleared=True),
    ]


def test_a_cleared_event_kept_verbatim_keeps_every_part_in_place() -> None:
    # Two text parts: only the verbatim copy holds this shape.
    event = model(
        thought("plan", SIG_THOUGHT),
        types.Part(text="Checking"),
        types.Part(text=" now."),
        call("c1", SIG_CALL, city="Oslo"),
        call("c2", city="Lima"),
    )
    ours = event_to_sidecar(event)
    assert META_CONTENT in ours.metadata
    rendered = event_from_sidecar(cleared_inputs(ours), author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        thought("plan", SIG_THOUGHT),
        types.Part(text="Checking"),
        types.Part(text=" now."),
        call("c1", SIG_CALL, cleared=True),
        call("c2", cleared=True),
    ]


def test_cleared_reasoning_text_is_shown_cleared_and_its_signature_kept() -> None:
    event = model(
        thought("long private plan", SIG_THOUGHT),
        thought("unsigned aside"),
        types.Part(text="a"),
        types.Part(text="b"),
        call("c1", SIG_CALL),
    )
    ours = event_to_sidecar(event)
    cleared = ours.evolve(
        reasoning=tuple(replace(r, text="") for r in ours.reasoning), cleared=True
    )
    rendered = event_from_sidecar(cleared, author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        thought("", SIG_THOUGHT),
        types.Part(text="a"),
        types.Part(text="b"),
        call("c1", SIG_CALL),
    ]


def test_a_cleared_thought_leaves_its_signature_where_the_server_renders_it() -> None:
    # Mapped natively (no verbatim copy): a signed thought whose text a clearing took
    # (keep_reasoning_turns) is a text-less signature, sent on the text part as the
    # server's Gemini rendering sends it; the call keeps its own.
    event = model(thought("plan", SIG_THOUGHT), call("c1", SIG_CALL, city="Oslo"))
    ours = event_to_sidecar(event)
    assert META_CONTENT not in ours.metadata
    cleared = ours.evolve(reasoning=(Reasoning("", SIG_THOUGHT),), cleared=True)
    rendered = event_from_sidecar(cleared, author="unused")
    assert rendered.content is not None
    assert rendered.content.parts == [
        types.Part(text="", thought_signature=SIG_THOUGHT),
        call("c1", SIG_CALL, city="Oslo"),
    ]


# -- the real Runner ----------------------------------------------------------------------

CITIES = ["Oslo", "Lima", "Perth", "Quito"]
NOTES = "Compare with the last three days and the regional forecast. " * 8


def get_weather(city: str, notes: str) -> dict[str, str]:
    """Returns today's weather report for a city."""
    return {"city": city, "report": f"{city}: sunny, 21 C, light wind from the west. " * 8}


class SigningLlm(BaseLlm):
    """A Gemini-3-like script: every answer opens with a thought and carries signatures.

    A question gets a thought, then two parallel ``get_weather`` calls, the
    first signed; a tool result gets a signed thought and a signed answer.
    Every request and every response is recorded.
    """

    model: str = "signing"
    requests: list[list[types.Content]] = Field(default_factory=list)
    responses: list[types.Content] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append([c.model_copy(deep=True) for c in llm_request.contents])
        n = len(self.responses)
        last = llm_request.contents[-1]
        if any(p.function_response for p in last.parts or []):
            parts = [
                thought(f"Both reports are in ({n}).", b"thought-%d\x00" % n),
                types.Part(text=f"Sunny everywhere ({n}).", thought_signature=b"text-%d\xff" % n),
            ]
        else:
            question = "".join(p.text or "" for p in last.parts or [])
            found = re.search(r"weather in (\w+) and (\w+)", question)
            assert found, f"the last content is not a question: {last}"
            parts = [
                thought(f"I need two reports ({n})."),
                call_part(found.group(1), b"call-%d\x00\xfe" % n),
                call_part(found.group(2), None),
            ]
        content = types.Content(role="model", parts=parts)
        self.responses.append(content.model_copy(deep=True))
        yield LlmResponse(content=content)


def call_part(city: str, signature: bytes | None) -> types.Part:
    fc = types.FunctionCall(name="get_weather", args={"city": city, "notes": NOTES})
    return types.Part(function_call=fc, thought_signature=signature)


def without_arguments(content: types.Content) -> types.Content:
    """A content with its calls' arguments and ids left out: what clearing may change."""
    parts = [
        p.model_copy(update={"function_call": types.FunctionCall(name=p.function_call.name)})
        if p.function_call
        else p
        for p in content.parts or []
    ]
    return types.Content(role=content.role, parts=parts)


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


async def converse(service: BaseSessionService, turns: int, **agent_options: Any) -> SigningLlm:
    """``turns`` two-city questions to a forecaster on ``service``; the model, with its record."""
    llm = SigningLlm()
    agent = LlmAgent(
        name="forecaster",
        model=llm,
        instruction="Use get_weather.",
        tools=[get_weather],
        **agent_options,
    )
    runner = Runner(app_name="signed", agent=agent, session_service=service)
    await service.create_session(app_name="signed", user_id="u", session_id="s")
    for turn in range(turns):
        text = f"Turn {turn}: what is the weather in {CITIES[turn]} and {CITIES[turn + 1]}?"
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
            pass
    assert len(llm.requests) == 2 * turns
    return llm


async def test_the_runner_and_the_callback_send_what_adks_own_session_service_sends(
    client: AsyncClient,
) -> None:
    ours = await converse(CompactionSessionService(client, namespace="parity"), turns=3)
    adks = await converse(InMemorySessionService(), turns=3)
    assert ours.requests == adks.requests
    callback = CompactingModelCallback(client, namespace="parity-mirror")
    mirrored = await converse(InMemorySessionService(), turns=3, before_model_callback=callback)
    assert mirrored.requests == adks.requests
    # ADK sends an agent's own thoughts back, signed or not.
    assert any(
        p.thought and not p.thought_signature for c in ours.requests[-1] for p in c.parts or []
    )


async def test_the_runner_sends_every_signature_back_unchanged_across_a_clearing(
    client: AsyncClient,
) -> None:
    clear = ClearToolResults(keep_tool_uses=2, clear_tool_inputs=True)
    service = CompactionSessionService(
        client, policy=CompactionPolicy(trigger=TokenCount(900), strategy=clear)
    )
    turns = 3
    llm = await converse(service, turns)

    cleared_calls = 0
    for k, request in enumerate(llm.requests):
        sent = [c for c in request if c.role == "model"]
        # Every earlier response comes back whole: its thoughts, texts and signatures byte
        # for byte, each signature on the part it came on (the first call, the text).
        assert [without_arguments(c) for c in sent] == [
            without_arguments(r) for r in llm.responses[:k]
        ]
        cleared_calls += sum(
            1
            for c in sent
            for p in c.parts or []
            if p.function_call and p.function_call.args == {"cleared": True}
        )
    # A clearing landed in between: later requests send older calls with cleared arguments
    # (and their results as placeholders), signatures still in place.
    assert cleared_calls > 0
    last = llm.requests[-1]
    signed = [
        p.thought_signature
        for c in last
        for p in c.parts or []
        if p.function_call and p.function_call.args == {"cleared": True}
    ]
    assert b"call-0\x00\xfe" in signed
    placeholders = [
        p.function_response.response
        for c in last
        for p in c.parts or []
        if p.function_response and "cleared" in str(p.function_response.response)
    ]
    assert placeholders
    # The log keeps the originals, signatures included; the window the cleared arguments.
    handle = client.session(session_key("adk", "signed", "u", "s"))
    log_calls = [c for e in [e async for e in handle.events()] if e.cleared for c in e.tool_calls]
    window = (await handle.context()).events
    window_calls = [c for e in window if e.cleared for c in e.tool_calls]
    assert log_calls
    assert all(NOTES in c.arguments_json for c in log_calls)
    assert [c.arguments_json for c in window_calls] == [CLEARED_ARGUMENTS] * len(log_calls)
    assert [c.signature for c in window_calls] == [c.signature for c in log_calls]
    assert b"call-0\x00\xfe" in [c.signature for c in window_calls]


def lookup(q: str) -> dict[str, str]:
    """Looks something up."""
    return {"q": q, "found": "a long answer " * 40}


class LoopingLlm(BaseLlm):
    """One invocation's tool loop: four signed ``lookup`` calls in a row, then an answer."""

    model: str = "looping"
    requests: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append([c.model_copy(deep=True) for c in llm_request.contents])
        n = len(self.requests)
        if n <= 4:
            fc = types.FunctionCall(name="lookup", args={"q": f"q{n}"})
            part = types.Part(function_call=fc, thought_signature=b"loop-%d" % n)
        else:
            part = types.Part(text="Done.", thought_signature=b"answer")
        yield LlmResponse(content=types.Content(role="model", parts=[thought("Next."), part]))


async def test_a_clearing_inside_an_invocation_reaches_its_next_model_call_signatures_kept(
    client: AsyncClient,
) -> None:
    llm = LoopingLlm()
    clear = ClearToolResults(keep_tool_uses=1)
    service = CompactionSessionService(
        client, policy=CompactionPolicy(trigger=TokenCount(200), strategy=clear), namespace="loop"
    )
    runner = Runner(
        app_name="loop",
        agent=LlmAgent(name="x", model=llm, tools=[lookup]),
        session_service=service,
    )
    await service.create_session(app_name="loop", user_id="u", session_id="s")
    message = types.Content(role="user", parts=[types.Part(text="Look it all up.")])
    async for _ in runner.run_async(user_id="u", session_id="s", new_message=message):
        pass

    assert len(llm.requests) == 5
    for k, request in enumerate(llm.requests):
        parts = [p for c in request for p in c.parts or []]
        # Every call made so far, each with its signature and the thought before it.
        assert [p.thought_signature for p in parts if p.function_call] == [
            b"loop-%d" % i for i in range(1, k + 1)
        ]
        assert sum(bool(p.thought) for p in parts) == k
        # All but the newest result show their placeholder: the clearing landed mid-loop.
        responses = [str(p.function_response.response) for p in parts if p.function_response]
        assert ["cleared" in r for r in responses] == [True] * max(0, k - 1) + [False] * min(k, 1)


def old_form(event: AdkEvent) -> Event:
    """``event`` as the mapping before reasoning fields stored it: thoughts only verbatim."""
    ours = event_to_sidecar(event)
    if event.content is None or not ours.reasoning:
        return ours
    verbatim = event.content.model_dump_json(exclude_none=True)
    calls = tuple(replace(c, signature=b"") for c in ours.tool_calls)
    metadata = {**ours.metadata, META_CONTENT: verbatim}
    return ours.evolve(reasoning=(), tool_calls=calls, metadata=metadata)


async def test_the_callback_resumes_a_mirror_an_earlier_mapping_wrote(client: AsyncClient) -> None:
    sessions = InMemorySessionService()
    llm = SigningLlm()
    callback = CompactingModelCallback(client, namespace="resumed")
    agent = LlmAgent(name="forecaster", model=llm, tools=[get_weather])
    plain = Runner(app_name="signed", agent=agent, session_service=sessions)
    await sessions.create_session(app_name="signed", user_id="u", session_id="s")
    ask = types.Content(role="user", parts=[types.Part(text="weather in Oslo and Lima?")])
    async for _ in plain.run_async(user_id="u", session_id="s", new_message=ask):
        pass
    session = await sessions.get_session(app_name="signed", user_id="u", session_id="s")
    assert session is not None
    key = session_key("resumed", "signed", "u", "s")
    await client.create_session(key, None, {})
    await client.session(key).append([old_form(e) for e in session.events])

    agent.before_model_callback = callback
    resumed = Runner(app_name="signed", agent=agent, session_service=sessions)
    ask = types.Content(role="user", parts=[types.Part(text="weather in Perth and Quito?")])
    async for _ in resumed.run_async(user_id="u", session_id="s", new_message=ask):
        pass
    # The stored events stay as they were, and still give back every thought and signature.
    assert llm.requests[-1][: len(llm.requests[1])] == llm.requests[1]
    assert [without_arguments(c) for c in llm.requests[-1] if c.role == "model"] == [
        without_arguments(r) for r in llm.responses[:-1]
    ]
