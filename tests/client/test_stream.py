"""StreamEvents (acks, per-request errors, background compactions) and WatchSession."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from sidecar.client import (
    Ack,
    AsyncClient,
    BackgroundCompaction,
    FailedPreconditionError,
    InvalidArgumentError,
    Missed,
    NotFoundError,
    RequestFailed,
    StreamMessage,
    decode,
)
from sidecar.client.streams import EventStream
from sidecar.gen.compaction.v1 import compaction_service_pb2 as pb
from sidecar.model import CompactionResult
from tests.client.conftest import SUMMARIZE, t, turn, u, until_watched
from tests.compaction.fakes import FakeSummarizer
from tests.engine.gates import GatedSummarizer
from tests.server.harness import address, running


async def _next(stream: EventStream) -> StreamMessage:
    return await asyncio.wait_for(anext(stream), 5)


async def test_stream_acks_each_request_by_its_id(client: AsyncClient) -> None:
    async with client.session("s1").stream() as stream:
        first = await stream.send(turn(0), request_id="r1", create_if_missing=True)
        second = await stream.send(turn(1))
        await stream.close()
        messages = [m async for m in stream]

    assert first == "r1"
    assert all(isinstance(m, Ack) for m in messages)
    acks = [m for m in messages if isinstance(m, Ack)]
    assert [m.request_id for m in acks] == ["r1", second]
    assert [e.position for m in acks for e in m.result.events] == [1, 2, 3, 4]
    assert acks[1].result.version > acks[0].result.version
    assert all(m.session_id == "s1" for m in acks)


async def test_a_bad_request_fails_alone_and_the_stream_goes_on(client: AsyncClient) -> None:
    async with client.session("s1").stream() as stream:
        await stream.send(turn(0), request_id="good", create_if_missing=True)
        await stream.send([u(), t()], request_id="bad")
        await stream.send(turn(1), request_id="stale", expected_version=1000)
        await stream.send(turn(2), request_id="after")
        await stream.close()
        messages = [m async for m in stream]

    assert [m.request_id for m in messages if not isinstance(m, BackgroundCompaction)] == [
        "good",
        "bad",
        "stale",
        "after",
    ]
    bad, stale = messages[1], messages[2]
    assert isinstance(bad, RequestFailed)
    assert isinstance(bad.error, InvalidArgumentError)
    assert bad.error.field == "events[1].tool_results"
    assert isinstance(stale, RequestFailed)
    assert isinstance(stale.error, FailedPreconditionError)
    assert stale.error.current_version is not None
    assert isinstance(messages[3], Ack)
    texts = [e.text async for e in client.session("s1").events()]
    assert texts == ["question number0", "answer number0", "question number2", "answer number2"]


async def test_stream_interleaves_background_compactions(tmp_path: Path) -> None:
    summarizer = GatedSummarizer("the story so far")
    async with (
        running(tmp_path, summarizer=summarizer, default_policy=json.dumps(SUMMARIZE)) as sidecar,
        AsyncClient(address(sidecar)) as client,
        client.session("s1").stream() as stream,
    ):
        for n in range(3):
            await stream.send(turn(n), request_id=f"r{n}", create_if_missing=True)
            assert isinstance(await _next(stream), Ack)
        await stream.send(turn(3), request_id="r3")
        fourth = await _next(stream)
        assert isinstance(fourth, Ack)
        assert fourth.result.compaction_scheduled
        await asyncio.wait_for(summarizer.started.wait(), 5)
        # Appends go on while the summarizer works; their acks come first.
        await stream.send(turn(4), request_id="r4")
        fifth = await _next(stream)
        assert isinstance(fifth, Ack)
        assert not fifth.result.compaction_scheduled  # single flight
        summarizer.gate.set()

        landed = await _next(stream)
        await stream.send(turn(5), request_id="r5")
        sixth = await _next(stream)

        context = await client.session("s1").context()

    assert isinstance(landed, BackgroundCompaction)
    assert landed.session_id == "s1"
    assert landed.result.compacted
    assert landed.result.strategy == "summarize"
    assert isinstance(sixth, Ack)
    assert sixth.request_id == "r5"
    summary = [e for e in context.events if e.synthetic]
    assert [e.text for e in summary][-1] == "the story so far"
    assert context.events[-1].text == "answer number5"


async def test_watch_sees_compactions_as_they_land(tmp_path: Path) -> None:
    async with (
        running(
            tmp_path, summarizer=FakeSummarizer("recap"), default_policy=json.dumps(SUMMARIZE)
        ) as sidecar,
        AsyncClient(address(sidecar)) as client,
    ):
        handle = client.session("s1")
        await client.create_session("s1")
        async with handle.watch() as watch:
            waiting = asyncio.create_task(anext(watch))
            await until_watched(sidecar, "s1")
            for n in range(4):
                await handle.append(turn(n))
            update = await asyncio.wait_for(waiting, 5)
            appended = await handle.append(turn(4))
            forced = await handle.compact(force=True)
            again = await asyncio.wait_for(anext(watch), 5)

    assert isinstance(update, CompactionResult)
    assert update.compacted
    assert update.strategy == "summarize"
    assert [e.text for e in update.active_events if e.synthetic][-1] == "recap"
    assert not appended.compaction_scheduled
    assert forced.compacted
    assert isinstance(again, CompactionResult)
    assert again.compaction_id == forced.compaction_id != ""


async def test_watch_of_a_missing_session_is_not_found(client: AsyncClient) -> None:
    async with client.session("nobody").watch() as watch:
        with pytest.raises(NotFoundError):
            await asyncio.wait_for(anext(watch), 5)


def test_watch_decodes_a_missed_notice() -> None:
    assert decode.watch_update(pb.WatchSessionResponse(missed=3)) == Missed(3)


async def test_a_clearing_set_off_by_a_streamed_append_comes_back_in_its_ack(
    client: AsyncClient,
) -> None:
    """The inline clearing's result rides on the ack: cleared ids, placeholders in its window."""
    from sidecar.compaction.clear_tool_results import ClearToolResults
    from sidecar.compaction.policy import CompactionPolicy
    from sidecar.compaction.triggers import TokenCount
    from sidecar.model import Event, Role, ToolCall, ToolResult

    policy = CompactionPolicy(TokenCount(250), ClearToolResults(keep_tool_uses=1))
    await client.create_session("cs", policy=policy)
    async with client.session("cs").stream() as stream:
        await stream.send([u("go")], request_id="q")
        for n in range(3):
            call = Event(id=f"a{n}", role=Role.ASSISTANT, tool_calls=(ToolCall(f"c{n}", "logs"),))
            result = ToolResult(f"c{n}", "logs", "line " * 100)
            await stream.send([call, Event(id=f"t{n}", role=Role.TOOL, tool_results=(result,))])
        await stream.close()
        acks = [m for m in [m async for m in stream] if isinstance(m, Ack)]

    cleared = [m.result.compaction for m in acks if m.result.compaction is not None]
    assert cleared, [m.result for m in acks]
    assert cleared[-1].strategy == "clear_tool_results"
    assert set(cleared[-1].cleared_ids) <= {"t0", "t1"}
    window = {e.id: e for e in cleared[-1].active_events}
    assert all(window[i].cleared for i in cleared[-1].cleared_ids)
    assert not window["t2"].cleared
