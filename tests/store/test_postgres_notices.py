"""Compactions other replicas land, heard as notices: live, and caught up on after
the LISTEN connection was lost, refused, or fell silent; and what a notice holds
fits the size PostgreSQL allows one.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg
import pytest

from sidecar.engine.engine import SessionEngine
from sidecar.engine.validation import check_stored_session_id
from sidecar.errors import InvalidArgument
from sidecar.model import CompactionResult
from sidecar.store.postgres import PostgresStore
from sidecar.store.postgres_notices import CompactionNotices
from sidecar.store.postgres_writes import NOTIFY_CHANNEL
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


# -- the size of a notice -----------------------------------------------------------

LONGEST_SESSION_ID = "n" * 64 + "#" + "x" * 128
"""The longest id the engine stores: a tenant's namespace, '#', a client's id."""


async def test_a_notice_at_the_longest_ids_and_schema_name_fits_the_payload_cap(
    postgres_database: str,
) -> None:
    """PostgreSQL refuses a NOTIFY payload past 8,000 bytes, and with it the compaction's
    whole transaction. A notice holds the schema's name (63 bytes at most, a control
    character escaped to six in JSON), the session id (what the engine stores needs no
    escaping) and two 32-character ids: some 700 bytes at the most."""
    check_stored_session_id(LONGEST_SESSION_ID)
    with pytest.raises(InvalidArgument):
        check_stored_session_id(LONGEST_SESSION_ID + "x")
    schema = "\x01" * 63  # NAMEDATALEN - 1 bytes, each the costliest to escape
    admin = await asyncpg.connect(postgres_database)
    payloads: asyncio.Queue[str] = asyncio.Queue()
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    await admin.add_listener(NOTIFY_CHANNEL, lambda *notice: payloads.put_nowait(notice[3]))
    in_schema = postgres_database + "?search_path=" + quote(f'"{schema}"', safe="")
    here, elsewhere = PostgresStore(in_schema), PostgresStore(in_schema)
    await here.open()
    await elsewhere.open()
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    try:
        here.on_compaction_elsewhere(lambda *notice: heard.put_nowait(notice))
        await asyncio.wait_for(here.listening.wait(), 10)
        await elsewhere.append(
            LONGEST_SESSION_ID, [u("u1"), a("a1"), u("u2")], create_if_missing=True
        )
        landed = await elsewhere.apply(LONGEST_SESSION_ID, plan(["u1", "a1"], base=""))
        assert await asyncio.wait_for(heard.get(), 10) == (LONGEST_SESSION_ID, landed.compaction_id)
        payload = await asyncio.wait_for(payloads.get(), 10)
        assert json.loads(payload)["schema"] == schema
        assert len(payload.encode()) <= 700 < 8000
    finally:
        await here.close()
        await elsewhere.close()
        await admin.close()


async def test_a_compaction_whose_notice_is_refused_stores_nothing(
    postgres_database: str,
) -> None:
    """Past the engine, the store takes ids of up to 2,048 bytes, control characters too:
    such a notice is past the cap. NOTIFY runs in the compaction's transaction, so its
    refusal is the compaction's, and nothing of it is stored."""
    store = PostgresStore(postgres_database)
    await store.open()
    session_id = "\x01" * 2048
    try:
        await store.append(session_id, [u("u1"), a("a1"), u("u2")], create_if_missing=True)
        with pytest.raises(asyncpg.InvalidParameterValueError, match="payload string too long"):
            await store.apply(session_id, plan(["u1", "a1"], base=""))
        session, window = await store.active_window(session_id)
        assert session.version == 1
        assert [e.id for e in window] == ["u1", "a1", "u2"]
        assert (await store.list_compactions(session_id, page_size=10, page_token="")).items == ()
    finally:
        await store.close()
