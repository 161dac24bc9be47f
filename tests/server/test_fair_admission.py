"""Admission past the in-flight budget, end to end: fair between tenants, then connections.

The servicer keys every append it lets into the budget by its caller's tenant
and connection (``inflight.py`` holds the rule itself, tested on its own in
``test_inflight.py``). Here the budget is one byte, so every request is let
in alone and the order the appends run in is the order they were let in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.server.app import Sidecar
from sidecar.server.inflight import InflightBudget
from tests.server.harness import address, running, until
from tests.server.test_api import turn

if TYPE_CHECKING:  # the async stub type exists only in the generated .pyi
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

A = (("authorization", "Bearer a-token"),)
B = (("authorization", "Bearer b-token"),)
FLOODING_CONNECTIONS = 8
OWN_CONNECTION = (("grpc.use_local_subchannel_pool", 1),)  # a channel per connection


def recording(sidecar: Sidecar, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session ids of the appends the servicer runs, in the order they run."""
    order: list[str] = []
    appends = sidecar.servicer.appends
    append = appends.append

    async def recorded(session_id: str, *args: Any, **kwargs: Any) -> Any:
        order.append(session_id)
        return await append(session_id, *args, **kwargs)

    monkeypatch.setattr(appends, "append", recorded)
    return order


async def unary(stub: Stub, session_id: str, metadata: tuple[tuple[str, str], ...]) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id=session_id, events=turn(0), create_if_missing=True),
        metadata=metadata,
        timeout=30,
    )


async def streamed(stub: Stub, session_id: str, metadata: tuple[tuple[str, str], ...]) -> None:
    async def requests() -> AsyncIterator[pb.StreamEventsRequest]:
        yield pb.StreamEventsRequest(
            request_id="r0", session_id=session_id, events=turn(0), create_if_missing=True
        )

    async for answer in stub.StreamEvents(requests(), metadata=metadata, timeout=30):
        assert not answer.HasField("error"), answer.error.message


Send = Callable[["Stub", str, tuple[tuple[str, str], ...]], Coroutine[Any, Any, None]]


@pytest.mark.parametrize("flood", [unary, streamed], ids=["unary", "streamed"])
async def test_a_quiet_tenant_waits_for_one_request_not_one_per_connection_of_a_flood(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flood: Send
) -> None:
    """Tenant a has a request waiting on each of eight connections; b's one goes first or
    second (a tie with a's first goes to a, which asked first), not ninth."""
    tokens = tmp_path / "tokens"
    tokens.write_text("a a-token\nb b-token\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar, AsyncExitStack() as stack:
        budget = sidecar.servicer.inflight = InflightBudget(1)
        order = recording(sidecar, monkeypatch)
        channels = [
            await stack.enter_async_context(
                grpc.aio.insecure_channel(address(sidecar), options=OWN_CONNECTION)
            )
            for _ in range(FLOODING_CONNECTIONS + 1)
        ]
        stubs: list[Stub] = [pb_grpc.CompactionServiceStub(channel) for channel in channels]
        budget.charge(1)  # held, so every request waits for its turn
        calls = [
            asyncio.create_task(flood(stubs[n], f"a{n}", A)) for n in range(FLOODING_CONNECTIONS)
        ]
        await until(lambda: budget.waiting == FLOODING_CONNECTIONS)
        calls.append(asyncio.create_task(unary(stubs[-1], "b", B)))
        await until(lambda: budget.waiting == FLOODING_CONNECTIONS + 1)
        budget.release(1)
        await asyncio.gather(*calls)
        assert sorted(order) == sorted([f"a{n}" for n in range(FLOODING_CONNECTIONS)] + ["b"])
        assert order.index("b") <= 1, order  # by connection alone it came ninth


async def test_within_a_tenant_a_quiet_connection_goes_beside_a_flooding_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One tenant: eight streams on one connection, one call on another; the call goes second."""
    tokens = tmp_path / "tokens"
    tokens.write_text("a a-token\n")
    async with running(tmp_path, auth_token_file=str(tokens)) as sidecar, AsyncExitStack() as stack:
        budget = sidecar.servicer.inflight = InflightBudget(1)
        order = recording(sidecar, monkeypatch)
        flooding, quiet = [
            pb_grpc.CompactionServiceStub(
                await stack.enter_async_context(
                    grpc.aio.insecure_channel(address(sidecar), options=OWN_CONNECTION)
                )
            )
            for _ in range(2)
        ]
        budget.charge(1)
        calls = [
            asyncio.create_task(streamed(flooding, f"s{n}", A)) for n in range(FLOODING_CONNECTIONS)
        ]
        await until(lambda: budget.waiting == FLOODING_CONNECTIONS)
        calls.append(asyncio.create_task(unary(quiet, "quiet", A)))
        await until(lambda: budget.waiting == FLOODING_CONNECTIONS + 1)
        budget.release(1)
        await asyncio.gather(*calls)
        assert order.index("quiet") <= 1, order
