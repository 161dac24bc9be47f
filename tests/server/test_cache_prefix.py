"""GetContext's cache_prefix_id and stable prefix: moved only by a change before the window end."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sidecar.client import AsyncClient
from sidecar.compaction.policy import policy_from_dict
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2
from sidecar.model import Event, Role
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

WINDOW = policy_pb2.CompactionPolicy(
    trigger=policy_pb2.Trigger(turn_count=2),
    strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=1)),
)
CLEAR = policy_pb2.CompactionPolicy(
    strategy=policy_pb2.Strategy(clear_tool_results=policy_pb2.ClearToolResults(keep_tool_uses=0))
)


def turn(n: int, *, tool: bool = False) -> list[event_pb2.Event]:
    events = [event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=f"question {n}")]
    if tool:
        call = f"c{n}"
        events += [
            event_pb2.Event(
                id=f"c{n}",
                role=event_pb2.ROLE_ASSISTANT,
                tool_calls=[event_pb2.ToolCall(id=call, name="cat")],
            ),
            event_pb2.Event(
                id=f"t{n}",
                role=event_pb2.ROLE_TOOL,
                tool_results=[
                    event_pb2.ToolResult(call_id=call, name="cat", content="line " * 300)
                ],
            ),
        ]
    return [*events, event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text=f"ok {n}")]


async def context(stub: Stub, session_id: str = "s") -> pb.GetContextResponse:
    return await stub.GetContext(pb.GetContextRequest(session_id=session_id))


async def append(stub: Stub, events: list[event_pb2.Event]) -> pb.AppendEventsResponse:
    return await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=events))


async def test_appends_keep_the_id_and_a_compaction_moves_it(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await append(stub, turn(1))
    first = await context(stub)
    assert len(first.cache_prefix_id) == 32
    assert (first.stable_prefix_tokens, first.stable_prefix_events) == (0, 0)
    await append(stub, turn(2))
    again = await context(stub)
    cached = await context(stub)  # served from the server's context cache
    for answer in (again, cached):
        assert answer.cache_prefix_id == first.cache_prefix_id
        assert answer.stable_prefix_tokens == 0
    compacted = await append(stub, turn(3))
    assert compacted.compaction.compacted
    after = await context(stub)
    assert after.cache_prefix_id != first.cache_prefix_id
    assert after.stable_prefix_events == len(after.events)
    assert after.stable_prefix_tokens == after.token_count
    await append(stub, turn(4)[:1])
    grown = await context(stub)
    assert grown.cache_prefix_id == after.cache_prefix_id
    assert (grown.stable_prefix_tokens, grown.stable_prefix_events) == (
        after.stable_prefix_tokens,
        after.stable_prefix_events,
    )
    assert grown.token_count > after.token_count
    assert list(grown.events[: grown.stable_prefix_events]) == list(after.events)


async def test_a_clearing_and_a_restore_move_it_too(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=CLEAR))
    await append(stub, turn(1, tool=True) + turn(2))
    before = await context(stub)
    cleared = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    assert list(cleared.result.cleared_event_ids) == ["t1"]
    after_clearing = await context(stub)
    assert after_clearing.cache_prefix_id != before.cache_prefix_id
    assert after_clearing.stable_prefix_tokens == after_clearing.token_count
    await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s"))
    restored = await context(stub)
    assert restored.cache_prefix_id not in (before.cache_prefix_id, after_clearing.cache_prefix_id)
    # The same events, counted exactly since the clearing planned (estimated before it).
    assert [uncounted(e) for e in restored.events] == [uncounted(e) for e in before.events]
    assert before.token_count_estimated
    assert not any(e.token_count_estimated for e in restored.events)
    assert restored.stable_prefix_tokens == restored.token_count


def uncounted(event: event_pb2.Event) -> event_pb2.Event:
    """``event`` without its token count and whether that is an estimate."""
    copy = event_pb2.Event()
    copy.CopyFrom(event)
    copy.ClearField("token_count")
    copy.ClearField("token_count_estimated")
    return copy


async def test_a_session_made_again_under_its_id_gets_new_ids(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    await append(stub, turn(1))
    old = await context(stub)
    await stub.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    await append(stub, turn(1))
    new = await context(stub)
    assert new.cache_prefix_id != old.cache_prefix_id
    other = await stub.CreateSession(pb.CreateSessionRequest(session_id="t"))
    assert other.session_id == "t"
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="t", events=turn(1)))
    assert (await context(stub, "t")).cache_prefix_id != new.cache_prefix_id


async def test_the_python_client_reads_the_prefix_even_from_a_window_read_in_parts(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, max_message_bytes=16384) as sidecar:
        async with AsyncClient(address(sidecar)) as client:
            await client.create_session(
                "s", policy=policy_from_dict({"strategy": {"sliding_window": {"max_events": 4}}})
            )
            session = client.session("s")
            for n in range(8):
                await session.append(
                    [Event(id=f"u{n}", role=Role.USER, text=f"question {n} " + "x" * 3000)]
                )
            await session.compact(force=True)
            await session.append([Event(id="u9", role=Role.USER, text="y" * 3000)])
            window = await session.context()
    assert [e.id for e in window.events] == ["u4", "u5", "u6", "u7", "u9"]
    assert len(window.cache_prefix_id) == 32
    assert window.stable_prefix_events == 4
    assert window.stable_prefix_tokens == sum(e.token_count for e in window.events[:4])


async def test_a_late_result_for_a_call_in_the_prefix_moves_it(stub: Stub) -> None:
    # The call c1 waits for its result when the window is compacted: the prefix renders
    # the placeholder. The result logged later replaces it, inside the prefix.
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await append(stub, turn(0))
    pending = turn(1, tool=True)[:2]  # the question and the call, no result yet
    await append(stub, pending)
    compacted = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    assert compacted.result.compacted
    before = await context(stub)
    assert [e.id for e in before.events] == ["u1", "c1"]
    assert before.stable_prefix_events == 2
    await append(stub, [turn(1, tool=True)[2]])  # t1, answering c1
    after = await context(stub)
    assert after.cache_prefix_id != before.cache_prefix_id
    assert after.stable_prefix_events == 2
    await append(stub, [event_pb2.Event(id="a1", role=event_pb2.ROLE_ASSISTANT, text="ok")])
    assert (await context(stub)).cache_prefix_id == after.cache_prefix_id


async def test_a_new_system_message_moves_it_and_the_prefix_never_outcounts_the_window(
    stub: Stub,
) -> None:
    long_system = event_pb2.Event(id="sys0", role=event_pb2.ROLE_SYSTEM, text="rule " * 200)
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await append(stub, [long_system, *turn(0), *turn(1)])
    await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    before = await context(stub)
    assert before.stable_prefix_tokens == before.token_count
    short = event_pb2.Event(id="sys1", role=event_pb2.ROLE_SYSTEM, text="be brief")
    await append(stub, [short])
    after = await context(stub)
    assert after.cache_prefix_id != before.cache_prefix_id
    assert after.token_count < before.token_count  # the long one no longer counts
    assert after.stable_prefix_tokens <= after.token_count
    await append(stub, [event_pb2.Event(id="sys2", role=event_pb2.ROLE_SYSTEM, text="be brief")])
    assert (await context(stub)).cache_prefix_id == after.cache_prefix_id  # the same bytes
