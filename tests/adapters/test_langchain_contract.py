"""``SessionCompactionMiddleware`` as a drop-in: it never loses a message the model should see.

Each case runs a real ``create_agent`` graph with a model that records what
it receives, against a real server, and compares with what the same graph
sends without the middleware (or with LangChain's ``SummarizationMiddleware``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver

from sidecar.adapters.langchain import SessionCompactionMiddleware, compacted_messages
from sidecar.client import Client
from sidecar.compaction.policy import policy_from_dict
from sidecar.model import Event, Role, ToolResult
from sidecar.providers.conversation import orphan_text
from sidecar.summarizer.prompts import DEFAULT_SHADOW_PROMPT
from tests.adapters.chat_models import RecordingModel

SUMMARIZE_ALL_BUT_LAST = policy_from_dict(
    {
        "trigger": {"turn_count": 1},
        "strategy": {"summarize": {"max_events_to_keep": 1, "overlap": 0}, "min_saved_tokens": 1},
    }
)


def texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


def run(
    messages: list[AnyMessage],
    middleware: Sequence[AgentMiddleware[Any, Any]] = (),
    *,
    thread: str,
) -> list[BaseMessage]:
    """What the model receives on one invocation of a graph whose state starts as ``messages``."""
    model = RecordingModel()
    agent = create_agent(model, [], middleware=list(middleware), checkpointer=InMemorySaver())
    state: Any = {"messages": messages}
    config: Any = {"configurable": {"thread_id": thread}}
    agent.invoke(state, config)
    (seen,) = model.seen
    return seen


def test_a_system_message_in_the_state_reaches_the_model_as_without_the_middleware(
    sidecar_address: str,
) -> None:
    def state() -> list[AnyMessage]:
        return [
            HumanMessage("q1"),
            AIMessage("a1"),
            SystemMessage("Now answer in French."),
            HumanMessage("q2"),
        ]

    plain = run(state(), thread="plain")
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, session_id="sys-in-state")
        ours = run(state(), [middleware], thread="ours")
    assert texts(ours) == texts(plain) == ["q1", "a1", "Now answer in French.", "q2"]


def test_a_system_message_survives_compaction_in_place(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(
            client, policy=SUMMARIZE_ALL_BUT_LAST, session_id="sys-kept", await_compaction=True
        )
        seen = run(
            [
                HumanMessage("q1 " * 50),
                AIMessage("a1 " * 50),
                SystemMessage("Use metric units."),
                HumanMessage("q2"),
            ],
            [middleware],
            thread="sys-kept",
        )
    # q1 and a1 are summarized; the latest system message stays where it was stored,
    # the summary turn goes right before the kept conversation.
    assert texts(seen)[0] == "Use metric units."
    assert texts(seen)[1] == DEFAULT_SHADOW_PROMPT.strip()
    assert texts(seen)[3:] == ["q2"]


def test_equal_messages_without_ids_stay_two_messages(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, session_id="twins")
        state: Any = {"messages": [HumanMessage("same"), AIMessage("ok"), HumanMessage("same")]}
        middleware.before_model(state, None)  # type: ignore[arg-type]
        assert len({m.id for m in state["messages"]}) == 3
        log = list(client.session("langchain/twins").events())
        assert [e.text for e in log] == ["same", "ok", "same"]
        seen = run(
            [HumanMessage("same"), AIMessage("ok"), HumanMessage("same")],
            [SessionCompactionMiddleware(client, session_id="twins-graph")],
            thread="twins",
        )
        assert texts(seen) == ["same", "ok", "same"]


class Inject(AgentMiddleware[Any, Any]):
    """An outer middleware that adds a message in front of the model's input."""

    def wrap_model_call(self, request: ModelRequest[Any], handler: Any) -> ModelResponse[Any]:
        note = HumanMessage("Context: the user is in Oslo.", id="injected")
        return handler(request.override(messages=[note, *request.messages]))  # type: ignore[no-any-return]


def test_a_message_another_middleware_adds_reaches_the_model(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        middleware = SessionCompactionMiddleware(client, session_id="injected")
        seen = run(
            [HumanMessage("q1"), AIMessage("a1"), HumanMessage("q2")],
            [Inject(), middleware],
            thread="injected",
        )
    assert texts(seen) == ["Context: the user is in Oslo.", "q1", "a1", "q2"]


def test_compaction_never_orphans_a_tool_result_and_an_existing_orphan_is_user_text() -> None:
    call = {"id": "c1", "name": "lookup", "args": {}}
    messages: list[AnyMessage] = [
        ToolMessage("stray", tool_call_id="nobody", id="t0"),
        HumanMessage("q1", id="h1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage("found", tool_call_id="c1", id="t1"),
        HumanMessage("q2", id="h2"),
    ]
    # The window the service keeps (it archived t0 and never cuts between a1 and t1).
    window = [
        Event(id="h1", role=Role.USER, text="q1"),
        Event(id="a1", role=Role.ASSISTANT),
        Event(id="t1", role=Role.TOOL),
        Event(id="h2", role=Role.USER, text="q2"),
    ]
    mirrored = {m.id for m in messages if m.id}
    out = compacted_messages(window, messages, mirrored)
    assert [m.id for m in out] == ["h1", "a1", "t1", "h2"]
    # Without compaction, an orphan already in the state goes on as the renderings give it.
    window = [Event(id="t0", role=Role.TOOL), *window]
    out = compacted_messages(window, messages, mirrored)
    assert [m.id for m in out] == ["t0", "h1", "a1", "t1", "h2"]
    assert isinstance(out[0], HumanMessage)
    assert out[0].content == orphan_text(ToolResult("nobody", "", "stray"))


def test_a_message_removed_from_the_state_is_not_sent_again() -> None:
    messages: list[AnyMessage] = [HumanMessage("q2", id="h2")]
    window = [
        Event(id="h1", role=Role.USER, text="secret: 1234"),  # removed by RemoveMessage
        Event(id="h2", role=Role.USER, text="q2"),
    ]
    assert [m.id for m in compacted_messages(window, messages, {"h1", "h2"})] == ["h2"]


def test_a_message_edited_in_place_does_not_wedge_a_restarted_thread(sidecar_address: str) -> None:
    with Client(sidecar_address) as client:
        first = SessionCompactionMiddleware(client, session_id="edited")
        state: Any = {"messages": [HumanMessage("q1", id="h1")]}
        first.before_model(state, None)  # type: ignore[arg-type]
        restarted = SessionCompactionMiddleware(client, session_id="edited")
        state = {"messages": [HumanMessage("q1, edited", id="h1"), HumanMessage("q2", id="h2")]}
        restarted.before_model(state, None)  # type: ignore[arg-type]
        log = list(client.session("langchain/edited").events())
        assert [(e.id, e.text) for e in log] == [("h1", "q1"), ("h2", "q2")]


def _no_orphan(seen: Sequence[BaseMessage]) -> None:
    """No ``ToolMessage`` the model gets lacks a call before it that waits for it."""
    waiting: list[str] = []
    for message in seen:
        if isinstance(message, AIMessage):
            waiting += [str(c["id"]) for c in message.tool_calls]
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in waiting, message
            waiting.remove(message.tool_call_id)


def test_the_model_never_gets_an_orphan_tool_message_with_or_without_a_policy(
    sidecar_address: str,
) -> None:
    call = {"id": "c1", "name": "lookup", "args": {}}

    def state() -> list[AnyMessage]:
        return [
            HumanMessage("q1", id="h1"),
            ToolMessage("stray", tool_call_id="gone", name="lookup", id="t0"),
            AIMessage("", tool_calls=[call], id="a1"),
            ToolMessage("found", tool_call_id="c1", id="t1"),
            ToolMessage("again", tool_call_id="c1", id="t2", status="error"),
            AIMessage("a1 done", id="a2"),
            HumanMessage("q2", id="h2"),
        ]

    for policy in (None, SUMMARIZE_ALL_BUT_LAST):
        name = f"orphans-{policy is not None}"
        with Client(sidecar_address) as client:
            middleware = SessionCompactionMiddleware(
                client, session_id=name, policy=policy, await_compaction=True
            )
            seen = run(state(), [middleware], thread=name)
            logged = list(client.session(f"langchain/{name}").events())
        _no_orphan(seen)
        strays = [m for m in seen if m.id in ("t0", "t2")]
        assert all(isinstance(m, HumanMessage) for m in strays)
        if policy is None:  # nothing archived: both reach the model, as user text
            assert [m.content for m in strays] == [
                orphan_text(ToolResult("gone", "lookup", "stray")),
                orphan_text(ToolResult("c1", "", "again", is_error=True)),
            ]
        assert {"t0", "t2"} <= {e.id for e in logged}  # the log keeps them as they are


def test_the_answer_langchain_gives_an_invalid_tool_call_reaches_the_model_as_without_it(
    sidecar_address: str,
) -> None:
    """The agent answers an invalid tool call (malformed arguments) with an error
    ``ToolMessage``, and providers send the invalid call as a call (OpenAI refuses a call
    with no tool message after it): that answer is no orphan, and must not become user
    text."""
    bad = {"type": "invalid_tool_call", "id": "bad1", "name": "lookup", "args": "{not json"}

    def state() -> list[AnyMessage]:
        return [
            HumanMessage("q1", id="h1"),
            AIMessage("", invalid_tool_calls=[bad], id="a1"),
            HumanMessage("q2", id="h2"),
        ]

    def shown(seen: Sequence[BaseMessage]) -> list[tuple[str, str]]:
        return [(type(m).__name__, str(m.content)) for m in seen]

    plain = run(state(), thread="invalid-call-plain")
    assert [type(m) for m in plain] == [HumanMessage, AIMessage, ToolMessage, HumanMessage]
    for policy in (None, SUMMARIZE_ALL_BUT_LAST):
        name = f"invalid-call-{policy is not None}"
        with Client(sidecar_address) as client:
            middleware = SessionCompactionMiddleware(client, session_id=name, policy=policy)
            ours = run(state(), [middleware], thread=name)
        assert shown(ours) == shown(plain)


def test_a_call_whose_arguments_hold_a_nan_does_not_wedge_the_thread(
    sidecar_address: str,
) -> None:
    # Python's JSON reads NaN (a provider's arguments, parsed); the agent sends the call on,
    # and so must the middleware, every run of the thread after it.
    def state() -> list[AnyMessage]:
        call = {"id": "c1", "name": "plot", "args": {"low": float("nan")}}
        return [
            HumanMessage("q1", id="h1"),
            AIMessage("", tool_calls=[call], id="a1"),
            ToolMessage("plotted", tool_call_id="c1", id="t1"),
            HumanMessage("q2", id="h2"),
        ]

    plain = run(state(), thread="nan-plain")
    with Client(sidecar_address) as client:
        ours = run(state(), [SessionCompactionMiddleware(client, session_id="nan")], thread="nan")
        logged = [e.id for e in client.session("langchain/nan").events()]
    assert texts(ours) == texts(plain)
    assert logged[:4] == ["h1", "a1", "t1", "h2"]


def test_summarization_middleware_before_or_after_ours_sends_what_it_sends_alone(
    sidecar_address: str,
) -> None:
    """``SummarizationMiddleware`` puts its summary first in the state, before messages it
    keeps: the log has it after them (it is appended last), the model must have it first."""

    def summarization() -> SummarizationMiddleware:
        return SummarizationMiddleware(
            RecordingModel(), trigger=("messages", 6), keep=("messages", 2)
        )

    def seen(middleware: list[AgentMiddleware[Any, Any]], thread: str) -> list[list[str]]:
        model = RecordingModel()
        agent = create_agent(model, [], middleware=middleware, checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": thread}}
        for turn in range(6):
            agent.invoke({"messages": [HumanMessage(f"question {turn} " + "word " * 30)]}, config)
        return [[f"{type(m).__name__}: {str(m.content)[:20]}" for m in call] for call in model.seen]

    alone = seen([summarization()], "summarization-alone")
    assert any(call[0].startswith("HumanMessage: Here is a summary") for call in alone)
    with Client(sidecar_address) as client:
        for name in ("ours-first", "ours-last"):
            ours = SessionCompactionMiddleware(client, session_id=f"summarization-{name}")
            both = [ours, summarization()] if name == "ours-first" else [summarization(), ours]
            assert seen(both, name) == alone, name
