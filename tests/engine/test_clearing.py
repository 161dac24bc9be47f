"""The engine runs clearings and pipelines as compactions: versioned, recorded, published."""

from __future__ import annotations

import asyncio

import pytest

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.engine.engine import SessionEngine
from sidecar.engine.observer import NoObserver
from sidecar.errors import NoSummarizer, SummarizerUnavailable
from sidecar.model import CompactionResult, Event, Role, SkipReason, ToolCall, ToolResult
from sidecar.store.sqlite import SqliteStore
from tests.compaction.fakes import FakeSummarizer
from tests.engine.gates import GatedSummarizer

PAGE = "2025-03-01 12:00:01 ERROR checkout: connection reset by peer\n" * 30


def tool_turn(n: int, calls: int = 4) -> list[Event]:
    events = [Event(id=f"u{n}", role=Role.USER, text=f"look at incident {n}")]
    for i in range(calls):
        call = f"c{n}-{i}"
        events.append(
            Event(id=f"a{call}", role=Role.ASSISTANT, tool_calls=(ToolCall(call, "logs"),))
        )
        events.append(
            Event(id=f"t{call}", role=Role.TOOL, tool_results=(ToolResult(call, "logs", PAGE),))
        )
    return events


async def tokens(engine: SessionEngine, session_id: str = "s") -> int:
    """The window's tokens as exact counting has them (appends are estimated until then)."""
    return (await engine.counts.exact(session_id)).counters.tokens


async def test_a_clearing_compacts_inline_and_is_published(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=CompactionPolicy(None, ClearToolResults()))
    await engine.append("s", tool_turn(1))
    before = await tokens(engine)
    watcher = engine.watch("s")
    result = await engine.compact("s", force=True)
    assert result.compacted
    assert result.strategy == "clear_tool_results"
    assert result.cleared_ids == ("tc1-0",)
    assert not result.archived_events
    assert await tokens(engine) == before - result.tokens_estimated_saved
    published = await asyncio.wait_for(watcher.next(), 5)
    assert isinstance(published, CompactionResult)
    assert published.compaction_id == result.compaction_id
    _, window = await engine.context("s")
    assert [e.id for e in window if e.cleared] == ["tc1-0"]
    watcher.close()


async def test_the_pipeline_stops_once_clearing_is_enough(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    pipeline = Pipeline((ClearToolResults(keep_tool_uses=1), TokenBudget(max_tokens=50)))
    await engine.create_session("s", policy=CompactionPolicy(None, pipeline))
    await engine.append("s", tool_turn(1) + tool_turn(2))
    full = await tokens(engine)
    # A threshold the clearing alone brings the window under.
    await engine.store.update_session(
        "s",
        set_policy=True,
        policy_json=CompactionPolicy(TokenCount(full // 2), pipeline).to_json(),
    )
    appended = await engine.append("s", [Event(id="x", role=Role.USER, text="and now?")])
    assert appended.compaction is not None
    assert appended.compaction.strategy == "pipeline"
    assert appended.compaction.cleared_ids
    assert not appended.compaction.archived_events  # token_budget never ran
    records = (await store.list_compactions("s", page_size=10, page_token="")).items
    assert [r.strategy for r in records] == ["clear_tool_results"]


async def test_a_forced_pipeline_runs_every_step_each_as_a_compaction(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    pipeline = Pipeline((ClearToolResults(keep_tool_uses=1), TokenBudget(max_tokens=400)))
    await engine.create_session("s", policy=CompactionPolicy(TokenCount(10**6), pipeline))
    await engine.append("s", tool_turn(1) + tool_turn(2))
    version = (await store.get_session("s")).version
    result = await engine.compact("s", force=True)
    records = (await store.list_compactions("s", page_size=10, page_token="")).items
    assert [r.strategy for r in records] == ["clear_tool_results", "token_budget"]
    assert result.version == version + 2  # step by step: one version per landed step
    assert result.compaction_id == records[-1].compaction_id
    assert result.archived_events
    assert result.tokens_estimated_saved == sum(r.tokens_saved for r in records)


async def test_a_summarize_step_runs_in_the_background(store: SqliteStore) -> None:
    engine = SessionEngine(store, summarizer=FakeSummarizer("incident 1: connection resets"))
    summarize = Summarize(max_events_to_keep=2, overlap=1, min_saved_tokens=1)
    pipeline = Pipeline((ClearToolResults(keep_tool_uses=1), summarize))
    await engine.create_session("s", policy=CompactionPolicy(TokenCount(100), pipeline))
    watcher = engine.watch("s")
    appended = await engine.append("s", tool_turn(1) + tool_turn(2))
    assert appended.compaction is not None
    assert appended.compaction.cleared_ids
    assert appended.compaction_scheduled
    await engine.wait_idle()
    seen = [await asyncio.wait_for(watcher.next(), 5) for _ in range(2)]
    assert [r.strategy for r in seen if isinstance(r, CompactionResult)] == [
        "clear_tool_results",
        "summarize",
    ]
    watcher.close()


async def test_a_pipeline_with_a_summarize_step_needs_a_summarizer(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    pipeline = Pipeline((ClearToolResults(), Summarize()))
    with pytest.raises(NoSummarizer) as info:
        await engine.create_session("s", policy=CompactionPolicy(None, pipeline))
    assert info.value.field == "policy.strategy.pipeline.steps[1].summarize"


async def test_min_cleared_tokens_skips_as_not_worth_it(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    policy = CompactionPolicy(None, ClearToolResults(min_cleared_tokens=10**6))
    await engine.create_session("s", policy=policy)
    await engine.append("s", tool_turn(1))
    result = await engine.compact("s", force=True)
    assert not result.compacted
    assert result.skipped_reason is SkipReason.NOT_WORTH_IT


async def test_no_step_runs_while_the_pipelines_summary_is_in_flight(store: SqliteStore) -> None:
    summarizer = GatedSummarizer("incident 1: connection resets")
    engine = SessionEngine(store, summarizer=summarizer)
    summarize = Summarize(max_events_to_keep=2, overlap=1, min_saved_tokens=1)
    pipeline = Pipeline((ClearToolResults(keep_tool_uses=1), summarize))
    await engine.create_session("s", policy=CompactionPolicy(TokenCount(100), pipeline))
    first = await engine.append("s", tool_turn(1) + tool_turn(2))
    assert first.compaction_scheduled
    await summarizer.started.wait()
    # The trigger fires again, with results to clear: nothing runs until the summary lands.
    during = await engine.append("s", tool_turn(3))
    assert during.compaction is None
    assert not during.compaction_scheduled
    summarizer.gate.set()
    await engine.wait_idle()
    records = (await store.list_compactions("s", page_size=10, page_token="")).items
    assert [r.strategy for r in records] == ["clear_tool_results", "summarize"]


async def test_a_failed_summary_step_is_counted_and_raised(store: SqliteStore) -> None:
    observed: list[CompactionResult] = []

    class Recorder(NoObserver):
        def compaction(self, result: CompactionResult) -> None:
            observed.append(result)

    engine = SessionEngine(
        store, summarizer=FakeSummarizer(error=SummarizerUnavailable("503")), observer=Recorder()
    )
    summarize = Summarize(max_events_to_keep=2, overlap=1, min_saved_tokens=1)
    pipeline = Pipeline((ClearToolResults(keep_tool_uses=1), summarize))
    await engine.create_session("s", policy=CompactionPolicy(None, pipeline))
    await engine.append("s", tool_turn(1) + tool_turn(2))
    with pytest.raises(SummarizerUnavailable):
        await engine.compact("s", force=True)
    assert [(r.strategy, r.skipped_reason) for r in observed] == [
        ("clear_tool_results", None),
        ("pipeline", SkipReason.FAILED),
    ]
    # The clearing that landed before the failed step stands.
    _, window = await engine.context("s")
    assert any(e.cleared for e in window)


async def test_an_interval_pipeline_still_summarizes_after_clearing(store: SqliteStore) -> None:
    """ADK's interval mode with clearing first: a clearing moves nothing, so it does not
    restart the interval's count, and every interval still ends in a summary."""
    from sidecar.adapters.adk_mapping import adk_policy

    summarizer = FakeSummarizer("S")
    engine = SessionEngine(store, summarizer=summarizer)
    policy = adk_policy(
        compaction_interval=2,
        overlap_size=1,
        clear_tool_results=ClearToolResults(keep_tool_uses=1),
    )
    await engine.create_session("s", policy=policy)
    for n in range(12):
        await engine.append("s", tool_turn(n, calls=2))
        await engine.wait_idle()

    assert len(summarizer.requests) >= 4
    session, window = await engine.context("s")
    assert len(window) < 3 * len(tool_turn(0, calls=2))  # the window stays bounded
    assert session.counters.turns_since_compaction <= 2


async def test_a_placeholder_with_pointers_restores_the_original_exactly(
    store: SqliteStore,
) -> None:
    engine = SessionEngine(store)
    await engine.create_session(
        "s", policy=CompactionPolicy(None, ClearToolResults(keep_tool_uses=1))
    )
    original = '{"reservation_id": "ZFA04Y", "flight": "HAT136", "notes": "' + "ok " * 200 + '"}'
    log = [
        Event(id="u", role=Role.USER, text="change it"),
        Event(id="a1", role=Role.ASSISTANT, tool_calls=(ToolCall("c1", "get_reservation"),)),
        Event(
            id="t1", role=Role.TOOL, tool_results=(ToolResult("c1", "get_reservation", original),)
        ),
        Event(id="a2", role=Role.ASSISTANT, tool_calls=(ToolCall("c2", "search"),)),
        Event(id="t2", role=Role.TOOL, tool_results=(ToolResult("c2", "search", PAGE),)),
    ]
    await engine.append("s", log)
    before = await tokens(engine)
    cleared = await engine.compact("s", force=True)
    assert cleared.cleared_ids == ("t1",)
    assert cleared.identifiers_dropped == 0
    _, window = await engine.context("s")
    assert (
        window[2]
        .tool_results[0]
        .content.endswith(
            "(call c1) \N{RIGHTWARDS ARROW} ZFA04Y, HAT136;"
            " the original stays in the session log and can be searched]"
        )
    )
    await engine.restores.restore("s")
    _, window = await engine.context("s")
    assert window[2].tool_results[0].content == original
    assert not window[2].cleared
    assert await tokens(engine) == before
