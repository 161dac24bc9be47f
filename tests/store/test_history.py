"""The compaction history and restores, held to one contract on every store.

A restore undoes the newest compaction standing: what it archived is active
again in place, what it cleared is uncleared, the summary turn it inserted is
archived, counters come back exactly, appends made since stay; nothing is
deleted, and the restore is itself a record in the history.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from sidecar.errors import CompactionNotFound, RestoreRefused, VersionConflict
from sidecar.model import (
    Cause,
    CompactionPlan,
    Event,
    Role,
    SessionCounters,
    ToolCall,
    ToolResult,
)
from sidecar.store.protocol import SearchQuery, Store
from tests.store.test_contract import a, compact, ids, s, seed, summary, t, u


async def window(store: Store, session_id: str = "s") -> tuple[Event, ...]:
    return (await store.active_window(session_id))[1]


async def counters(store: Store, session_id: str = "s") -> SessionCounters:
    return (await store.get_session(session_id)).counters


async def turns_session(store: Store) -> None:
    await seed(store, "s", [s("sys"), u("u1"), a("a1"), u("u2"), a("a2"), u("u3"), a("a3")])


async def test_restoring_an_archiving_pass_brings_the_window_and_counters_back(
    store: Store,
) -> None:
    await turns_session(store)
    before_window, before_counters = await window(store), await counters(store)
    landed = await compact(store, "s", ["u1", "a1", "u2", "a2"])
    assert ids(await window(store)) == ["sys", "u3", "a3"]
    outcome = await store.restore("s", "")
    assert await window(store) == before_window
    assert outcome.restored_ids == ("u1", "a1", "u2", "a2")
    assert outcome.archived == ()
    after = await store.get_session("s")
    assert after.counters == before_counters
    assert after.last_compaction_id == outcome.restore_id
    assert after.version == landed.session.version + 1
    history = await store.list_compactions("s", page_size=10, page_token="", newest_first=True)
    restore_record, undone = history.items
    assert (restore_record.compaction_id, restore_record.strategy) == (
        outcome.restore_id,
        "restore",
    )
    assert (restore_record.restores, restore_record.cause) == (landed.compaction_id, Cause.RESTORE)
    assert restore_record.restored_ids == ("u1", "a1", "u2", "a2")
    assert (undone.compaction_id, undone.restored_by) == (landed.compaction_id, outcome.restore_id)
    assert undone.archived_ids == ("u1", "a1", "u2", "a2")


async def test_restoring_a_summary_archives_it_and_brings_back_the_one_it_replaced(
    store: Store,
) -> None:
    await turns_session(store)
    first = await compact(store, "s", ["u1", "a1"], inserts=summary("s1", "one"), before="u2")
    after_first = await window(store)
    second = await compact(
        store, "s", ["s1-q", "s1-a", "u2", "a2"], inserts=summary("s2", "two"), before="u3"
    )
    assert ids(await window(store)) == ["sys", "s2-q", "s2-a", "u3", "a3"]
    outcome = await store.restore("s", second.compaction_id)
    assert await window(store) == after_first
    assert ids(outcome.archived) == ["s2-q", "s2-a"]
    assert outcome.restored_ids == ("s1-q", "s1-a", "u2", "a2")
    # Nothing is deleted: the undone summary is in the log, archived.
    log = await store.list_events("s", page_size=100, page_token="")
    assert {"s2-q", "s2-a"} <= {e.id for e in log.items if e.archived}
    # And the pass before can be restored next, down to the original window.
    await store.restore("s", first.compaction_id)
    assert ids(await window(store)) == ["sys", "u1", "a1", "u2", "a2", "u3", "a3"]


async def test_restoring_a_clearing_brings_the_original_results_back(store: Store) -> None:
    call = ToolCall("c1", "grep", '{"q":"x"}')
    big = ToolResult("c1", "grep", "row " * 200)
    await seed(store, "s", [u("u1"), a("a1", calls=[call]), t("t1", big, tokens=400), u("u2")])
    before_window, before_counters = await window(store), await counters(store)
    cleared = replace(before_window[2], tool_results=(replace(big, content="[cleared]"),))
    plan = CompactionPlan(
        strategy="clear_tool_results",
        clears=(cleared.evolve(token_count=3, cleared=True),),
        tokens_estimated_saved=397,
        base_compaction_id="",
    )
    await store.apply("s", plan)
    assert (await counters(store)).tokens == before_counters.tokens - 397
    outcome = await store.restore("s", "")
    assert await window(store) == before_window
    assert not (await window(store))[2].cleared
    assert await counters(store) == before_counters
    assert outcome.restored_ids == ("t1",)
    assert outcome.tokens_saved == -397


async def test_appends_made_since_stay_where_they_are_and_intervals_count_on(
    store: Store,
) -> None:
    await turns_session(store)
    turns_before = (await counters(store)).turns_since_compaction
    await compact(store, "s", ["u1", "a1", "u2", "a2"])
    await store.append("s", [u("u4"), a("a4")])
    await store.restore("s", "")
    assert ids(await window(store)) == ["sys", "u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4"]
    after = await counters(store)
    # As if the pass had never run: every turn since the last standing compaction.
    assert after.turns_since_compaction == turns_before + 1
    assert replace(after, turns_since_compaction=0) == replace(
        SessionCounters.of_window(await window(store)), turns_since_compaction=0
    )


async def test_a_restore_moves_the_counters_by_its_own_rows_exactly(store: Store) -> None:
    """The counters a restore leaves are those of the window, summed afresh: with a summary
    turn re-archived, cleared results uncleared, a superseded system message back (whose
    count is not the window's, the latest one's is) and appends made since."""
    calls = tuple(ToolCall(f"c{i}", "grep") for i in range(2))
    await seed(
        store,
        "s",
        [
            s("sys1", tokens=7),
            u("u1"),
            a("a1"),
            Event(id="ta", role=Role.ASSISTANT, tool_calls=calls, token_count=4),
            Event(
                id="tt",
                role=Role.TOOL,
                tool_results=tuple(ToolResult(c.id, "grep", "row " * 40) for c in calls),
                token_count=90,
            ),
            s("sys2", tokens=11),
            u("u2"),
            a("a2"),
        ],
    )
    cleared = replace((await window(store))[4], token_count=6, cleared=True)
    session = await store.get_session("s")
    await store.apply(
        "s",
        CompactionPlan(
            strategy="clear_tool_results",
            clears=(cleared,),
            base_compaction_id=session.last_compaction_id,
        ),
    )
    await compact(store, "s", ["sys1", "u1", "a1"], inserts=summary("sum", "hi"), before="ta")
    await store.append("s", [u("u3"), a("a3")])
    for _ in range(2):  # the summarizing pass, then the clearing
        before = await counters(store)
        await store.restore("s", "")
        after = await counters(store)
        expected = SessionCounters.of_window(await window(store))
        assert replace(after, turns_since_compaction=0) == replace(
            expected, turns_since_compaction=0
        ), before
    assert ids(await window(store)) == [
        *["sys1", "u1", "a1", "ta", "tt", "sys2", "u2", "a2", "u3", "a3"]
    ]
    assert (await counters(store)).system_tokens == 11


async def test_only_the_newest_standing_compaction_can_be_restored(store: Store) -> None:
    await turns_session(store)
    with pytest.raises(RestoreRefused, match="no compaction to restore"):
        await store.restore("s", "")
    first = await compact(store, "s", ["u1", "a1"])
    second = await compact(store, "s", ["u2", "a2"])
    version = (await store.get_session("s")).version
    with pytest.raises(RestoreRefused) as info:
        await store.restore("s", first.compaction_id)
    assert info.value.first == second.compaction_id
    assert second.compaction_id in str(info.value)
    with pytest.raises(CompactionNotFound):
        await store.restore("s", "no-such-compaction")
    assert (await store.get_session("s")).version == version  # refused: nothing stored
    restored = await store.restore("s", second.compaction_id)
    with pytest.raises(RestoreRefused, match="restored already"):
        await store.restore("s", second.compaction_id)
    with pytest.raises(RestoreRefused, match="is a restore"):
        await store.restore("s", restored.restore_id)
    await store.restore("s", first.compaction_id)
    with pytest.raises(RestoreRefused, match="no compaction to restore"):
        await store.restore("s", "")


async def test_a_restore_is_version_checked(store: Store) -> None:
    await turns_session(store)
    landed = await compact(store, "s", ["u1", "a1"])
    with pytest.raises(VersionConflict) as info:
        await store.restore("s", "", expected_version=landed.session.version - 1)
    assert info.value.current_version == landed.session.version
    assert ids(await window(store))[:2] == ["sys", "u2"]
    outcome = await store.restore("s", "", expected_version=landed.session.version)
    assert outcome.session.version == landed.session.version + 1


async def test_a_plan_made_before_the_restore_no_longer_lands(store: Store) -> None:
    # A background summary planned on the compaction a restore then undid.
    await turns_session(store)
    landed = await compact(store, "s", ["u1", "a1"])
    await store.restore("s", "")
    with pytest.raises(VersionConflict):
        await compact(
            store,
            "s",
            ["u2", "a2"],
            inserts=summary("late", "stale"),
            before="u3",
            base=landed.compaction_id,
        )
    assert ids(await window(store)) == ["sys", "u1", "a1", "u2", "a2", "u3", "a3"]


async def test_a_restore_racing_an_append_keeps_both(store: Store) -> None:
    await turns_session(store)
    await compact(store, "s", ["u1", "a1", "u2", "a2"])
    appended, restored = await asyncio.gather(
        store.append("s", [u("u4"), a("a4")]), store.restore("s", "")
    )
    assert ids(await window(store)) == ["sys", "u1", "a1", "u2", "a2", "u3", "a3", "u4", "a4"]
    final = await store.get_session("s")
    assert final.version == max(appended.session.version, restored.session.version)
    assert final.counters == replace(
        SessionCounters.of_window(await window(store)),
        turns_since_compaction=final.counters.turns_since_compaction,
    )


async def test_history_lists_newest_first_in_pages_bounded_in_bytes(store: Store) -> None:
    await seed(store, "s", [u(f"u{n}") for n in range(12)])
    landed = [(await compact(store, "s", [f"u{n}"])).compaction_id for n in range(10)]
    page = await store.list_compactions("s", page_size=4, page_token="", newest_first=True)
    seen = [r.compaction_id for r in page.items]
    while page.next_page_token:
        page = await store.list_compactions(
            "s", page_size=4, page_token=page.next_page_token, newest_first=True
        )
        seen += [r.compaction_id for r in page.items]
    assert seen == landed[::-1]
    oldest = await store.list_compactions("s", page_size=100, page_token="")
    assert [r.compaction_id for r in oldest.items] == landed
    tight = await store.list_compactions(
        "s", page_size=100, page_token="", newest_first=True, max_bytes=600
    )
    assert 1 <= len(tight.items) < 10
    assert tight.next_page_token


async def test_a_pause_lasts_until_the_policy_is_next_set(store: Store) -> None:
    await turns_session(store)
    await compact(store, "s", ["u1", "a1"])
    outcome = await store.restore("s", "", pause_auto_compaction=True)
    assert outcome.session.auto_compaction_paused
    relabelled = await store.update_session("s", labels={"k": "v"})
    assert relabelled.auto_compaction_paused
    await store.append("s", [u("u9")])
    assert (await store.get_session("s")).auto_compaction_paused
    updated = await store.update_session("s", policy_json=None, set_policy=True)
    assert not updated.auto_compaction_paused


async def test_a_search_hit_says_which_compaction_archived_it(store: Store) -> None:
    await seed(store, "s", [u("u1", "the order number is 88231"), a("a1"), u("u2", "and 88231")])
    landed = await compact(store, "s", ["u1", "a1"])
    found = await store.search(
        SearchQuery("88231", session_id="s", include_active=True), page_size=10, page_token=""
    )
    by_id = {h.event.id: h.archived_by for h in found.items}
    assert by_id == {"u1": landed.compaction_id, "u2": ""}


async def test_the_stable_prefix_is_what_the_last_change_left_and_appends_keep_it(
    store: Store,
) -> None:
    await turns_session(store)
    fresh = await store.get_session("s")
    assert (fresh.stable_prefix_tokens, fresh.stable_prefix_events) == (0, 0)
    landed = await compact(store, "s", ["u1", "a1"])
    left = landed.session
    assert (left.stable_prefix_tokens, left.stable_prefix_events) == (
        left.counters.tokens,
        len(await window(store)),
    )
    grown = (await store.append("s", [u("u9")])).session
    assert (grown.stable_prefix_tokens, grown.stable_prefix_events) == (
        left.stable_prefix_tokens,
        left.stable_prefix_events,
    )
    assert grown.last_compaction_id == left.last_compaction_id != fresh.last_compaction_id
    restored = (await store.restore("s", "")).session
    assert restored.stable_prefix_events == len(await window(store))
    assert restored.last_compaction_id not in (left.last_compaction_id, fresh.last_compaction_id)
    assert (await store.get_session("s")).stable_prefix_tokens == restored.counters.tokens


async def test_one_record_is_read_by_its_id_with_its_ids_whole(store: Store) -> None:
    await turns_session(store)
    landed = await compact(store, "s", ["u1", "a1"])
    record = await store.compaction_record("s", landed.compaction_id)
    assert record.compaction_id == landed.compaction_id
    assert record.archived_ids == ("u1", "a1")
    with pytest.raises(CompactionNotFound):
        await store.compaction_record("s", "absent")


async def test_a_records_loss_report_is_stored_and_read_back(store: Store) -> None:
    await turns_session(store)
    session = await store.get_session("s")
    plan = CompactionPlan(
        strategy="sliding_window",
        archive_ids=("u1", "a1"),
        base_compaction_id=session.last_compaction_id,
        identifiers_dropped=3,
        dropped_identifiers=("ZFA04Y", "src/app.py:42", "2024-05-20"),
    )
    landed = await store.apply("s", plan)
    history = await store.list_compactions("s", page_size=10, page_token="", newest_first=True)
    (record,) = history.items
    assert record.compaction_id == landed.compaction_id
    assert record.identifiers_dropped == 3
    assert record.dropped_identifiers == ("ZFA04Y", "src/app.py:42", "2024-05-20")
    outcome = await store.restore("s", "")
    restore_record, _ = (
        await store.list_compactions("s", page_size=10, page_token="", newest_first=True)
    ).items
    assert restore_record.compaction_id == outcome.restore_id
    assert (restore_record.identifiers_dropped, restore_record.dropped_identifiers) == (0, ())
