"""Compactions other replicas land, heard as notices: live, and caught up on after
the LISTEN connection was lost, refused, or fell silent.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

from sidecar.engine.engine import SessionEngine
from sidecar.model import CompactionResult
from sidecar.store.postgres import PostgresStore
from sidecar.store.postgres_notices import CompactionNotices
from tests.store.relay import Relay
from tests.store.test_postgres import a, fetch, plan, u


class CatchUps:
    """A catch-up callback that counts its calls, and waits for the next one."""

    def __init__(self) -> None:
        self.calls = 0
        self._called = asyncio.Condition()

    async def __call__(self) -> None:
        async with self._called:
            self.calls += 1
            self._called.notify_all()

    async def reach(self, calls: int, timeout_s: float = 10) -> None:
        async with asyncio.timeout(timeout_s), self._called:
            await self._called.wait_for(lambda: self.calls >= calls)


async def test_a_lost_notice_connection_is_followed_by_a_catch_up(
    postgres_database: str,
) -> None:
    store = PostgresStore(postgres_database, pool_size=2)
    await store.open()
    catch_ups = CatchUps()
    try:
        store.on_compaction_elsewhere(lambda _session, _compaction: None, catch_ups)
        await catch_ups.reach(1)  # the first connection too: a watch may have begun before
        killed = await fetch(
            postgres_database,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN%' AND datname = current_database()",
        )
        assert [r[0] for r in killed] == [True]
        await catch_ups.reach(2)
    finally:
        await store.close()


def via(dsn: str, port: int) -> str:
    """``dsn`` with its port replaced (to go through a Relay)."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(netloc=f"{parts.netloc.rpartition(':')[0]}:{port}"))


async def test_notices_missed_before_a_failed_first_connect_are_caught_up(
    postgres_database: str,
) -> None:
    """The pool can open while the notice connection cannot (one connection too many, a
    blip): watches begun meanwhile heard nothing, and the catch-up ran only after an outage
    of a connection that had once been up."""
    relay = Relay(urlsplit(postgres_database).port or 5432)
    relay.refusing = True
    notices = CompactionNotices(
        via(postgres_database, await relay.start()), connect_timeout_s=2, origin="here"
    )
    catch_ups = CatchUps()
    try:
        notices.subscribe(lambda _session, _compaction: None, catch_ups)
        await asyncio.wait_for(relay.refused.wait(), 10)
        relay.refusing = False
        await catch_ups.reach(1)
        assert notices.listening.is_set()
    finally:
        await notices.close()
        await relay.close()


async def test_a_notice_connection_gone_silent_is_replaced_and_caught_up(
    postgres_database: str,
) -> None:
    """A peer gone without a FIN (a dead host, a dropped NAT entry): a connection that only
    listens noticed nothing, and the replica stopped hearing of other replicas' compactions
    for good. Asked to answer when quiet, it is found out, replaced and caught up."""
    relay = Relay(urlsplit(postgres_database).port or 5432)
    notices = CompactionNotices(
        via(postgres_database, await relay.start()),
        connect_timeout_s=1,
        origin="here",
        liveness_interval_s=0.2,
    )
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    catch_ups = CatchUps()
    elsewhere = PostgresStore(postgres_database, pool_size=2)
    await elsewhere.open()
    try:
        notices.subscribe(lambda *notice: heard.put_nowait(notice), catch_ups)
        await catch_ups.reach(1)
        relay.fall_silent()
        await catch_ups.reach(2)
        await elsewhere.append("s", [u("u1"), a("a1"), u("u2")], create_if_missing=True)
        landed = await elsewhere.apply("s", plan(["u1", "a1"], base=""))
        # The new connection hears the other replica again.
        assert await asyncio.wait_for(heard.get(), 10) == ("s", landed.compaction_id)
    finally:
        await notices.close()
        await relay.close()
        await elsewhere.close()


async def test_catch_up_publishes_what_was_missed_once_and_in_order(
    postgres_database: str,
) -> None:
    """Replica B never heard of A's compactions; catching up tells its watcher of each, once."""
    a_store = PostgresStore(postgres_database, pool_size=2)
    b_store = PostgresStore(postgres_database, pool_size=2)
    await a_store.open()
    await b_store.open()
    b_engine = SessionEngine(b_store)
    b_engine.follow_other_replicas()
    try:
        await a_store.append("s", [u("u1"), a("a1"), u("u2"), a("a2")], create_if_missing=True)
        first = await a_store.apply("s", plan(["u1"], base=""))
        watcher = b_engine.watch("s")
        for _ in range(50):  # the watch notes where the session stands, in the background
            if b_engine.watchers.known("s") is not None:
                break
            await asyncio.sleep(0.02)
        assert b_engine.watchers.known("s") == first.session.version
        second = await a_store.apply("s", plan(["a1"], base=first.compaction_id))
        third = await a_store.apply("s", plan(["u2"], base=second.compaction_id))
        await b_engine.catch_up()
        await b_engine.catch_up()  # nothing new: nothing published twice
        b_engine.relay_compaction("s", third.compaction_id)  # a late live notice: ignored
        await asyncio.sleep(0.2)
        seen = []
        while not watcher._queue.empty():
            update = await watcher.next()
            assert isinstance(update, CompactionResult)
            seen.append(update.compaction_id)
        assert seen == [second.compaction_id, third.compaction_id]
        watcher.close()
    finally:
        await b_engine.close()
        await a_store.close()
        await b_store.close()
