"""The store contract for cleared tool results, on every store.

The active window shows the placeholder and counts it; the log keeps the
original (ListEvents returns it, search finds it); a clearing is one
compaction, recorded with what it cleared.
"""

from __future__ import annotations

import pytest

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.tokens import count_event
from sidecar.errors import VersionConflict
from sidecar.model import CompactionPlan, Event, Role, ToolCall, ToolResult
from sidecar.store.protocol import SearchQuery, Store

SECRET = "kubelet evicted pod checkout-7f9 for memory pressure " * 20


def counted(event: Event) -> Event:
    return event.evolve(token_count=count_event(event))


def tool_loop() -> list[Event]:
    events = [counted(Event(id="u1", role=Role.USER, text="why did checkout fail?"))]
    for i in range(1, 6):
        events.append(
            counted(Event(id=f"a{i}", role=Role.ASSISTANT, tool_calls=(ToolCall(f"c{i}", "logs"),)))
        )
        content = SECRET if i == 1 else f"log page {i} " * 50
        events.append(
            counted(
                Event(
                    id=f"t{i}", role=Role.TOOL, tool_results=(ToolResult(f"c{i}", "logs", content),)
                )
            )
        )
    return events


async def clear(store: Store, session_id: str = "s") -> CompactionPlan:
    session, window = await store.active_window(session_id)
    plan = ClearToolResults().plan(window)
    return CompactionPlan(
        strategy=plan.strategy,
        clears=plan.clears,
        tokens_estimated_saved=plan.tokens_estimated_saved,
        base_compaction_id=session.last_compaction_id,
    )


async def test_a_cleared_event_shows_its_placeholder_in_the_window_and_counts_it(
    store: Store,
) -> None:
    await store.append("s", tool_loop(), create_if_missing=True)
    before = await store.get_session("s")
    plan = await clear(store)
    outcome = await store.apply("s", plan)
    assert outcome.session.version == before.version + 1
    session, window = await store.active_window("s")
    assert [e.id for e in window] == [e.id for e in tool_loop()]  # nothing archived or moved
    cleared = {e.id: e for e in window if e.cleared}
    assert sorted(cleared) == ["t1", "t2"]
    assert "logs" in cleared["t1"].tool_results[0].content
    assert SECRET not in cleared["t1"].tool_results[0].content
    assert cleared["t1"].token_count == count_event(cleared["t1"])
    assert session.counters == before.counters.after_clearing(window)
    assert session.counters.turns_since_compaction == before.counters.turns_since_compaction
    assert session.counters.tokens == before.counters.tokens - plan.tokens_estimated_saved


async def test_the_log_keeps_the_original_and_search_finds_it(store: Store) -> None:
    await store.append("s", tool_loop(), create_if_missing=True)
    await store.apply("s", await clear(store))
    page = await store.list_events("s", page_size=100, page_token="")
    by_id = {e.id: e for e in page.items}
    assert by_id["t1"].cleared
    assert by_id["t1"].tool_results[0].content == SECRET
    assert by_id["t1"].token_count == tool_loop()[2].token_count
    assert not by_id["t5"].cleared
    hits = await store.search(
        SearchQuery(text="kubelet evicted", session_id="s", include_active=True),
        page_size=10,
        page_token="",
    )
    assert [h.event.id for h in hits.items] == ["t1"]
    assert hits.items[0].event.tool_results[0].content == SECRET


async def test_the_active_listing_shows_the_window_as_get_context_does(store: Store) -> None:
    """A window too large for one answer is read in active pages: they must be the window."""
    await store.append("s", tool_loop(), create_if_missing=True)
    await store.apply("s", await clear(store))
    _, window = await store.active_window("s")
    page = await store.list_events("s", page_size=100, page_token="", include_archived=False)
    assert page.items == window
    small = await store.list_events(
        "s", page_size=100, page_token="", include_archived=False, max_bytes=1
    )
    assert small.items == window[:1]
    assert small.next_page_token


async def test_a_clearing_is_recorded_as_a_compaction(store: Store) -> None:
    await store.append("s", tool_loop(), create_if_missing=True)
    outcome = await store.apply("s", await clear(store))
    (record,) = (await store.list_compactions("s", page_size=10, page_token="")).items
    assert record.strategy == "clear_tool_results"
    assert record.cleared_ids == ("t1", "t2")
    assert record.archived_ids == ()
    result = await store.compaction_result("s", outcome.compaction_id)
    assert result.cleared_ids == ("t1", "t2")
    assert not result.archived_events
    assert (await store.get_session("s")).last_compaction_id == outcome.compaction_id


async def test_a_cleared_event_archived_later_keeps_its_original_in_the_log(store: Store) -> None:
    await store.append("s", tool_loop(), create_if_missing=True)
    await store.apply("s", await clear(store))
    session = await store.get_session("s")
    await store.apply(
        "s",
        CompactionPlan(
            strategy="test", archive_ids=("a1", "t1"), base_compaction_id=session.last_compaction_id
        ),
    )
    page = await store.list_events("s", page_size=100, page_token="")
    t1 = next(e for e in page.items if e.id == "t1")
    assert t1.archived
    assert t1.cleared
    assert t1.tool_results[0].content == SECRET
    _, window = await store.active_window("s")
    assert [e.id for e in window if e.cleared] == ["t2"]


async def test_a_clearing_of_an_event_no_longer_active_is_rejected(store: Store) -> None:
    await store.append("s", tool_loop(), create_if_missing=True)
    plan = await clear(store)
    await store.apply(
        "s", CompactionPlan(strategy="test", archive_ids=("u1", "a1", "t1"), base_compaction_id="")
    )
    with pytest.raises(VersionConflict):
        await store.apply("s", plan)
    stale = CompactionPlan(
        strategy=plan.strategy,
        clears=plan.clears,
        base_compaction_id=(await store.get_session("s")).last_compaction_id,
    )
    with pytest.raises(VersionConflict):  # t1 is archived now
        await store.apply("s", stale)
