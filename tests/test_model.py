"""The model's own small rules: server-assigned ids and an event's content size."""

from __future__ import annotations

import uuid

from sidecar.model import Event, Part, Reasoning, Role, ToolCall, ToolResult, new_event_id


def test_a_server_assigned_id_is_a_random_version_4_uuid_in_hex() -> None:
    ids = [new_event_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for event_id in ids:
        parsed = uuid.UUID(hex=event_id)
        assert parsed.hex == event_id  # 32 lowercase hex digits, as uuid4().hex
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    # the 122 random bits do vary: every hex digit but the version's takes many values
    digits = [{event_id[i] for event_id in ids} for i in range(32)]
    assert [i for i, seen in enumerate(digits) if len(seen) < 4] == [12]


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
