"""A pass planned from the window's head is the pass planned from the whole window.

Property: on random stored sessions (tool loops, results that come turns
late, orphan results, call ids used twice, system messages mid-window, a
summary and an earlier pass's archived events), every window strategy's plan
made as the engine makes it (``window_head`` growing from a random size until
``plan_from_head`` decides) equals ``plan_step`` on the whole active window.
The texts are long enough that the loss report's reads end inside some heads,
so heads decide for real and not only once they are the whole window.

Then the contract on both stores: what ``window_head`` says of the rest of
the window, and that links are back-filled for events stored before them.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import tempfile
from pathlib import Path

import asyncpg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.head import Wanted, plan_from_head
from sidecar.compaction.pipeline import WindowStep, plan_step
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.compaction.turn_window import TurnWindow
from sidecar.model import Boundary, CompactionPlan, Event, Role, ToolCall, ToolResult
from sidecar.store.postgres import PostgresStore
from sidecar.store.protocol import Store
from sidecar.store.sqlite import SqliteStore
from tests.conftest import Postgres, scratch_database

_ids = itertools.count()


def _counted(event: Event) -> Event:
    return event.evolve(token_count=count_event(event))


def _prose(n: int, size: int) -> str:
    words = (f"w{n}x{i} FL{n:03d}{i % 7}" for i in itertools.count())
    text = ""
    while len(text) < size:
        text += next(words) + " "
    return text[:size]


@st.composite
def sessions(draw: st.DrawFn) -> list[Event]:
    """A session's events in append order."""
    events: list[Event] = []
    if draw(st.booleans()):
        events.append(_counted(Event(id=f"s{next(_ids)}", role=Role.SYSTEM, text="be brief")))
    late: list[tuple[str, str]] = []  # (call id, name): answered in a later turn
    last_call = ""
    for _ in range(draw(st.integers(1, 40))):
        n = next(_ids)
        events.append(_counted(Event(id=f"u{n}", role=Role.USER, text=_prose(n, 40))))
        if draw(st.integers(0, 5)) == 0:
            events.append(_counted(Event(id=f"s{n}", role=Role.SYSTEM, text=f"rule {n}")))
        for call_id, name in late[: draw(st.integers(0, len(late)))]:
            late.remove((call_id, name))
            result = ToolResult(call_id, name, f"late {call_id}")
            events.append(
                _counted(Event(id=f"l{n}{call_id}", role=Role.TOOL, tool_results=(result,)))
            )
        for k in range(draw(st.integers(0, 3))):
            call_id = last_call if last_call and draw(st.integers(0, 30)) == 0 else f"c{n}-{k}"
            last_call = call_id
            call = ToolCall(call_id, "lookup", f'{{"q": "FL{n:03d}{k}"}}')
            events.append(_counted(Event(id=f"a{n}-{k}", role=Role.ASSISTANT, tool_calls=(call,))))
            if draw(st.integers(0, 4)) == 0:
                late.append((call_id, "lookup"))
                continue
            size = draw(st.sampled_from((30, 3_000, 9_000)))
            result = ToolResult(call_id, "lookup", _prose(n, size))
            events.append(_counted(Event(id=f"t{n}-{k}", role=Role.TOOL, tool_results=(result,))))
        if draw(st.integers(0, 8)) == 0:  # an orphan: its call is nowhere
            orphan = ToolResult(f"gone{n}", "lookup", "stale")
            events.append(_counted(Event(id=f"o{n}", role=Role.TOOL, tool_results=(orphan,))))
        size = draw(st.sampled_from((10, 20_000, 40_000)))
        events.append(_counted(Event(id=f"a{n}", role=Role.ASSISTANT, text=_prose(n, size))))
    return events


STRATEGIES = st.one_of(
    st.builds(SlidingWindow, max_events=st.integers(1, 200), boundary=st.sampled_from(Boundary)),
    st.builds(TurnWindow, max_turns=st.integers(1, 40), boundary=st.sampled_from(Boundary)),
    st.builds(TokenBudget, max_tokens=st.integers(50, 200_000), boundary=st.sampled_from(Boundary)),
    st.builds(
        ClearToolResults,
        keep_tool_uses=st.integers(0, 30),
        keep_reasoning_turns=st.one_of(st.none(), st.integers(1, 3)),
    ),
    st.builds(
        SlidingWindow,
        max_events=st.integers(1, 30),
        max_dropped_identifiers=st.integers(0, 20),
        min_saved_tokens=st.integers(0, 5_000),
    ),
)


async def _planned_like_the_engine(
    store: Store, session_id: str, step: WindowStep, size: int | None
) -> CompactionPlan:
    """``StepRunner._planned``'s loop, from a head of ``size`` events."""
    while size is not None:
        _, head = await store.window_head(
            session_id, size, count_calls=isinstance(step, ClearToolResults)
        )
        made = plan_from_head(step, head)
        if isinstance(made, CompactionPlan):
            return made
        assert isinstance(made, Wanted)
        size = made.events if made.events is None else max(made.events, 2 * size + 1)
    _, window = await store.active_window(session_id)
    return plan_step(step, window)


async def _stored(store: Store, events: list[Event], earlier: WindowStep | None) -> None:
    half = len(events) // 2
    await store.append("s", events[:half], create_if_missing=True)
    if earlier is not None:
        _, window = await store.active_window("s")
        plan = plan_step(earlier, window)
        if not plan.is_empty:
            await store.apply("s", plan)
    await store.append("s", events[half:])


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    events=sessions(),
    earlier=st.one_of(st.none(), STRATEGIES),
    steps=st.lists(STRATEGIES, min_size=1, max_size=4),
    size=st.integers(0, 80),
)
def test_a_plan_from_the_head_is_the_plan_from_the_whole_window(
    events: list[Event], earlier: WindowStep | None, steps: list[WindowStep], size: int
) -> None:
    async def check() -> None:
        with tempfile.TemporaryDirectory() as scratch:
            store = SqliteStore(str(Path(scratch) / "head.db"))
            await store.open()
            try:
                await _stored(store, events, earlier)
                _, window = await store.active_window("s")
                for step in steps:
                    expected = plan_step(step, window)
                    assert await _planned_like_the_engine(store, "s", step, size) == expected
            finally:
                await store.close()

    asyncio.run(check())


def _long_session(turns: int, late_call: bool = False) -> list[Event]:
    events = [_counted(Event(id="sys", role=Role.SYSTEM, text="be brief"))]
    for n in range(turns):
        events.append(_counted(Event(id=f"u{n}", role=Role.USER, text=f"question {n}")))
        call = ToolCall(f"c{n}", "lookup", '{"q": 1}')
        events.append(_counted(Event(id=f"a{n}-call", role=Role.ASSISTANT, tool_calls=(call,))))
        if not (late_call and n == 0):
            result = ToolResult(f"c{n}", "lookup", "row " * 50)
            events.append(_counted(Event(id=f"t{n}", role=Role.TOOL, tool_results=(result,))))
        events.append(_counted(Event(id=f"a{n}", role=Role.ASSISTANT, text=_prose(n, 9_000))))
    if late_call:
        result = ToolResult("c0", "lookup", "finally")
        events.append(_counted(Event(id="late", role=Role.TOOL, tool_results=(result,))))
    events.append(_counted(Event(id="sys2", role=Role.SYSTEM, text="be briefer")))
    return events


async def test_the_head_sums_up_the_rest_of_the_window(store: Store) -> None:
    await store.append("s", _long_session(60, late_call=True), create_if_missing=True)
    session, head = await store.window_head("s", 10, count_calls=True)
    assert not head.complete
    assert len(head.events) == 10
    assert [e.id for e in head.events[:3]] == ["sys", "u0", "a0-call"]
    assert head.real_events == session.counters.real_events == 60 * 4
    assert head.turns == 60
    assert head.tool_calls == 60
    assert [e.id for e in head.pinned_after] == ["sys2"]
    # c0 by the late result at the end; c2 (the head's last event) by the event after it.
    assert head.answered_after == frozenset({"c0", "c2"})
    assert head.called_after == frozenset()
    _, window = await store.active_window("s")
    conversation = sum(e.token_count for e in window if e.is_real)
    assert head.conversation_tokens == conversation
    _, whole = await store.window_head("s", 10_000)
    assert whole.complete
    assert whole.events == window


async def test_a_result_past_the_head_keeps_its_call_turn(store: Store) -> None:
    """The late result of c0 pulls a sliding window's cut back to turn 0: nothing goes."""
    await store.append("s", _long_session(60, late_call=True), create_if_missing=True)
    step = SlidingWindow(max_events=200)
    _, window = await store.active_window("s")
    plan = await _planned_like_the_engine(store, "s", step, 10)
    assert plan == plan_step(step, window)
    assert plan.archive_ids == ("sys",)  # superseded by sys2; the conversation stays whole


UNDO_PENDING_COUNTS = (
    "DROP INDEX events_pending",
    "ALTER TABLE events DROP COLUMN token_low",
    "ALTER TABLE events DROP COLUMN token_high",
    "ALTER TABLE sessions DROP COLUMN pending_below",
    "ALTER TABLE sessions DROP COLUMN pending_above",
)
"""Migration 11 undone, for a database as a release before it left it."""


async def test_links_are_back_filled_for_events_stored_before_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = SqliteStore(str(path))
    await store.open()
    try:
        await store.append("s", _long_session(60, late_call=True), create_if_missing=True)
    finally:
        await store.close()
    with sqlite3.connect(path, isolation_level=None) as db:  # as a release before links left it
        for statement in UNDO_PENDING_COUNTS:  # migration 11, which came after
            db.execute(statement)
        db.execute("DROP TABLE tool_links")
        db.execute("DROP INDEX events_pinned")
        db.execute("DELETE FROM schema_version WHERE version >= 10")
    store = SqliteStore(str(path))
    await store.open()
    try:
        _, head = await store.window_head("s", 10, count_calls=True)
        assert head.tool_calls == 60
        assert head.answered_after == frozenset({"c0", "c2"})
    finally:
        await store.close()


async def test_links_are_back_filled_on_postgres(postgres: Postgres) -> None:
    async with scratch_database(postgres) as dsn:
        store = PostgresStore(dsn, pool_size=2)
        await store.open()
        try:
            await store.append("s", _long_session(60, late_call=True), create_if_missing=True)
        finally:
            await store.close()
        db = await asyncpg.connect(dsn)
        try:  # as a release before links left it
            for statement in UNDO_PENDING_COUNTS:
                await db.execute(statement)
            await db.execute("DROP TABLE tool_links")
            await db.execute("DROP INDEX events_pinned")
            await db.execute("DELETE FROM schema_version WHERE version >= 10")
        finally:
            await db.close()
        store = PostgresStore(dsn, pool_size=2)
        await store.open()
        try:
            _, head = await store.window_head("s", 10, count_calls=True)
            assert head.tool_calls == 60
            assert head.answered_after == frozenset({"c0", "c2"})
        finally:
            await store.close()
