"""Both adapters hand the agent the summary's identifier trail and a placeholder's pointers."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from sidecar.adapters.adk_mapping import window_to_adk
from sidecar.adapters.langchain import event_to_message
from sidecar.model import Event, Role, ToolResult

TRAIL = "User asked: change my flight\nIdentifiers: ZFA04Y, HAT136, 2024-05-20"
POINTED = "[lookup result cleared to save context (call c1) \N{RIGHTWARDS ARROW} ZFA04Y; ...]"


def summary_turn() -> list[Event]:
    return [
        Event(id="s-u", role=Role.USER, text="Summarize", synthetic=True),
        Event(id="s-a", role=Role.ASSISTANT, text=TRAIL, synthetic=True),
    ]


def test_the_adk_summary_event_carries_the_trail() -> None:
    _shadow, summary = window_to_adk(summary_turn())
    assert summary.content is not None
    assert summary.content.parts is not None
    assert summary.content.parts[0].text == TRAIL


def test_the_langchain_summary_message_carries_the_trail() -> None:
    message = event_to_message(summary_turn()[1])
    assert isinstance(message, AIMessage)
    assert message.content == TRAIL


def test_a_cleared_result_shows_its_pointers_to_langchain() -> None:
    cleared = Event(
        id="t1",
        role=Role.TOOL,
        tool_results=(ToolResult("c1", "lookup", POINTED),),
        cleared=True,
    )
    message = event_to_message(cleared)
    assert isinstance(message, ToolMessage)
    assert message.content == POINTED
