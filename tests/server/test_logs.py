"""Structured logs: one JSON object per line, ids as fields, no event content by default."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.server.logs import configure_logging
from tests.server.harness import address, running
from tests.server.test_api import WINDOW

SECRET = "the launch code is 0000"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The root logger writing JSON at DEBUG into a buffer; restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    buffer = io.StringIO()
    configure_logging("DEBUG", "json", stream=buffer)
    try:
        yield buffer
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def records(buffer: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]


async def converse(sidecar_address: str) -> None:
    async with grpc.aio.insecure_channel(sidecar_address) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s1", policy=WINDOW))
        for n in range(6):
            await stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id="s1",
                    events=[
                        event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=SECRET),
                        event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text="ok"),
                    ],
                )
            )
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetContext(pb.GetContextRequest(session_id="absent"))


async def test_json_lines_carry_session_and_compaction_ids_but_no_content(
    tmp_path: Path, captured: io.StringIO
) -> None:
    async with running(tmp_path) as sidecar:
        await converse(address(sidecar))
    lines = records(captured)
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    compacted = [line for line in lines if str(line["message"]).startswith("compacted")]
    assert compacted
    assert compacted[0]["session_id"] == "s1"
    assert len(str(compacted[0]["compaction_id"])) == 32
    assert compacted[0]["strategy"] == "sliding_window"
    appended = [line for line in lines if str(line["message"]).startswith("appended")]
    assert appended[0]["event_ids"] == ["u0", "a0"]
    failed = [line for line in lines if line.get("method") == "GetContext"]
    assert failed[0]["code"] == "NOT_FOUND"
    assert failed[0]["level"] == "DEBUG"  # an answer, not news: the ADK adapter asks each call
    assert failed[0]["session_id"] == "absent"
    assert SECRET not in captured.getvalue()


async def test_event_content_is_logged_only_when_asked(
    tmp_path: Path, captured: io.StringIO
) -> None:
    async with running(tmp_path, log_event_content=True) as sidecar:
        await converse(address(sidecar))
    appended = [line for line in records(captured) if "content" in line]
    assert appended
    assert SECRET in str(appended[0]["content"])
