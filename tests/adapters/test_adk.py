"""The ADK adapters end to end: a real Runner and agent, a scripted model, a real server.

Each turn the user asks for a city's weather; the scripted model calls the
``get_weather`` tool, then answers from its result. The model records every
request it gets, so the tests assert what the model actually saw.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events.event import Event as AdkEvent
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from sidecar.adapters.adk import (
    CompactingModelCallback,
    CompactionSessionService,
    adk_policy,
    event_from_sidecar,
    event_to_sidecar,
    session_key,
)
from sidecar.client import AsyncClient
from sidecar.engine.validation import MAX_AUTHOR_CHARS, MAX_BRANCH_CHARS
from sidecar.model import Event
from sidecar.summarizer.prompts import DEFAULT_SHADOW_PROMPT

APP = "weather-app"
USER = "ana@example.com"
INSTRUCTION = "You are a weather assistant. Always call get_weather before answering."
CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Lagos", "Perth", "Lima", "Turin", "Riga", "Cork"]
TURNS = 30
INTERVAL = 4  # compact every 4 turns, ADK-style


def get_weather(city: str, tool_context: ToolContext) -> dict[str, str]:
    """Returns today's weather report for a city."""
    tool_context.state["last_city"] = city
    report = f"{city}: sunny, 21 C, light wind from the west, humidity 40 percent. " * 6
    return {"city": city, "report": report}


@dataclass
class Seen:
    """What one model call received."""

    system: str
    contents: list[types.Content]


@dataclass
class Script:
    calls: list[Seen] = field(default_factory=list)


class ScriptedLlm(BaseLlm):
    """A model with a script: a user question gets a tool call, a tool result gets an answer."""

    model: str = "scripted"
    script: Script

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        system = llm_request.config.system_instruction
        self.script.calls.append(
            Seen(
                system=system if isinstance(system, str) else str(system),
                contents=[c.model_copy(deep=True) for c in llm_request.contents],
            )
        )
        # ADK may put the dynamic instruction after the turn (an agent with a static one)
        last = next(c for c in reversed(llm_request.contents) if not _instruction(c))
        responses = [p.function_response for p in last.parts or [] if p.function_response]
        if responses:
            city = (responses[0].response or {})["city"]
            text = f"The weather in {city} is sunny and 21 C."
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
            return
        question = "".join(p.text or "" for p in last.parts or [])
        found = re.search(r"weather in (\w+)", question)
        assert found, f"the last content is not a question: {last}"
        call = types.FunctionCall(name="get_weather", args={"city": found.group(1)})
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


def _instruction(content: types.Content) -> bool:
    return INSTRUCTION in texts(content)


def make_agent(script: Script, **kwargs: Any) -> LlmAgent:
    return LlmAgent(
        name="forecaster",
        model=ScriptedLlm(script=script),
        instruction=INSTRUCTION,
        tools=[get_weather],
        **kwargs,
    )


def question(turn: int) -> types.Content:
    city = CITIES[turn % len(CITIES)]
    text = f"Turn {turn}: what is the weather in {city} today?"
    return types.Content(role="user", parts=[types.Part(text=text)])


async def run_turns(runner: Runner, session_id: str, turns: int) -> list[AdkEvent]:
    produced: list[AdkEvent] = []
    for turn in range(turns):
        async for event in runner.run_async(
            user_id=USER, session_id=session_id, new_message=question(turn)
        ):
            produced.append(event)
    return produced


def assert_tool_pairs_intact(contents: list[types.Content]) -> None:
    """Every function response directly follows the model content that called it."""
    for i, content in enumerate(contents):
        responses = [p.function_response.name for p in content.parts or [] if p.function_response]
        if not responses:
            continue
        assert i > 0, "a tool result opens the context"
        before = contents[i - 1]
        calls = [p.function_call.name for p in before.parts or [] if p.function_call]
        assert before.role == "model", (i, before)
        assert calls == responses, (i, before, content)


def texts(content: types.Content) -> str:
    return "".join(p.text or "" for p in content.parts or [])


@pytest.fixture
async def client(sidecar_address: str) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(sidecar_address) as client:
        yield client


async def test_runner_sees_compacted_window_and_the_log_keeps_everything(
    client: AsyncClient,
) -> None:
    script = Script()
    service = CompactionSessionService(
        client,
        policy=adk_policy(compaction_interval=INTERVAL, overlap_size=1, max_summary_tokens=96),
        await_compaction=True,
    )
    runner = Runner(app_name=APP, agent=make_agent(script), session_service=service)
    await service.create_session(
        app_name=APP, user_id=USER, session_id="s1", state={"user:units": "metric", "visits": 1}
    )

    produced = await run_turns(runner, "s1", TURNS)

    # Two model calls per turn: the tool call, then the answer.
    assert len(script.calls) == 2 * TURNS
    for seen in script.calls:
        assert INSTRUCTION in seen.system  # the system instruction goes first, every call
        assert seen.contents[0].role == "user"
        assert_tool_pairs_intact(seen.contents)
    # Compacted after the trigger: later calls open with the summary turn and stay
    # bounded (summary pair + at most INTERVAL + 1 turns of 4 events), while an
    # uncompacted run would send 4 * 29 + 3 contents on its last call.
    compacted = [s for s in script.calls if texts(s.contents[0]) == DEFAULT_SHADOW_PROMPT.strip()]
    first = next(i for i, s in enumerate(script.calls) if s in compacted)
    assert first <= 2 * (INTERVAL + 2)
    for seen in script.calls[first:]:
        assert seen in compacted
        assert seen.contents[1].role == "model"
        assert "get_weather" in texts(seen.contents[1])
        assert len(seen.contents) <= 2 + 4 * (INTERVAL + 1)
    assert "Turn 29" in texts(script.calls[-1].contents[-3])

    # The service's log has the whole history, archived events included.
    key = session_key("adk", APP, USER, "s1")
    log = [e async for e in client.session(key).events()]
    real = [e for e in log if not e.synthetic]
    assert len(real) == 4 * TURNS
    assert sum(e.archived for e in real) >= 4 * (TURNS - INTERVAL - 1)
    stored = {e.id: e for e in real}
    for event in produced:
        if event.partial:
            continue
        back = event_from_sidecar(stored[event.id], author="unused")
        assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)

    # get_session returns the active window, with state (session, user) intact.
    session = await service.get_session(app_name=APP, user_id=USER, session_id="s1")
    assert session is not None
    assert len(session.events) <= 2 + 4 * (INTERVAL + 1) < len(real)
    assert session.state["last_city"] == CITIES[(TURNS - 1) % len(CITIES)]
    assert session.state["user:units"] == "metric"
    assert session.state["visits"] == 1
    recent = await service.get_session(
        app_name=APP, user_id=USER, session_id="s1", config=GetSessionConfig(num_recent_events=3)
    )
    assert recent is not None
    assert [e.id for e in recent.events] == [e.id for e in session.events[-3:]]


async def test_events_round_trip_without_loss() -> None:
    call = types.FunctionCall(id="adk-1", name="lookup", args={"q": "x", "n": [1, 2]})
    cases = [
        AdkEvent(
            invocation_id="inv-1",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="hola")]),
            actions=EventActions(state_delta={"k": {"nested": True}}),
        ),
        AdkEvent(
            invocation_id="inv-1",
            author="agent",
            content=types.Content(
                role="model", parts=[types.Part(text="let me see"), types.Part(function_call=call)]
            ),
            branch="root.agent",
        ),
        AdkEvent(
            invocation_id="inv-1",
            author="agent",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(
                            id="adk-1", name="lookup", response={"error": "boom"}
                        )
                    )
                ],
            ),
        ),
        # What the field mapping alone would lose: a thought, two texts, inline bytes first.
        AdkEvent(
            author="agent",
            content=types.Content(
                role="model",
                parts=[
                    types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG")),
                    types.Part(text="thinking", thought=True),
                    types.Part(text="a"),
                    types.Part(text="b"),
                ],
            ),
        ),
        AdkEvent(author="agent", actions=EventActions(transfer_to_agent="other")),
    ]
    for event in cases:
        ours = event_to_sidecar(event)
        back = event_from_sidecar(ours, author="unused")
        assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)
    roles = [event_to_sidecar(e).role.name for e in cases]
    assert roles == ["USER", "ASSISTANT", "TOOL", "ASSISTANT", "ASSISTANT"]
    assert event_to_sidecar(cases[2]).tool_results[0].is_error


def test_an_image_before_its_text_is_stored_once() -> None:
    """Gemini's usual order: the field mapping cannot say it, so the content is kept
    verbatim too, and was with the image in base64 beside its bytes in the parts (a
    600 KB image made a 1.4 MB event, past the 1 MiB event limit)."""
    image = bytes(range(256)) * 2400  # 600 KB
    event = AdkEvent(
        invocation_id="inv-1",
        author="user",
        content=types.Content(
            role="user",
            parts=[
                types.Part.from_bytes(data=image, mime_type="image/png"),
                types.Part(text="what is in this picture?"),
                types.Part.from_bytes(data=b"", mime_type="image/png"),
                types.Part(file_data=types.FileData(file_uri="gs://b/x.pdf", mime_type="a/pdf")),
                types.Part.from_bytes(data=b"second", mime_type="image/gif"),
            ],
        ),
    )
    ours = event_to_sidecar(event)
    assert sum(len(value) for value in ours.metadata.values()) < 2_000
    assert ours.content_bytes() < len(image) + 10_000
    back = event_from_sidecar(ours, author="unused")
    assert back.model_dump(exclude_none=True) == event.model_dump(exclude_none=True)


async def test_session_crud_and_state(client: AsyncClient) -> None:
    service = CompactionSessionService(client, namespace="crud")
    made = await service.create_session(
        app_name=APP, user_id="bo", state={"app:theme": "dark", "user:lang": "pt", "x": 1}
    )
    assert made.state == {"app:theme": "dark", "user:lang": "pt", "x": 1}
    other = await service.create_session(app_name=APP, user_id="bo", session_id="second")
    assert other.state == {"app:theme": "dark", "user:lang": "pt"}  # shared scopes only
    with pytest.raises(Exception, match="already exists"):
        await service.create_session(app_name=APP, user_id="bo", session_id="second")
    listed = await service.list_sessions(app_name=APP, user_id="bo")
    assert sorted(s.id for s in listed.sessions) == sorted([made.id, "second"])
    assert await service.get_user_state(app_name=APP, user_id="bo") == {"lang": "pt"}
    await service.delete_session(app_name=APP, user_id="bo", session_id="second")
    assert await service.get_session(app_name=APP, user_id="bo", session_id="second") is None
    await service.delete_session(app_name=APP, user_id="bo", session_id="second")  # no error
    listed = await service.list_sessions(app_name=APP)
    assert [s.id for s in listed.sessions] == [made.id]


async def test_an_agent_name_and_branch_past_the_services_bounds_come_back_whole(
    client: AsyncClient,
) -> None:
    """ADK bounds neither an agent's name nor a branch, the dotted path of names: past the
    service's bounds they are stored fitted, and ADK gets back the event it wrote."""
    name = "research_" + "x" * 291  # 300 characters, a valid agent name
    branch = ".".join([name] * 4)  # 1,203 characters
    service = CompactionSessionService(client, namespace="long-names")
    session = await service.create_session(app_name=APP, user_id="bo")
    event = AdkEvent(
        invocation_id="inv-1",
        author=name,
        branch=branch,
        content=types.Content(role="model", parts=[types.Part(text="found it")]),
    )
    await service.append_event(session, event)
    key = session_key("long-names", APP, "bo", session.id)
    [stored] = [e async for e in client.session(key).events()]
    assert len(stored.author) <= MAX_AUTHOR_CHARS
    assert len(stored.branch) <= MAX_BRANCH_CHARS
    back = await service.get_session(app_name=APP, user_id="bo", session_id=session.id)
    assert back is not None
    assert [e.model_dump(exclude_none=True) for e in back.events] == [
        event.model_dump(exclude_none=True)
    ]


async def test_callback_compacts_requests_of_an_agent_with_its_own_session_service(
    client: AsyncClient,
) -> None:
    script = Script()
    callback = CompactingModelCallback(
        client,
        policy=adk_policy(compaction_interval=3, overlap_size=1, max_summary_tokens=96),
        await_compaction=True,
    )
    sessions: BaseSessionService = InMemorySessionService()
    agent = make_agent(script, before_model_callback=callback)
    runner = Runner(app_name=APP, agent=agent, session_service=sessions)
    await sessions.create_session(app_name=APP, user_id=USER, session_id="own")
    turns = 12
    await run_turns(runner, "own", turns)

    for seen in script.calls:
        assert INSTRUCTION in seen.system
        assert_tool_pairs_intact(seen.contents)
    last = script.calls[-1].contents
    assert texts(last[0]) == DEFAULT_SHADOW_PROMPT.strip()
    assert len(last) <= 2 + 4 * 4
    # The agent's own session service still has everything; so does the service's log.
    kept = await sessions.get_session(app_name=APP, user_id=USER, session_id="own")
    assert kept is not None
    assert len(kept.events) == 4 * turns
    key = session_key("adk-mirror", APP, USER, "own")
    log: list[Event] = [e async for e in client.session(key).events()]
    # Mirrored before each model call: all but the last answer, which no call followed.
    assert len([e for e in log if not e.synthetic]) == 4 * turns - 1


async def test_callback_leaves_an_agent_without_history_its_current_turn(
    client: AsyncClient,
) -> None:
    """``include_contents='none'``: ADK sends the model the current turn only, and the
    callback put the whole (compacted) history back."""
    seen: dict[str, list[list[str]]] = {}
    for name, callbacks in (
        ("adk", {}),
        (
            "compacting",
            {"before_model_callback": CompactingModelCallback(client, namespace="nohist")},
        ),
    ):
        script = Script()
        agent = make_agent(script, include_contents="none", **callbacks)
        sessions: BaseSessionService = InMemorySessionService()
        runner = Runner(app_name=APP, agent=agent, session_service=sessions)
        await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
        await run_turns(runner, "s", 3)
        seen[name] = [[texts(content) for content in call.contents] for call in script.calls]
    assert seen["compacting"] == seen["adk"]
    assert all(len(contents) <= 3 for contents in seen["adk"])  # a turn, not the history


async def test_callback_remembers_the_most_recent_sessions_only(
    client: AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived callback serving many sessions holds what it remembers for the most
    recent ones only; a session it forgot is mirrored again, each event still stored once."""
    monkeypatch.setattr("sidecar.adapters.usage.MAX_SESSIONS", 2)
    script = Script()
    callback = CompactingModelCallback(client, namespace="bounded")
    sessions: BaseSessionService = InMemorySessionService()
    runner = Runner(
        app_name=APP,
        agent=make_agent(script, before_model_callback=callback),
        session_service=sessions,
    )
    ids = ["a", "b", "c"]
    for session_id in ids:
        await sessions.create_session(app_name=APP, user_id=USER, session_id=session_id)
    for turn in range(3):
        for session_id in ids:  # each session forgotten before its next turn
            async for _ in runner.run_async(
                user_id=USER, session_id=session_id, new_message=question(turn)
            ):
                pass
            assert len(callback._sent) <= 2
    for session_id in ids:
        kept = await sessions.get_session(app_name=APP, user_id=USER, session_id=session_id)
        assert kept is not None
        key = session_key("bounded", APP, USER, session_id)
        log = [e.id for e in [e async for e in client.session(key).events()] if not e.synthetic]
        # Mirrored before each model call: all but the last answer, each once, in order.
        assert log == [e.id for e in kept.events[:-1]]
    for seen in script.calls:
        assert_tool_pairs_intact(seen.contents)


CONTEXT_NOTE = types.Content(role="user", parts=[types.Part(text="Context: metric units.")])


async def run_with_additions(script: Script, turns: int, **callbacks: Any) -> None:
    """An agent with a ``static_instruction`` (so ADK puts its dynamic instruction among the
    contents), each run given ``CONTEXT_NOTE`` as ``RunConfig.model_input_context``."""
    from google.adk.agents.run_config import RunConfig

    agent = make_agent(
        script,
        static_instruction=types.Content(role="user", parts=[types.Part(text="Be brief.")]),
        **callbacks,
    )
    sessions: BaseSessionService = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=sessions)
    await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
    for turn in range(turns):
        async for _ in runner.run_async(
            user_id=USER,
            session_id="s",
            new_message=question(turn),
            run_config=RunConfig(model_input_context=[CONTEXT_NOTE]),
        ):
            pass


async def test_callback_keeps_what_adk_adds_to_the_history(client: AsyncClient) -> None:
    """An agent with a ``static_instruction`` gets its dynamic instruction as a content of its
    own, and ``RunConfig.model_input_context`` adds contents before the turn: the callback
    compacts the history around them, and the model sees each where ADK put it."""
    script = Script()
    callback = CompactingModelCallback(
        client,
        policy=adk_policy(compaction_interval=3, overlap_size=1, max_summary_tokens=96),
        await_compaction=True,
        namespace="additions",
    )
    turns = 9
    await run_with_additions(script, turns, before_model_callback=callback)

    assert len(script.calls) == 2 * turns
    compacted = 0
    for seen in script.calls:
        assert_tool_pairs_intact(seen.contents)
        # the dynamic instruction, once (where ADK puts it: the parity test below)
        assert sum(_instruction(c) for c in seen.contents) == 1
        # the context note right before the turn's question, once
        notes = [i for i, c in enumerate(seen.contents) if texts(c) == texts(CONTEXT_NOTE)]
        assert len(notes) == 1
        assert "what is the weather" in texts(seen.contents[notes[0] + 1])
        if any(texts(c) == DEFAULT_SHADOW_PROMPT.strip() for c in seen.contents):
            compacted += 1
    assert compacted >= 2 * (turns - 4)  # the history gave way to the summary turn


async def test_callback_that_compacts_nothing_sends_what_adk_sends(client: AsyncClient) -> None:
    """With nothing compacted, the request is ADK's own, contents for contents: what ADK
    adds to the history (a static instruction's dynamic one, ``model_input_context``)
    stands where ADK put it."""
    seen: dict[str, list[list[types.Content]]] = {}
    for name, callbacks in (
        ("adk", {}),
        ("compacting", {"before_model_callback": CompactingModelCallback(client, namespace="p")}),
    ):
        script = Script()
        await run_with_additions(script, 3, **callbacks)
        seen[name] = [call.contents for call in script.calls]
    assert len(seen["adk"]) == 6
    assert seen["compacting"] == seen["adk"]


async def test_callback_mirrors_an_event_past_the_services_limit_as_a_stand_in(
    client: AsyncClient,
) -> None:
    """A tool result past the service's 1 MiB event limit: the agent runs on (every later
    call failed), the model gets ADK's own result while it is in the window, the mirror
    stores its stand-in."""

    def get_weather(city: str, tool_context: ToolContext) -> dict[str, str]:
        """Returns today's weather report for a city, with every station's raw readings."""
        return {"city": city, "report": "station reading 21.0 C; " * 60_000}  # 1.4 MB

    script = Script()
    callback = CompactingModelCallback(client, namespace="huge")
    agent = LlmAgent(
        name="forecaster",
        model=ScriptedLlm(script=script),
        instruction=INSTRUCTION,
        tools=[get_weather],
        before_model_callback=callback,
    )
    sessions: BaseSessionService = InMemorySessionService()
    runner = Runner(app_name=APP, agent=agent, session_service=sessions)
    await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
    await run_turns(runner, "s", 2)
    last = script.calls[-1].contents
    reports = [
        p.function_response.response
        for c in last
        for p in c.parts or []
        if p.function_response and p.function_response.response
    ]
    assert len(reports) == 2
    assert all(len(r["report"]) > 1_400_000 for r in reports)
    key = session_key("huge", APP, USER, "s")
    stood_in = [e async for e in client.session(key).events() if e.tool_results]
    assert len(stood_in) == 2
    assert all(int(e.metadata["sidecar.stand_in"]) > 1 << 20 for e in stood_in)
    # weighed as the model is sent it, whole: a token trigger sees the 2.8 MB
    assert (await client.session(key).get()).counters.tokens > 2 * 1_400_000 // 4
