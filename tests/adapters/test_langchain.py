"""The LangChain middleware end to end: a real ``create_agent`` graph, a scripted model, a server.

Each turn the user asks for a city's weather; the scripted model calls the
``get_weather`` tool, then answers from its result. The model records the
messages of every call, so the tests assert what the model actually saw.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from sidecar.adapters.langchain import SessionCompactionMiddleware
from sidecar.client import AsyncClient, Client
from sidecar.compaction.policy import policy_from_dict
from sidecar.summarizer.prompts import DEFAULT_SHADOW_PROMPT

SYSTEM = "You are a weather assistant. Always call get_weather before answering."
CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Lagos", "Perth", "Lima", "Turin", "Riga", "Cork"]
TURNS = 30
POLICY = policy_from_dict(
    {
        "trigger": {"interval_turns": 4},
        "strategy": {
            "summarize": {"max_events_to_keep": 2, "overlap": 1, "max_summary_tokens": 96}
        },
    }
)
# The summary pair, plus at most 5 turns of 4 messages: 4 since the last compaction, 1 kept.
BOUND = 2 + 4 * 5


@tool
def get_weather(city: str) -> str:
    """Returns today's weather report for a city."""
    return f"{city}: sunny, 21 C, light wind from the west, humidity 40 percent. " * 6


class ScriptedChatModel(BaseChatModel):
    """A chat model with a script: a question gets a tool call, a tool result gets an answer."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            city = str(last.content).split(":", 1)[0]
            reply = AIMessage(content=f"The weather in {city} is sunny and 21 C.")
        else:
            found = re.search(r"weather in (\w+)", str(last.content))
            assert found, f"the last message is not a question: {last!r}"
            call = {
                "id": f"call-{len(self.seen)}",
                "name": "get_weather",
                "args": {"city": found.group(1)},
            }
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def question(turn: int) -> Any:  # the graph's input state
    text = f"Turn {turn}: what is the weather in {CITIES[turn % len(CITIES)]} today?"
    return {"messages": [HumanMessage(content=text)]}


def assert_well_formed(messages: list[BaseMessage]) -> None:
    """System prompt first, then no tool result without the call right before it."""
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].content == SYSTEM
    assert not any(isinstance(m, SystemMessage) for m in messages[1:])
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            before = messages[i - 1]
            assert isinstance(before, AIMessage), (i, messages)
            assert message.tool_call_id in {c["id"] for c in before.tool_calls}


def assert_compacted(calls: list[list[BaseMessage]]) -> int:
    """Calls open with the summary turn once compaction started, and stay bounded after."""
    first = next(i for i, m in enumerate(calls) if m[1].content == DEFAULT_SHADOW_PROMPT.strip())
    assert first <= 2 * 6
    for messages in calls[first:]:
        assert messages[1].content == DEFAULT_SHADOW_PROMPT.strip()
        assert isinstance(messages[2], AIMessage)
        assert "get_weather" in str(messages[2].content)
        assert len(messages) <= 1 + BOUND
    return first


def weather_agent(model: ScriptedChatModel, middleware: SessionCompactionMiddleware) -> Any:
    return create_agent(
        model,
        [get_weather],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel()


async def test_async_agent_gets_compacted_context_and_keeps_its_history(
    sidecar_address: str, model: ScriptedChatModel
) -> None:
    async with AsyncClient(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, policy=POLICY, await_compaction=True)
        agent = weather_agent(model, middleware)
        config: Any = {"configurable": {"thread_id": "t-async"}}
        for turn in range(TURNS):
            await agent.ainvoke(question(turn), config)

        assert len(model.seen) == 2 * TURNS
        for messages in model.seen:
            assert_well_formed(messages)
        assert_compacted(model.seen)
        assert "Turn 29" in str(model.seen[-1][-3].content)

        # The graph's state still has every message: nothing was removed from it.
        state = await agent.aget_state(config)
        assert len(state.values["messages"]) == 4 * TURNS
        # The service's log has them too (the last answer mirrored as the last run ended).
        log = [e async for e in client.session("langchain/t-async").events()]
        real = [e for e in log if not e.synthetic]
        assert len(real) == 4 * TURNS
        assert [e.id for e in real] == [m.id for m in state.values["messages"]]
        assert sum(e.archived for e in real) >= 4 * (TURNS - 6)


def test_sync_agent_is_mirrored_idempotently(
    sidecar_address: str, model: ScriptedChatModel
) -> None:
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(
            client, policy=POLICY, session_id="fixed", await_compaction=True
        )
        agent = weather_agent(model, middleware)
        config: Any = {"configurable": {"thread_id": "t-sync"}}
        turns = 12
        for turn in range(turns):
            agent.invoke(question(turn), config)
        for messages in model.seen:
            assert_well_formed(messages)
        assert_compacted(model.seen)
        # A fresh middleware (a restarted process) re-sends the whole state: ids make it a no-op.
        again = SessionCompactionMiddleware(client, policy=POLICY, session_id="fixed")
        agent = create_agent(
            model,
            [get_weather],
            system_prompt=SYSTEM,
            middleware=[again],
            checkpointer=agent.checkpointer,
        )
        agent.invoke(question(turns), config)
        real = [e for e in client.session("langchain/fixed").events() if not e.synthetic]
        # Every earlier message once, plus the new turn's question, call, result and answer.
        assert len(real) == 4 * (turns + 1)
        assert len({e.id for e in real}) == len(real)


def test_the_middleware_remembers_the_most_recent_threads_only(
    sidecar_address: str, model: ScriptedChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived middleware serving many threads holds what it remembers for the most
    recent ones only; a thread it forgot is mirrored again, each message still stored once."""
    monkeypatch.setattr("sidecar.adapters.usage.MAX_SESSIONS", 2)
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client)
        agent = weather_agent(model, middleware)
        threads = ["bound-a", "bound-b", "bound-c"]
        turns = 3
        for turn in range(turns):
            for thread in threads:  # each thread forgotten before its next turn
                agent.invoke(question(turn), {"configurable": {"thread_id": thread}})
                assert len(middleware._sent) <= 2
                assert len(middleware._windows) <= 2
        for thread in threads:
            state = agent.get_state({"configurable": {"thread_id": thread}})
            real = [e for e in client.session(f"langchain/{thread}").events() if not e.synthetic]
            assert [e.id for e in real] == [m.id for m in state.values["messages"]]
        for messages in model.seen:
            assert_well_formed(messages)


def test_a_run_without_a_thread_is_named_by_its_first_message(
    sidecar_address: str, model: ScriptedChatModel
) -> None:
    """No checkpointer, no ``thread_id`` (as ``SummarizationMiddleware`` is used too): a run is
    mirrored into a session named by its first message, so a caller that sends its history
    back each run stays in one session, compacted; another conversation gets its own."""
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, policy=POLICY, await_compaction=True)
        agent = create_agent(model, [get_weather], system_prompt=SYSTEM, middleware=[middleware])
        history: list[BaseMessage] = []
        for turn in range(12):
            sent = [*history, *question(turn)["messages"]]
            history = agent.invoke({"messages": sent})["messages"]
        for messages in model.seen:
            assert_well_formed(messages)
        assert_compacted(model.seen)
        key = f"langchain/run-{history[0].id}"
        real = [e for e in client.session(key).events() if not e.synthetic]
        assert [e.id for e in real] == [m.id for m in history]

        other = agent.invoke(question(0))["messages"]
        assert other[0].id != history[0].id
        runs = [s for s in client.list_sessions() if s.session_id.startswith("langchain/run-")]
        assert len(runs) == 2


def test_a_long_thread_id_names_one_session_of_its_own(
    sidecar_address: str, model: ScriptedChatModel
) -> None:
    """A thread id has no length limit (one made of a tenant, a user and a conversation,
    each ``/`` escaped): past the service's 128 characters it is hashed, one session each."""
    base = "tenant-acme-emea/user-maria.fernanda.gonzalez@example-company.com/conversation/"
    threads = [f"{base}{n:036d}" for n in range(2)]
    with Client(sidecar_address) as client:
        agent = weather_agent(model, SessionCompactionMiddleware(client))
        for thread in threads:
            agent.invoke(question(0), {"configurable": {"thread_id": thread}})
        keys = [
            s.session_id
            for s in client.list_sessions()
            if s.session_id.startswith("langchain/tenant-acme-emea")
        ]
        assert len(keys) == 2
        logged = sorted([e.id for e in client.session(key).events()] for key in keys)
        states = [agent.get_state({"configurable": {"thread_id": t}}) for t in threads]
        assert logged == sorted([m.id for m in s.values["messages"]] for s in states)


def test_two_thread_ids_never_share_a_session() -> None:
    """Escapes of fixed width: U+3A00 is not ``:`` and ``00``, so two conversations never
    mirror into one session (and one's summary never reaches the other's model)."""
    keys = {
        SessionCompactionMiddleware("127.0.0.1:1", session_id=thread).key(None)  # type: ignore[arg-type]
        for thread in ["a\u3a00", "a:00", "a\u0101", "a\x101", "a\U0001f600", "a\x1f600", "a:"]
    }
    assert len(keys) == 7
    assert SessionCompactionMiddleware("x:1", session_id="user:7 é").key(None) == (  # type: ignore[arg-type]
        "langchain/user:3A7:20:E9"  # ASCII and Latin-1 escape as before: their sessions stay
    )


@tool("get_weather")
def huge_weather(city: str) -> str:
    """Returns today's weather report for a city, with every station's raw readings."""
    return f"{city}: sunny. " + "station reading 21.0 C; " * 60_000  # 1.4 MB


def test_a_message_past_the_services_event_limit_is_mirrored_as_a_stand_in(
    sidecar_address: str, model: ScriptedChatModel
) -> None:
    """A tool result past the service's 1 MiB event limit: the agent runs on (it was refused
    on every call after), the model gets the whole result, the log its stand-in."""
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, session_id="huge")
        agent = create_agent(
            model,
            [huge_weather],
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "huge"}}
        for turn in range(2):
            agent.invoke(question(turn), config)
        result = next(m for m in model.seen[-1] if isinstance(m, ToolMessage))
        assert len(str(result.content)) > 1_400_000  # the model got it whole, as without us
        stored = [e for e in client.session("langchain/huge").events() if e.tool_results]
        assert len(stored) == 2
        for event in stored:
            assert int(event.metadata["sidecar.stand_in"]) > 1 << 20
            (kept,) = event.tool_results
            assert kept.content.startswith("Lisbon: sunny.") or kept.content.startswith("Oslo")
            assert "past the service's max_event_bytes" in kept.content
            assert len(kept.content) < 2_000
        # Weighed whole, as the model is sent it: counted as its 1,000 characters, two 1.4 MB
        # results left a token_count trigger far from firing on a window past any model's.
        tokens = client.session("langchain/huge").get().counters.tokens
        assert tokens > 2 * 1_400_000 // 4
