"""``SessionEngine.append_many``: several sessions' appends in one call, each as ``append``."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import TokenCount
from sidecar.engine.engine import SessionEngine
from sidecar.engine.results import AppendResult
from sidecar.errors import InvalidArgument, SessionNotFound, StoreUnavailable
from sidecar.model import Event, Role, ToolCall
from sidecar.server.metrics import Metrics, TimedStore
from sidecar.store import sqlite_append_groups, sqlite_writes
from sidecar.store.protocol import CountsLanded, PlainAppend
from sidecar.store.sqlite import SqliteStore
from tests.engine.gates import GatedSummarizer
from tests.engine.test_engine import SUMMARY, WINDOW, ids_of_context, turn


def plain(session_id: str, events: list[Event], *, create: bool = False) -> PlainAppend:
    return PlainAppend(session_id, tuple(events), create_if_missing=create)


async def test_each_session_gets_what_its_own_append_would(store: SqliteStore) -> None:
    summarizer = GatedSummarizer("so far")
    engine = SessionEngine(store, summarizer=summarizer)
    await engine.create_session("window", policy=WINDOW)
    await engine.create_session("summary", policy=SUMMARY)
    for n in range(3):
        await engine.append_many([plain("window", turn(n)), plain("summary", turn(n))])
    results = await engine.append_many(
        [
            plain("window", turn(3)),
            plain("absent", turn(0)),
            plain("summary", turn(3)),
            plain(
                "bad",
                [Event(id="t", role=Role.USER, tool_calls=(ToolCall("c", "x", "{"),))],
                create=True,
            ),
            plain("new", [Event(id="", role=Role.USER, text="hello world")], create=True),
        ]
    )
    window, absent, summary, bad, new = results
    assert isinstance(window, AppendResult)
    assert window.compaction is not None
    assert window.compaction.compacted  # inline, under the lock, as append does
    assert await ids_of_context(engine, "window") == ["u2", "a2", "u3", "a3"]
    assert isinstance(absent, SessionNotFound)
    assert isinstance(summary, AppendResult)
    assert summary.compaction_scheduled
    assert isinstance(bad, InvalidArgument)
    assert bad.field == "events[0].tool_calls"
    assert isinstance(new, AppendResult)
    assert new.events[0].id  # given an id, and counted
    assert new.events[0].token_count == engine.estimator.count("User: hello world")
    with pytest.raises(SessionNotFound):
        await store.get_session("absent")
    with pytest.raises(SessionNotFound):
        await store.get_session("bad")
    # The scheduled summary holds its session's lock only to read the window and to
    # land: once it waits for its summarizer, no lock is held or left behind.
    await asyncio.wait_for(summarizer.started.wait(), 10)
    assert len(engine.locks) == 0
    summarizer.gate.set()
    await engine.wait_idle()


async def test_a_session_whose_lock_is_held_waits_alone(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    for name in ("busy", "free"):
        await engine.create_session(name)
    holding = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with engine.locks.hold("busy"):
            holding.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    call = asyncio.create_task(engine.append_many([plain("busy", turn(0)), plain("free", turn(0))]))
    for _ in range(200):  # the free session's append lands while busy's lock is held
        if (await store.get_session("free")).version == 2:
            break
        await asyncio.sleep(0.01)
    assert (await store.get_session("free")).version == 2
    assert (await store.get_session("busy")).version == 1
    assert not call.done()
    release.set()
    busy, free = await call
    await holder
    assert isinstance(busy, AppendResult)
    assert isinstance(free, AppendResult)
    assert (busy.session.version, free.session.version) == (2, 2)
    assert len(engine.locks) == 0


async def test_one_append_per_session(store: SqliteStore) -> None:
    engine = SessionEngine(store)
    with pytest.raises(ValueError, match="one append per session"):
        await engine.append_many([plain("s", turn(0)), plain("s", turn(1))])


async def test_a_store_that_fails_fails_each_append_and_releases_every_lock(
    store: SqliteStore,
) -> None:
    engine = SessionEngine(store)
    await engine.create_session("a")
    await engine.create_session("b")
    await store.close()
    results = await engine.append_many([plain("a", turn(0)), plain("b", turn(0))])
    assert [type(result) for result in results] == [StoreUnavailable, StoreUnavailable]
    assert len(engine.locks) == 0


async def test_a_cancelled_call_appends_nothing_for_sessions_still_waiting_for_their_lock(
    store: SqliteStore,
) -> None:
    engine = SessionEngine(store)
    for name in ("a", "b", "busy"):
        await engine.create_session(name)
    release = asyncio.Event()

    async def hold() -> None:
        async with engine.locks.hold("busy"):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    call = asyncio.create_task(
        engine.append_many([plain(name, turn(0)) for name in ("a", "b", "busy")])
    )
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    call.cancel()
    # The call ends at once, not when the lock it waits for is free.
    done, _ = await asyncio.wait([call], timeout=2)
    assert call in done
    assert call.cancelled()
    release.set()
    await holder
    assert (await store.get_session("busy")).version == 1  # nothing appended
    assert len(engine.locks) == 0


async def test_a_session_that_fails_after_storing_fails_alone(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = SessionEngine(store)
    for name in ("a", "broken", "c"):
        await engine.create_session(name)
    policy_of = engine.policy_of

    def failing(session: Any, **kwargs: Any) -> Any:
        if session.session_id == "broken":
            raise RuntimeError("unreadable stored policy")
        return policy_of(session, **kwargs)

    monkeypatch.setattr(engine, "policy_of", failing)
    a, broken, c = await engine.append_many([plain(n, turn(0)) for n in ("a", "broken", "c")])
    assert isinstance(a, AppendResult)
    assert isinstance(broken, RuntimeError)
    assert isinstance(c, AppendResult)
    assert len(engine.locks) == 0


async def test_each_failed_append_is_counted_as_the_store_being_unavailable(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = Metrics()
    engine = SessionEngine(TimedStore.wrap(store, metrics), observer=metrics)
    for name in ("a", "b", "c"):
        await engine.create_session(name)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sqlite_writes, "append", broken)  # one by one
    monkeypatch.setattr(sqlite_append_groups, "append_together", broken)  # or together
    results = await engine.append_many([plain(n, turn(0)) for n in ("a", "b", "c")])
    assert all(isinstance(result, StoreUnavailable) for result in results)
    counted = metrics.registry.get_sample_value(
        "compaction_store_unavailable_total", {"operation": "append_many"}
    )
    assert counted == 3


class Overlapping(SqliteStore):
    """A SQLite store that counts its landings and how many it had in flight at once."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.landings = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.failing: set[str] = set()  # sessions whose landings fail

    async def land_counts(
        self, session_id: str, exact: Mapping[str, int], *, incarnation: int | None = None
    ) -> CountsLanded:
        self.landings += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            result = await super().land_counts(session_id, exact, incarnation=incarnation)
            if session_id in self.failing:
                raise StoreUnavailable("the landing failed")
            return result
        finally:
            self.in_flight -= 1


@pytest.fixture
async def overlapping(tmp_path: Path) -> AsyncIterator[tuple[SessionEngine, Overlapping]]:
    """An engine over an ``Overlapping`` store, with sessions a, b and quiet whose trigger's
    threshold lies between the bounds of ``STRADDLING``."""
    store = Overlapping(str(tmp_path / "overlapping.db"))
    await store.open()
    engine = SessionEngine(store)
    policy = CompactionPolicy(TokenCount(1000), TokenBudget(500))
    for name in ("a", "b", "quiet"):
        await engine.create_session(name, policy=policy)
    try:
        yield engine, store
    finally:
        await engine.close()
        await store.close()


STRADDLING = "word " * 400  # 2,006 bytes, 401 tokens: between the bounds lies 1,000


def straddling(*names: str) -> list[PlainAppend]:
    return [
        plain(name, [Event(id="u1", role=Role.USER, text="hi" if name == "quiet" else STRADDLING)])
        for name in names
    ]


async def test_sessions_whose_bounds_straddle_their_threshold_land_their_counts_together(
    overlapping: tuple[SessionEngine, Overlapping],
) -> None:
    engine, store = overlapping
    results = await engine.append_many(straddling("a", "quiet", "b"))
    assert (store.landings, store.most_in_flight) == (2, 2)
    assert all(isinstance(r, AppendResult) and r.compaction is None for r in results)
    a, quiet, b = (cast(AppendResult, r).session.counters for r in results)
    assert (a.tokens_exact, quiet.tokens_exact, b.tokens_exact) == (True, False, True)
    assert len(engine.locks) == 0


async def test_a_landing_that_fails_in_a_batch_fails_its_session_alone(
    overlapping: tuple[SessionEngine, Overlapping],
) -> None:
    engine, store = overlapping
    store.failing.add("b")
    a, quiet, b = await engine.append_many(straddling("a", "quiet", "b"))
    assert isinstance(a, AppendResult)
    assert a.session.counters.tokens_exact
    assert isinstance(quiet, AppendResult)
    assert isinstance(b, StoreUnavailable)
    assert len(engine.locks) == 0
