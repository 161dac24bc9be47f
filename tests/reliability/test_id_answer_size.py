"""Never refused after commit, round two: answers made of ids still fit the send limit.

With 135,000 events of 128-character ids a Compact answered RESOURCE_EXHAUSTED
(21 MB) after its compaction committed, and a RestoreCompaction too (38.7 MB),
so a client retrying the "failed" restore undid the next-older compaction;
ListCompactions could never list that history and GetContext failed even
without content. The same with a 64 KB limit and a thousand-odd events: id
lists are left out whole (``*_omitted``), and read in parts through
ListCompactions ``ids_of`` and ListEvents.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import grpc

from sidecar.client import AsyncClient, Client
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from sidecar.gen.compaction.v1 import event_pb2, policy_pb2, session_pb2
from tests.reliability.budget import FIGURES, LONG
from tests.server.harness import address, running

if TYPE_CHECKING:
    from sidecar.gen.compaction.v1.compaction_service_pb2_grpc import (
        CompactionServiceAsyncStub as Stub,
    )

LIMIT = 64 * 1024
EVENTS = 6000 if LONG else 1200  # 1,200 ids of 128 characters: ~190 KB without content
KEEP = policy_pb2.CompactionPolicy(
    strategy=policy_pb2.Strategy(sliding_window=policy_pb2.SlidingWindow(max_events=2))
)


def event_id(n: int) -> str:
    return f"{n:08d}-" + "i" * 119


def channel(target: str) -> grpc.aio.Channel:
    # The client takes any size: the server must bound its answers itself.
    return grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)])


async def fill(stub: Stub, session_id: str, count: int) -> list[str]:
    """``count`` events of 128-character ids, appended in requests well within the limit."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id=session_id, policy=KEEP))
    ids = [event_id(n) for n in range(count)]
    for start in range(0, count, 200):
        events = [
            event_pb2.Event(
                id=i,
                role=event_pb2.ROLE_USER if n % 2 == 0 else event_pb2.ROLE_ASSISTANT,
                text="t",
            )
            for n, i in enumerate(ids[start : start + 200], start)
        ]
        await stub.AppendEvents(pb.AppendEventsRequest(session_id=session_id, events=events))
    return ids


async def record_ids(stub: Stub, session_id: str, compaction_id: str) -> list[str]:
    """Archived, cleared and inserted ids of one compaction, read with ``ids_of``."""
    ids: list[str] = []
    token = ""
    while True:
        page = await stub.ListCompactions(
            pb.ListCompactionsRequest(session_id=session_id, ids_of=compaction_id, page_token=token)
        )
        assert page.ByteSize() <= LIMIT
        [record] = page.compactions
        assert record.compaction_id == compaction_id
        ids += [*record.archived_event_ids, *record.cleared_event_ids, *record.inserted_event_ids]
        token = page.next_page_token
        if not token:
            return ids


async def history(stub: Stub, session_id: str) -> list[session_pb2.Compaction]:
    records = []
    token = ""
    while True:
        page = await stub.ListCompactions(
            pb.ListCompactionsRequest(session_id=session_id, page_token=token)
        )
        assert page.ByteSize() <= LIMIT
        records += list(page.compactions)
        token = page.next_page_token
        if not token:
            return records


async def test_a_compaction_archiving_many_ids_answers_and_its_ids_read_in_parts(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, max_message_bytes=LIMIT) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            ids = await fill(stub, "big", EVENTS)
            answer = await stub.Compact(pb.CompactRequest(session_id="big", force=True))
            assert answer.ByteSize() <= LIMIT
            result = answer.result
            assert result.compacted
            assert result.archived_event_count == EVENTS - 2
            assert result.archived_events_omitted
            assert not result.archived_events
            assert [e.id for e in result.active_events] == ids[-2:]  # the window still fits
            [record] = await history(stub, "big")
            assert record.compaction_id == result.compaction_id
            assert record.archived_event_ids_omitted
            assert not record.archived_event_ids
            assert await record_ids(stub, "big", result.compaction_id) == ids[:-2]
            FIGURES["id_lists_sent_in_parts"] += 1


async def test_a_restore_of_many_ids_answers_so_nothing_is_restored_twice(
    tmp_path: Path,
) -> None:
    async with running(tmp_path, max_message_bytes=LIMIT) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            ids = await fill(stub, "big", EVENTS)
            older = await stub.Compact(pb.CompactRequest(session_id="big", force=True))
            await stub.AppendEvents(
                pb.AppendEventsRequest(
                    session_id="big",
                    events=[
                        event_pb2.Event(id="late-u", role=event_pb2.ROLE_USER, text="u"),
                        event_pb2.Event(id="late-a", role=event_pb2.ROLE_ASSISTANT, text="a"),
                    ],
                )
            )
            newer = await stub.Compact(pb.CompactRequest(session_id="big", force=True))
            assert newer.result.compacted
            restored = await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="big"))
            assert restored.ByteSize() <= LIMIT
            assert restored.result.strategy == "restore"
            assert not restored.result.restored_event_ids_omitted  # two events: they fit
            # Undoing the older one brings back 1,200 events: none of the lists fit.
            again = await stub.RestoreCompaction(pb.RestoreCompactionRequest(session_id="big"))
            assert again.ByteSize() <= LIMIT
            result = again.result
            assert result.restored_event_ids_omitted
            assert result.active_events_omitted
            records = await history(stub, "big")
            FIGURES["id_lists_sent_in_parts"] += 1
            assert [r.restores for r in records if r.strategy == "restore"] == [
                older.result.compaction_id,
                newer.result.compaction_id,
            ]
            # What a restore made active again is what the pass it undid archived.
            assert await record_ids(stub, "big", older.result.compaction_id) == ids[:-2]
            context = await stub.GetContext(pb.GetContextRequest(session_id="big"))
            assert context.ByteSize() <= LIMIT
            assert context.events_omitted
            assert context.content_omitted
            assert not context.events
            assert context.version == result.version


async def test_a_window_of_many_ids_is_read_whole_by_the_client(tmp_path: Path) -> None:
    async with running(tmp_path, max_message_bytes=LIMIT) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            ids = await fill(stub, "big", EVENTS)
            answer = await stub.GetContext(pb.GetContextRequest(session_id="big"))
            # Building stopped once the answer passed the limit: most events never framed.
            assert len(sidecar.servicer.blobs) < EVENTS // 2
            assert answer.ByteSize() <= LIMIT
            assert answer.events_omitted
            assert not answer.events
            assert answer.token_count > 0
            assert answer.cache_prefix_id
            shaped = await stub.GetContext(
                pb.GetContextRequest(session_id="big", format=pb.CONTEXT_FORMAT_ANTHROPIC)
            )
            assert shaped.events_omitted
            assert not shaped.rendered_json

        def sync_window() -> list[str]:
            with Client(address(sidecar)) as sync:
                return [e.id for e in sync.session("big").context().events]

        def sync_history() -> list[tuple[str, ...]]:
            with Client(address(sidecar)) as sync:
                return [r.archived_ids for r in sync.session("big").compactions()]

        assert await asyncio.to_thread(sync_window) == ids
        async with AsyncClient(address(sidecar)) as client:
            session = client.session("big")
            window = await session.context()
            assert [e.id for e in window.events] == ids
            await session.compact(force=True)
            [record] = [r async for r in session.compactions()]
            assert record.archived_ids == tuple(ids[:-2])  # read in parts by the client
        assert await asyncio.to_thread(sync_history) == [tuple(ids[:-2])]


async def test_paging_a_compactions_ids_refuses_what_is_not_its_page(tmp_path: Path) -> None:
    async with running(tmp_path, max_message_bytes=LIMIT) as sidecar:
        async with channel(address(sidecar)) as ch:
            stub: Stub = pb_grpc.CompactionServiceStub(ch)
            await fill(stub, "big", 400)
            await fill(stub, "other", 400)
            mine = (await stub.Compact(pb.CompactRequest(session_id="big", force=True))).result
            theirs = (await stub.Compact(pb.CompactRequest(session_id="other", force=True))).result
            first = await stub.ListCompactions(
                pb.ListCompactionsRequest(session_id="big", ids_of=mine.compaction_id, page_size=7)
            )
            assert len(first.compactions[0].archived_event_ids) == 7
            assert first.next_page_token
            refused = [
                pb.ListCompactionsRequest(session_id="big", ids_of="absent"),
                pb.ListCompactionsRequest(session_id="big", ids_of=theirs.compaction_id),
                pb.ListCompactionsRequest(
                    session_id="other",
                    ids_of=theirs.compaction_id,
                    page_token=first.next_page_token,  # a page of another compaction's ids
                ),
                pb.ListCompactionsRequest(
                    session_id="big", ids_of=mine.compaction_id, page_token="garbage"
                ),
            ]
            codes = []
            for request in refused:
                try:
                    await stub.ListCompactions(request)
                except grpc.aio.AioRpcError as exc:
                    codes.append((exc.code(), "page_token" in (exc.details() or "")))
            assert codes == [
                (grpc.StatusCode.NOT_FOUND, False),
                (grpc.StatusCode.NOT_FOUND, False),
                (grpc.StatusCode.INVALID_ARGUMENT, True),
                (grpc.StatusCode.INVALID_ARGUMENT, True),
            ]
