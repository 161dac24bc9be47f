"""Events the benchmark's tests build their small traces from."""

from __future__ import annotations

from sidecar.model import Event, Role, ToolCall, ToolResult


def reads(first: int, last: int, arguments: str = "{}", words: int = 300) -> list[Event]:
    """Tool loops ``first``..``last - 1``: a ``read`` call with ``arguments``, then its result of
    ``words`` filler words (ids ``a<i>``, ``t<i>``, call ids ``c<i>``)."""
    events: list[Event] = []
    for i in range(first, last):
        call = ToolCall(f"c{i}", "read", arguments)
        events.append(Event(id=f"a{i}", role=Role.ASSISTANT, tool_calls=(call,)))
        result = ToolResult(call.id, "read", "w " * words)
        events.append(Event(id=f"t{i}", role=Role.TOOL, tool_results=(result,)))
    return events
