"""Property: ``cache_prefix_id`` changes exactly when the prefix a provider would cache changes.

A provider caches the request it was sent, from its first byte: the system
instruction, then the messages of the window's stable prefix (its first
``stable_prefix_events`` events), each call in it answered as the whole
window answers it (a result logged later is rendered right after its call;
an unanswered call gets a placeholder). Random sessions go through appends,
late tool results, new system messages, compactions, clearings and
restores; after each change GetContext is read plainly and in every format,
and for any two states of a session the ids are equal exactly when those
prefix bytes are equal in every format. ``stable_prefix_tokens`` never
exceeds ``token_count``.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.model import Event, Role, ToolResult
from sidecar.providers.render import ContextFormat, render_json
from sidecar.server import convert
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

FORMATS = {
    ContextFormat.GEMINI: pb.CONTEXT_FORMAT_GEMINI,
    ContextFormat.OPENAI_CHAT: pb.CONTEXT_FORMAT_OPENAI_CHAT,
    ContextFormat.OPENAI_RESPONSES: pb.CONTEXT_FORMAT_OPENAI_RESPONSES,
    ContextFormat.ANTHROPIC: pb.CONTEXT_FORMAT_ANTHROPIC,
}

# A turn: the number of tool calls, and for each whether its result comes at once.
TURN = st.tuples(st.just("turn"), st.lists(st.booleans(), max_size=3), st.booleans())
LATE = st.tuples(st.just("late"), st.integers(0, 5))
SYSTEM = st.tuples(st.just("system"), st.sampled_from(["be brief", "be kind"]))
COMPACT = st.tuples(
    st.just("compact"),
    st.one_of(
        st.builds(
            lambda n, pair: policy_pb2.Strategy(
                sliding_window=policy_pb2.SlidingWindow(max_events=n),
                boundary=policy_pb2.BOUNDARY_TOOL_PAIR if pair else policy_pb2.BOUNDARY_TURN,
            ),
            st.integers(1, 6),
            st.booleans(),
        ),
        st.builds(
            lambda n: policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=n)),
            st.integers(1, 3),
        ),
        st.builds(
            lambda n: policy_pb2.Strategy(
                clear_tool_results=policy_pb2.ClearToolResults(keep_tool_uses=n)
            ),
            st.integers(0, 2),
        ),
    ),
)
RESTORE = st.tuples(st.just("restore"))
OPS = st.lists(st.one_of(TURN, TURN, LATE, SYSTEM, COMPACT, RESTORE), min_size=1, max_size=12)


@dataclass
class Agent:
    """The client side of a session: what it appended, and the calls it still owes a result."""

    stub: Stub
    session_id: str
    ids: itertools.count[int] = field(default_factory=itertools.count)
    open_calls: list[str] = field(default_factory=list)

    async def append(self, events: list[event_pb2.Event]) -> None:
        await self.stub.AppendEvents(
            pb.AppendEventsRequest(session_id=self.session_id, events=events)
        )

    def result(self, call: str) -> event_pb2.Event:
        return event_pb2.Event(
            id=f"t-{call}",
            role=event_pb2.ROLE_TOOL,
            tool_results=[event_pb2.ToolResult(call_id=call, name="grep", content=f"rows {call}")],
        )

    async def run(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "turn":
            n = next(self.ids)
            events = [event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"ask {n}")]
            answers: list[bool] = op[1]  # type: ignore[assignment]
            for k, answered in enumerate(answers):
                call = f"c{n}-{k}"
                events.append(
                    event_pb2.Event(
                        id=f"a{n}-{k}",
                        role=event_pb2.ROLE_ASSISTANT,
                        tool_calls=[event_pb2.ToolCall(id=call, name="grep")],
                    )
                )
                if answered:
                    events.append(self.result(call))
                else:
                    self.open_calls.append(call)
            if op[2]:
                events.append(
                    event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text=f"done {n}")
                )
            await self.append(events)
        elif kind == "late" and self.open_calls:
            call = self.open_calls.pop(int(op[1]) % len(self.open_calls))  # type: ignore[call-overload]
            await self.append([self.result(call)])
        elif kind == "system":
            n = next(self.ids)
            await self.append(
                [event_pb2.Event(id=f"s{n}", role=event_pb2.ROLE_SYSTEM, text=str(op[1]))]
            )
        elif kind == "compact":
            policy = policy_pb2.CompactionPolicy(strategy=op[1])  # type: ignore[arg-type]
            await self.stub.Compact(
                pb.CompactRequest(session_id=self.session_id, policy=policy, force=True)
            )
        elif kind == "restore":
            try:
                await self.stub.RestoreCompaction(
                    pb.RestoreCompactionRequest(session_id=self.session_id)
                )
            except grpc.aio.AioRpcError as exc:  # nothing left to restore
                if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                    raise


def cached_prefix(window: list[Event], prefix_events: int) -> dict[ContextFormat, str]:
    """The bytes a provider caches of this window's stable prefix, in every format.

    The request the prefix alone makes: the latest system message (rendered
    first wherever it stands), the prefix's other events, and the results
    logged after the prefix that answer its calls (rendered after those calls).
    """
    systems = [e for e in window if e.role is Role.SYSTEM]
    prefix = [e for e in window[:prefix_events] if e.role is not Role.SYSTEM]
    calls = {c.id for e in prefix for c in e.tool_calls}
    calls -= {r.call_id for e in prefix for r in e.tool_results}
    late: list[ToolResult] = []
    for event in window[prefix_events:]:
        for result in event.tool_results:
            if result.call_id in calls:
                calls.discard(result.call_id)
                late.append(result)
    view = systems[-1:] + prefix
    if late:
        view.append(Event(id="late", role=Role.TOOL, tool_results=tuple(late)))
    return {fmt: render_json(view, fmt) for fmt in FORMATS}


@dataclass(frozen=True)
class Seen:
    cache_prefix_id: str
    prefix: tuple[str, ...]
    note: str


async def observe(stub: Stub, session_id: str, note: str) -> Seen:
    plain = await stub.GetContext(pb.GetContextRequest(session_id=session_id))
    assert not plain.content_omitted
    assert 0 <= plain.stable_prefix_tokens <= plain.token_count, note
    assert 0 <= plain.stable_prefix_events <= len(plain.events), note
    for value in FORMATS.values():
        shaped = await stub.GetContext(pb.GetContextRequest(session_id=session_id, format=value))
        assert (
            shaped.cache_prefix_id,
            shaped.stable_prefix_tokens,
            shaped.stable_prefix_events,
        ) == (plain.cache_prefix_id, plain.stable_prefix_tokens, plain.stable_prefix_events)
    window = [convert.event_in(e, "events") for e in plain.events]
    prefix = cached_prefix(window, plain.stable_prefix_events)
    return Seen(plain.cache_prefix_id, tuple(prefix[fmt] for fmt in FORMATS), note)


_sessions = itertools.count()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_the_id_changes_exactly_when_the_cached_prefix_bytes_change(
    ops: list[tuple[object, ...]],
) -> None:
    async def body(directory: Path) -> None:
        async with running(directory) as sidecar:
            async with grpc.aio.insecure_channel(address(sidecar)) as channel:
                stub: Stub = pb_grpc.CompactionServiceStub(channel)
                session_id = f"p{next(_sessions)}"
                await stub.CreateSession(pb.CreateSessionRequest(session_id=session_id))
                agent = Agent(stub, session_id)
                seen = [await observe(stub, session_id, "created")]
                for op in ops:
                    await agent.run(op)
                    seen.append(await observe(stub, session_id, repr(op)))
                for a, b in itertools.combinations(seen, 2):
                    same_bytes = a.prefix == b.prefix
                    same_id = a.cache_prefix_id == b.cache_prefix_id
                    assert same_bytes == same_id, (a.note, b.note, same_bytes, a.prefix, b.prefix)

    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(body(Path(directory)))
