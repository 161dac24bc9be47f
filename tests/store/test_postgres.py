"""What only the PostgreSQL store promises: migrations under concurrency, schemas,
several writers on one database, and surviving a database restart.

The contract suite (test_contract.py) already runs every shared behaviour on it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from sidecar.errors import (
    InvalidArgument,
    InvalidConfig,
    SchemaTooNew,
    SessionNotFound,
    StoreUnavailable,
    VersionConflict,
)
from sidecar.model import CompactionPlan, Event, Role
from sidecar.store.postgres import PostgresStore
from sidecar.store.postgres_schema import MIGRATIONS, Db, folds_accents, migrate
from sidecar.store.protocol import SearchQuery
from sidecar.store.urls import postgres_url_problem, redact
from tests.conftest import Postgres
from tests.postgres_server import PostgresServer
from tests.tls import self_signed


def u(id: str, text: str = "hi") -> Event:
    return Event(id=id, role=Role.USER, text=text, token_count=3)


def a(id: str, text: str = "ok") -> Event:
    return Event(id=id, role=Role.ASSISTANT, text=text, token_count=3)


@pytest.fixture
async def store(postgres_database: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(postgres_database, pool_size=4)
    await opened.open()
    yield opened
    await opened.close()


async def fetch(dsn: str, sql: str) -> list[asyncpg.Record]:
    """Read the database with a plain connection, as an operator would."""
    db = await asyncpg.connect(dsn)
    try:
        return await db.fetch(sql)
    finally:
        await db.close()


# -- schema and migrations ------------------------------------------------------


async def test_replicas_starting_at_once_migrate_exactly_once(postgres_database: str) -> None:
    stores = [PostgresStore(postgres_database, pool_size=1) for _ in range(6)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        rows = await fetch(postgres_database, "SELECT version FROM schema_version")
        assert [r[0] for r in rows] == [m.version for m in MIGRATIONS]
        await stores[0].create_session("s", policy_json=None, labels={})
        assert (await stores[5].get_session("s")).version == 1
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_database_from_a_newer_build_is_refused(postgres_database: str) -> None:
    first = PostgresStore(postgres_database)
    await first.open()
    await first.close()
    db = await asyncpg.connect(postgres_database)
    await db.execute("INSERT INTO schema_version (version, description) VALUES (99, 'future')")
    await db.close()
    with pytest.raises(SchemaTooNew, match="version 99"):
        await PostgresStore(postgres_database).open()


async def test_stores_in_different_schemas_of_one_database_are_independent(
    postgres_database: str,
) -> None:
    db = await asyncpg.connect(postgres_database)
    await db.execute("CREATE SCHEMA team_a; CREATE SCHEMA team_b")
    await db.close()
    a_store = PostgresStore(postgres_database + "?search_path=team_a")
    b_store = PostgresStore(postgres_database + "?search_path=team_b")
    await a_store.open()
    await b_store.open()
    try:
        await a_store.append("s", [u("u1")], create_if_missing=True)
        with pytest.raises(SessionNotFound):
            await b_store.get_session("s")
        tables = await fetch(
            postgres_database,
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'events'"
            " ORDER BY 1",
        )
        assert [r[0] for r in tables] == ["team_a", "team_b"]
        # One unaccent extension per database, installed with the first schema; the
        # second schema's search configuration must find it all the same.
        assert a_store.folds_accents
        assert b_store.folds_accents
        await b_store.append("s", [u("u1", "Café")], create_if_missing=True)
        hits = await b_store.search(
            SearchQuery("cafe", include_active=True), page_size=5, page_token=""
        )
        assert [h.event.text for h in hits.items] == ["Café"]
    finally:
        await a_store.close()
        await b_store.close()


async def test_two_schemas_migrating_at_once_both_fold_accents(postgres_database: str) -> None:
    """The unaccent extension is one per database, and each schema's migration is under a
    lock of its own: the second schema's CREATE EXTENSION used to meet the first's
    uncommitted one, fail on its unique name, and leave that store without folding for good.
    """
    setup = await asyncpg.connect(postgres_database)
    await setup.execute("CREATE SCHEMA team_a; CREATE SCHEMA team_b")
    await setup.close()
    first = await asyncpg.connect(postgres_database, server_settings={"search_path": "team_a"})
    second = await asyncpg.connect(postgres_database, server_settings={"search_path": "team_b"})
    try:
        held = first.transaction()
        await held.start()
        await migrate(first, "team_a")  # done, not yet committed
        waiting = asyncio.create_task(migrate(second, "team_b"))
        await asyncio.sleep(0.5)  # team_b's migration now waits on team_a's extension
        await held.commit()
        await waiting
        assert await folds_accents(first)
        assert await folds_accents(second)
    finally:
        await first.close()
        await second.close()


async def test_an_id_too_long_for_an_index_is_invalid_argument_not_internal(
    postgres_database: str,
) -> None:
    """Ids are unique B-tree keys, capped at 2,704 bytes: a 3 KB id used to fail the write
    with ProgramLimitExceededError, which the API answers INTERNAL."""
    store = PostgresStore(postgres_database)
    await store.open()
    try:
        long_id = "x" * 3000
        with pytest.raises(InvalidArgument) as info:
            await store.create_session(long_id, policy_json=None, labels={})
        assert info.value.field == "session_id"
        with pytest.raises(InvalidArgument) as info:
            await store.append(long_id, [u("u1")], create_if_missing=True)
        assert info.value.field == "session_id"
        with pytest.raises(InvalidArgument) as info:
            await store.append("s", [u("u1"), u("é" * 1100)], create_if_missing=True)
        assert info.value.field == "events[1].id"
        with pytest.raises(SessionNotFound):
            await store.get_session("s")  # nothing stored
        await store.append("s", [u("é" * 1000)], create_if_missing=True)  # 2,000 bytes: fine
    finally:
        await store.close()


async def test_upgrading_to_accent_folding_reindexes_the_stored_events(
    postgres_database: str,
) -> None:
    """A database written before migration 3 gets its old events folded too."""
    db = await asyncpg.connect(postgres_database)
    try:
        await migrate(db, "test", MIGRATIONS[:2])
        pk = await db.fetchval(
            "INSERT INTO sessions (id, version, create_time, update_time)"
            " VALUES ('old', 1, now(), now()) RETURNING pk"
        )
        await db.execute(
            "INSERT INTO events (session, position, sort_key, id, role, content, token_count,"
            " create_time, body) VALUES ($1, 1, 3, 'e1', 'user', $2, 3, now(), $3)",
            pk,
            '{"t":"Un café"}',
            "User: Un café",
        )
    finally:
        await db.close()
    store = PostgresStore(postgres_database)
    await store.open()
    try:
        assert store.folds_accents
        hits = await store.search(
            SearchQuery("cafe", include_active=True), page_size=5, page_token=""
        )
        assert [h.event.id for h in hits.items] == ["e1"]
    finally:
        await store.close()


async def test_a_missing_database_is_a_configuration_error(postgres: Postgres) -> None:
    with pytest.raises(InvalidConfig, match="does not exist") as info:
        await PostgresStore(postgres.dsn("no_such_database")).open()
    assert info.value.field == "store"


async def test_a_search_path_schema_that_does_not_exist_is_refused_not_created(
    postgres_database: str,
) -> None:
    with pytest.raises(InvalidConfig, match="no schema of search_path 'nosuch'") as info:
        await PostgresStore(postgres_database + "?search_path=nosuch").open()
    assert info.value.field == "store"
    schemas = await fetch(postgres_database, "SELECT 1 FROM pg_namespace WHERE nspname = 'nosuch'")
    assert schemas == []


@pytest.mark.parametrize(
    ("query", "reason"),
    [("sslmode=bogus", "must be one of"), ("sslmode=require", "does not offer SSL")],
)
async def test_an_ssl_setting_the_server_cannot_meet_is_a_configuration_error(
    postgres: Postgres, query: str, reason: str
) -> None:
    """The tests' own server has no SSL: no wait would mend either URL."""
    with pytest.raises(InvalidConfig, match=reason) as info:
        await PostgresStore(f"{postgres.dsn('postgres')}?{query}").open()
    assert info.value.field == "store"


async def test_a_port_that_is_not_postgresql_is_not_blamed_on_sslmode() -> None:
    """A wrong port (an HTTP server there) with the default sslmode: no SSL was asked for.

    asyncpg says "rejected SSL upgrade" for any answer but PostgreSQL's to its
    SSL request; the store used to call that an SSL setting the server cannot
    meet and stop at once, telling the operator to choose the sslmode already in use.
    """

    async def http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(8)
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(StoreUnavailable) as info:
            await PostgresStore(f"postgresql://u@127.0.0.1:{port}/x", connect_timeout_s=2).open()
        assert "sslmode" not in str(info.value)
        assert "not as a PostgreSQL server would" in str(info.value)
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://u:p@db:99999/x", "port '99999' in postgresql://u:***@db:99999/x"),
        ("postgresql://u@db:0/x", "port '0'"),
        ("postgresql://u@db:x1/x", "port 'x1'"),
        ("postgresql://u@a:5432,b:70000/x", "port '70000'"),
        ("postgresql:///x?host=/run/pg&port=65536", "port '65536'"),
        ("postgresql://u@db/x?sslrootcert=/no/ca.pem", "sslrootcert '/no/ca.pem'"),
        ("postgresql://u@db/x?sslkey=/", "sslkey '/'"),
        ("postgresql://u:p@db:5432/x", None),
        ("postgresql://u@[::1]:5432,db:/x?port=5432,5433", None),
        ("postgres://u@db/x?sslmode=require&search_path=s", None),
    ],
)
def test_a_postgres_url_is_checked_before_it_is_opened(url: str, problem: str | None) -> None:
    found = postgres_url_problem(url)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem), found


def test_ssl_files_that_hold_no_certificates_are_refused_before_connecting(
    tmp_path: Path,
) -> None:
    """asyncpg's SSLError on loading them looked like a server down: retried until the open
    timed out, for a file no wait mends."""
    cert, key = self_signed(tmp_path)
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    base = "postgresql://u@db/x?sslmode=verify-full"
    assert postgres_url_problem(f"{base}&sslrootcert={cert}&sslcert={cert}&sslkey={key}") is None
    found = postgres_url_problem(f"{base}&sslrootcert={junk}")
    assert found is not None
    assert found.startswith(f"sslrootcert '{junk}' in {base}&sslrootcert={junk} does not hold")
    found = postgres_url_problem(f"{base}&sslcert={cert}&sslkey={junk}")
    assert found is not None
    assert found.startswith(f"sslcert '{cert}'")
    found = postgres_url_problem(f"{base}&sslcrl={junk}")
    assert found is not None
    assert found.startswith("sslcrl")


def test_urls_in_messages_never_show_the_password() -> None:
    assert redact("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact("postgresql://app@db/x") == "postgresql://app@db/x"
    store = PostgresStore("postgresql://app:s3cret@127.0.0.1:1/x")
    assert "s3cret" not in store.where


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://pg@db/x?password=hunter2", "postgresql://pg@db/x?password=***"),
        (
            "postgresql://pg@db/x?sslmode=require&sslpassword=k3y&search_path=s",
            "postgresql://pg@db/x?sslmode=require&sslpassword=***&search_path=s",
        ),
        (
            "postgresql://app:s3cret@db/x?PASSWORD=hunter2&password=",
            "postgresql://app:***@db/x?PASSWORD=***&password=***",
        ),
        ("postgresql://pg@db/x?pass%77ord=hunter2", "postgresql://pg@db/x?pass%77ord=***"),
        ("postgresql://pg@db/x?passfile=/etc/pgpass", "postgresql://pg@db/x?passfile=/etc/pgpass"),
    ],
)
def test_urls_in_messages_never_show_a_secret_of_the_query(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert "hunter2" not in PostgresStore(url).where


async def test_labels_are_jsonb_behind_a_gin_index(
    postgres_database: str, store: PostgresStore
) -> None:
    await store.create_session("s", policy_json=None, labels={"team": "sre", "tier": "1"})
    rows = await fetch(postgres_database, "SELECT labels->>'team' FROM sessions")
    assert rows[0][0] == "sre"
    index = await fetch(
        postgres_database, "SELECT indexdef FROM pg_indexes WHERE indexname = 'sessions_labels'"
    )
    assert "gin" in index[0][0]


# -- several writers on one database -----------------------------------------------


def plan(archive: list[str], *, base: str) -> CompactionPlan:
    return CompactionPlan(strategy="test", archive_ids=tuple(archive), base_compaction_id=base)


async def test_two_stores_writing_one_session_keep_one_dense_order(
    postgres_database: str,
) -> None:
    """Two pools stand for two replicas: appends and compactions race on one session."""
    left = PostgresStore(postgres_database, pool_size=4)
    right = PostgresStore(postgres_database, pool_size=4)
    await left.open()
    await right.open()
    acked: list[tuple[int, str]] = []  # (version after the write, event id)
    compactions = 0

    async def appender(store: PostgresStore, name: str) -> None:
        for n in range(40):
            event = u(f"{name}-{n}") if n % 2 == 0 else a(f"{name}-{n}")
            outcome = await store.append("s", [event], create_if_missing=True)
            acked.append((outcome.session.version, event.id))

    async def compactor(store: PostgresStore) -> None:
        nonlocal compactions
        for _ in range(15):
            session, window = await store.active_window("s")
            if len(window) > 4:
                two = plan([e.id for e in window[:2]], base=session.last_compaction_id)
                try:
                    await store.apply("s", two)
                    compactions += 1
                except VersionConflict:
                    pass  # the other replica compacted from the same snapshot first
            await asyncio.sleep(random.uniform(0, 0.01))

    try:
        await left.create_session("s", policy_json=None, labels={})
        await asyncio.gather(
            appender(left, "l"),
            appender(right, "r"),
            appender(left, "l2"),
            compactor(left),
            compactor(right),
        )
        log: list[Event] = []
        token = ""
        while True:
            page = await left.list_events("s", page_size=50, page_token=token)
            log += page.items
            token = page.next_page_token
            if not token:
                break
        assert sorted(e.id for e in log) == sorted(event_id for _, event_id in acked)
        assert [e.position for e in log] == list(range(1, len(log) + 1))
        versions = [version for version, _ in acked]
        assert len(set(versions)) == len(versions)  # every write got its own version
        session = await right.get_session("s")
        assert session.version == 1 + len(acked) + compactions
        # Each event's position follows the version order its write committed in.
        by_version = [event_id for _, event_id in sorted(acked)]
        assert by_version == [e.id for e in sorted(log, key=lambda e: e.position)]
        records = await left.list_compactions("s", page_size=100, page_token="")
        assert len(records.items) == compactions
        archived = [i for r in records.items for i in r.archived_ids]
        assert len(archived) == len(set(archived))  # never archived twice
    finally:
        await left.close()
        await right.close()


# -- a database restart -------------------------------------------------------------


async def test_calls_fail_unavailable_while_the_database_is_down_then_recover(
    own_postgres: PostgresServer,
) -> None:
    store = PostgresStore(own_postgres.dsn(), pool_size=3, connect_timeout_s=2)
    await store.open()
    try:
        await store.append("s", [u("u1")], create_if_missing=True)
        own_postgres.stop()
        with pytest.raises(StoreUnavailable):
            await store.ping()
        with pytest.raises(StoreUnavailable):
            await store.append("s", [a("a1")])
        with pytest.raises(StoreUnavailable):
            await store.active_window("s")
        own_postgres.start()
        # The same store, not reopened: the pool replaces its dead connections.
        await store.ping()
        await store.append("s", [a("a1")])
        _, window = await store.active_window("s")
        assert [e.id for e in window] == ["u1", "a1"]
    finally:
        await store.close()


async def test_health_fails_while_the_database_takes_no_writes(postgres_database: str) -> None:
    """Reads still work on a read-only database (a standby, a full disk); the probe must not."""
    store = PostgresStore(postgres_database, pool_size=2)
    await store.open()
    admin = await asyncpg.connect(postgres_database)
    try:
        await store.append("s", [u("u1")], create_if_missing=True)
        await store.ping()
        database = await admin.fetchval("SELECT current_database()")
        await admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        await store._pool.expire_connections()  # type: ignore[union-attr]  # reconnect: new setting
        with pytest.raises(StoreUnavailable):
            await store.ping()
        _, window = await store.active_window("s")  # reads still answer
        assert [e.id for e in window] == ["u1"]
        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await store._pool.expire_connections()  # type: ignore[union-attr]
        await store.ping()
        await store.append("s", [a("a1")])
    finally:
        await admin.close()
        await store.close()


@pytest.mark.parametrize(
    "sqlstate",
    ["40P01", "40001", "57014", "53100"],  # deadlock, serialization, statement timeout, disk full
)
async def test_an_outage_the_server_answers_for_one_call_keeps_the_pooled_connections(
    postgres_database: str, sqlstate: str
) -> None:
    """The server answered, so every connection works: none is dropped for it.

    Each such error used to terminate its connection and expire every other
    one, so one deadlock or statement timeout reconnected the whole pool.
    """
    store = PostgresStore(postgres_database, pool_size=3)
    await store.open()

    async def backend(db: Db) -> int:
        await db.execute("SELECT pg_sleep(0.3)")  # the three calls hold all three connections
        pid: int = await db.fetchval("SELECT pg_backend_pid()")
        return pid

    async def refused(db: Db) -> None:
        await db.execute(f"DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{sqlstate}'; END $$")

    try:
        pids = await asyncio.gather(*(store._connections.run(backend, retry=False) for _ in "abc"))
        with pytest.raises(StoreUnavailable):
            await store._connections.run(refused, retry=True)
        again = await asyncio.gather(*(store._connections.run(backend, retry=False) for _ in "abc"))
        assert sorted(again) == sorted(pids)
    finally:
        await store.close()
