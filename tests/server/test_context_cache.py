"""GetContext's kept responses and per-event wire bytes never serve a stale window."""

from __future__ import annotations

import asyncio
import platform
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

from sidecar.compaction.policy import policy_from_dict
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2
from sidecar.model import Event, Role, Session, SessionCounters, utcnow
from sidecar.providers.prefix import StablePrefix
from sidecar.server import convert
from sidecar.server.app import Sidecar
from sidecar.server.context_cache import (
    ENTRY_OVERHEAD,
    RESPONSE_MEMORY,
    ContextResponses,
    EventBlobs,
)
from sidecar.server.memory import return_freed_memory
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )


def _event(i: int) -> event_pb2.Event:
    return event_pb2.Event(id=f"e{i}", role=event_pb2.ROLE_USER, text=f"message {i}")


async def _texts(stub: Stub, session_id: str = "s") -> list[str]:
    reply = await stub.GetContext(pb.GetContextRequest(session_id=session_id))
    return [e.text for e in reply.events]


async def _kept(stub: Stub, sidecar: Sidecar, session_id: str = "s") -> pb.GetContextResponse:
    """The session's context, read twice: a session's answer is kept from its second read."""
    await stub.GetContext(pb.GetContextRequest(session_id=session_id))
    reply = await stub.GetContext(pb.GetContextRequest(session_id=session_id))
    assert session_id in sidecar.servicer.contexts
    return reply


CREATED = utcnow()


def _session(version: int) -> Session:
    return Session("s", version, None, {}, CREATED, CREATED, SessionCounters(), 0)


async def test_repeated_reads_share_one_response(stub: Stub, sidecar: Sidecar) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    once = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert "s" not in sidecar.servicer.contexts  # a session read once is not kept
    first = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert "s" in sidecar.servicer.contexts  # read again: kept from now on
    second = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert once == first == second
    assert [e.text for e in second.events] == ["message 1"]
    assert sidecar.servicer.context_answers.reads == {"built": 2, "kept": 1}


async def test_sessions_read_once_leave_the_caches_empty(stub: Stub, sidecar: Sidecar) -> None:
    """A sweep over many sessions, each read once, must not fill the read caches (issue 37)."""
    for s in range(20):
        await stub.AppendEvents(
            pb.AppendEventsRequest(session_id=f"s{s}", events=[_event(s)], create_if_missing=True)
        )
        await stub.GetContext(pb.GetContextRequest(session_id=f"s{s}"))
    servicer = sidecar.servicer
    assert len(servicer.contexts) == 0
    assert servicer.contexts.bytes_held == servicer.blobs.bytes_held == 0
    assert sidecar.engine.store.cache_bytes() == 0  # type: ignore[attr-defined]


async def test_counts_landed_without_a_write_are_seen_at_once(stub: Stub, sidecar: Sidecar) -> None:
    """A landing moves the counters, not the version: the kept answer must not hide it."""
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    before = await _kept(stub, sidecar)
    assert before.token_count_estimated
    landed = await sidecar.engine.counts.land("s")
    after = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert after.version == before.version
    assert not after.token_count_estimated
    assert not after.events[0].token_count_estimated
    assert after.token_count == landed.counters.tokens


async def test_an_append_through_the_api_is_seen_at_once(stub: Stub) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    assert await _texts(stub) == ["message 1"]
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(2)]))
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert [e.text for e in reply.events] == ["message 1", "message 2"]
    assert reply.version == 2


async def test_a_write_behind_the_servicers_back_is_caught_by_the_version(
    stub: Stub, sidecar: Sidecar
) -> None:
    """Another replica writes to the shared store: the kept response must not be served."""
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    assert [e.text for e in (await _kept(stub, sidecar)).events] == ["message 1"]
    await sidecar.engine.store.append("s", [Event("e2", Role.ASSISTANT, "from elsewhere")])
    assert await _texts(stub) == ["message 1", "from elsewhere"]


async def test_a_recreated_session_at_the_same_version_is_not_confused(
    stub: Stub, sidecar: Sidecar
) -> None:
    store = sidecar.engine.store
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    assert [e.text for e in (await _kept(stub, sidecar)).events] == ["message 1"]
    await store.delete_session("s")  # behind the servicer's back, like another replica
    await store.append("s", [Event("x", Role.USER, "new life")], create_if_missing=True)
    assert (await store.get_session("s")).version == 1  # the same version as the kept one
    assert await _texts(stub) == ["new life"]


async def test_compaction_and_update_and_delete_drop_the_kept_response(
    stub: Stub, sidecar: Sidecar
) -> None:
    events = [_event(i) for i in range(6)]
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=events, create_if_missing=True)
    )
    assert len((await _kept(stub, sidecar)).events) == 6
    contexts = sidecar.servicer.contexts
    policy = pb.CompactRequest(session_id="s", force=True)
    policy.policy.strategy.sliding_window.max_events = 2
    await stub.Compact(policy)
    assert "s" not in contexts
    assert await _texts(stub) == ["message 4", "message 5"]
    await stub.DeleteSession(pb.DeleteSessionRequest(session_id="s"))
    assert "s" not in contexts


def test_assembled_response_equals_the_field_by_field_one() -> None:
    events = [
        Event(f"e{i}", Role.USER if i % 2 else Role.ASSISTANT, f"text {i} é 字", position=i)
        for i in range(50)
    ]
    session = _session(7)
    expected = pb.GetContextResponse(
        version=7,
        token_count=session.counters.tokens,
        turn_count=session.counters.turns,
        cache_prefix_id=StablePrefix(session, events).id,
    )
    convert.events_out(events, expected.events)
    blobs = EventBlobs()
    assert blobs.response(session, events, StablePrefix(session, events)) == expected
    # from the kept bytes
    assert blobs.response(session, events, StablePrefix(session, events)) == expected
    assert len(blobs) == 50


def test_event_blobs_start_over_past_their_bound() -> None:
    blobs = EventBlobs(max_bytes=3 * (2 * 70 + ENTRY_OVERHEAD))  # the bytes and the Event pinned
    events = [Event(f"e{i}", Role.USER, "x" * 60) for i in range(10)]
    for event in events:
        blobs.framed(event)
    assert len(blobs) < 10
    prefix = StablePrefix(_session(1), events)
    assert blobs.response(_session(1), events, prefix).events[9].text == "x" * 60


def test_context_responses_stay_under_their_bound() -> None:
    response = pb.GetContextResponse(version=1)
    response.events.add(id="e", text="y" * 300)
    per_answer = RESPONSE_MEMORY * response.ByteSize() + ENTRY_OVERHEAD  # parsed, not on the wire
    kept = ContextResponses(max_bytes=3 * per_answer)
    for i in range(10):
        kept.put(f"s{i}", _session(1), response)
        assert kept.bytes_held <= 3 * per_answer
    assert len(kept) == 3
    assert kept.get("s9", _session(1)) is response  # the most recent stays
    assert kept.get("s9", _session(2)) is None  # another version: dropped
    assert "s9" not in kept


@asynccontextmanager
async def serving(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[Sidecar, Stub]]:
    """A server with ``settings`` and a stub, session "s" holding "message 1"."""
    async with (
        running(tmp_path, **settings) as sidecar,
        grpc.aio.insecure_channel(address(sidecar)) as channel,
    ):
        stub = pb_grpc.CompactionServiceStub(channel)
        await stub.AppendEvents(
            pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
        )
        yield sidecar, stub


async def test_with_no_read_cache_every_answer_is_built_afresh(tmp_path: Path) -> None:
    async with serving(tmp_path, read_cache_mib=0) as (sidecar, stub):
        assert await _texts(stub) == ["message 1"]
        assert await _texts(stub) == ["message 1"]
        await sidecar.engine.store.append("s", [Event("e2", Role.ASSISTANT, "from elsewhere")])
        assert await _texts(stub) == ["message 1", "from elsewhere"]
        assert len(sidecar.servicer.contexts) == 0
        assert len(sidecar.servicer.blobs) == 0


async def _fresh(sidecar: Sidecar, session_id: str = "s") -> pb.GetContextResponse:
    """The answer built from the store, bypassing every kept response."""
    session, events = await sidecar.engine.context(session_id)
    return EventBlobs().response(session, events, StablePrefix(session, events))


async def test_an_append_extends_the_kept_response(stub: Stub, sidecar: Sidecar) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    await _kept(stub, sidecar)
    # A retry of e1 and a new event in one batch: only e2 joins the window.
    retry_and_new = pb.AppendEventsRequest(session_id="s", events=[_event(1), _event(2)])
    await stub.AppendEvents(retry_and_new)
    assert "s" in sidecar.servicer.contexts  # extended, not dropped
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert [e.text for e in reply.events] == ["message 1", "message 2"]
    assert reply == await _fresh(sidecar)  # events, version and counters alike
    for i in (3, 4, 5):  # several appends between two reads
        await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(i)]))
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert [e.text for e in reply.events][-3:] == ["message 3", "message 4", "message 5"]
    assert reply == await _fresh(sidecar)


async def test_counts_landed_in_between_are_not_mixed_with_the_kept_estimates(
    stub: Stub, sidecar: Sidecar
) -> None:
    """Exact counts land without a new version (issue 37): an append after that must not
    extend an answer whose events still show the estimates its total no longer holds."""
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    kept = await _kept(stub, sidecar)
    assert kept.token_count_estimated
    await sidecar.engine.counts.exact("s")
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(2)]))
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert reply.token_count == sum(e.token_count for e in reply.events)
    assert [e.token_count_estimated for e in reply.events] == [False, True]
    assert reply == await _fresh(sidecar)


async def test_an_append_that_compacts_drops_the_kept_response(
    stub: Stub, sidecar: Sidecar
) -> None:
    create = pb.CreateSessionRequest(session_id="s")
    create.policy.trigger.event_count = 3
    create.policy.strategy.sliding_window.max_events = 2
    await stub.CreateSession(create)
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(1)]))
    await _kept(stub, sidecar)
    ack = await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(2), _event(3), _event(4)])
    )
    assert ack.compaction.compacted
    assert "s" not in sidecar.servicer.contexts
    assert await stub.GetContext(pb.GetContextRequest(session_id="s")) == await _fresh(sidecar)


async def test_a_write_in_between_is_not_papered_over(stub: Stub, sidecar: Sidecar) -> None:
    """Another replica appends between our read and our append: extending would lose its event."""
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    await _kept(stub, sidecar)
    await sidecar.engine.store.append("s", [Event("x", Role.ASSISTANT, "from elsewhere")])
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(2)]))
    assert await _texts(stub) == ["message 1", "from elsewhere", "message 2"]


async def test_idle_server_drops_its_read_caches_and_busy_one_keeps_them(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, read_cache_idle_s=1.0) as (sidecar, stub):
        for _ in range(15):  # busy for longer than the idle span: nothing is dropped
            assert await _texts(stub) == ["message 1"]
            await asyncio.sleep(0.1)
        decoded = sidecar.engine.store._decoded  # type: ignore[attr-defined]
        assert "s" in sidecar.servicer.contexts
        assert len(decoded) == 1
        await asyncio.sleep(2.0)  # quiet: dropped
        assert len(sidecar.servicer.contexts) == 0
        assert len(sidecar.servicer.blobs) == 0
        assert len(decoded) == 0
        assert await _texts(stub) == ["message 1"]  # and rebuilt on the next read


def test_freed_memory_is_handed_back_where_glibc_allows() -> None:
    assert return_freed_memory() == (platform.libc_ver()[0] == "glibc")


async def test_a_retry_never_carries_a_kept_answer_past_a_change_it_did_not_make(
    stub: Stub, sidecar: Sidecar
) -> None:
    """A pure retry stores nothing: the version it reports may come from a compaction elsewhere."""
    events = [_event(i) for i in range(6)]
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=events, create_if_missing=True)
    )
    await _kept(stub, sidecar)  # kept at version 1
    two = policy_from_dict({"strategy": {"sliding_window": {"max_events": 2}}})
    await sidecar.engine.compact("s", policy=two, force=True)  # as a background summary would
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(5)]))  # retry
    assert await stub.GetContext(pb.GetContextRequest(session_id="s")) == await _fresh(sidecar)
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(6)]))
    reply = await stub.GetContext(pb.GetContextRequest(session_id="s"))
    assert [e.text for e in reply.events] == ["message 4", "message 5", "message 6"]
    assert reply == await _fresh(sidecar)


async def test_a_retry_after_another_replicas_append_shows_that_append(
    stub: Stub, sidecar: Sidecar
) -> None:
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=[_event(1)], create_if_missing=True)
    )
    await _kept(stub, sidecar)
    await sidecar.engine.store.append("s", [Event("x", Role.ASSISTANT, "from replica B")])
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=[_event(1)]))  # retry
    assert await _texts(stub) == ["message 1", "from replica B"]
