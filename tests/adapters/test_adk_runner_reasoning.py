"""The real ADK Runner on the service: Gemini-3-like thoughts and signatures go back unchanged.

A scripted model (a ``BaseLlm`` that records every ``LlmRequest``) answers
like Gemini 3 with thinking on: a thought first, then function calls whose
first carries a ``thought_signature``, or a signed answer. Each later request
must carry every earlier signature back byte for byte, on the part it came
on, over several turns and across clearings; and the Runner must send on this
service what it sends on ADK's own.
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

from sidecar.adapters.adk import CompactingModelCallback, CompactionSessionService, event_to_sidecar
from sidecar.adapters.adk_mapping import META_CONTENT, session_key
from sidecar.client import AsyncClient
from sidecar.compaction.clear_tool_results import CLEARED_ARGUMENTS, ClearToolResults
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.triggers import TokenCount
from sidecar.model import Event
from tests.adapters.test_adk_reasoning import thought

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


def signatures(content: types.Content) -> list[tuple[str, bytes]]:
    """A content's signatures in order, each with the kind of part it is on."""
    return [
        ("call" if p.function_call else "text", p.thought_signature)
        for p in content.parts or []
        if p.thought_signature
    ]


async def test_cleared_reasoning_text_leaves_every_signature_in_place(
    client: AsyncClient,
) -> None:
    clear = ClearToolResults(keep_tool_uses=2, clear_tool_inputs=True, keep_reasoning_turns=1)
    service = CompactionSessionService(
        client,
        policy=CompactionPolicy(trigger=TokenCount(900), strategy=clear),
        namespace="reasoning",
    )
    llm = await converse(service, turns=3)

    for k, request in enumerate(llm.requests):
        sent = [c for c in request if c.role == "model"]
        assert len(sent) == k
        for content, response in zip(sent, llm.responses, strict=False):
            # Each earlier response's signatures, in order, each on the kind of part it was on.
            assert signatures(content) == signatures(response)
            said = [p.text for p in content.parts or [] if p.text and not p.thought]
            assert said == [p.text for p in response.parts or [] if p.text and not p.thought]
    # The last call: only its own turn's thought has text; the older ones' signatures stay,
    # on empty parts where the thoughts were, and the unsigned ones are gone.
    last = [c for c in llm.requests[-1] if c.role == "model"]
    assert [p.text for c in last for p in c.parts or [] if p.thought] == ["I need two reports (4)."]
    emptied = [p.thought_signature for c in last for p in c.parts or [] if p.text == ""]
    assert emptied == [b"thought-1\x00", b"thought-3\x00"]


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
