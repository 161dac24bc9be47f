"""Never refused after commit: an answer that would pass the message limit still goes out.

An append's acknowledgement echoes its events, and an inline compaction adds
the new window and what it archived, so the answer can be several times the
request. It used to fail with RESOURCE_EXHAUSTED ("Sent message larger than
max") after everything was stored, and a stream died with it. Now such an
answer lists its events without their content (``content_omitted``).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from sidecar.client import AsyncClient
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.reliability.budget import FIGURES, LONG
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

LIMIT = 400_000
BIG = 90_000
# Compacts inline on every new turn, keeping two events: each append archives the last turn.
POLICY = policy_pb2.CompactionPolicy(
    trigger=policy_pb2.Trigger(turn_count=1),
    strategy=policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=2)),
)
ROUNDS = 40 if LONG else 3


def big(event_id: str, role: event_pb2.Role.ValueType, size: int) -> event_pb2.Event:
    return event_pb2.Event(id=event_id, role=role, text="x" * size)


def turn(n: int, size: int) -> list[event_pb2.Event]:
    return [
        big(f"u{n}", event_pb2.ROLE_USER, size),
        big(f"a{n}", event_pb2.ROLE_ASSISTANT, size),
    ]


async def stored_ids(stub: Stub, session_id: str) -> list[str]:
    ids: list[str] = []
    token = ""
    while True:
        page = await stub.ListEvents(
            pb.ListEventsRequest(session_id=session_id, page_size=2, page_token=token)
        )
        ids += [e.id for e in page.events]
        token = page.next_page_token
        if not token:
            return ids


def channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)])


async def test_an_append_whose_answer_is_too_large_is_acknowledged_without_content(
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    async with running(tmp_path, max_message_bytes=LIMIT, max_event_bytes=BIG + 10_000) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            for round_ in range(ROUNDS):
                session_id = f"big-{round_}"
                await stub.CreateSession(
                    pb.CreateSessionRequest(session_id=session_id, policy=POLICY)
                )
                size = rng.randint(BIG - 20_000, BIG)
                await stub.AppendEvents(
                    pb.AppendEventsRequest(session_id=session_id, events=turn(0, size))
                )
                # 4 events (within the request limit) that archive the first turn and a
                # second one: the ack would carry 4 + 2 + 4 events of ~size bytes.
                events = [*turn(1, size), *turn(2, size)]
                assert pb.AppendEventsRequest(events=events).ByteSize() < LIMIT
                ack = await stub.AppendEvents(
                    pb.AppendEventsRequest(session_id=session_id, events=events)
                )
                assert ack.ByteSize() <= LIMIT
                assert [e.id for e in ack.events] == ["u1", "a1", "u2", "a2"]
                assert ack.compaction.compacted
                assert ack.compaction.content_omitted
                assert [e.id for e in ack.compaction.active_events] == ["u2", "a2"]
                assert [e.id for e in ack.compaction.archived_events] == ["u0", "a0", "u1", "a1"]
                assert all(e.archived for e in ack.compaction.archived_events)
                assert await stored_ids(stub, session_id) == ["u0", "a0", "u1", "a1", "u2", "a2"]
                context = await stub.GetContext(pb.GetContextRequest(session_id=session_id))
                assert [len(e.text) for e in context.events] == [size, size]
                FIGURES["oversized_answers_sent_without_content"] += 1


async def test_a_stream_survives_an_answer_that_would_be_too_large(tmp_path: Path) -> None:
    async with running(tmp_path, max_message_bytes=LIMIT, max_event_bytes=BIG + 10_000) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="st", policy=POLICY))

            async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
                yield pb.StreamEventsRequest(request_id="r0", session_id="st", events=turn(0, BIG))
                yield pb.StreamEventsRequest(
                    request_id="r1", session_id="st", events=[*turn(1, BIG), *turn(2, BIG)]
                )
                yield pb.StreamEventsRequest(request_id="r2", session_id="st", events=turn(3, 10))

            acks = [r async for r in stub.StreamEvents(requests()) if r.request_id]
            assert [r.request_id for r in acks] == ["r0", "r1", "r2"]
            assert not any(r.HasField("error") for r in acks)
            assert await stored_ids(stub, "st") == [
                f"{kind}{n}" for n in range(4) for kind in ("u", "a")
            ]


async def test_a_window_too_large_for_one_answer_stays_readable(tmp_path: Path) -> None:
    # Ten 90 KB images count a few tokens each: no token trigger fires, and the window
    # (900 KB) passes the 400 KB limit; GetContext, ListEvents and the client still read it.
    async with running(tmp_path, max_message_bytes=LIMIT, max_event_bytes=BIG + 10_000) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            images = [
                event_pb2.Event(
                    id=f"img{n}",
                    role=event_pb2.ROLE_USER if n % 2 == 0 else event_pb2.ROLE_ASSISTANT,
                    parts=[event_pb2.Part(mime_type="image/png", data=bytes([n]) * BIG)],
                )
                for n in range(10)
            ]
            for n in range(0, 10, 2):
                await stub.AppendEvents(
                    pb.AppendEventsRequest(
                        session_id="pics", events=images[n : n + 2], create_if_missing=True
                    )
                )
            answer = await stub.GetContext(pb.GetContextRequest(session_id="pics"))
            assert answer.content_omitted
            assert [e.id for e in answer.events] == [e.id for e in images]
            assert await stored_ids(stub, "pics") == [e.id for e in images]
            page = await stub.ListEvents(pb.ListEventsRequest(session_id="pics"))
            assert 1 <= len(page.events) < 10
            assert page.ByteSize() <= LIMIT // 2 + BIG
            assert page.next_page_token
        async with AsyncClient(address(sidecar)) as client:
            window = await client.session("pics").context()
        assert [e.parts[0].data[:1] for e in window.events] == [bytes([n]) for n in range(10)]
        assert all(len(e.parts[0].data) == BIG for e in window.events)
