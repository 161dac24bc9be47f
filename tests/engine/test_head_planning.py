"""A pass that changes little reads little: Compact plans from the window's head.

On a window of 30,000 events, a sliding window archiving two of them, a turn
window dropping the oldest turn and a clearing with nothing to clear read the
head (a few thousand events at most, what the loss report needs past the cut)
and never the whole window, and make the plan the whole window would make.
A plan the head cannot decide (a clearing with calls to clear) still reads
the window.
"""

from __future__ import annotations

from typing import Any

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import WindowStep, plan_step
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.turn_window import TurnWindow
from sidecar.engine.engine import SessionEngine
from sidecar.model import Boundary, Event, Role, ToolCall, ToolResult
from sidecar.store.sqlite import SqliteStore

EVENTS = 30_000


class CountingStore:
    """``inner``, recording how much of the window each read asks for."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner
        self.windows = 0
        self.heads: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def active_window(self, session_id: str) -> Any:
        self.windows += 1
        return await self.inner.active_window(session_id)

    async def window_head(self, session_id: str, events: int, **kwargs: Any) -> Any:
        self.heads.append(events)
        return await self.inner.window_head(session_id, events, **kwargs)


def _event(i: int) -> Event:
    text = f"message {i} about the incident and the deploy to FL{i:05d}"
    role = Role.USER if i % 2 == 0 else Role.ASSISTANT
    return Event(id=f"e{i}", role=role, text=text, token_count=len(text) // 4)


async def _big(store: SqliteStore) -> None:
    for start in range(0, EVENTS, 5_000):
        batch = [_event(i) for i in range(start, start + 5_000)]
        await store.append("s", batch, create_if_missing=True)


async def _compacted(
    store: SqliteStore, step: WindowStep
) -> tuple[CountingStore, tuple[str, ...], tuple[str, ...]]:
    """What Compact archived with ``step``, what the whole window's plan archives, the reads."""
    _, window = await store.active_window("s")
    expected = plan_step(step, window).archive_ids
    counting = CountingStore(store)
    engine = SessionEngine(counting)
    result = await engine.compact("s", policy=CompactionPolicy(None, step), force=True)
    return counting, tuple(e.id for e in result.archived_events), expected


async def test_a_small_sliding_window_pass_reads_only_the_head(store: SqliteStore) -> None:
    await _big(store)
    reads, archived, expected = await _compacted(store, SlidingWindow(max_events=EVENTS - 2))
    assert archived == expected == ("e0", "e1")
    assert reads.windows == 0
    assert max(reads.heads) < EVENTS // 2


async def test_dropping_the_oldest_turn_reads_only_the_head(store: SqliteStore) -> None:
    await _big(store)
    reads, archived, expected = await _compacted(store, TurnWindow(max_turns=EVENTS // 2 - 1))
    assert archived == expected == ("e0", "e1")
    assert reads.windows == 0
    assert max(reads.heads) < EVENTS // 2


async def test_a_clearing_with_nothing_to_clear_reads_no_event(store: SqliteStore) -> None:
    await _big(store)
    reads, archived, expected = await _compacted(store, ClearToolResults())
    assert archived == expected == ()
    assert reads.windows == 0
    assert reads.heads == [0]


async def test_a_tool_pair_cut_reads_only_the_head(store: SqliteStore) -> None:
    await _big(store)
    step = SlidingWindow(max_events=EVENTS - 3, boundary=Boundary.TOOL_PAIR)
    reads, archived, expected = await _compacted(store, step)
    assert archived == expected == ("e0", "e1", "e2")
    assert reads.windows == 0


async def test_a_clearing_with_calls_to_clear_reads_the_window(store: SqliteStore) -> None:
    await _big(store)
    call = ToolCall("c1", "lookup", "{}")
    await store.append(
        "s",
        [
            Event(id="call", role=Role.ASSISTANT, tool_calls=(call,), token_count=5),
            Event(
                id="result",
                role=Role.TOOL,
                tool_results=(ToolResult("c1", "lookup", "row " * 400),),
                token_count=400,
            ),
        ],
    )
    reads, _, _ = await _compacted(store, ClearToolResults(keep_tool_uses=0))
    assert reads.windows == 1
