"""The LangChain middleware passes the stable prefix on: OpenAI's key, Anthropic's breakpoint.

A real agent on a real server, with a scripted chat model that calls a
tool for each question and answers its result, and records each call's
messages, its bound settings (what ``model_settings`` reaches the provider
as) and the window the service gave that call (read as the call is made:
nothing is appended in between). The session keeps the newest turn once it
holds more than two, so every other question lands a compaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from sidecar.adapters.langchain import SessionCompactionMiddleware
from sidecar.adapters.langchain_cache import CacheHints, provider_of, with_breakpoint
from sidecar.client import Client, SessionContext
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.triggers import TurnCount
from sidecar.compaction.turn_window import TurnWindow
from tests.adapters.cache_prefix import assert_key_moves_only_with_compactions
from tests.adapters.chat_models import RecordingModel

POLICY = CompactionPolicy(trigger=TurnCount(2), strategy=TurnWindow(max_turns=1))
TURNS = 6
MARK = {"type": "ephemeral"}


@tool
def lookup(order: str) -> str:
    """Returns an order's status."""
    return f"order {order}: shipped, arriving Tuesday."


class SettingsModel(RecordingModel):
    """Calls ``lookup`` for a question and answers its result; records the session's window
    at every call."""

    window: Callable[[], SessionContext] | None = None
    windows: list[SessionContext] = Field(default_factory=list)

    def _answer(self, messages: list[BaseMessage]) -> ChatResult:
        self.seen.append(list(messages))
        if self.window is not None:
            self.windows.append(self.window())
        if isinstance(messages[-1], ToolMessage):
            reply = AIMessage(content="It ships Tuesday.")
        else:
            call = {"id": f"call-{len(self.seen)}", "name": "lookup", "args": {"order": "A1"}}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def run(
    address: str, session_id: str, hints: CacheHints | None, min_tokens: int = 1
) -> SettingsModel:
    with Client(address) as client:
        key = f"langchain/{session_id}"
        model = SettingsModel(window=lambda: client.session(key).context())
        middleware = SessionCompactionMiddleware(
            client,
            policy=POLICY,
            session_id=session_id,
            cache_hints=hints,
            cache_min_tokens=min_tokens,
        )
        agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": session_id}}
        for turn in range(TURNS):
            text = f"Turn {turn}: where is order A{turn}?"
            agent.invoke({"messages": [HumanMessage(content=text)]}, config)
    return model


def marked(message: BaseMessage) -> bool:
    return not isinstance(message.content, str) and any(
        isinstance(b, dict) and "cache_control" in b for b in message.content
    )


def text(message: BaseMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(b["text"] for b in message.content if isinstance(b, dict))


def test_openai_gets_the_prefix_id_as_prompt_cache_key_until_a_compaction(
    sidecar_address: str,
) -> None:
    model = run(sidecar_address, "openai", "openai")
    keys = [s.get("prompt_cache_key") for s in model.settings]
    assert_key_moves_only_with_compactions(keys, model.windows)
    assert not any(marked(m) for call in model.seen for m in call)


def test_anthropic_gets_a_breakpoint_on_the_stable_prefix_last_message(
    sidecar_address: str,
) -> None:
    plain = run(sidecar_address, "plain", None)
    model = run(sidecar_address, "anthropic", "anthropic")
    assert not any("prompt_cache_key" in s for s in model.settings)
    placed = 0
    for messages, window, unhinted in zip(model.seen, model.windows, plain.seen, strict=True):
        # What the model is told is the same, with or without the breakpoint.
        assert [text(m) for m in messages] == [text(m) for m in unhinted]
        marks = [i for i, m in enumerate(messages) if marked(m)]
        if not window.stable_prefix_events:
            assert marks == []
            continue
        last = window.events[window.stable_prefix_events - 1]
        assert marks == [next(i for i, m in enumerate(messages) if m.id == last.id)]
        assert messages[marks[0]].content[-1]["cache_control"] == MARK  # type: ignore[index]
        placed += 1
    assert placed >= 2
    # The graph's state keeps its messages as they were: the mark is on a copy.
    assert not any(marked(m) for m in plain.seen[-1])


def test_no_breakpoint_below_the_providers_minimum(sidecar_address: str) -> None:
    model = run(sidecar_address, "small", "anthropic", min_tokens=1024)
    assert any(w.stable_prefix_events for w in model.windows)
    assert all(w.stable_prefix_tokens < 1024 for w in model.windows)
    assert not any(marked(m) for call in model.seen for m in call)


def test_auto_picks_by_the_models_package() -> None:
    openai = type("ChatOpenAI", (), {"__module__": "langchain_openai.chat_models.base"})
    anthropic = type("ChatAnthropic", (), {"__module__": "langchain_anthropic.chat_models"})
    assert provider_of(openai(), "auto") == "openai"
    assert provider_of(anthropic(), "auto") == "anthropic"
    assert provider_of(RecordingModel(), "auto") is None
    assert provider_of(RecordingModel(), "anthropic") == "anthropic"


def test_the_breakpoint_skips_what_cannot_carry_it() -> None:
    calls = [{"id": "c1", "name": "lookup", "args": {}}]
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    messages: list[Any] = [
        HumanMessage(content="hi", id="u"),
        AIMessage(content=[{"type": "text", "text": "looking"}, thinking], id="a1"),
        AIMessage(content="", tool_calls=calls, id="a2"),
    ]
    out = with_breakpoint(messages, 2, MARK)
    assert out is not None
    # The empty tool call and the reasoning block are passed over: the text before them is marked.
    assert [marked(m) for m in out] == [False, True, False]
    assert out[1].content == [{"type": "text", "text": "looking", "cache_control": MARK}, thinking]
    assert messages[1].content[0] == {"type": "text", "text": "looking"}
    # A breakpoint already placed (by the caller) is left alone: no second one is added.
    assert with_breakpoint(out, 2, MARK) is None
