"""Clients that append, compact, read and retry, recording what they were told.

Each client works on one session with ids of its own (``<client>-<n>-u`` ...),
one operation at a time, and records every completed one in a ``History``:

- appends of whole turns (a user message, tool calls with their results, an
  answer), over unary AppendEvents or a long-lived StreamEvents;
- lost acknowledgements: a call is cancelled once sent (it may or may not
  have landed), then retried with the same event ids until acknowledged;
- conditional appends with a stale ``expected_version`` and batches holding
  one bad event: refused, so their ids are recorded as never to be stored;
- forced compactions and GetContext reads (kept as snapshots to check).

UNAVAILABLE (a server killed or restarting, a full disk) is retried; any
other error fails the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from tests.reliability.history import History, Op, SeenEvent, Snapshot

CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 300),
]
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
CALL_TIMEOUT_S = 20.0

# Small windows, so compactions happen all the time while the load runs.
WINDOW_POLICIES: list[dict[str, Any]] = [
    {
        "trigger": {"event_count": 12},
        "strategy": {"sliding_window": {"max_events": 6}, "boundary": "BOUNDARY_TOOL_PAIR"},
    },
    {
        "trigger": {"turn_count": 3},
        "strategy": {"turn_window": {"max_turns": 2}, "boundary": "BOUNDARY_TURN"},
    },
    {
        "trigger": {"token_count": 300},
        "strategy": {"token_budget": {"max_tokens": 150}, "boundary": "BOUNDARY_TURN"},
    },
]


def policy_message(data: dict[str, Any]) -> policy_pb2.CompactionPolicy:
    from google.protobuf import json_format

    return json_format.ParseDict(data, policy_pb2.CompactionPolicy())


def turn(client: str, n: int, rng: random.Random) -> list[event_pb2.Event]:
    """One whole turn: its tool pairs always travel in the same batch."""
    prefix = f"{client}-{n}"
    user = event_pb2.Event(
        id=f"{prefix}-u", role=event_pb2.ROLE_USER, text=f"question {n} " + "détail " * (n % 5)
    )
    answer = event_pb2.Event(
        id=f"{prefix}-r", role=event_pb2.ROLE_ASSISTANT, text=f"answer {n} 答案"
    )
    kind = rng.randrange(3)
    if kind == 0:
        return [user, answer]
    calls = [
        event_pb2.ToolCall(id=f"{prefix}-c{i}", name="lookup", arguments_json=f'{{"q": {i}}}')
        for i in range(1 if kind == 1 else 2)
    ]
    return [
        user,
        event_pb2.Event(id=f"{prefix}-a", role=event_pb2.ROLE_ASSISTANT, tool_calls=calls),
        event_pb2.Event(
            id=f"{prefix}-t",
            role=event_pb2.ROLE_TOOL,
            tool_results=[
                event_pb2.ToolResult(call_id=c.id, name=c.name, content="42 " * (n % 7))
                for c in calls
            ],
        ),
        answer,
    ]


def bad_turn(client: str, n: int) -> list[event_pb2.Event]:
    """A good event followed by a TOOL event without results: the whole batch is refused."""
    return [
        event_pb2.Event(id=f"{client}-{n}-bu", role=event_pb2.ROLE_USER, text="fine"),
        event_pb2.Event(id=f"{client}-{n}-bt", role=event_pb2.ROLE_TOOL, text="no results"),
    ]


@dataclass
class Mix:
    """How often a client does what (the rest are plain appends)."""

    lost_ack: float = 0.15
    context: float = 0.25
    compact: float = 0.08
    stale_version: float = 0.05
    bad_batch: float = 0.04


async def create_sessions(address: str, sessions: list[str]) -> None:
    """Create each session with a window policy (ALREADY_EXISTS is fine: a retry)."""
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        for index, session in enumerate(sessions):
            request = pb.CreateSessionRequest(
                session_id=session,
                policy=policy_message(WINDOW_POLICIES[index % len(WINDOW_POLICIES)]),
            )
            await retry(lambda r=request: stub.CreateSession(r, timeout=CALL_TIMEOUT_S), None)


async def retry(call: Any, history: History | None, *, give_up_s: float = 120.0) -> Any:
    """Await ``call()`` until it is not UNAVAILABLE / DEADLINE_EXCEEDED (ALREADY_EXISTS ends it)."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            return await call()
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.ALREADY_EXISTS:
                return None
            if error.code() not in RETRYABLE or time.monotonic() > deadline:
                raise
            if history is not None:
                history.unavailable += 1
            await asyncio.sleep(0.05)


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    """An error of a stream's per-request answer, raised like a unary call's."""
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details, None)


class StreamLane:
    """A long-lived StreamEvents call, reopened when it breaks or is cancelled."""

    def __init__(self, stub: Any) -> None:
        self.stub = stub
        self.call: Any = None
        self.counter = 0

    async def send(self, request: pb.StreamEventsRequest) -> None:
        if self.call is None:
            self.call = self.stub.StreamEvents(timeout=600)
        try:
            await self.call.write(request)
        except grpc.aio.AioRpcError as error:
            # Writing to a stream whose server was just killed fails in the client's own
            # core as INTERNAL "Internal error from Core": the connection is gone.
            if error.details() == "Internal error from Core":
                raise rpc_error(grpc.StatusCode.UNAVAILABLE, "stream broken") from error
            raise

    async def ack(self, request_id: str) -> pb.StreamEventsResponse:
        """The answer to ``request_id`` (background compaction messages are skipped)."""
        while True:
            out = await self.call.read()
            if out is grpc.aio.EOF:  # type: ignore[attr-defined]
                raise rpc_error(grpc.StatusCode.UNAVAILABLE, "stream ended")
            if out.request_id == request_id:
                return out  # type: ignore[no-any-return]

    def drop(self) -> None:
        if self.call is not None:
            self.call.cancel()
        self.call = None


class LoadClient:
    """One client of one session; ``run`` does ``ops`` operations or runs until ``stop``."""

    def __init__(
        self,
        name: str,
        session: str,
        address: str,
        history: History,
        *,
        seed: int,
        mix: Mix | None = None,
        streaming: bool = False,
    ) -> None:
        self.name = name
        self.session = session
        self.address = address
        self.history = history
        self.rng = random.Random(seed)
        self.mix = mix or Mix()
        self.streaming = streaming
        self.version = 0
        self.n = 0
        self.latencies: list[float] = []

    def _op(self, kind: str, start: float, version: int, **more: Any) -> None:
        self.version = max(self.version, version)
        self.history.record(
            Op(self.name, self.session, kind, start, time.monotonic(), version, **more)
        )

    async def run(self, ops: int | None = None, stop: asyncio.Event | None = None) -> None:
        async with grpc.aio.insecure_channel(self.address, options=CHANNEL_OPTIONS) as channel:
            stub = pb_grpc.CompactionServiceStub(channel)
            lane = StreamLane(stub) if self.streaming else None
            try:
                done = 0
                while (ops is None or done < ops) and not (stop is not None and stop.is_set()):
                    await self.step(stub, lane)
                    done += 1
            finally:
                if lane is not None:
                    lane.drop()

    async def step(self, stub: Any, lane: StreamLane | None) -> None:
        roll = self.rng.random()
        mix = self.mix
        if roll < mix.context:
            await self.read_context(stub)
        elif roll < mix.context + mix.compact:
            await self.compact(stub)
        elif roll < mix.context + mix.compact + mix.stale_version:
            await self.stale_append(stub)
        elif roll < mix.context + mix.compact + mix.stale_version + mix.bad_batch:
            await self.bad_append(stub)
        else:
            await self.append(stub, lane, lose_ack=self.rng.random() < mix.lost_ack)

    # -- appends ----------------------------------------------------------------

    async def append(self, stub: Any, lane: StreamLane | None, *, lose_ack: bool) -> None:
        """Append the next turn; a lost acknowledgement is followed by a retry with the same ids."""
        events = turn(self.name, self.n, self.rng)
        self.n += 1
        ids = [e.id for e in events]
        self.history.send(self.session, ids)
        start = time.monotonic()
        if lose_ack:
            await self._send_and_cancel(stub, lane, events)
            self.history.lost_acks += 1
        deadline = time.monotonic() + 120
        while True:
            try:
                version, acked = await self._append_once(stub, lane, events)
                break
            except grpc.aio.AioRpcError as error:
                if error.code() not in RETRYABLE or time.monotonic() > deadline:
                    raise
                self.history.unavailable += 1
                if lane is not None:
                    lane.drop()
                await asyncio.sleep(0.05)
        assert acked == ids, f"{self.name}: acknowledged {acked}, sent {ids}"
        self.latencies.append(time.monotonic() - start)
        self._op("append", start, version, acked=tuple(ids))

    async def _send_and_cancel(
        self, stub: Any, lane: StreamLane | None, events: list[event_pb2.Event]
    ) -> None:
        """Send the append, then cancel the call before (or after) it is answered."""
        if lane is None:
            request = pb.AppendEventsRequest(
                session_id=self.session, events=events, create_if_missing=True
            )
            call = stub.AppendEvents(request, timeout=CALL_TIMEOUT_S)
            await asyncio.sleep(self.rng.uniform(0, 0.004))
            call.cancel()
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
                await call
            return
        lane.counter += 1
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            await lane.send(
                pb.StreamEventsRequest(
                    request_id=f"{self.name}-{lane.counter}",
                    session_id=self.session,
                    events=events,
                    create_if_missing=True,
                )
            )
            await asyncio.sleep(self.rng.uniform(0, 0.004))
        lane.drop()

    async def _append_once(
        self, stub: Any, lane: StreamLane | None, events: list[event_pb2.Event]
    ) -> tuple[int, list[str]]:
        if lane is None:
            reply = await stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id=self.session, events=events, create_if_missing=True
                ),
                timeout=CALL_TIMEOUT_S,
            )
            return reply.version, [e.id for e in reply.events]
        lane.counter += 1
        request_id = f"{self.name}-{lane.counter}"
        try:
            await lane.send(
                pb.StreamEventsRequest(
                    request_id=request_id,
                    session_id=self.session,
                    events=events,
                    create_if_missing=True,
                )
            )
            out = await asyncio.wait_for(lane.ack(request_id), CALL_TIMEOUT_S)
        except (asyncio.InvalidStateError, TimeoutError) as exc:  # a broken or stuck stream
            raise rpc_error(grpc.StatusCode.UNAVAILABLE, repr(exc)) from exc
        if out.HasField("error"):
            code = next(c for c in grpc.StatusCode if c.value[0] == out.error.code)
            raise rpc_error(code, out.error.message)
        return out.append.version, [e.id for e in out.append.events]

    async def stale_append(self, stub: Any) -> None:
        """An append checked against a version already passed: refused, nothing stored."""
        if self.version < 2:
            return  # expected_version 0 means "no check" in proto3: nothing stale to send
        events = turn(self.name, self.n, self.rng)
        self.n += 1
        ids = [e.id for e in events]
        request = pb.AppendEventsRequest(
            session_id=self.session, events=events, expected_version=self.version - 1
        )
        try:
            await stub.AppendEvents(request, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            if error.code() in RETRYABLE:
                self.history.unavailable += 1  # may or may not have been checked: not recorded
                return
            if error.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            self.history.refuse(self.session, ids)
            return
        raise AssertionError(f"{self.name}: an append at a stale version was accepted")

    async def bad_append(self, stub: Any) -> None:
        events = bad_turn(self.name, self.n)
        self.n += 1
        request = pb.AppendEventsRequest(session_id=self.session, events=events)
        try:
            await stub.AppendEvents(request, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as error:
            if error.code() in RETRYABLE:
                self.history.unavailable += 1
                return
            if error.code() != grpc.StatusCode.INVALID_ARGUMENT:
                raise
            self.history.refuse(self.session, [e.id for e in events])
            return
        raise AssertionError(f"{self.name}: a batch with a bad event was accepted")

    # -- reads and compactions ------------------------------------------------

    async def read_context(self, stub: Any) -> None:
        start = time.monotonic()
        try:
            reply = await stub.GetContext(
                pb.GetContextRequest(session_id=self.session), timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            if error.code() in RETRYABLE:
                self.history.unavailable += 1
                return
            if error.code() == grpc.StatusCode.NOT_FOUND and self.version == 0:
                return  # nothing appended yet
            raise
        snapshot = Snapshot(
            tuple(SeenEvent.of(e) for e in reply.events), reply.token_count, reply.turn_count
        )
        self._op("context", start, reply.version, snapshot=snapshot)

    async def compact(self, stub: Any) -> None:
        start = time.monotonic()
        try:
            reply = await stub.Compact(
                pb.CompactRequest(session_id=self.session, force=True), timeout=CALL_TIMEOUT_S
            )
        except grpc.aio.AioRpcError as error:
            if error.code() in RETRYABLE:
                self.history.unavailable += 1
                return
            if error.code() == grpc.StatusCode.NOT_FOUND and self.version == 0:
                return
            raise
        self._op("compact", start, reply.result.version)


def clients_for(
    address: str, history: History, *, sessions: list[str], clients: int, seed: int
) -> list[LoadClient]:
    """``clients`` clients spread over ``sessions``; every third one appends over a stream."""
    return [
        LoadClient(
            f"c{i}",
            sessions[i % len(sessions)],
            address,
            history,
            seed=seed * 1000 + i,
            streaming=i % 3 == 2,
        )
        for i in range(clients)
    ]


@contextlib.asynccontextmanager
async def background(clients: list[LoadClient]) -> AsyncIterator[asyncio.Event]:
    """Run ``clients`` until the yielded event is set; re-raise the first failure on exit."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(c.run(stop=stop)) for c in clients]
    try:
        yield stop
    finally:
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
