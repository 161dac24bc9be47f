"""The model's own small rules: an event's content size."""

from __future__ import annotations

from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult


def test_content_bytes_counts_every_kind_of_content_in_utf8() -> None:
    event = Event(
        id="e1",
        role=Role.ASSISTANT,
        text="héllo",  # 6 bytes
        tool_calls=(ToolCall("c1", "f", "{}", b"sig"),),  # 2 + 1 + 2 + 3
        reasoning=(Reasoning("ü", b"ss", False, "r1"),),  # 2 + 2 + 2
        parts=(Part("image/png", b"1234", ""), Part("text/plain", b"", "u")),  # 4 + 1
        metadata={"k": "vv"},  # 3
    )
    assert event.content_bytes() == 6 + 8 + 6 + 5 + 3
    result = Event(id="t", role=Role.TOOL, tool_results=(ToolResult("c1", "ff", "ä"),))
    assert result.content_bytes() == 2 + 2
    assert Event(id="u", role=Role.USER).content_bytes() == 0
