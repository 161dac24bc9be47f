"""A compaction's result lists the new window while it is small, and costs what it changes.

On a window past ``ANSWER_WINDOW_EVENTS`` a Compact, a restore, a skipped
pass and what watchers are told leave the window out (``active_events_omitted``)
and read none of it to answer; what the pass changed is listed all the same.
"""

from __future__ import annotations

from typing import Any

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.engine.answer_window import ANSWER_WINDOW_EVENTS
from sidecar.engine.engine import SessionEngine
from sidecar.model import Boundary, CompactionResult, Event, Role
from sidecar.store.sqlite import SqliteStore


class CountingReads:
    """The store, counting its whole-window reads."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self.window_reads = 0

    async def active_window(self, session_id: str) -> Any:
        self.window_reads += 1
        return await self._store.active_window(session_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def events(count: int) -> list[Event]:
    return [
        Event(id=f"e{i}", role=Role.USER if i % 2 == 0 else Role.ASSISTANT, text=f"message {i}")
        for i in range(count)
    ]


def keep_all_but_two(size: int) -> CompactionPolicy:
    return CompactionPolicy(None, SlidingWindow(max_events=size - 2, boundary=Boundary.TOOL_PAIR))


async def session_of(store: SqliteStore, size: int) -> tuple[SessionEngine, CountingReads]:
    reads = CountingReads(store)
    engine = SessionEngine(reads)
    await engine.create_session("s")
    made = events(size)
    for start in range(0, size, 500):
        await engine.append("s", made[start : start + 500])
    reads.window_reads = 0
    return engine, reads


async def test_a_small_window_is_listed_in_every_result(store: SqliteStore) -> None:
    size = ANSWER_WINDOW_EVENTS
    engine, _ = await session_of(store, size)
    watcher = engine.watch("s")
    compacted = await engine.compact("s", policy=keep_all_but_two(size), force=True)
    assert [e.id for e in compacted.archived_events] == ["e0", "e1"]
    assert len(compacted.active_events) == size - 2
    assert not compacted.active_events_omitted
    told = await watcher.next()
    assert isinstance(told, CompactionResult)
    assert len(told.active_events) == size - 2
    restored = await engine.restores.restore("s")
    assert restored.restored_ids == ("e0", "e1")
    assert len(restored.active_events) == size
    assert not restored.active_events_omitted
    skipped = await engine.compact(
        "s", policy=CompactionPolicy(None, ClearToolResults()), force=True
    )
    assert not skipped.compacted
    assert len(skipped.active_events) == size
    assert not skipped.active_events_omitted
    watcher.close()


async def test_a_big_window_is_left_out_and_not_read_for_the_answer(store: SqliteStore) -> None:
    size = ANSWER_WINDOW_EVENTS + 3  # still past the bound once two events are archived
    engine, reads = await session_of(store, size)
    watcher = engine.watch("s")

    compacted = await engine.compact("s", policy=keep_all_but_two(size), force=True)
    assert [e.id for e in compacted.archived_events] == ["e0", "e1"]  # what changed: listed
    assert compacted.active_events == ()
    assert compacted.active_events_omitted
    assert reads.window_reads == 0  # planned from the head; nothing read to answer
    told = await watcher.next()
    assert isinstance(told, CompactionResult)
    assert told.active_events_omitted
    assert told.compaction_id == compacted.compaction_id

    reads.window_reads = 0
    restored = await engine.restores.restore("s")
    assert restored.restored_ids == ("e0", "e1")
    assert restored.active_events == ()
    assert restored.active_events_omitted
    assert reads.window_reads == 0  # a restore costs what it changes

    reads.window_reads = 0
    skipped = await engine.compact(
        "s", policy=CompactionPolicy(None, ClearToolResults()), force=True
    )
    assert not skipped.compacted
    assert skipped.active_events == ()
    assert skipped.active_events_omitted
    assert reads.window_reads == 0  # nothing to clear, told by the call count alone

    # The window is all there, for the client that reads it.
    _, window = await engine.context("s")
    assert [e.id for e in window] == [f"e{i}" for i in range(size)]
    watcher.close()
