"""A token removed from --auth-token-file ends the calls it has open, not only new ones.

Before, an open StreamEvents kept appending and an open WatchSession kept
delivering compaction results (with event content) after the token was gone,
even after a second rotation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.reliability.budget import FIGURES, LONG
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

OLD = (("authorization", "Bearer old-token"),)
NEW = (("authorization", "Bearer new-token"),)
ROUNDS = 5 if LONG else 1
# The file is re-read at most once a second; open calls check twice a second.
WITHIN_S = 3.0


def user(n: int) -> list[event_pb2.Event]:
    return [event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"question {n}")]


async def read_to_the_end(call: object) -> None:
    while await call.read() is not grpc.aio.EOF:  # type: ignore[attr-defined]
        pass
    raise AssertionError("the stream ended without an error")


def rotate(tokens: Path, *names: str) -> None:
    tokens.write_text("".join(f"{name}\n" for name in names))


async def logged(stub: Stub, session_id: str) -> list[str]:
    page = await stub.ListEvents(pb.ListEventsRequest(session_id=session_id), metadata=NEW)
    return [e.id for e in page.events]


@pytest.mark.parametrize("round_", range(ROUNDS))
async def test_an_open_stream_ends_when_its_token_is_removed(tmp_path: Path, round_: int) -> None:
    tokens = tmp_path / "tokens"
    rotate(tokens, "old-token", "new-token")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            outgoing: asyncio.Queue[pb.StreamEventsRequest | None] = asyncio.Queue()

            async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
                while (request := await outgoing.get()) is not None:
                    yield request

            call = stub.StreamEvents(requests(), metadata=OLD)
            await outgoing.put(
                pb.StreamEventsRequest(
                    request_id="r0", session_id="s", events=user(0), create_if_missing=True
                )
            )
            first = await call.read()
            assert isinstance(first, pb.StreamEventsResponse)
            assert first.request_id == "r0"
            assert first.HasField("append")
            rotate(tokens, "new-token")
            revoked_at = time.monotonic()
            await asyncio.sleep(1.2)  # past the file's re-read interval
            await outgoing.put(
                pb.StreamEventsRequest(request_id="r1", session_id="s", events=user(1))
            )
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await asyncio.wait_for(read_to_the_end(call), WITHIN_S + 2)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert time.monotonic() - revoked_at < WITHIN_S
            await outgoing.put(None)
            assert await logged(stub, "s") == ["u0"]  # nothing written after the revocation
            FIGURES["open_calls_ended_by_revocation"] += 1


async def test_an_idle_watch_ends_when_its_token_is_removed(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    rotate(tokens, "old-token", "new-token")
    window = policy_pb2.CompactionPolicy(
        strategy=policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=1))
    )
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar:
        async with grpc.aio.insecure_channel(address(sidecar)) as channel:
            stub: Stub = pb_grpc.CompactionServiceStub(channel)
            await stub.CreateSession(
                pb.CreateSessionRequest(session_id="w", policy=window), metadata=NEW
            )
            watch = stub.WatchSession(pb.WatchSessionRequest(session_id="w"), metadata=OLD)
            await watch.initial_metadata()
            rotate(tokens, "new-token")
            revoked_at = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await asyncio.wait_for(watch.read(), timeout=WITHIN_S + 2)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert time.monotonic() - revoked_at < WITHIN_S
            FIGURES["open_calls_ended_by_revocation"] += 1
