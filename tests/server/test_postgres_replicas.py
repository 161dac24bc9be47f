"""Several ``compaction-sidecar serve`` processes on one PostgreSQL database.

What a shared deployment must never do: lose or duplicate an acknowledged
event, reorder one client's events, or apply two compactions from one
snapshot — whichever replica each call lands on, and across a database restart.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from tests.postgres_server import PostgresServer
from tests.server.harness import free_port

# Small windows, so compactions happen all the time while the load runs.
POLICY = {
    "trigger": {"event_count": 12},
    "strategy": {"sliding_window": {"max_events": 6}, "boundary": "TOOL_PAIR"},
}


@dataclass
class Replica:
    """One serve process; ``address`` is its API, which also answers health checks."""

    process: subprocess.Popen[str]
    port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@asynccontextmanager
async def replica(dsn: str, *extra: str) -> AsyncIterator[Replica]:
    port = free_port()
    process = subprocess.Popen(  # noqa: ASYNC220 - starting a child is instant
        [
            sys.executable,
            "-m",
            "sidecar.cli",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--store",
            dsn,
            "--default-policy",
            json.dumps(POLICY),
            "--store-pool-size",
            "4",
            "--shutdown-grace-s",
            "1",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started = Replica(process, port)
    try:
        assert process.stdout is not None
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, process.stdout.readline)
            if not line:
                raise RuntimeError(f"serve exited with {process.wait()}")
            if "listening on" in line:
                break
        # Keep draining its output so a chatty server never blocks on a full pipe.
        drain = loop.run_in_executor(None, process.stdout.read)
        yield started
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if "drain" in locals():
            await drain


@dataclass
class History:
    """What clients were told: every acknowledged event, per session, in ack order per client."""

    acked: dict[str, list[str]] = field(default_factory=dict)
    per_client: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    versions: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    unavailable: int = 0
    compactions: int = 0

    def ack(self, session: str, client: str, event_ids: list[str], version: int) -> None:
        self.acked.setdefault(session, []).extend(event_ids)
        self.per_client.setdefault((session, client), []).extend(event_ids)
        self.versions.setdefault((session, client), []).append(version)


def turn(client: str, n: int) -> list[event_pb2.Event]:
    """A user turn with a tool loop: four events whose tool pair must stay together."""
    call = f"{client}-c{n}"
    return [
        event_pb2.Event(id=f"{client}-{n}-u", role=event_pb2.ROLE_USER, text=f"question {n}"),
        event_pb2.Event(
            id=f"{client}-{n}-a",
            role=event_pb2.ROLE_ASSISTANT,
            tool_calls=[event_pb2.ToolCall(id=call, name="lookup", arguments_json="{}")],
        ),
        event_pb2.Event(
            id=f"{client}-{n}-t",
            role=event_pb2.ROLE_TOOL,
            tool_results=[event_pb2.ToolResult(call_id=call, name="lookup", content="42")],
        ),
        event_pb2.Event(id=f"{client}-{n}-r", role=event_pb2.ROLE_ASSISTANT, text="it is 42"),
    ]


async def run_client(
    addresses: list[str],
    session: str,
    client: str,
    turns: int,
    history: History,
    *,
    seed: int,
    until: asyncio.Event | None = None,
) -> None:
    """Append ``turns`` turns (or until ``until`` is set), each to a random replica.

    Each append is retried until acknowledged.

    A retry resends the same event ids, so an append that landed before its
    acknowledgement was lost is answered from the log, not stored twice.
    """
    rng = random.Random(seed)
    channels = [grpc.aio.insecure_channel(a) for a in addresses]
    stubs = [pb_grpc.CompactionServiceStub(c) for c in channels]
    try:
        for n in range(turns):
            if until is not None and until.is_set():
                return
            events = turn(client, n)
            request = pb.AppendEventsRequest(
                session_id=session, events=events, create_if_missing=True
            )
            while True:
                stub = rng.choice(stubs)
                try:
                    reply = await stub.AppendEvents(request, timeout=10)
                    break
                except grpc.aio.AioRpcError as error:
                    if error.code() not in (
                        grpc.StatusCode.UNAVAILABLE,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                    ):
                        raise
                    history.unavailable += 1
                    await asyncio.sleep(0.1)
            assert [e.id for e in reply.events] == [e.id for e in events]
            history.ack(session, client, [e.id for e in events], reply.version)
            if rng.random() < 0.25:  # an explicit compaction now and then, on any replica
                try:
                    done = await rng.choice(stubs).Compact(
                        pb.CompactRequest(session_id=session, force=True), timeout=10
                    )
                    history.compactions += int(done.result.compacted)
                except grpc.aio.AioRpcError as error:
                    if error.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
    finally:
        for channel in channels:
            await channel.close(None)


async def check(address: str, history: History) -> None:
    """Each acknowledged event once, dense positions, each client's order kept, pairs whole."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        for session, acked in history.acked.items():
            log: list[event_pb2.Event] = []
            token = ""
            while True:
                page = await stub.ListEvents(
                    pb.ListEventsRequest(session_id=session, page_size=500, page_token=token)
                )
                log += page.events
                token = page.next_page_token
                if not token:
                    break
            appended = [e for e in log if not e.synthetic]
            ids = [e.id for e in appended]
            assert len(ids) == len(set(ids)), f"{session}: an event is stored twice"
            assert sorted(ids) == sorted(acked), f"{session}: acknowledged events are missing"
            positions = sorted(e.position for e in log)
            assert positions == list(range(1, len(log) + 1)), f"{session}: positions not dense"
            position = {e.id: e.position for e in appended}
            for (s, client), mine in history.per_client.items():
                if s == session:
                    assert [position[i] for i in mine] == sorted(position[i] for i in mine), (
                        f"{session}: {client}'s events are out of order"
                    )
            for key, versions in history.versions.items():
                if key[0] == session:
                    assert versions == sorted(set(versions)), f"{key}: versions did not grow"
            # No compaction ever split a tool call from its result.
            archived = {e.id for e in log if e.archived}
            for e in appended:
                if e.id.endswith("-a"):
                    assert (e.id in archived) == (e.id[:-1] + "t" in archived), e.id
            context = await stub.GetContext(pb.GetContextRequest(session_id=session))
            assert all(not e.archived for e in context.events)


async def test_two_replicas_share_sessions_without_losing_or_reordering(
    postgres_database: str,
) -> None:
    history = History()
    async with replica(postgres_database) as left, replica(postgres_database) as right:
        addresses = [left.address, right.address]
        await asyncio.gather(
            *(
                run_client(addresses, f"shared-{s}", f"c{c}", 12, history, seed=10 * s + c)
                for s in range(3)
                for c in range(4)
            )
        )
        assert history.compactions > 0
        await check(left.address, history)
        await check(right.address, history)
    # The audit trail, read straight from the database: no two compactions of a
    # session started from one version, and no event was archived twice.
    db = await asyncpg.connect(postgres_database)
    try:
        rows = await db.fetch(
            "SELECT count(a.id), count(DISTINCT a.id)"
            " FROM compactions, unnest(archived_ids) AS a(id) GROUP BY session"
        )
    finally:
        await db.close()
    assert len(rows) == 3
    for archived, distinct_archived in rows:
        assert archived == distinct_archived
    versions = await asyncpg_versions(postgres_database)
    assert all(total == distinct for total, distinct in versions)
    assert sum(len(ids) for ids in history.acked.values()) == 3 * 4 * 12 * 4


async def asyncpg_versions(dsn: str) -> list[tuple[int, int]]:
    """Per session: how many compactions, and from how many distinct versions."""
    db = await asyncpg.connect(dsn)
    try:
        rows = await db.fetch(
            "SELECT count(*), count(DISTINCT version_before) FROM compactions GROUP BY session"
        )
    finally:
        await db.close()
    return [(r[0], r[1]) for r in rows]


async def health(address: str) -> int:
    async with grpc.aio.insecure_channel(address) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        return int(reply.status)


async def test_a_database_restart_mid_load_loses_nothing_acknowledged(
    own_postgres: PostgresServer,
) -> None:
    history = History()
    async with replica(own_postgres.dsn(), "--store-probe-interval-s", "0.2") as one:
        done = asyncio.Event()
        load = asyncio.gather(
            *(
                run_client([one.address], "s", f"c{c}", 10_000, history, seed=c, until=done)
                for c in range(4)
            )
        )
        await asyncio.sleep(1.0)
        before = sum(len(ids) for ids in history.acked.values())
        own_postgres.stop()
        await asyncio.sleep(1.5)
        assert await health(one.address) == health_pb2.HealthCheckResponse.NOT_SERVING
        own_postgres.start()
        await asyncio.sleep(2.0)
        done.set()
        await load
        assert sum(len(ids) for ids in history.acked.values()) > before  # it came back
        assert history.unavailable > 0  # the outage was seen by the clients
        assert await health(one.address) == health_pb2.HealthCheckResponse.SERVING
        await check(one.address, history)


async def test_a_watcher_on_one_replica_sees_compactions_landed_by_another(
    postgres_database: str,
) -> None:
    async with replica(postgres_database) as left, replica(postgres_database) as right:
        async with (
            grpc.aio.insecure_channel(left.address) as to_left,
            grpc.aio.insecure_channel(right.address) as to_right,
        ):
            on_left = pb_grpc.CompactionServiceStub(to_left)
            on_right = pb_grpc.CompactionServiceStub(to_right)
            await on_left.CreateSession(pb.CreateSessionRequest(session_id="w"))
            for n in range(3):
                await on_left.AppendEvents(
                    pb.AppendEventsRequest(session_id="w", events=turn("c", n))
                )
            watch = on_right.WatchSession(pb.WatchSessionRequest(session_id="w"))
            await watch.initial_metadata()
            await asyncio.sleep(1.0)  # the right replica's LISTEN connection comes up
            done = await on_left.Compact(pb.CompactRequest(session_id="w", force=True))
            assert done.result.compacted
            update = await asyncio.wait_for(watch.read(), 10)
            assert isinstance(update, pb.WatchSessionResponse)
            assert update.compaction.compaction_id == done.result.compaction_id
            assert [e.id for e in update.compaction.archived_events] == [
                e.id for e in done.result.archived_events
            ]
            assert [e.id for e in update.compaction.active_events] == [
                e.id for e in done.result.active_events
            ]
            watch.cancel()
