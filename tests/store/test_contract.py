"""The Store contract: what every implementation must do, written only against the protocol.

The ``store`` fixture (conftest.py) runs each test once per implementation.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.window import apply_plan
from sidecar.errors import (
    EventConflict,
    InvalidArgument,
    LimitExceeded,
    SessionExists,
    SessionNotFound,
    VersionConflict,
)
from sidecar.model import (
    CompactionPlan,
    Event,
    LabelUpdate,
    Part,
    Reasoning,
    Role,
    Session,
    SessionCounters,
    ToolCall,
    ToolResult,
    UsageReport,
)
from sidecar.store.paging import encode_token, fingerprint
from sidecar.store.protocol import (
    AppendOutcome,
    ApplyOutcome,
    CompactionRecord,
    PlainAppend,
    SearchQuery,
    SessionFilter,
    Store,
)

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def u(id: str, text: str = "hi", *, tokens: int = 10, at: int = 0) -> Event:
    return Event(
        id=id, role=Role.USER, text=text, token_count=tokens, create_time=T0 + timedelta(hours=at)
    )


def a(
    id: str, text: str = "ok", *, calls: Iterable[ToolCall] = (), tokens: int = 10, at: int = 0
) -> Event:
    return Event(
        id=id,
        role=Role.ASSISTANT,
        text=text,
        tool_calls=tuple(calls),
        token_count=tokens,
        create_time=T0 + timedelta(hours=at),
    )


def t(id: str, *results: ToolResult, tokens: int = 10, at: int = 0) -> Event:
    return Event(
        id=id,
        role=Role.TOOL,
        tool_results=results,
        token_count=tokens,
        create_time=T0 + timedelta(hours=at),
    )


def s(id: str, text: str = "be brief", *, tokens: int = 10) -> Event:
    return Event(id=id, role=Role.SYSTEM, text=text, token_count=tokens)


def summary(id: str, text: str, *, tokens: int = 5) -> tuple[Event, Event]:
    """A summary pair as the summarizing strategy writes it: shadow prompt, then the summary."""
    return (
        Event(id=f"{id}-q", role=Role.USER, text="Summarize", synthetic=True, token_count=tokens),
        Event(id=f"{id}-a", role=Role.ASSISTANT, text=text, synthetic=True, token_count=tokens),
    )


def ids(events: Iterable[Event]) -> list[str]:
    return [e.id for e in events]


async def seed(store: Store, session_id: str, events: Sequence[Event]) -> AppendOutcome:
    return await store.append(session_id, events, create_if_missing=True)


async def compact(
    store: Store,
    session_id: str,
    archive: Sequence[str],
    *,
    inserts: Sequence[Event] = (),
    before: str | None = None,
    base: str | None = None,
) -> ApplyOutcome:
    """Apply a hand-built plan based on the session's latest compaction unless told otherwise."""
    if base is None:
        base = (await store.get_session(session_id)).last_compaction_id
    plan = CompactionPlan(
        strategy="test",
        archive_ids=tuple(archive),
        inserts=tuple(inserts),
        insert_before=before,
        tokens_estimated_saved=7,
        base_compaction_id=base,
        summary_input_tokens=100,
        summary_output_tokens=20,
        summarizer_latency_ms=12.5,
    )
    return await store.apply(session_id, plan)


async def whole_log(
    store: Store, session_id: str, *, page_size: int, include_archived: bool = True
) -> list[Event]:
    events: list[Event] = []
    token = ""
    while True:
        page = await store.list_events(
            session_id, page_size=page_size, page_token=token, include_archived=include_archived
        )
        assert len(page.items) <= max(page_size, 1)
        events += page.items
        token = page.next_page_token
        if not token:
            return events


def conversation() -> list[Event]:
    return [
        s("sys"),
        u("u1", "first question"),
        a("a1", "first answer"),
        u("u2", "second question"),
        a("a2", "second answer"),
        u("u3", "third question"),
        a("a3", "third answer"),
    ]


# -- sessions -----------------------------------------------------------------


async def test_created_session_is_empty_at_version_1(store: Store) -> None:
    created = await store.create_session("s", policy_json='{"x": 1}', labels={"team": "a"})
    got = await store.get_session("s")
    assert got == created
    assert got.version == 1
    assert got.policy_json == '{"x": 1}'
    assert dict(got.labels) == {"team": "a"}
    assert got.counters == SessionCounters()
    assert got.total_events == 0
    assert got.last_compaction_id == ""
    assert (await store.active_window("s"))[1] == ()


async def test_creating_a_taken_id_raises_session_exists(store: Store) -> None:
    await store.create_session("s", policy_json=None, labels={})
    with pytest.raises(SessionExists):
        await store.create_session("s", policy_json=None, labels={})


async def test_absent_session_raises_not_found_everywhere(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        await store.get_session("nope")
    with pytest.raises(SessionNotFound):
        await store.active_window("nope")
    with pytest.raises(SessionNotFound):
        await store.append("nope", [u("u1")])
    with pytest.raises(SessionNotFound):
        await store.list_events("nope", page_size=10, page_token="")
    with pytest.raises(SessionNotFound):
        await store.list_compactions("nope", page_size=10, page_token="")
    with pytest.raises(SessionNotFound):
        await store.update_session("nope", labels={})
    with pytest.raises(SessionNotFound):
        await store.delete_session("nope")
    with pytest.raises(SessionNotFound):
        await compact(store, "nope", ["x"], base="")


async def test_update_session_replaces_policy_and_labels_and_bumps_version(store: Store) -> None:
    await store.create_session("s", policy_json="p1", labels={"a": "1"})
    only_labels = await store.update_session("s", labels={"b": "2"})
    assert (only_labels.version, only_labels.policy_json) == (2, "p1")
    assert dict(only_labels.labels) == {"b": "2"}
    cleared = await store.update_session("s", policy_json=None, set_policy=True, expected_version=2)
    assert (cleared.version, cleared.policy_json) == (3, None)
    assert await store.get_session("s") == cleared
    with pytest.raises(VersionConflict) as info:
        await store.update_session("s", labels={}, expected_version=2)
    assert info.value.current_version == 3


async def test_update_asking_for_no_change_writes_nothing(store: Store) -> None:
    await store.create_session("s", policy_json="p", labels={})
    assert (await store.update_session("s")).version == 1


async def test_the_session_model_is_stored_and_changed_only_when_named(store: Store) -> None:
    created = await store.create_session("s", policy_json="p", labels={}, model="gemini-2.5-flash")
    assert created.model == "gemini-2.5-flash"
    assert (await store.get_session("s")).model == "gemini-2.5-flash"
    relabelled = await store.update_session("s", labels={"a": "1"})
    assert relabelled.model == "gemini-2.5-flash"
    moved = await store.update_session("s", model="claude-sonnet-4-5", expected_version=2)
    assert (moved.version, moved.model, moved.policy_json) == (3, "claude-sonnet-4-5", "p")
    assert await store.get_session("s") == moved
    assert (await store.update_session("s", model="")).model == ""


def report(session: Session, ratio: float, version: int | None = None) -> UsageReport:
    """A usage report of ``ratio`` for the context of ``session``'s version (or ``version``)."""
    return UsageReport(ratio, session.version if version is None else version, session.incarnation)


async def test_a_usage_report_calibrates_in_the_append_that_carries_it(store: Store) -> None:
    created = await store.create_session("s", policy_json=None, labels={})
    first = await store.append("s", [u("u1")], usage=report(created, 1.5))
    assert (first.session.calibration.factor, first.session.calibration.samples) == (1.5, 1)
    assert first.usage_counted
    # A retry writes nothing, so its report is not counted twice.
    again = await store.append("s", [u("u1")], usage=report(created, 1.5))
    assert again.session.calibration.samples == 1
    assert not again.usage_counted
    second = await store.append("s", [u("u2")], usage=report(first.session, 0.5))
    assert second.session.calibration.samples == 2
    assert second.session.calibration.factor == pytest.approx(1.0)
    # Bounded: one absurd report moves the factor to at most 4.
    third = await store.append("s", [u("u3")], usage=report(second.session, 1000.0))
    assert third.session.calibration.factor == pytest.approx(1.0 + (4.0 - 1.0) / 3)
    assert (await store.get_session("s")).calibration == third.session.calibration
    # A refused append takes nothing in.
    with pytest.raises(VersionConflict):
        await store.append("s", [u("u4")], expected_version=1, usage=report(third.session, 2.0))
    assert (await store.get_session("s")).calibration == third.session.calibration


async def test_a_report_of_another_incarnation_or_an_unreached_version_is_not_counted(
    store: Store,
) -> None:
    created = await store.create_session("s", policy_json=None, labels={})
    old = created
    for n in range(5):
        old = (await store.append("s", [u(f"u{n}")])).session
    await store.delete_session("s")
    again = await store.create_session("s", policy_json=None, labels={})
    assert again.incarnation != old.incarnation
    stale = await store.append("s", [u("v1")], usage=report(old, 0.25))  # the deleted one's
    assert not stale.usage_counted
    assert stale.session.calibration.samples == 0
    ahead = await store.append("s", [u("v2")], usage=report(stale.session, 0.25, version=99))
    assert not ahead.usage_counted
    assert (await store.get_session("s")).calibration.factor == 1.0


async def test_another_model_starts_the_calibration_anew(store: Store) -> None:
    created = await store.create_session("s", policy_json=None, labels={}, model="gpt-4o")
    first = await store.append("s", [u("u1")], usage=report(created, 2.0))
    assert first.session.calibration.factor == 2.0
    same = await store.update_session("s", model="gpt-4o")
    assert same.calibration.factor == 2.0  # the same model: the factor holds
    moved = await store.update_session("s", model="claude-sonnet-4-5")
    assert (moved.calibration.factor, moved.calibration.samples) == (1.0, 0)
    assert (await store.get_session("s")).calibration == moved.calibration


async def test_list_sessions_in_id_order_filtered_by_every_label_pair(store: Store) -> None:
    for n in range(7):
        labels = {"team": "red" if n % 2 else "blue", "env": "prod" if n < 4 else "dev"}
        await store.create_session(f"s{n}", policy_json=None, labels=labels)
    everything = await store.list_sessions(SessionFilter(), page_size=0, page_token="")
    assert [x.session_id for x in everything.items] == [f"s{n}" for n in range(7)]
    assert everything.next_page_token == ""

    red_prod = SessionFilter(labels={"team": "red", "env": "prod"})
    seen: list[str] = []
    token = ""
    while True:
        page = await store.list_sessions(red_prod, page_size=1, page_token=token)
        seen += [x.session_id for x in page.items]
        token = page.next_page_token
        if not token:
            break
    assert seen == ["s1", "s3"]
    none = await store.list_sessions(
        SessionFilter(labels={"team": "green"}), page_size=10, page_token=""
    )
    assert none.items == ()


async def test_delete_session_removes_log_compactions_and_search_rows(store: Store) -> None:
    await seed(store, "gone", [u("u1", "zebra crossing"), a("a1"), u("u2"), a("a2")])
    await compact(store, "gone", ["u1", "a1"])
    await seed(store, "kept", [u("k1", "zebra kept")])
    await store.delete_session("gone")

    with pytest.raises(SessionNotFound):
        await store.get_session("gone")
    sessions = await store.list_sessions(SessionFilter(), page_size=10, page_token="")
    assert [x.session_id for x in sessions.items] == ["kept"]
    hits = await store.search(
        SearchQuery("zebra", include_active=True), page_size=10, page_token=""
    )
    assert [h.session_id for h in hits.items] == ["kept"]
    # The id is free again, with an empty log and no audit trail.
    await store.create_session("gone", policy_json=None, labels={})
    assert (await whole_log(store, "gone", page_size=10)) == []
    assert (await store.list_compactions("gone", page_size=10, page_token="")).items == ()


# -- append -------------------------------------------------------------------


async def test_append_assigns_dense_positions_and_one_version_per_batch(store: Store) -> None:
    await store.create_session("s", policy_json=None, labels={})
    first = await store.append("s", [u("u1"), a("a1")])
    second = await store.append("s", [u("u2")])
    assert [e.position for e in first.events + second.events] == [1, 2, 3]
    assert (first.session.version, second.session.version) == (2, 3)
    assert (first.written, second.written) == (2, 1)
    assert second.session.total_events == 3
    session, window = await store.active_window("s")
    assert session == second.session
    assert ids(window) == ["u1", "a1", "u2"]


async def test_append_stores_content_and_create_time_as_given(store: Store) -> None:
    rich = Event(
        id="rich",
        role=Role.ASSISTANT,
        text="voilà 東京 🚀",
        tool_calls=(ToolCall("c1", "search", '{"q": "a \\"quoted\\" word"}'),),
        tool_results=(ToolResult("c0", "lookup", "found", is_error=True),),
        parts=(Part("image/png", b"\x00\x01\xff"), Part("text/uri-list", uri="gs://b/o")),
        author="planner",
        branch="root.planner",
        metadata={"trace": "t-1", "empty": ""},
        create_time=datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        token_count=42,
    )
    stored = (await seed(store, "s", [rich])).events[0]
    _, (read,) = await store.active_window("s")
    for event in (stored, read):
        assert event.same_payload(rich)
        assert event.create_time == rich.create_time
        assert (event.position, event.token_count, event.synthetic, event.archived) == (
            1,
            42,
            False,
            False,
        )


async def test_reasoning_and_signatures_round_trip_byte_for_byte(store: Store) -> None:
    # Every byte value, and a signature that is not valid UTF-8: providers' tokens are opaque.
    signature = bytes(range(256)) * 3
    thinking = Event(
        id="a1",
        role=Role.ASSISTANT,
        text="checking the disk",
        reasoning=(
            Reasoning("The user wants df; 東京 first.", signature[:40], id="rs_1"),
            Reasoning("", signature, redacted=True),
            Reasoning("", b"\xff\x00only-a-signature"),
        ),
        tool_calls=(
            ToolCall("c1", "df", '{"h":true}', signature=b"\x00sig\xfe"),
            ToolCall("c2", "du", "{}"),
        ),
        token_count=7,
    )
    stored = (await seed(store, "s", [u("u1"), thinking])).events[1]
    _, window = await store.active_window("s")
    listed = await store.list_events("s", page_size=10, page_token="")
    for event in (stored, window[1], listed.items[1]):
        assert event.reasoning == thinking.reasoning
        assert event.tool_calls == thinking.tool_calls
        assert event.same_payload(thinking)
    # A retry with the reasoning altered is another payload, not the same event.
    assert not thinking.evolve(reasoning=thinking.reasoning[:1]).same_payload(thinking)


async def test_text_holding_nul_and_control_characters_round_trips_and_is_searchable(
    store: Store,
) -> None:
    odd = "before\x00after \x01\x1f tab\t line\nend \u2028 \ufeff"
    tool = ToolResult("c1", "cat", "binary\x00junk keyword")
    await seed(
        store, "s", [u("u1", odd), a("a1", calls=[ToolCall("c1", "cat", "{}")]), t("t1", tool)]
    )
    _, window = await store.active_window("s")
    assert window[0].text == odd
    assert window[2].tool_results == (tool,)
    await compact(store, "s", ["u1", "a1", "t1"])
    found = await store.search(SearchQuery("keyword"), page_size=10, page_token="")
    assert [h.event.id for h in found.items] == ["t1"]


async def test_a_one_megabyte_event_stores_whole_and_its_start_is_searchable(store: Store) -> None:
    words = " ".join(f"w{n}" for n in range(200_000))  # ~1.3 MB of distinct words
    big = a("big", "needle " + words)
    await seed(store, "s", [u("u1"), big, u("u2")])
    await compact(store, "s", ["u1", "big"])
    (read,) = [e for e in await whole_log(store, "s", page_size=10) if e.id == "big"]
    assert read.text == big.text
    found = await store.search(SearchQuery("needle"), page_size=10, page_token="")
    assert [h.event.id for h in found.items] == ["big"]


async def test_append_to_absent_session_creates_it_only_when_asked(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        await store.append("s", [u("u1")])
    outcome = await store.append("s", [u("u1")], create_if_missing=True, policy_json="p")
    # Creation and the first batch are one write.
    assert outcome.session.version == 1
    assert outcome.session.policy_json == "p"
    assert await store.get_session("s") == outcome.session


async def test_retry_returns_stored_events_and_writes_nothing(store: Store) -> None:
    first = await seed(store, "s", [u("u1"), a("a1")])
    retry_of_u1 = u("u1").evolve(create_time=T0 + timedelta(days=1))
    again = await store.append("s", [retry_of_u1, a("a1")], expected_version=0)
    assert again.events == first.events
    assert again.written == 0
    assert again.session.version == first.session.version
    assert await store.get_session("s") == first.session


async def test_partial_retry_writes_only_the_new_events(store: Store) -> None:
    await seed(store, "s", [u("u1")])
    outcome = await store.append("s", [u("u1"), a("a1")], expected_version=1)
    assert [(e.id, e.position) for e in outcome.events] == [("u1", 1), ("a1", 2)]
    assert (outcome.written, outcome.session.version) == (1, 2)


async def test_conflicting_payload_raises_and_writes_nothing_of_the_batch(store: Store) -> None:
    before = (await seed(store, "s", [u("u1", "original")])).session
    with pytest.raises(EventConflict) as info:
        await store.append("s", [a("a1"), u("u1", "changed")])
    assert info.value.event_id == "u1"
    session, window = await store.active_window("s")
    assert session == before
    assert ids(window) == ["u1"]


async def test_append_many_stores_each_as_append_would_and_fails_each_alone(
    store: Store,
) -> None:
    await seed(store, "kept", [u("u1", "original")])
    await seed(store, "retried", [u("r1")])
    outcomes = await store.append_many(
        [
            PlainAppend("new", (u("n1"), a("n2")), create_if_missing=True),
            PlainAppend("absent", (u("x1"),)),
            PlainAppend("kept", (a("a1"), u("u1", "changed"))),
            PlainAppend("retried", (u("r1"), a("r2"))),
        ],
        policy_json="p",
    )
    new, absent, conflict, retried = outcomes
    assert isinstance(new, AppendOutcome)
    assert [(e.id, e.position) for e in new.events] == [("n1", 1), ("n2", 2)]
    assert (new.written, new.session.version, new.session.policy_json) == (2, 1, "p")
    assert isinstance(absent, SessionNotFound)
    assert isinstance(conflict, EventConflict)
    assert conflict.event_id == "u1"
    assert isinstance(retried, AppendOutcome)
    assert (retried.written, retried.session.version) == (1, 2)
    # What failed stored nothing; what succeeded is stored whole.
    with pytest.raises(SessionNotFound):
        await store.get_session("absent")
    kept, window = await store.active_window("kept")
    assert (kept.version, ids(window)) == (1, ["u1"])
    assert ids((await store.active_window("new"))[1]) == ["n1", "n2"]
    assert await store.get_session("new") == new.session
    assert ids((await store.active_window("retried"))[1]) == ["r1", "r2"]
    # A second call is a retry of each: nothing new is written.
    again = await store.append_many([PlainAppend("new", (u("n1"), a("n2")))])
    assert isinstance(again[0], AppendOutcome)
    assert (again[0].written, again[0].events) == (0, new.events)


async def test_append_many_over_many_sessions_keeps_each_sessions_counters(store: Store) -> None:
    appends = [
        PlainAppend(f"s{n}", (u(f"u{n}", tokens=n), a(f"a{n}", tokens=1)), create_if_missing=True)
        for n in range(40)
    ]
    outcomes = await store.append_many(appends)
    for n, outcome in enumerate(outcomes):
        assert isinstance(outcome, AppendOutcome)
        session = await store.get_session(f"s{n}")
        assert session == outcome.session
        assert (session.counters.tokens, session.counters.active_events) == (n + 1, 2)
    hits = await store.search(
        SearchQuery("hi", session_id="s7", include_active=True), page_size=10, page_token=""
    )
    assert [hit.event.id for hit in hits.items] == ["u7"]


async def test_duplicates_within_a_batch_follow_the_retry_rule(store: Store) -> None:
    await store.create_session("s", policy_json=None, labels={})
    outcome = await store.append("s", [u("u1"), a("a1"), u("u1")])
    assert ids(outcome.events) == ["u1", "a1", "u1"]
    assert outcome.events[0] == outcome.events[2]
    assert outcome.written == 2
    with pytest.raises(EventConflict):
        await store.append("s", [u("u2"), u("u2", "other")])
    assert ids((await store.active_window("s"))[1]) == ["u1", "a1"]


async def test_expected_version_mismatch_raises_and_writes_nothing(store: Store) -> None:
    await seed(store, "s", [u("u1")])
    with pytest.raises(VersionConflict) as info:
        await store.append("s", [a("a1")], expected_version=0)
    assert info.value.current_version == 1
    assert ids((await store.active_window("s"))[1]) == ["u1"]
    assert (await store.append("s", [a("a1")], expected_version=1)).session.version == 2
    with pytest.raises(VersionConflict):
        await store.append("new", [u("x")], create_if_missing=True, expected_version=3)


async def test_label_updates_land_with_the_append_on_this_and_other_sessions(
    store: Store,
) -> None:
    await store.create_session("s", policy_json=None, labels={"keep": "1", "old": "x"})
    await store.create_session("holder", policy_json=None, labels={"a": "1"})
    outcome = await store.append(
        "s",
        [u("u1")],
        label_updates=[
            LabelUpdate(set={"state": "v1"}, remove=("old",)),
            LabelUpdate(session_id="holder", set={"b": "2"}, expected_version=1),
            LabelUpdate(session_id="fresh", set={"c": "3"}),
        ],
    )
    assert outcome.session.labels == {"keep": "1", "state": "v1"}
    assert outcome.session.version == 2
    assert (await store.get_session("s")).labels == {"keep": "1", "state": "v1"}
    holder = await store.get_session("holder")
    assert (holder.labels, holder.version) == ({"a": "1", "b": "2"}, 2)
    fresh = await store.get_session("fresh")
    assert (fresh.labels, fresh.version, fresh.policy_json) == ({"c": "3"}, 1, None)
    assert ids((await store.active_window("fresh"))[1]) == []


async def test_a_refused_label_update_refuses_the_whole_append(store: Store) -> None:
    before = (await seed(store, "s", [u("u1")])).session
    await store.create_session("holder", policy_json=None, labels={"a": "1"})
    stale = LabelUpdate(session_id="holder", set={"a": "2"}, expected_version=7)
    with pytest.raises(VersionConflict) as info:
        await store.append("s", [a("a1")], label_updates=[LabelUpdate(set={"x": "1"}), stale])
    assert info.value.current_version == 1
    too_many = LabelUpdate(session_id="holder", set={f"k{i}": "v" for i in range(4)})
    with pytest.raises(LimitExceeded):
        await store.append("s", [a("a1")], label_updates=[too_many], max_labels=4)
    with pytest.raises(VersionConflict):  # an absent session is at version 0
        await store.append("s", [a("a1")], label_updates=[LabelUpdate("nobody", {"x": "1"}, (), 1)])
    assert await store.get_session("s") == before
    assert ids((await store.active_window("s"))[1]) == ["u1"]
    holder = await store.get_session("holder")
    assert (holder.labels, holder.version) == ({"a": "1"}, 1)
    with pytest.raises(SessionNotFound):
        await store.get_session("nobody")


async def test_appends_updating_each_others_labels_at_once_all_land(store: Store) -> None:
    # A appends and updates B while B appends and updates A: one lock order, no deadlock.
    await store.create_session("A", policy_json=None, labels={})
    await store.create_session("B", policy_json=None, labels={})

    async def append(own: str, other: str, n: int) -> None:
        update = LabelUpdate(session_id=other, set={f"from-{own}": str(n)})
        await store.append(own, [u(f"{own}{n}")], label_updates=[update])

    for n in range(5):
        await asyncio.gather(*(append(o, t, 3 * n + i) for i in range(3) for o, t in ("AB", "BA")))
    assert len((await store.active_window("A"))[1]) == 15
    assert (await store.get_session("A")).labels["from-B"] in {"12", "13", "14"}


async def test_a_retried_append_writes_no_label_update(store: Store) -> None:
    first = await seed(store, "s", [u("u1")])
    again = await store.append(
        "s", [u("u1")], label_updates=[LabelUpdate(set={"x": "1"}), LabelUpdate("h", {"y": "1"})]
    )
    assert again.written == 0
    assert await store.get_session("s") == first.session
    with pytest.raises(SessionNotFound):
        await store.get_session("h")


async def test_counters_stay_exact_over_appends(store: Store) -> None:
    batches = [
        [s("sys1", tokens=30), u("u1", tokens=4)],
        [a("a1", calls=[ToolCall("c1", "f")], tokens=6), t("t1", ToolResult("c1", "f", "r"))],
        [s("sys2", tokens=50)],  # replaces the first system message in the token count
        [u("u2", tokens=3), a("a2", tokens=8)],
    ]
    for batch in batches:
        outcome = await seed(store, "s", batch)
        session, window = await store.active_window("s")
        assert outcome.session.counters == session.counters == SessionCounters.of_window(window)
    assert session.counters.tokens == 50 + 4 + 6 + 10 + 3 + 8
    assert (session.counters.turns, session.counters.real_events) == (2, 5)


# -- apply --------------------------------------------------------------------


async def test_apply_archives_in_place_and_inserts_the_summary_before_the_kept_window(
    store: Store,
) -> None:
    await seed(store, "s", conversation())
    session, window = await store.active_window("s")
    pair = summary("sum1", "they asked twice")
    plan = CompactionPlan(
        strategy="test",
        archive_ids=("u1", "a1", "u2", "a2"),
        inserts=pair,
        insert_before="u3",
        base_compaction_id=session.last_compaction_id,
    )
    outcome = await store.apply("s", plan)
    after, active = await store.active_window("s")

    expected = apply_plan(window, plan)
    assert ids(active) == ids(expected.active_events)
    assert ids(active) == ["sys", "sum1-q", "sum1-a", "u3", "a3"]
    assert ids(outcome.archived) == ["u1", "a1", "u2", "a2"]
    assert all(e.archived for e in outcome.archived)
    assert all(e.synthetic for e in active[1:3])
    assert [e.position for e in active[1:3]] == [8, 9]
    assert outcome.session.version == session.version + 1
    assert outcome.session.last_compaction_id == outcome.compaction_id != ""
    assert outcome.session.total_events == 9
    assert outcome.session.counters == SessionCounters.after_compaction(active)
    assert after == outcome.session

    log = await whole_log(store, "s", page_size=100)
    assert ids(log) == ["sys", "u1", "a1", "u2", "a2", "sum1-q", "sum1-a", "u3", "a3"]
    assert [e.archived for e in log] == [False, True, True, True, True, False, False, False, False]


async def test_apply_lands_when_events_were_appended_after_the_plan(store: Store) -> None:
    await seed(store, "s", conversation())
    session, window = await store.active_window("s")
    plan = CompactionPlan(
        strategy="test",
        archive_ids=("u1", "a1", "u2", "a2"),
        inserts=summary("sum1", "early talk"),
        insert_before="u3",
        base_compaction_id=session.last_compaction_id,
    )
    late = await store.append("s", [u("u4"), a("a4")])  # arrive while the summarizer runs
    outcome = await store.apply("s", plan)
    _, active = await store.active_window("s")
    assert ids(active) == ["sys", "sum1-q", "sum1-a", "u3", "a3", "u4", "a4"]
    assert ids(active) == ids(apply_plan(window + late.events, plan).active_events)
    assert outcome.session.counters == SessionCounters.after_compaction(active)

    # The next compaction folds the previous summary; the new pair lands before u4.
    await compact(
        store,
        "s",
        ["sum1-q", "sum1-a", "u3", "a3"],
        inserts=summary("sum2", "all earlier talk"),
        before="u4",
    )
    _, second_active = await store.active_window("s")
    assert ids(second_active) == ["sys", "sum2-q", "sum2-a", "u4", "a4"]
    log = await whole_log(store, "s", page_size=3)
    assert ids(log) == [
        *["sys", "u1", "a1", "u2", "a2", "sum1-q", "sum1-a", "u3", "a3"],
        *["sum2-q", "sum2-a", "u4", "a4"],
    ]
    assert sorted(e.position for e in log) == list(range(1, 14))

    after = await store.append("s", [u("u5")])
    assert after.session.counters == SessionCounters.after_compaction(second_active).after_append(
        after.events[0]
    )


async def test_sliding_window_plan_lands_like_the_in_memory_reference(store: Store) -> None:
    await seed(store, "s", conversation())
    _, window = await store.active_window("s")
    plan = SlidingWindow(max_events=2).plan(window)
    outcome = await store.apply("s", plan)
    _, active = await store.active_window("s")
    expected = apply_plan(window, plan)
    assert ids(active) == ids(expected.active_events) == ["sys", "u3", "a3"]
    assert ids(outcome.archived) == ids(expected.archived_events)
    assert outcome.session.counters == SessionCounters.after_compaction(active)


async def test_apply_is_rejected_when_another_compaction_landed(store: Store) -> None:
    await seed(store, "s", conversation())
    await compact(store, "s", ["u1", "a1"], base="")
    before = await store.get_session("s")
    with pytest.raises(VersionConflict) as info:
        await compact(store, "s", ["u2", "a2"], base="")
    assert info.value.current_version == before.version
    assert await store.get_session("s") == before


async def test_apply_is_rejected_when_the_session_was_deleted_and_created_again(
    store: Store,
) -> None:
    """A plan made on a session that was deleted since, and created again under its id
    with the same event ids, is stale: nothing of the deleted session lands."""
    await seed(store, "s", conversation())
    old = await store.get_session("s")
    await store.delete_session("s")
    await seed(store, "s", conversation())
    before = await store.get_session("s")
    assert before.last_compaction_id == old.last_compaction_id == ""
    plan = CompactionPlan(
        strategy="test",
        archive_ids=("u1", "a1"),
        base_compaction_id=old.last_compaction_id,
        base_incarnation=old.incarnation,
    )
    with pytest.raises(VersionConflict) as info:
        await store.apply("s", plan)
    assert info.value.current_version == before.version
    assert await store.get_session("s") == before
    assert ids((await store.active_window("s"))[1]) == ids(conversation())
    # The same plan made on the new session lands.
    fresh = replace(plan, base_incarnation=before.incarnation)
    assert ids((await store.apply("s", fresh)).archived) == ["u1", "a1"]


async def test_apply_is_rejected_when_an_archived_event_is_no_longer_active(store: Store) -> None:
    await seed(store, "s", conversation())
    first = await compact(store, "s", ["u1", "a1"])
    with pytest.raises(VersionConflict):
        await compact(store, "s", ["a1", "u2"], base=first.compaction_id)
    with pytest.raises(VersionConflict):
        await compact(store, "s", ["ghost"])
    with pytest.raises(VersionConflict):
        await compact(store, "s", ["u2"], inserts=summary("x", "y"), before="u1")
    assert ids((await store.active_window("s"))[1]) == ["sys", "u2", "a2", "u3", "a3"]


async def test_apply_is_rejected_when_insert_before_is_no_longer_active(store: Store) -> None:
    await seed(store, "s", conversation())
    first = await compact(store, "s", ["u1", "a1"])
    with pytest.raises(VersionConflict):
        await compact(store, "s", ["u2"], before="a1", base=first.compaction_id)
    assert (await store.get_session("s")) == first.session


async def test_apply_refuses_plans_it_cannot_place(store: Store) -> None:
    await seed(store, "s", conversation())
    with pytest.raises(ValueError, match="empty"):
        await store.apply("s", CompactionPlan(strategy="test"))
    with pytest.raises(ValueError, match="before"):
        await compact(store, "s", ["u1"], inserts=summary("m", "x"))
    with pytest.raises(EventConflict):
        await compact(store, "s", ["u1"], inserts=(a("u2"),), before="u3")
    assert (await store.get_session("s")).version == 1


async def test_list_compactions_is_the_audit_trail_oldest_first(store: Store) -> None:
    await seed(store, "s", conversation())
    first = await compact(store, "s", ["u1", "a1"], inserts=summary("m", "x"), before="u2")
    second = await compact(store, "s", ["m-q", "m-a", "u2", "a2"])
    records: list[CompactionRecord] = []
    token = ""
    while True:
        page = await store.list_compactions("s", page_size=1, page_token=token)
        records += page.items
        token = page.next_page_token
        if not token:
            break
    assert [r.compaction_id for r in records] == [first.compaction_id, second.compaction_id]
    one = records[0]
    assert (one.session_id, one.strategy, one.version_before, one.version_after) == (
        "s",
        "test",
        1,
        2,
    )
    assert one.archived_ids == ("u1", "a1")
    assert one.inserted_ids == ("m-q", "m-a")
    assert (one.tokens_saved, one.summary_input_tokens, one.summary_output_tokens) == (7, 100, 20)
    assert one.summarizer_latency_ms == 12.5
    assert records[1].archived_ids == ("m-q", "m-a", "u2", "a2")  # log order


# -- list_events ----------------------------------------------------------------


@pytest.mark.parametrize("page_size", [1, 2, 3, 1000])
async def test_list_events_walks_the_whole_log_in_order(store: Store, page_size: int) -> None:
    await seed(store, "s", conversation())
    await compact(store, "s", ["u1", "a1", "u2", "a2"], inserts=summary("m", "x"), before="u3")
    await seed(store, "s", [u("u4"), a("a4")])
    expected = ["sys", "u1", "a1", "u2", "a2", "m-q", "m-a", "u3", "a3", "u4", "a4"]
    log = await whole_log(store, "s", page_size=page_size)
    assert ids(log) == expected
    active = await whole_log(store, "s", page_size=page_size, include_archived=False)
    assert ids(active) == ids((await store.active_window("s"))[1])


async def test_page_size_zero_means_a_default_page(store: Store) -> None:
    await seed(store, "s", conversation())
    page = await store.list_events("s", page_size=0, page_token="")
    assert len(page.items) == 7
    assert page.next_page_token == ""


async def test_list_events_pages_are_bounded_in_bytes_and_lose_nothing(store: Store) -> None:
    sizes = [30_000, 5_000, 120_000, 40_000, 40_000, 10, 70_000, 30_000]
    await seed(store, "s", [u(f"e{n}", "x" * size) for n, size in enumerate(sizes)])
    pages: list[list[str]] = []
    token = ""
    while True:
        page = await store.list_events("s", page_size=1000, page_token=token, max_bytes=100_000)
        assert page.items, "a page holds at least one event"
        content = sum(e.content_bytes() for e in page.items)
        assert len(page.items) == 1 or content <= 100_000
        pages.append(ids(page.items))
        token = page.next_page_token
        if not token:
            break
    assert pages == [["e0", "e1"], ["e2"], ["e3", "e4", "e5"], ["e6"], ["e7"]]


async def test_a_page_cut_short_by_bytes_reads_only_the_events_it_holds(store: Store) -> None:
    """100 events of 90 KB, a page of up to 1,000 within 200 KB: two events are read.

    The store used to fetch and decode every event the page size allowed (9 MB
    here, up to a GB with 1 MiB events) and then keep the two that fit.
    """
    for start in range(0, 100, 10):
        await seed(store, "big", [u(f"b{n}", "y" * 90_000) for n in range(start, start + 10)])
    tracemalloc.start()
    try:
        page = await store.list_events("big", page_size=1000, page_token="", max_bytes=200_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ids(page.items) == ["b0", "b1"]
    assert page.next_page_token
    assert peak < 3_000_000, f"{peak:,} bytes held to answer two events of 90 KB"


async def test_a_bad_page_token_is_an_invalid_argument(store: Store) -> None:
    await seed(store, "s", conversation())
    await seed(store, "t", conversation())
    for bad in ["garbage", "!!!", "e30"]:
        with pytest.raises(InvalidArgument) as info:
            await store.list_events("s", page_size=2, page_token=bad)
        assert info.value.field == "page_token"
    token = (await store.list_events("s", page_size=2, page_token="")).next_page_token
    with pytest.raises(InvalidArgument):
        await store.list_sessions(SessionFilter(), page_size=2, page_token=token)
    with pytest.raises(InvalidArgument):
        await store.search(SearchQuery("x"), page_size=2, page_token=token)
    with pytest.raises(InvalidArgument):
        await store.list_compactions("s", page_size=2, page_token=token)
    with pytest.raises(InvalidArgument):
        await store.list_events("t", page_size=2, page_token=token)


# -- search ---------------------------------------------------------------------


def weather_talk() -> list[Event]:
    """An hour apart each: a tool loop about Paris, then a turn about Lyon."""
    return [
        s("sys", "You are a weather bot"),
        u("u1", "What is the weather in Paris?", at=0),
        a("a1", calls=[ToolCall("c1", "get_weather", '{"city": "Paris"}')], at=1),
        t("t1", ToolResult("c1", "get_weather", "sunny, 24 degrees"), at=2),
        a("a1b", "It is sunny in Paris today", at=3),
        u("u2", "And in Lyon?", at=4),
        a("a2", "Rainy in Lyon", at=5),
    ]


async def searchable(store: Store) -> None:
    """Session "w" with its Paris turn archived; session "other" with an archived Paris event."""
    await seed(store, "w", weather_talk())
    await compact(store, "w", ["u1", "a1", "t1", "a1b"])
    await seed(store, "other", [u("o1", "Paris in spring"), a("o2"), u("o3")])
    await compact(store, "other", ["o1", "o2"])


async def hit_ids(store: Store, query: SearchQuery, *, page_size: int = 100) -> list[str]:
    found: list[str] = []
    token = ""
    while True:
        page = await store.search(query, page_size=page_size, page_token=token)
        found += [f"{h.session_id}/{h.event.id}" for h in page.items]
        token = page.next_page_token
        if not token:
            return found


async def test_search_finds_archived_text_tool_calls_and_tool_results(store: Store) -> None:
    await searchable(store)
    assert set(await hit_ids(store, SearchQuery("paris"))) == {
        "w/u1",
        "w/a1",  # the tool call's arguments
        "w/a1b",
        "other/o1",
    }
    assert await hit_ids(store, SearchQuery("24 degrees")) == ["w/t1"]  # the tool result
    by_tool_name = await hit_ids(store, SearchQuery("get_weather", session_id="w"))
    assert set(by_tool_name) == {"w/a1", "w/t1"}


async def test_search_skips_active_events_unless_asked(store: Store) -> None:
    await searchable(store)
    assert await hit_ids(store, SearchQuery("lyon")) == []
    assert await hit_ids(store, SearchQuery("weather bot")) == []
    with_active = SearchQuery("lyon", include_active=True)
    assert set(await hit_ids(store, with_active)) == {"w/u2", "w/a2"}


async def test_search_hits_carry_event_rank_and_snippet(store: Store) -> None:
    await searchable(store)
    page = await store.search(SearchQuery("sunny", session_id="w"), page_size=10, page_token="")
    assert {h.event.id for h in page.items} == {"t1", "a1b"}
    ranks = [h.rank for h in page.items]
    assert ranks == sorted(ranks, reverse=True)
    for hit in page.items:
        assert hit.session_id == "w"
        assert hit.event.archived
        assert "sunny" in hit.snippet.lower()
    a1b = next(h.event for h in page.items if h.event.id == "a1b")
    assert a1b.text == "It is sunny in Paris today"
    assert a1b.position == 5


async def test_search_filters_by_session_role_and_time(store: Store) -> None:
    await searchable(store)
    paris = "paris"
    assert set(await hit_ids(store, SearchQuery(paris, session_id="w"))) == {
        "w/u1",
        "w/a1",
        "w/a1b",
    }
    assert set(await hit_ids(store, SearchQuery(paris, roles=(Role.ASSISTANT,)))) == {
        "w/a1",
        "w/a1b",
    }
    assert set(await hit_ids(store, SearchQuery(paris, roles=(Role.USER, Role.TOOL)))) == {
        "w/u1",
        "other/o1",
    }
    # since is inclusive, until exclusive.
    window = SearchQuery(
        paris, session_id="w", since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3)
    )
    assert await hit_ids(store, window) == ["w/a1"]
    with pytest.raises(SessionNotFound):
        await store.search(SearchQuery(paris, session_id="nope"), page_size=10, page_token="")


async def test_search_pages_through_every_hit_once(store: Store) -> None:
    await seed(store, "many", [u(f"m{n}", f"needle number {n}") for n in range(25)] + [u("last")])
    await compact(store, "many", [f"m{n}" for n in range(25)])
    one_page = await hit_ids(store, SearchQuery("needle"), page_size=1000)
    paged = await hit_ids(store, SearchQuery("needle"), page_size=4)
    assert len(one_page) == 25
    assert paged == one_page


async def test_search_pages_are_not_moved_by_events_appended_meanwhile(store: Store) -> None:
    """A listing sees the events stored when its first page was read: matches appended while
    a client pages (ranked above the ones listed, so they would push them along) show in no
    later page, and every hit of the first read comes once."""
    await seed(store, "old", [u(f"o{n}", f"needle among many other words {n}") for n in range(12)])
    query = SearchQuery("needle", include_active=True)
    first = await store.search(query, page_size=4, page_token="")
    await seed(store, "new", [u(f"n{n}", "needle needle") for n in range(8)])
    found = [h.event.id for h in first.items]
    token = first.next_page_token
    while token:
        page = await store.search(query, page_size=4, page_token=token)
        found += [h.event.id for h in page.items]
        token = page.next_page_token
    assert sorted(found) == sorted(f"o{n}" for n in range(12))
    # A listing started now sees them all, the new ones first (they rank higher).
    fresh = await hit_ids(store, query, page_size=5)
    assert len(fresh) == 20
    assert {hit.split("/")[0] for hit in fresh[:8]} == {"new"}


async def test_a_search_token_of_an_older_server_is_still_read(store: Store) -> None:
    """A token issued before listings carried their newest event (block and offset only, as
    a server sharing ``page_token_key`` across an upgrade issued it) pages on."""
    await seed(store, "old", [u(f"o{n}", f"needle among many other words {n}") for n in range(6)])
    query = SearchQuery("needle", include_active=True)
    whole = await hit_ids(store, query)
    bound = fingerprint("needle", None, "", [], True, None, None)
    older = encode_token("search", bound, (0, 2))
    page = await store.search(query, page_size=100, page_token=older)
    assert [f"{h.session_id}/{h.event.id}" for h in page.items] == whole[2:]


@pytest.mark.parametrize(
    "text",
    [
        '"',
        '"foo AND (',
        "AND (",
        "NEAR(",
        "NEAR(paris sunny, 2)",
        "*",
        "paris*",
        "'; DROP TABLE events; --",
        "text:paris",
        "^paris",
        "-paris",
        "paris OR",
        "",
        "   ",
        "\x00",
    ],
)
async def test_search_survives_hostile_query_text(store: Store, text: str) -> None:
    await searchable(store)
    await hit_ids(store, SearchQuery(text, include_active=True))
    assert len(await hit_ids(store, SearchQuery("paris"))) == 4  # nothing was dropped


async def test_search_reads_quotes_and_operators_as_plain_words(store: Store) -> None:
    await searchable(store)
    assert set(await hit_ids(store, SearchQuery('"sunny"'))) == {"w/t1", "w/a1b"}
    assert await hit_ids(store, SearchQuery("sunny NEAR")) == []


async def test_listing_and_search_can_be_held_to_an_id_prefix(store: Store) -> None:
    """How one tenant's namespace is kept apart from another's."""
    for session_id in ["acme#a", "acme#b", "acmex#c", "globex#a", "plain"]:
        await seed(store, session_id, [u(f"{session_id}-1", "quarterly numbers"), u("last")])
        await compact(store, session_id, [f"{session_id}-1"])
    page = await store.list_sessions(SessionFilter(id_prefix="acme#"), page_size=1, page_token="")
    listed = [s.session_id for s in page.items]
    while page.next_page_token:
        page = await store.list_sessions(
            SessionFilter(id_prefix="acme#"), page_size=1, page_token=page.next_page_token
        )
        listed += [s.session_id for s in page.items]
    assert listed == ["acme#a", "acme#b"]
    hits = await hit_ids(store, SearchQuery("quarterly", session_prefix="acme#"))
    assert sorted(hits) == ["acme#a/acme#a-1", "acme#b/acme#b-1"]
    assert len(await hit_ids(store, SearchQuery("quarterly"))) == 5


@pytest.mark.parametrize(
    "hostile",
    [
        "'; DROP TABLE sessions; --",
        "x' OR '1'='1",
        '{"a": 1}',
        "a & b | !c <-> d:*",  # tsquery syntax
        'NEAR("a" "b")',  # FTS5 syntax
        "%_\\",
    ],
)
async def test_labels_holding_sql_or_query_syntax_are_plain_data(
    store: Store, hostile: str
) -> None:
    await store.create_session("s", policy_json=None, labels={hostile: hostile, "k": hostile})
    await store.create_session("t", policy_json=None, labels={"k": "other"})
    assert (await store.get_session("s")).labels == {hostile: hostile, "k": hostile}
    page = await store.list_sessions(
        SessionFilter(labels={"k": hostile}), page_size=10, page_token=""
    )
    assert [s.session_id for s in page.items] == ["s"]
    all_sessions = await store.list_sessions(SessionFilter(), page_size=10, page_token="")
    assert [s.session_id for s in all_sessions.items] == ["s", "t"]


async def test_a_landed_compaction_reads_back_as_its_result(store: Store) -> None:
    await seed(store, "s", conversation())
    landed = await compact(
        store, "s", ["u1", "a1"], inserts=summary("sum", "they asked twice"), before="u2"
    )
    await store.append("s", [u("u4")])  # after the compaction
    result = await store.compaction_result("s", landed.compaction_id)
    assert result.compacted
    assert result.strategy == "test"
    assert result.compaction_id == landed.compaction_id
    assert result.version == landed.session.version
    assert result.tokens_estimated_saved == 7
    assert ids(result.archived_events) == ["u1", "a1"]
    assert all(e.archived for e in result.archived_events)
    # Not the window: the engine adds it when the result is to list it (a read of its own).
    assert result.active_events == ()
    assert not result.active_events_omitted
    with pytest.raises(KeyError):
        await store.compaction_result("s", "no-such-compaction")
    with pytest.raises(SessionNotFound):
        await store.compaction_result("absent", landed.compaction_id)


async def test_repeated_window_reads_follow_appends_compactions_and_recreation(
    store: Store,
) -> None:
    """Both stores reuse decoded events for unchanged rows; every read must still be exact."""
    await seed(store, "w", [u("u1"), a("a1"), u("u2"), a("a2")])
    _, once = await store.active_window("w")
    _, first = await store.active_window("w")  # read again: now the cache takes it in
    assert first == once
    assert not any(x is y for x, y in zip(once, first, strict=True))  # a first read is not kept
    _, again = await store.active_window("w")
    assert again == first
    assert all(x is y for x, y in zip(first, again, strict=True))  # decoded once since
    await store.append("w", [u("u3", "new")])
    _, grown = await store.active_window("w")
    assert ids(grown) == ["u1", "a1", "u2", "a2", "u3"]
    assert grown[-1].text == "new"
    await compact(store, "w", ["u1", "a1"], inserts=summary("x", "gist"), before="u2")
    _, compacted = await store.active_window("w")
    assert ids(compacted) == ["x-q", "x-a", "u2", "a2", "u3"]
    assert not any(e.archived for e in compacted)
    await store.delete_session("w")
    await seed(store, "w", [u("u1", "another life")])
    _, reborn = await store.active_window("w")
    assert [(e.id, e.text, e.position) for e in reborn] == [("u1", "another life", 1)]


async def test_search_folds_case_and_accents_on_both_sides(store: Store) -> None:
    """Both stores must find the same events for the same words: "cafe" matches "Café"."""
    await seed(
        store,
        "fold",
        [u("u1", "Un café crème à Zürich"), a("a1", "CAFE AU LAIT"), u("u2", "naïve résumé")],
    )

    def words(text: str) -> SearchQuery:
        return SearchQuery(text, session_id="fold", include_active=True)

    assert set(await hit_ids(store, words("cafe"))) == {"fold/u1", "fold/a1"}
    assert set(await hit_ids(store, words("CAFÉ"))) == {"fold/u1", "fold/a1"}
    assert await hit_ids(store, words("zurich creme")) == ["fold/u1"]
    assert await hit_ids(store, words("naive resume")) == ["fold/u2"]
    page = await store.search(words("zurich"), page_size=5, page_token="")
    assert "Zürich" in page.items[0].snippet  # the snippet shows the text as written


async def test_search_finds_the_words_of_paths_urls_and_addresses_on_both_stores(
    store: Store,
) -> None:
    """Punctuation separates words on both stores: a path, URL or address is found by its words.

    PostgreSQL's parser keeps ``/etc/passwd``, ``https://example.com/docs/setup``,
    ``ops@example.com`` and ``1.2.3`` whole, so a search for one of their words found
    them on SQLite only.
    """
    await seed(
        store,
        "punct",
        [
            u("u1", "cat /etc/passwd please"),
            a("a1", "see https://example.com/docs/setup for it"),
            u("u2", "mail ops@example.com today"),
            a("a2", "upgrade to release 1.2.3 now"),
            u("u3", "the config.py file"),
        ],
    )

    def words(text: str) -> SearchQuery:
        return SearchQuery(text, session_id="punct", include_active=True)

    assert await hit_ids(store, words("passwd")) == ["punct/u1"]
    assert await hit_ids(store, words("setup")) == ["punct/a1"]
    assert set(await hit_ids(store, words("example"))) == {"punct/a1", "punct/u2"}
    assert await hit_ids(store, words("ops")) == ["punct/u2"]
    assert await hit_ids(store, words("config")) == ["punct/u3"]
    assert await hit_ids(store, words("/etc/passwd")) == ["punct/u1"]
    assert set(await hit_ids(store, words("example.com"))) == {"punct/a1", "punct/u2"}
    assert await hit_ids(store, words("3 release")) == ["punct/a2"]
