"""StreamEvents stops reading instead of buffering, and the in-flight budget never deadlocks.

The bounds themselves (``streams.py``, ``--max-inflight-mib``) are pinned
here on a server in this process; the memory they keep a server to is
measured in ``tests/reliability/test_stream_memory.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.server import servicer
from sidecar.server.app import Sidecar
from sidecar.server.streams import EventStream
from tests.server.harness import address, running, until

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

KB = 1000
OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", 16 << 20)]


def request(session_id: str, n: int, events: int, event_bytes: int) -> pb.StreamEventsRequest:
    out = pb.StreamEventsRequest(request_id=f"r{n}", session_id=session_id, create_if_missing=True)
    for k in range(events):
        event = out.events.add(id=f"{session_id}-{n}-{k}", role=event_pb2.ROLE_USER)
        event.parts.add(mime_type="application/octet-stream", data=bytes(event_bytes))
    return out


async def stream_all(
    stub: Stub, session_id: str, count: int, events: int, event_bytes: int
) -> list[str]:
    """Stream ``count`` requests, read every answer; the acknowledged request ids, in order."""

    async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
        for n in range(count):
            yield request(session_id, n, events, event_bytes)

    acked = []
    async for answer in stub.StreamEvents(requests()):
        if answer.request_id:
            assert not answer.HasField("error"), answer.error.message
            acked.append(answer.request_id)
    return acked


def recorded_streams(monkeypatch: pytest.MonkeyPatch) -> list[EventStream]:
    """Every StreamEvents call's EventStream, as the servicer makes them."""
    made: list[EventStream] = []

    class Recorded(EventStream):
        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            made.append(self)

    monkeypatch.setattr(servicer, "EventStream", Recorded)
    return made


def stalled(stream: EventStream) -> bool:
    """Whether the stream reads nothing more until its client reads: both its queues full."""
    return not stream._outgoing.has_room() and not stream._inbox.has_room()


async def drained(sidecar: Sidecar) -> None:
    """Wait until the budget holds nothing (the server's side of ended calls has run)."""
    await until(lambda: sidecar.servicer.inflight.held == 0)


async def test_requests_larger_than_the_whole_budget_are_answered_one_at_a_time(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, max_inflight_mib=1) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar), options=OPTIONS) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            # 2.7 MB requests against a 1 MiB budget.
            acked = await asyncio.wait_for(stream_all(stub, "big", 4, 3, 900 * KB), 30)
            assert acked == ["r0", "r1", "r2", "r3"]
            await drained(sidecar)


async def test_streams_and_unary_appends_sharing_a_small_budget_all_finish(
    tmp_path: Path,
) -> None:
    """Eight streams and eight unary appends, 15 MB in all, through a 1 MiB budget."""
    async with running(tmp_path, max_inflight_mib=1) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar), options=OPTIONS) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)

            async def unary(n: int) -> None:
                events = request(f"unary-{n}", 0, 1, 400 * KB).events
                await stub.AppendEvents(
                    pb.AppendEventsRequest(
                        session_id=f"unary-{n}", events=events, create_if_missing=True
                    )
                )

            streams = [stream_all(stub, f"s{n}", 4, 1, 400 * KB) for n in range(8)]
            results = await asyncio.wait_for(
                asyncio.gather(*streams, *(unary(n) for n in range(8))), 60
            )
            assert results[:8] == [["r0", "r1", "r2", "r3"]] * 8
            for n in range(8):
                session = await stub.GetSession(pb.GetSessionRequest(session_id=f"s{n}"))
                assert session.total_event_count == 4
            assert sidecar.servicer.inflight.high_water >= 1 << 20  # the budget was reached
            await drained(sidecar)


async def test_a_client_that_stops_reading_stops_the_stream_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hundred 1 MB requests, no ack read: the server takes a few, then waits.

    Once the client reads, every request is acknowledged in order, and the
    stream's share of the budget is given back when it ends.
    """
    streams = recorded_streams(monkeypatch)
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar), options=OPTIONS) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            sent = 0

            async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
                nonlocal sent
                for n in range(100):
                    yield request("unread", n, 1, 1000 * KB)
                    sent += 1

            call = stub.StreamEvents(requests())
            # However long a loaded machine takes to get there: the answers the client
            # does not read fill the outgoing queue, and the requests the stream then
            # does not answer fill its inbox.
            await until(lambda: bool(streams) and stalled(streams[0]))
            await asyncio.sleep(0.5)  # room for a server that kept reading to show it
            # Its inbox, a batch's answers and its outgoing queue (4 MiB and one
            # request each), the answer being written, what the transports hold:
            # a score of 1 MB requests, not a hundred.
            assert sent <= 30, f"the server kept reading: {sent} requests sent"
            held = sidecar.servicer.inflight.held
            assert 0 < held <= 3 * ((4 << 20) + 1000 * KB) + 1000 * KB, held
            acked = [a.request_id async for a in call if a.request_id]
            assert acked == [f"r{n}" for n in range(100)]
            await drained(sidecar)


async def test_a_cancelled_stream_gives_its_budget_back(tmp_path: Path) -> None:
    async with running(tmp_path) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar), options=OPTIONS) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)

            async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
                for n in range(100):
                    yield request("gone", n, 1, 1000 * KB)

            call = stub.StreamEvents(requests())
            await until(lambda: sidecar.servicer.inflight.held > 0)
            call.cancel()
            await drained(sidecar)
