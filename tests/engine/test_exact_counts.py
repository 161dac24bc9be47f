"""Counting appends: estimated, and counted exactly where a decision needs it (issue 37)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.compaction.triggers import TokenCount
from sidecar.engine.engine import SessionEngine, TokenCounting
from sidecar.engine.estimates import KeptEstimate
from sidecar.errors import InvalidArgument
from sidecar.model import Event, ModelUsage, Role, Session
from sidecar.store.protocol import CountsLanded
from sidecar.store.sqlite import SqliteStore
from sidecar.tokenizer import TiktokenEstimator
from tests.engine.gates import PausingStore


class Counting(TiktokenEstimator):
    """The default estimator, saying how many texts it counted."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def count(self, text: str) -> int:
        self.texts += 1
        return super().count(text)


def user(id: str, text: str) -> Event:
    return Event(id=id, role=Role.USER, text=text)


def answer(id: str, text: str) -> Event:
    return Event(id=id, role=Role.ASSISTANT, text=text)


POLICY = CompactionPolicy(TokenCount(8000), TokenBudget(4000))


async def test_sessions_far_from_their_threshold_never_count_exactly(store: SqliteStore) -> None:
    estimator = Counting()
    engine = SessionEngine(store, estimator=estimator, default_policy=POLICY)
    for n in range(20):
        result = await engine.append(
            f"s{n}",
            [user(f"u{n}", "where is my bag? " * 20), answer(f"a{n}", "in Oslo")],
            create_if_missing=True,
        )
        assert all(e.token_count_estimated for e in result.events)
        assert not result.session.counters.tokens_exact
    assert estimator.texts == 0


async def test_a_check_the_bounds_cannot_settle_counts_first_and_decides_exactly(
    store: SqliteStore,
) -> None:
    estimator = Counting()
    engine = SessionEngine(store, estimator=estimator)
    text = "word " * 400  # 2,006 bytes, 401 tokens: between its bounds lies 1,000
    await engine.create_session("s", policy=CompactionPolicy(TokenCount(1000), TokenBudget(500)))
    result = await engine.append("s", [user("u1", text)])
    assert estimator.texts == 1  # counted to decide, and it does not fire
    assert result.compaction is None
    assert result.session.counters.tokens_exact
    assert result.session.counters.tokens == count_event(user("u1", text))


async def test_a_system_message_is_counted_when_it_is_appended(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    system = Event(id="s1", role=Role.SYSTEM, text="be brief")
    result = await engine.append("s", [system, user("u1", "hi")], create_if_missing=True)
    assert [e.token_count_estimated for e in result.events] == [False, True]
    assert result.session.counters.system_tokens == count_event(system)


async def test_a_plan_is_made_on_exact_counts(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    await engine.create_session("s", policy=CompactionPolicy(None, TokenBudget(30)))
    for n in range(4):
        await engine.append("s", [user(f"u{n}", f"question {n} " * 5), answer(f"a{n}", "ok")])
    result = await engine.compact("s", force=True)
    assert result.compacted
    assert not any(e.token_count_estimated for e in result.active_events)
    session, window = await engine.context("s")
    assert session.counters.tokens_exact
    assert [e.token_count for e in window] == [count_event(e) for e in window]


async def test_a_usage_report_is_held_against_the_exact_count(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    first = await engine.append("s", [user("u1", "hello " * 50)], create_if_missing=True)
    assert not first.session.counters.tokens_exact
    exact = count_event(user("u1", "hello " * 50))
    usage = ModelUsage(first.session.version, 2 * exact)
    second = await engine.append("s", [answer("a1", "hi")], usage=usage)
    assert second.usage_ignored_reason == ""
    assert second.session.calibration.factor == 2.0


async def test_a_usage_report_lands_only_what_its_version_holds(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    first = await engine.append("s", [user("u1", "hello " * 50)], create_if_missing=True)
    await engine.append("s", [answer("a1", "fine, thanks " * 30)])
    usage = ModelUsage(first.session.version, 100)
    third = await engine.append("s", [user("u2", "and you?")], usage=usage)
    assert third.usage_ignored_reason == ""
    assert [e.id for e in (await store.pending_counts("s", 10))[1]] == ["a1", "u2"]


async def test_a_usage_report_that_is_refused_lands_nothing(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    first = await engine.append("s", [user("u1", "hello " * 50)], create_if_missing=True)
    with pytest.raises(InvalidArgument):
        await engine.append("s", [answer("a1", "hi")], usage=ModelUsage(first.session.version, 0))
    assert [e.id for e in (await store.pending_counts("s", 10))[1]] == ["u1"]


class SlowToHear(SqliteStore):
    """A store whose first landing's caller hears of it only once ``heard`` is set."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.heard = asyncio.Event()
        self.landings = 0

    async def land_counts(
        self, session_id: str, exact: Mapping[str, int], *, incarnation: int | None = None
    ) -> CountsLanded:
        landed = await super().land_counts(session_id, exact, incarnation=incarnation)
        self.landings += 1
        if self.landings == 1:
            await self.heard.wait()
        return landed


async def test_a_report_waits_for_a_landing_in_flight_to_move_the_estimates(
    tmp_path: object,
) -> None:
    store = SlowToHear(f"{tmp_path}/slow.db")
    await store.open()
    engine = SessionEngine(store)
    try:
        first = await engine.append("s", [user("u1", "hello " * 50)], create_if_missing=True)
        landing = asyncio.ensure_future(engine.counts.land("s"))
        await asyncio.sleep(0.2)  # it landed, and has not heard yet
        usage = ModelUsage(first.session.version, 100)
        report = asyncio.ensure_future(engine.counts.usage_report("s", usage))
        await asyncio.sleep(0.2)
        store.heard.set()
        await landing
        taken, ignored = await report
        assert ignored == ""
        assert taken is not None
    finally:
        await engine.close()
        await store.close()


@pytest.fixture
async def pausing(tmp_path: Path) -> AsyncIterator[tuple[SessionEngine, PausingStore]]:
    """An engine over a store whose calls stop where the test says."""
    store = PausingStore(str(tmp_path / "pausing.db"))
    await store.open()
    engine = SessionEngine(store)
    try:
        yield engine, store
    finally:
        await engine.close()
        await store.close()


HELLO = user("u1", "hello " * 50)
FINE = answer("a1", "fine, thanks " * 30)


async def test_a_read_between_a_landing_and_its_news_is_not_moved_by_it_again(
    pausing: tuple[SessionEngine, PausingStore],
) -> None:
    engine, store = pausing
    await engine.append("s", [HELLO], create_if_missing=True)
    before, after = store.pause("landing"), store.pause("landed")
    landing = asyncio.ensure_future(engine.counts.land("s"))  # counts u1
    await before.reached.wait()
    second = await engine.append("s", [FINE])  # pending, not in this landing
    before.go.set()
    await after.reached.wait()
    await engine.context("s")  # read after u1's count landed, a1's still pending
    after.go.set()
    await landing
    exact = await engine.counts.exact("s")  # a1's lands too
    kept = engine.models.estimates.estimate("s", second.session.version)
    assert kept == KeptEstimate(exact.incarnation, exact.counters.tokens, 0, 0, 2)


@pytest.mark.parametrize("appended", [False, True], ids=["same version", "older version"])
async def test_a_read_made_before_a_landing_and_kept_after_it_is_not_held_back(
    pausing: tuple[SessionEngine, PausingStore], appended: bool
) -> None:
    engine, store = pausing
    first = await engine.append("s", [HELLO], create_if_missing=True)
    read = store.pause("read")
    reading = asyncio.ensure_future(engine.context("s"))  # version 1, u1 pending
    await read.reached.wait()
    if appended:
        await engine.append("s", [FINE])  # version 2
    await engine.counts.land("s")
    read.go.set()
    await reading  # kept after the landing moved the estimates
    kept = engine.models.estimates.estimate("s", first.session.version)
    assert kept == KeptEstimate(first.session.incarnation, count_event(HELLO), 0, 0, 1)


async def test_the_background_counter_lands_counts_soon_after(store: SqliteStore) -> None:
    engine = SessionEngine(store, token_counting=TokenCounting.BACKGROUND)
    try:
        await engine.append("s", [user("u1", "hello " * 50)], create_if_missing=True)
        for _ in range(100):
            session, window = await engine.context("s")
            if session.counters.tokens_exact:
                break
            await asyncio.sleep(0.05)
        assert session.counters.tokens_exact
        assert not window[0].token_count_estimated
    finally:
        await engine.close()


async def test_counting_on_append_never_estimates(store: SqliteStore) -> None:
    engine = SessionEngine(store, token_counting=TokenCounting.ON_APPEND)
    result = await engine.append("s", [user("u1", "hello")], create_if_missing=True)
    assert not result.events[0].token_count_estimated
    assert result.session.counters.tokens_exact


class Characters:
    """An estimator with no bound on its tokens' bytes."""

    name = "characters"

    def count(self, text: str) -> int:
        return len(text)


async def test_an_estimator_without_known_bounds_counts_on_append(store: SqliteStore) -> None:
    engine = SessionEngine(store, estimator=Characters())
    assert engine.counts.mode is TokenCounting.ON_APPEND
    result = await engine.append("s", [user("u1", "hello")], create_if_missing=True)
    assert not result.events[0].token_count_estimated
    assert result.events[0].token_count == len("User: hello")


class RacedRead:
    """The store's first read of a session's pending events with ``before`` run just before
    it and ``after`` just after it (each given the session id); ``raced`` once it ran."""

    def __init__(
        self,
        store: SqliteStore,
        *,
        before: Callable[[str], Awaitable[object]] | None = None,
        after: Callable[[str], Awaitable[object]] | None = None,
    ) -> None:
        self.raced = False
        self._read = store.pending_counts
        self._before, self._after = before, after
        store.pending_counts = self  # type: ignore[method-assign]

    async def __call__(
        self, session_id: str, limit: int, **kwargs: Any
    ) -> tuple[Session, tuple[Event, ...]]:
        if self.raced:
            return await self._read(session_id, limit, **kwargs)
        self.raced = True
        if self._before is not None:
            await self._before(session_id)
        found = await self._read(session_id, limit, **kwargs)
        if self._after is not None:
            await self._after(session_id)
        return found


async def test_an_append_by_another_replica_between_landing_reads_is_landed_next(
    store: SqliteStore,
) -> None:
    """Another replica lands the pending counts and appends again between this replica's read
    of the pending events and its read of the header: the header shows pending counts that
    the first read did not see. That is no contradiction (it failed an append with INTERNAL
    on two PostgreSQL replicas); they are landed next."""
    engine = SessionEngine(store)
    await engine.append("s", [user("u1", "where is my bag? " * 20)], create_if_missing=True)
    other = SessionEngine(store)  # the other replica, on the same store
    race = RacedRead(
        store,
        before=other.counts.exact,
        after=lambda session_id: other.append(session_id, [answer("a1", "in Oslo " * 30)]),
    )
    session = await engine.counts.exact("s")
    assert race.raced
    assert session.counters.tokens_exact
    assert session.total_events == 2


async def test_counts_of_a_deleted_session_do_not_land_on_its_successor(
    store: SqliteStore,
) -> None:
    """The session is deleted and created again, with the same event id and other
    content, between the read of its pending events and the landing of their counts:
    the old content's count does not land on the new event, which gets its own."""
    engine = SessionEngine(store)
    await engine.append("s", [user("u1", "where is my bag? " * 40)], create_if_missing=True)

    async def recreate(session_id: str) -> None:
        await store.delete_session(session_id)
        await engine.append(session_id, [user("u1", "hi")], create_if_missing=True)

    race = RacedRead(store, after=recreate)
    session = await engine.counts.exact("s")
    assert race.raced
    assert session.counters.tokens_exact
    # The same event in a session of its own, counted exactly.
    await engine.append("t", [user("u1", "hi")], create_if_missing=True)
    alone = await engine.counts.exact("t")
    _, window = await store.active_window("s")
    assert [e.token_count for e in window] == [alone.counters.tokens]
    assert session.counters.tokens == alone.counters.tokens
