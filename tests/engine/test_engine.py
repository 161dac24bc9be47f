"""The engine: auto-compaction, single-flight summaries, version-checked apply, watchers."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import Always, TurnCount
from sidecar.engine.engine import COUNT_IN_THREAD_CHARS, SessionEngine, policy_json
from sidecar.engine.watchers import Gone, Lagged, Watcher, WatcherHub
from sidecar.errors import (
    InvalidArgument,
    LimitExceeded,
    NoSummarizer,
    SessionNotFound,
    SummarizerTimeout,
    SummarizerUnavailable,
    VersionConflict,
)
from sidecar.model import CompactionPlan, CompactionResult, Event, Role, SkipReason, ToolCall
from sidecar.store.sqlite import SqliteStore
from tests.compaction.fakes import FakeSummarizer
from tests.engine.gates import GatedSummarizer

WINDOW = CompactionPolicy(TurnCount(3), SlidingWindow(max_events=4))
SUMMARY = CompactionPolicy(
    TurnCount(3), Summarize(4, 1, shadow_prompt="Summary", max_summary_tokens=1)
)


def turn(n: int) -> list[Event]:
    return [
        Event(id=f"u{n}", role=Role.USER, text=f"question {n}"),
        Event(id=f"a{n}", role=Role.ASSISTANT, text=f"answer {n}"),
    ]


async def ids_of_context(engine: SessionEngine, session_id: str) -> list[str]:
    _, events = await engine.context(session_id)
    return [e.id for e in events]


async def test_window_strategy_compacts_inline_with_the_append(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=WINDOW)
    for n in range(3):
        result = await engine.append("s", turn(n))
        assert result.compaction is None
    result = await engine.append("s", turn(3))  # the fourth turn: turns > 3
    assert result.compaction is not None
    assert result.compaction.compacted
    assert [e.id for e in result.compaction.archived_events] == ["u0", "a0", "u1", "a1"]
    assert await ids_of_context(engine, "s") == ["u2", "a2", "u3", "a3"]
    assert result.session.version == result.compaction.version
    assert result.session.counters.turns == 2


async def test_token_counts_are_computed_on_append(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s")
    result = await engine.append("s", [Event(id="x", role=Role.USER, text="hello world")])
    assert result.events[0].token_count == engine.estimator.count("User: hello world")
    assert result.session.counters.tokens == result.events[0].token_count


async def test_retry_is_idempotent_and_does_not_recompact(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=WINDOW)
    for n in range(4):
        await engine.append("s", turn(n))
    version = (await store.get_session("s")).version
    again = await engine.append("s", turn(3))
    assert again.compaction is None
    assert again.session.version == version
    assert [e.id for e in again.events] == ["u3", "a3"]


async def test_events_without_ids_get_server_ids(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    result = await engine.append(
        "new", [Event(id="", role=Role.USER, text="hi")], create_if_missing=True
    )
    assert len(result.events[0].id) == 32


async def test_summary_runs_in_background_and_appends_during_the_call_stand(
    store: SqliteStore,
) -> None:
    summarizer = GatedSummarizer("the story so far")
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("s", policy=SUMMARY)
    watcher = engine.watch("s")
    for n in range(3):
        await engine.append("s", turn(n))
    fired = await engine.append("s", turn(3))
    assert fired.compaction_scheduled
    await summarizer.started.wait()
    # The lock is not held during the LLM call: appends go through, and a
    # trigger firing meanwhile does not start a second call.
    during = await engine.append("s", turn(4))
    assert not during.compaction_scheduled
    summarizer.gate.set()
    result = await asyncio.wait_for(watcher.next(), 5)
    assert isinstance(result, CompactionResult)
    assert result.compacted
    assert summarizer.calls == 1
    context = await ids_of_context(engine, "s")
    _, events = await engine.context("s")
    assert [e.synthetic for e in events[:2]] == [True, True]
    assert events[1].text == "the story so far"
    assert context[2:] == ["u2", "a2", "u3", "a3", "u4", "a4"]
    watcher.close()


async def test_summarizer_error_leaves_the_session_exactly_as_it_was(store: SqliteStore) -> None:
    engine = SessionEngine(store, summarizer=FakeSummarizer(error=SummarizerUnavailable("503")))
    await engine.create_session("s", policy=CompactionPolicy(None, SUMMARY.strategy))
    for n in range(6):
        await engine.append("s", turn(n))
    # A pass counts the window exactly before it plans (issue 37): a write that changes
    # no version, and the only one a failed pass leaves.
    await engine.counts.exact("s")
    before = await store.active_window("s")
    with pytest.raises(SummarizerUnavailable):
        await engine.compact("s", force=True)
    assert await store.active_window("s") == before


async def test_a_summarizing_policy_needs_a_summarizer(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    with pytest.raises(NoSummarizer) as info:
        await engine.create_session("s", policy=SUMMARY)
    assert info.value.field == "policy.strategy.summarize"
    with pytest.raises(NoSummarizer):
        await engine.compact("s", force=True, policy=SUMMARY)
    # A policy stored by another replica that had one: the pass fails, nothing changes.
    await store.create_session("s", policy_json=policy_json(SUMMARY), labels={})
    for n in range(6):
        await engine.append("s", turn(n))
    await engine.counts.exact("s")  # as a pass does before it plans, changing no version
    before = await store.active_window("s")
    with pytest.raises(SummarizerUnavailable, match="no summarizer"):
        await engine.compact("s", force=True)
    assert await store.active_window("s") == before


async def test_summarizer_timeout(store: SqliteStore) -> None:
    engine = SessionEngine(store, summarizer=GatedSummarizer(), summary_timeout_s=0.05)
    await engine.create_session("s", policy=SUMMARY)
    for n in range(6):
        await engine.append("s", turn(n))
    with pytest.raises(SummarizerTimeout):
        await engine.compact("s", force=True)
    assert len(await ids_of_context(engine, "s")) == 12


async def test_compaction_landing_first_makes_the_summary_a_no_op(store: SqliteStore) -> None:
    summarizer = GatedSummarizer()
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("s", policy=CompactionPolicy(None, SUMMARY.strategy))
    for n in range(6):
        await engine.append("s", turn(n))
    slow = asyncio.create_task(engine.compact("s", force=True))
    await summarizer.started.wait()
    # Another replica on the same store compacts while the LLM call runs.
    window = await SessionEngine(store).compact(
        "s", force=True, policy=CompactionPolicy(Always(), SlidingWindow(max_events=2))
    )
    assert window.compacted
    summarizer.gate.set()
    result = await slow
    assert not result.compacted
    assert result.skipped_reason is SkipReason.SUPERSEDED
    log = await store.list_events("s", page_size=1000, page_token="")
    assert len(log.items) == 12  # nothing lost, nothing inserted by the loser


async def summary_running(store: SqliteStore) -> tuple[GatedSummarizer, SessionEngine, Watcher]:
    """Session ``s`` watched, its fourth turn's background summary waiting at the gate."""
    summarizer = GatedSummarizer()
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("s", policy=SUMMARY)
    watcher = engine.watch("s")
    for n in range(3):
        await engine.append("s", turn(n))
    assert (await engine.append("s", turn(3))).compaction_scheduled
    await summarizer.started.wait()
    return summarizer, engine, watcher


async def test_a_scheduled_summary_that_is_superseded_still_answers_its_watchers(
    store: SqliteStore,
) -> None:
    """An append that said ``compaction_scheduled`` promised a result on the session's
    watchers: one that lost its race to another compaction is that result too."""
    summarizer, _engine, watcher = await summary_running(store)
    # Another replica on the same store compacts while the LLM call runs.
    other = await SessionEngine(store).compact(
        "s", force=True, policy=CompactionPolicy(Always(), SlidingWindow(max_events=2))
    )
    assert other.compacted
    summarizer.gate.set()
    result = await asyncio.wait_for(watcher.next(), 5)
    assert isinstance(result, CompactionResult)
    assert not result.compacted
    assert result.skipped_reason is SkipReason.SUPERSEDED
    assert result.version == other.version
    watcher.close()


async def test_a_summary_of_a_deleted_session_does_not_land_on_its_successor(
    store: SqliteStore,
) -> None:
    """A session deleted while its summary runs, and created again under its id with
    the same event ids: the old pass is superseded, nothing of the old one comes back."""
    summarizer, engine, watcher = await summary_running(store)
    await store.delete_session("s")  # as the DeleteSession RPC does
    await engine.create_session("s", policy=CompactionPolicy(None, SUMMARY.strategy))
    for n in range(4):
        await engine.append(
            "s",
            [
                Event(id=f"u{n}", role=Role.USER, text=f"new question {n}"),
                Event(id=f"a{n}", role=Role.ASSISTANT, text=f"new answer {n}"),
            ],
        )
    before = await store.active_window("s")
    summarizer.gate.set()
    result = await asyncio.wait_for(watcher.next(), 5)
    assert isinstance(result, CompactionResult)
    assert not result.compacted
    assert result.skipped_reason is SkipReason.SUPERSEDED
    await engine.wait_idle()
    assert await store.active_window("s") == before
    assert not (await store.list_compactions("s", page_size=10, page_token="")).items
    watcher.close()


async def test_empty_plan_writes_nothing(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=WINDOW)
    await engine.append("s", turn(0))
    version = (await store.get_session("s")).version
    result = await engine.compact("s", force=True)
    assert not result.compacted
    assert result.skipped_reason is SkipReason.WITHIN_LIMIT
    assert (await store.get_session("s")).version == version


async def test_compact_without_force_respects_the_trigger(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=WINDOW)
    await engine.append("s", turn(0))
    result = await engine.compact("s")
    assert result.skipped_reason is SkipReason.TRIGGER_NOT_FIRED


async def test_a_skipped_compact_still_returns_the_active_window(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=WINDOW)
    await engine.append("s", turn(0))
    for result in (await engine.compact("s"), await engine.compact("s", force=True)):
        assert not result.compacted
        assert [e.id for e in result.active_events] == ["u0", "a0"]
        assert result.version == (await store.get_session("s")).version
    await engine.create_session("none", use_default_policy=False)
    await engine.append("none", turn(1))
    result = await engine.compact("none", force=True)
    assert result.skipped_reason is SkipReason.NO_POLICY
    assert [e.id for e in result.active_events] == ["u1", "a1"]


async def test_policy_without_trigger_never_compacts_on_its_own(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=CompactionPolicy(None, SlidingWindow(2)))
    for n in range(10):
        assert (await engine.append("s", turn(n))).compaction is None
    assert (await engine.compact("s", force=True)).compacted


async def test_default_policy_applies_to_sessions_created_without_one(store: SqliteStore) -> None:
    engine = SessionEngine(store, default_policy=WINDOW)
    await engine.append("auto", turn(0), create_if_missing=True)
    await engine.create_session("explicit")
    for sid in ("auto", "explicit"):
        session = await store.get_session(sid)
        assert engine.policy_of(session) == WINDOW


async def test_compact_expected_version_mismatch(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=WINDOW)
    await engine.append("s", turn(0))
    with pytest.raises(VersionConflict) as info:
        await engine.compact("s", force=True, expected_version=99)
    assert info.value.current_version == 2


async def test_slow_watcher_is_told_it_fell_behind_and_never_blocks(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    engine.watchers = type(engine.watchers)(queue_size=1)
    await engine.create_session("s", policy=CompactionPolicy(Always(), SlidingWindow(2)))
    watcher = engine.watch("s")
    for n in range(10):
        await engine.append("s", turn(n))
    assert engine.watchers.queued() == 1  # the queue is full; the rest were dropped
    first = await watcher.next()
    assert engine.watchers.queued() == 0
    assert not isinstance(first, Lagged)
    lagged = await watcher.next()
    assert isinstance(lagged, Lagged)
    assert lagged.missed > 0
    watcher.close()
    assert len(engine.watchers) == 0


async def test_a_watchers_queue_is_bounded_in_bytes_too() -> None:
    """Results list their windows: a watcher that does not read holds at most its bytes'
    worth of them (one always), and is told how many it missed."""
    hub = WatcherHub(queue_size=64, queue_bytes=10_000)
    watcher = hub.subscribe("s")
    window = tuple(Event(id=f"e{n}", role=Role.USER, text="x" * 1_000) for n in range(4))

    def result(version: int, events: tuple[Event, ...]) -> CompactionResult:
        return CompactionResult(True, "sliding_window", active_events=events, version=version)

    hub.publish("s", result(1, window * 5))  # alone past the bound: taken all the same
    hub.publish("s", result(2, window))
    assert hub.queued() == 1
    assert (await watcher.next()).version == 1  # type: ignore[union-attr]
    for version in range(3, 6):
        hub.publish("s", result(version, window))
    assert hub.queued() == 2  # 4 kB each: a third would pass the 10 kB
    assert [getattr(await watcher.next(), "version", None) for _ in range(2)] == [3, 4]
    assert await watcher.next() == Lagged(2)
    watcher.close()


async def test_a_deleted_sessions_watchers_read_what_was_queued_then_gone(
    store: SqliteStore,
) -> None:
    """Ending a watch keeps its order: the results queued, the count lost, then Gone for good
    (a reader already waiting wakes at once)."""
    engine = SessionEngine(store)
    engine.watchers = type(engine.watchers)(queue_size=1)
    await engine.create_session("s", policy=CompactionPolicy(Always(), SlidingWindow(2)))
    full, waiting = engine.watch("s"), engine.watch("s")
    for n in range(4):  # each queue holds one result; the others are lost
        await engine.append("s", turn(n))
    assert isinstance(await waiting.next(), CompactionResult)
    assert isinstance(await waiting.next(), Lagged)
    reader = asyncio.create_task(waiting.next())
    await asyncio.sleep(0)
    engine.watchers.end("s")
    assert isinstance(await asyncio.wait_for(reader, 5), Gone)
    assert [type(await full.next()) for _ in range(4)] == [CompactionResult, Lagged, Gone, Gone]
    assert len(engine.watchers) == 0
    full.close()  # closing an ended watcher is harmless
    waiting.close()
    assert engine.watchers.watchers == 0


async def test_bad_input_is_rejected_before_anything_is_stored(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s")
    bad = Event(id="t", role=Role.USER, tool_calls=(ToolCall("c", "x", "{"),))
    with pytest.raises(InvalidArgument) as info:
        await engine.append("s", [Event(id="ok", role=Role.USER), bad])
    assert info.value.field == "events[1].tool_calls"
    broken_json = Event(id="t", role=Role.ASSISTANT, tool_calls=(ToolCall("c", "x", "{"),))
    with pytest.raises(InvalidArgument) as info:
        await engine.append("s", [broken_json])
    assert info.value.field == "events[0].tool_calls[0].arguments_json"
    with pytest.raises(InvalidArgument) as info:
        await engine.append("bad id!", [Event(id="x", role=Role.USER)])
    assert info.value.field == "session_id"
    with pytest.raises(LimitExceeded) as limit:
        await engine.append("s", [Event(id="big", role=Role.USER, text="x" * (2 << 20))])
    assert limit.value.limit == "max_event_bytes"
    with pytest.raises(SessionNotFound):
        await engine.append("missing", [Event(id="x", role=Role.USER)])
    session = await store.get_session("s")
    assert session.version == 1
    assert session.total_events == 0


async def test_close_cancels_summaries_past_the_grace_period(store: SqliteStore) -> None:
    summarizer = GatedSummarizer()
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("s", policy=SUMMARY)
    for n in range(4):
        await engine.append("s", turn(n))
    await summarizer.started.wait()
    before = await store.active_window("s")
    await engine.close(grace_s=0.05)
    assert engine.in_flight() == 0
    assert await store.active_window("s") == before


class SlowEstimator:
    """Counts one token per character, taking ``seconds`` per text as a big text would."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def count(self, text: str) -> int:
        time.sleep(self.seconds)  # like tiktoken: busy without holding the GIL
        return len(text)


@contextlib.asynccontextmanager
async def loop_stalls() -> AsyncIterator[list[float]]:
    """How long each 10 ms sleep on the event loop took, while the block ran."""
    stalls: list[float] = []

    async def tick() -> None:
        while True:
            began = time.perf_counter()
            await asyncio.sleep(0.01)
            stalls.append(time.perf_counter() - began)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    try:
        yield stalls
    finally:
        ticker.cancel()


async def test_big_batches_are_counted_off_the_event_loop(store: SqliteStore) -> None:
    """A 100 KB tool result must not freeze every other call while its tokens are counted."""
    engine = SessionEngine(store, estimator=SlowEstimator(0.3))
    await engine.append("s", [Event("warm", Role.USER, "hi")], create_if_missing=True)
    async with loop_stalls() as stalls:
        big = Event("big", Role.USER, "x" * (COUNT_IN_THREAD_CHARS + 1))
        result = await engine.append("s", [big])
    assert result.events[0].token_count == len("User: ") + COUNT_IN_THREAD_CHARS + 1
    assert max(stalls) < 0.2  # counted inline, the loop would stall for the whole 0.3 s
    small = await engine.append("s", [Event("small", Role.USER, "hi")])
    assert small.events[0].token_count > 0  # small batches are counted inline
    await engine.close()


async def test_the_first_count_is_off_the_event_loop_however_small(store: SqliteStore) -> None:
    """The default estimator builds its encoding on the first count: not on the loop."""
    engine = SessionEngine(store, estimator=SlowEstimator(0.3))  # as slow as that build
    async with loop_stalls() as stalls:
        first = await engine.append("s", [Event("first", Role.USER, "hi")], create_if_missing=True)
    assert first.events[0].token_count == len("User: hi")
    assert max(stalls) < 0.2  # counted inline, the loop would stall for the whole 0.3 s
    await engine.close()


async def test_catch_up_and_a_live_notice_reach_watchers_once_and_in_order(
    store: SqliteStore,
) -> None:
    """Another replica's compactions: two missed during an outage, a third heard live meanwhile."""
    engine = SessionEngine(store)
    engine.follow_other_replicas()
    await engine.append("s", turn(0) + turn(1) + turn(2), create_if_missing=True)
    watcher = engine.watch("s")
    for _ in range(50):
        if engine.watchers.known("s") is not None:
            break
        await asyncio.sleep(0.01)

    async def elsewhere(archive: str) -> str:  # lands a compaction behind the engine's back
        session = await store.get_session("s")
        plan = CompactionPlan(
            "test", archive_ids=(archive,), base_compaction_id=session.last_compaction_id
        )
        return (await store.apply("s", plan)).compaction_id

    listed = store.list_compactions

    async def slow_list(*args: Any, **kwargs: Any) -> Any:  # as a few round trips would be
        await asyncio.sleep(0.05)
        return await listed(*args, **kwargs)

    store.list_compactions = slow_list  # type: ignore[method-assign]
    missed = [await elsewhere("u0"), await elsewhere("a0")]
    catching_up = asyncio.create_task(engine.catch_up())
    await asyncio.sleep(0)
    live = await elsewhere("u1")
    engine.relay_compaction("s", live)
    engine.relay_compaction("s", live)  # announced twice: told once
    await catching_up
    await asyncio.sleep(0.2)
    told = []
    while watcher.queued():
        update = await watcher.next()
        assert isinstance(update, CompactionResult)
        told.append(update.compaction_id)
    assert told == [*missed, live]
    await engine.close()
