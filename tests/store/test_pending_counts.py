"""The Store contract for exact counts that land after the append (issue 37).

Every implementation (the ``store`` fixture runs each test once per store)
keeps an event's "not counted yet" state with its bounds, carries the
window's slack in the session's counters, and lands exact counts in a write
that changes no version, with counters that always equal the window's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.model import Event, Role, SessionCounters
from sidecar.store.protocol import Store
from tests.store.test_contract import a, compact, ids, seed, summary, u


def pending(event: Event, low: int, high: int) -> Event:
    """``event`` appended with its count pending: ``token_count`` is its estimate."""
    return event.evolve(token_bounds=(low, high))


async def assert_counters_are_the_windows(store: Store, session_id: str) -> SessionCounters:
    session, window = await store.active_window(session_id)
    expected = SessionCounters.of_window(window, session.counters.turns_since_compaction)
    assert session.counters == expected
    return session.counters


async def test_a_pending_event_keeps_its_bounds_and_the_counters_carry_its_slack(
    store: Store,
) -> None:
    await seed(store, "s", [u("u1", tokens=10), pending(a("a1", tokens=6), 2, 20)])
    session, window = await store.active_window("s")
    assert [e.token_bounds for e in window] == [None, (2, 20)]
    assert session.counters.tokens == 16
    assert (session.counters.tokens_low, session.counters.tokens_high) == (12, 30)
    assert not session.counters.tokens_exact
    page = await store.list_events("s", page_size=10, page_token="")
    assert [e.token_bounds for e in page.items] == [None, (2, 20)]
    assert ids((await store.pending_counts("s", 10))[1]) == ["a1"]
    await assert_counters_are_the_windows(store, "s")


async def test_landing_sets_the_exact_count_and_changes_no_version(store: Store) -> None:
    await seed(store, "s", [u("u1", tokens=10), pending(a("a1", tokens=6), 2, 20)])
    before = await store.get_session("s")
    landed = await store.land_counts("s", {"a1": 9})
    assert [(e.id, e.token_count, exact) for e, exact in landed.landed] == [("a1", 6, 9)]
    assert landed.session.version == before.version
    after = await store.get_session("s")
    assert (after.version, after.update_time) == (before.version, before.update_time)
    assert after.counters.tokens == 19
    assert after.counters.tokens_exact
    assert after == landed.session
    _, window = await store.active_window("s")
    assert [(e.token_count, e.token_bounds) for e in window] == [(10, None), (9, None)]
    assert (await store.pending_counts("s", 10))[1] == ()
    await assert_counters_are_the_windows(store, "s")


async def test_a_count_lands_once_and_unknown_ids_change_nothing(store: Store) -> None:
    await seed(store, "s", [pending(u("u1", tokens=3), 1, 8)])
    await store.land_counts("s", {"u1": 4})
    again = await store.land_counts("s", {"u1": 7, "nope": 1})
    assert again.landed == ()
    session = await store.get_session("s")
    assert session.counters.tokens == 4
    await assert_counters_are_the_windows(store, "s")


async def test_pending_counts_come_oldest_first_and_bounded(store: Store) -> None:
    events = [pending(u(f"u{i}", tokens=3), 1, 8) for i in range(5)]
    await seed(store, "s", events)
    assert ids((await store.pending_counts("s", 3))[1]) == ["u0", "u1", "u2"]
    await store.land_counts("s", {"u0": 2, "u2": 2})
    assert ids((await store.pending_counts("s", 10))[1]) == ["u1", "u3", "u4"]
    await assert_counters_are_the_windows(store, "s")


async def test_pending_counts_through_a_position_leave_the_later_ones(store: Store) -> None:
    events = [pending(u(f"u{i}", tokens=3), 1, 8) for i in range(4)]
    await seed(store, "s", [*events[:2], u("counted"), *events[2:]])
    assert ids((await store.pending_counts("s", 10, through=4))[1]) == ["u0", "u1", "u2"]
    assert ids((await store.pending_counts("s", 2, through=4))[1]) == ["u0", "u1"]
    assert ids((await store.pending_counts("s", 10, through=3))[1]) == ["u0", "u1"]
    assert ids((await store.pending_counts("s", 10, through=0))[1]) == []


async def test_a_retry_of_a_pending_event_is_answered_with_it_as_stored(store: Store) -> None:
    first = await seed(store, "s", [pending(u("u1", tokens=3), 1, 8)])
    await store.land_counts("s", {"u1": 2})
    retry = await seed(store, "s", [pending(u("u1", tokens=5), 1, 8)])
    assert retry.written == 0
    assert [(e.token_count, e.token_bounds) for e in retry.events] == [(2, None)]
    assert first.session.version == retry.session.version


async def test_compaction_beside_pending_events_keeps_the_counters_the_windows(
    store: Store,
) -> None:
    # Counted turns, then events appended while a summary was being written: pending.
    await seed(store, "s", [u("u1"), a("a1"), u("u2"), a("a2")])
    await seed(store, "s", [pending(u("u3", tokens=4), 1, 12), pending(a("a3", tokens=4), 1, 9)])
    await compact(store, "s", ["u1", "a1"], inserts=summary("x", "the gist"), before="u2")
    counters = await assert_counters_are_the_windows(store, "s")
    assert (counters.pending_below, counters.pending_above) == (6, 13)
    await store.land_counts("s", {"u3": 5, "a3": 2})
    counters = await assert_counters_are_the_windows(store, "s")
    assert counters.tokens_exact


async def test_a_restore_keeps_the_pending_slack(store: Store) -> None:
    await seed(store, "s", [u("u1"), a("a1"), u("u2")])
    await compact(store, "s", ["u1", "a1"])
    await seed(store, "s", [pending(a("a2", tokens=4), 1, 12)])
    await store.restore("s", "")
    counters = await assert_counters_are_the_windows(store, "s")
    assert (counters.pending_below, counters.pending_above) == (3, 8)
    await store.land_counts("s", {"a2": 3})
    await assert_counters_are_the_windows(store, "s")


async def test_landing_an_archived_events_count_leaves_the_window_as_it_was(
    store: Store,
) -> None:
    await seed(store, "s", [pending(u("u1", tokens=4), 1, 12), a("a1"), u("u2")])
    await compact(store, "s", ["u1", "a1"])
    before = await assert_counters_are_the_windows(store, "s")
    landed = await store.land_counts("s", {"u1": 3})
    assert [e.id for e, _ in landed.landed] == ["u1"]
    assert await assert_counters_are_the_windows(store, "s") == before
    log = await store.list_events("s", page_size=10, page_token="")
    assert [(e.id, e.token_count, e.token_bounds) for e in log.items][:1] == [("u1", 3, None)]


async def test_a_system_message_replaced_beside_pending_events_keeps_the_sum(
    store: Store,
) -> None:
    system = Event(id="s1", role=Role.SYSTEM, text="be brief", token_count=5)
    newer = Event(id="s2", role=Role.SYSTEM, text="be kind", token_count=7)
    events: Sequence[Event] = [system, pending(u("u1", tokens=4), 1, 12), newer]
    await seed(store, "s", events)
    counters = await assert_counters_are_the_windows(store, "s")
    assert (counters.tokens, counters.system_tokens) == (11, 7)
    await store.land_counts("s", {"u1": 6})
    counters = await assert_counters_are_the_windows(store, "s")
    assert counters.tokens == 13


async def test_counts_of_a_deleted_session_do_not_land_on_its_successor(store: Store) -> None:
    """Counts made of a session that was deleted since, and created again under its id
    with the same event ids, are of other content: nothing lands, the new events stay
    pending for counts of their own."""
    await seed(store, "s", [pending(u("u1", "an old and much longer question", tokens=3), 1, 30)])
    old, counted = await store.pending_counts("s", 10)
    assert ids(counted) == ["u1"]
    await store.delete_session("s")
    await seed(store, "s", [pending(u("u1", "new", tokens=2), 1, 8)])
    landed = await store.land_counts("s", {"u1": 25}, incarnation=old.incarnation)
    assert landed.landed == ()
    now, still = await store.pending_counts("s", 10)
    assert now.incarnation != old.incarnation
    assert [(e.id, e.token_bounds) for e in still] == [("u1", (1, 8))]
    await assert_counters_are_the_windows(store, "s")
    # Counts of the session as it is land.
    fresh = await store.land_counts("s", {"u1": 1}, incarnation=now.incarnation)
    assert [exact for _, exact in fresh.landed] == [1]
