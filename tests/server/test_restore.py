"""Undo over gRPC: the compaction history, restores, their order, and pausing the trigger."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.rpc import error_details_pb2, status_pb2

from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

WINDOW = policy_pb2.CompactionPolicy(
    trigger=policy_pb2.Trigger(turn_count=2),
    strategy=policy_pb2.Strategy(turn_window=policy_pb2.TurnWindow(max_turns=1)),
)


def turn(n: int, text: str = "") -> list[event_pb2.Event]:
    return [
        event_pb2.Event(id=f"u{n}", role=event_pb2.ROLE_USER, text=text or f"question {n}"),
        event_pb2.Event(id=f"a{n}", role=event_pb2.ROLE_ASSISTANT, text=f"answer {n}"),
    ]


async def context_ids(stub: Stub) -> list[str]:
    return [e.id for e in (await stub.GetContext(pb.GetContextRequest(session_id="s"))).events]


async def test_restore_undoes_the_newest_compaction_and_the_history_says_so(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1) + turn(2)))
    ack = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(3)))
    assert ack.compaction.compacted
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(4)))
    forced = await stub.Compact(pb.CompactRequest(session_id="s", force=True))
    assert await context_ids(stub) == ["u4", "a4"]
    history = await stub.ListCompactions(pb.ListCompactionsRequest(session_id="s"))
    newest, oldest = history.compactions
    assert (newest.compaction_id, newest.cause) == (
        forced.result.compaction_id,
        session_pb2.COMPACTION_CAUSE_FORCE,
    )
    assert (oldest.cause, list(oldest.archived_event_ids)) == (
        session_pb2.COMPACTION_CAUSE_TRIGGER,
        ["u1", "a1", "u2", "a2"],
    )
    assert list(newest.archived_event_ids) == ["u3", "a3"]

    # The older one is refused, naming the one to restore first.
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RestoreCompaction(
            pb.RestoreCompactionRequest(session_id="s", compaction_id=oldest.compaction_id)
        )
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert newest.compaction_id in (info.value.details() or "")
    trailers: dict[str, bytes] = dict(info.value.trailing_metadata() or ())  # type: ignore[arg-type]
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    failure = error_details_pb2.PreconditionFailure()
    status.details[0].Unpack(failure)
    assert failure.violations[0].subject == newest.compaction_id

    undone = await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s"))
    assert undone.result.strategy == "restore"
    assert list(undone.result.restored_event_ids) == ["u3", "a3"]
    assert await context_ids(stub) == ["u3", "a3", "u4", "a4"]
    await stub.RestoreCompaction(
        pb.RestoreCompactionRequest(session_id="s", compaction_id=oldest.compaction_id)
    )
    assert await context_ids(stub) == ["u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4"]
    history = await stub.ListCompactions(pb.ListCompactionsRequest(session_id="s", page_size=2))
    assert [c.strategy for c in history.compactions] == ["restore", "restore"]
    assert history.compactions[0].restores == oldest.compaction_id
    assert history.next_page_token
    rest = await stub.ListCompactions(
        pb.ListCompactionsRequest(session_id="s", page_token=history.next_page_token)
    )
    assert [c.restored_by for c in rest.compactions] == [
        undone.result.compaction_id,
        history.compactions[0].compaction_id,
    ]


async def test_a_paused_session_does_not_compact_again_until_its_policy_is_set(
    stub: Stub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1) + turn(2)))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(3)))
    restored = await stub.RestoreCompaction(
        pb.RestoreCompactionRequest(session_id="s", pause_auto_compaction=True)
    )
    assert (await stub.GetSession(pb.GetSessionRequest(session_id="s"))).auto_compaction_paused
    ack = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(4)))
    assert not ack.HasField("compaction")  # the trigger fires, but is paused
    assert len(await context_ids(stub)) == 8
    assert restored.result.version < ack.version
    session = await stub.UpdateSession(
        pb.UpdateSessionRequest(
            session=session_pb2.Session(session_id="s", policy=WINDOW),
            update_mask=FieldMask(paths=["policy"]),
        )
    )
    assert not session.auto_compaction_paused
    ack = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(5)))
    assert ack.compaction.compacted


async def test_a_restore_is_published_to_watchers(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(1) + turn(2)))
    await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(3)))
    watch = stub.WatchSession(pb.WatchSessionRequest(session_id="s"))
    await asyncio.sleep(0.2)  # subscribed before the restore lands
    restored = await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s"))
    seen = cast(pb.WatchSessionResponse, await asyncio.wait_for(watch.read(), 5))
    watch.cancel()
    assert seen.compaction.compaction_id == restored.result.compaction_id
    assert seen.compaction.strategy == "restore"


async def test_a_search_hit_names_the_compaction_that_archived_it(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", policy=WINDOW))
    await stub.AppendEvents(
        pb.AppendEventsRequest(session_id="s", events=turn(1, "order 55120 shipped") + turn(2))
    )
    ack = await stub.AppendEvents(pb.AppendEventsRequest(session_id="s", events=turn(3)))
    found = await stub.SearchEvents(pb.SearchEventsRequest(query="55120", session_id="s"))
    assert [(h.event.id, h.archived_by) for h in found.hits] == [
        ("u1", ack.compaction.compaction_id)
    ]


async def test_restore_errors_name_what_is_wrong(stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="absent"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s"))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="s", compaction_id="x"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.ListCompactions(pb.ListCompactionsRequest(session_id="absent"))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_malformed_compaction_id_is_refused_naming_the_field(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    for bad in ("x" * 1_000_000, "../etc", "id with spaces"):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.RestoreCompaction(
                pb.RestoreCompactionRequest(session_id="s", compaction_id=bad)
            )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (info.value.details() or "").startswith("compaction_id:")
        assert len(info.value.details() or "") < 200
        # ListCompactions' ids_of too: it was echoed whole in a NOT_FOUND, past the 16 KiB
        # grpc allows an error's message, and the client saw RESOURCE_EXHAUSTED instead.
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ListCompactions(pb.ListCompactionsRequest(session_id="s", ids_of=bad))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (info.value.details() or "").startswith("ids_of:")
        assert len(info.value.details() or "") < 200


async def test_an_unknown_update_mask_path_is_named_but_not_echoed_whole(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.UpdateSession(
            pb.UpdateSessionRequest(
                session=session_pb2.Session(session_id="s"),
                update_mask=FieldMask(paths=["p" * 1_000_000]),
            )
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (info.value.details() or "").startswith("update_mask.paths:")
    assert len(info.value.details() or "") < 200
