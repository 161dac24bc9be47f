"""Reasoning over gRPC: only the assistant's, kept byte for byte, omitted with the content."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

SIGNATURE = bytes(range(256)) * 4


def thinking(id: str, thought: str = "first check the disk") -> event_pb2.Event:
    return event_pb2.Event(
        id=id,
        role=event_pb2.ROLE_ASSISTANT,
        reasoning=[
            event_pb2.Reasoning(text=thought, signature=SIGNATURE, id="rs_1"),
            event_pb2.Reasoning(signature=b"\xff" * 64, redacted=True),
        ],
        tool_calls=[event_pb2.ToolCall(id="c1", name="df", signature=b"\x00\x01call")],
    )


async def refused(stub: Stub, event: event_pb2.Event) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s", events=[event], create_if_missing=True)
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return info.value.details() or ""


async def test_only_an_assistant_event_carries_reasoning_and_a_redacted_block_no_text(
    stub: Stub,
) -> None:
    user = event_pb2.Event(
        id="u1", role=event_pb2.ROLE_USER, reasoning=[event_pb2.Reasoning(text="x")]
    )
    assert (await refused(stub, user)).startswith("events[0].reasoning:")
    bad = thinking("a1")
    bad.reasoning[1].text = "leaked"
    assert (await refused(stub, bad)).startswith("events[0].reasoning[1].text:")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND  # nothing stored


async def test_reasoning_comes_back_from_every_read_byte_for_byte(stub: Stub) -> None:
    sent = [event_pb2.Event(id="u1", role=event_pb2.ROLE_USER, text="disk?"), thinking("a1")]
    ack = await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=sent, create_if_missing=True)
    )
    context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    listed = await stub.ListEvents(pb.ListEventsRequest(session_id="s"))
    for events in (ack.events, context.events, listed.events):
        assert list(events[1].reasoning) == list(sent[1].reasoning)
        assert events[1].tool_calls[0].signature == b"\x00\x01call"
    found = await stub.SearchEvents(
        pb.SearchEventsRequest(query="check the disk", session_id="s", include_active=True)
    )
    assert [h.event.id for h in found.hits] == ["a1"]  # reasoning text is searchable


async def test_an_answer_over_the_limit_omits_reasoning_with_the_rest_of_the_content(
    tmp_path: Path,
) -> None:
    async with (
        running(tmp_path, max_message_bytes=16384) as sidecar,
        grpc.aio.insecure_channel(address(sidecar)) as channel,
    ):
        stub: Stub = pb_grpc.CompactionServiceStub(channel)
        events = [thinking(f"a{n}", "long thought " * 100) for n in range(12)]
        await stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s", events=events[:6], create_if_missing=True)
        )
        await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events[6:]))
        context = await stub.GetContext(pb.GetContextRequest(session_id="s"))
        assert context.content_omitted
        assert len(context.events) == 12
        for event in context.events:
            assert [(r.text, r.signature) for r in event.reasoning] == [("", b""), ("", b"")]
            assert event.tool_calls[0].signature == b""
