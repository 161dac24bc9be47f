"""What only the SQLite store promises: its schema, pragmas, query plans and thread model."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.errors import InvalidConfig, SchemaTooNew, SessionNotFound, StoreUnavailable
from sidecar.model import CompactionPlan, Event, Part, Role
from sidecar.store import sqlite_schema
from sidecar.store.protocol import SearchQuery
from sidecar.store.sqlite import SqliteStore, run_in_connection_thread
from sidecar.store.sqlite_reads import ACTIVE_ROWS_SQL, ACTIVE_WINDOW_SQL
from sidecar.store.sqlite_schema import MIGRATIONS, Migration, current_version, migrate


def u(id: str, text: str = "hi") -> Event:
    return Event(id=id, role=Role.USER, text=text, token_count=3)


def a(id: str, text: str = "ok") -> Event:
    return Event(id=id, role=Role.ASSISTANT, text=text, token_count=3)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture
async def store(path: str) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(path)
    await opened.open()
    yield opened
    await opened.close()


def query(path: str, sql: str) -> list[tuple[object, ...]]:
    """Read the file with plain sqlite3, as an operator would."""
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


async def writer_pragma(store: SqliteStore, name: str) -> object:
    assert store._writer is not None  # white-box: pragmas are per connection
    row = await run_in_connection_thread(
        store._writer.connection, lambda db: db.execute(f"PRAGMA {name}").fetchone()
    )
    return row[0]


# -- schema and migrations ------------------------------------------------------


async def test_a_new_file_is_migrated_to_the_latest_version(path: str) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.close()
    assert query(path, "SELECT max(version) FROM schema_version") == [(len(MIGRATIONS),)]
    tables = {row[0] for row in query(path, "SELECT name FROM sqlite_master")}
    assert {"sessions", "events", "compactions", "events_fts", "events_active"} <= tables


async def test_a_file_at_version_0_is_upgraded(path: str) -> None:
    # An older layout: the version table exists but no migration ran yet.
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, description TEXT)")
    db.commit()
    db.close()
    store = SqliteStore(path)
    await store.open()
    await store.append("s", [u("u1")], create_if_missing=True)
    await store.close()
    assert query(path, "SELECT max(version) FROM schema_version") == [(len(MIGRATIONS),)]


async def test_an_older_file_gets_the_next_migration_and_keeps_its_data(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.append("s", [u("u1"), a("a1")], create_if_missing=True)
    await store.close()

    next_version = len(MIGRATIONS) + 1
    note = Migration(
        next_version, "a note per session", ("ALTER TABLE sessions ADD COLUMN note TEXT",)
    )
    monkeypatch.setattr(sqlite_schema, "MIGRATIONS", (*MIGRATIONS, note))
    store = SqliteStore(path)
    await store.open()
    _, window = await store.active_window("s")
    await store.close()
    assert [e.id for e in window] == ["u1", "a1"]
    versions = query(path, "SELECT version FROM schema_version ORDER BY version")
    assert versions == [(v,) for v in range(1, next_version + 1)]
    assert query(path, "SELECT note FROM sessions") == [(None,)]


def test_a_failing_migration_leaves_the_file_at_its_old_version(path: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, path)
    broken = Migration(
        len(MIGRATIONS) + 1, "broken", ("ALTER TABLE sessions ADD COLUMN x TEXT", "NOT SQL")
    )
    with pytest.raises(sqlite3.OperationalError):
        migrate(db, path, (*MIGRATIONS, broken))
    assert current_version(db) == len(MIGRATIONS)
    assert "x" not in {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
    db.close()


async def test_a_file_from_a_newer_build_is_refused(path: str) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO schema_version (version, description) VALUES (99, 'future')")
    db.commit()
    db.close()
    with pytest.raises(SchemaTooNew, match=rf"schema version 99.*up to {len(MIGRATIONS)}"):
        await SqliteStore(path).open()


async def test_a_path_that_cannot_hold_the_store_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    """A directory or a file of something else: no wait mends it, so it is not StoreUnavailable."""
    other = tmp_path / "server.pem"
    other.write_text("-----BEGIN CERTIFICATE-----\n" + "A" * 4096 + "\n")
    for where, reason in [(tmp_path, "directory"), (other, "not a database")]:
        with pytest.raises(InvalidConfig, match=reason) as info:
            await SqliteStore(str(where)).open()
        assert info.value.field == "store"
    assert other.read_text().startswith("-----BEGIN CERTIFICATE-----")


# -- pragmas, layout and plans --------------------------------------------------


async def test_wal_normal_by_default_full_on_request(path: str, store: SqliteStore) -> None:
    assert query(path, "PRAGMA journal_mode") == [("wal",)]
    assert await writer_pragma(store, "synchronous") == 1  # NORMAL
    assert await writer_pragma(store, "foreign_keys") == 1
    assert await writer_pragma(store, "busy_timeout") == 5000
    full = SqliteStore(path, synchronous="full")
    await full.open()
    assert await writer_pragma(full, "synchronous") == 2  # FULL
    await full.close()


def test_constructor_rejects_bad_settings(path: str) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStore(path, synchronous="NORMAL; DROP TABLE events")
    with pytest.raises(ValueError, match="readers"):
        SqliteStore(path, readers=0)


@pytest.mark.parametrize("sql", [ACTIVE_WINDOW_SQL, ACTIVE_ROWS_SQL])
async def test_active_window_query_uses_the_partial_index(
    path: str, store: SqliteStore, sql: str
) -> None:
    await store.append("s", [u(f"e{n}") for n in range(50)], create_if_missing=True)
    plan = query(path, f"EXPLAIN QUERY PLAN {sql.replace('?', '1')}")
    details = " ".join(str(row[-1]) for row in plan)
    assert "events_active" in details
    assert "TEMP B-TREE" not in details  # the index already gives log order


async def test_a_recreated_session_never_gets_the_old_events_decoded_form(
    store: SqliteStore,
) -> None:
    """SQLite may give a new row the id of a deleted one: the decode cache checks the row."""
    await store.append("s", [u("u1", "the old text")], create_if_missing=True)
    _, (old,) = await store.active_window("s")  # decoded and cached
    await store.delete_session("s")
    await store.append("s", [u("u1", "the new text")], create_if_missing=True)
    _, (new,) = await store.active_window("s")
    assert (old.text, new.text) == ("the old text", "the new text")
    _, (again,) = await store.active_window("s")
    assert again is new  # unchanged rows are not decoded twice


async def test_rows_keep_the_sort_key_rule_and_compact_content(
    path: str, store: SqliteStore
) -> None:
    await store.append("s", [u("u1"), a("a1"), u("u2"), a("a2")], create_if_missing=True)
    summary = Event(id="sum", role=Role.ASSISTANT, text="earlier", token_count=2)
    await store.apply(
        "s",
        CompactionPlan(
            strategy="test", archive_ids=("u1", "a1"), inserts=(summary,), insert_before="u2"
        ),
    )
    rows = query(path, "SELECT id, position, sort_key, archived, synthetic FROM events")
    assert sorted(rows, key=lambda r: str(r[0])) == [
        ("a1", 2, 5, 1, 0),
        ("a2", 4, 9, 0, 0),
        ("sum", 5, 6, 0, 1),  # right before u2: 2 * u2.position
        ("u1", 1, 3, 1, 0),
        ("u2", 3, 7, 0, 0),
    ]
    assert query(path, "SELECT content FROM events WHERE id = 'u1'") == [('{"t":"hi"}',)]


async def test_part_bytes_are_base64_in_the_content_json(path: str, store: SqliteStore) -> None:
    event = Event(id="p", role=Role.USER, parts=(Part("image/png", b"\x89PNG"),), token_count=1)
    await store.append("s", [event], create_if_missing=True)
    (content,) = query(path, "SELECT content FROM events")[0]
    assert json.loads(str(content)) == {"p": [["image/png", "iVBORw==", ""]]}
    await store.search(SearchQuery("image"), page_size=1, page_token="")  # indexes it
    (fts,) = query(path, "SELECT body FROM events_fts")[0]
    assert fts == "User: [image/png content]"  # searchable text never holds the bytes


async def test_ping_and_calls_after_close_raise_store_unavailable(path: str) -> None:
    store = SqliteStore(path)
    await store.open()
    await store.ping()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.ping()
    with pytest.raises(StoreUnavailable):
        await store.append("s", [u("u1")], create_if_missing=True)


# -- concurrency ----------------------------------------------------------------


async def test_concurrent_appends_lose_nothing_and_keep_positions_dense(
    path: str, store: SqliteStore
) -> None:
    sessions = [f"s{n}" for n in range(8)]
    writers_per_session, batches_per_writer = 6, 10
    versions: dict[str, list[int]] = {sid: [] for sid in sessions}

    async def writer(sid: str, w: int) -> None:
        for b in range(batches_per_writer):
            batch = [u(f"{w}-{b}-q"), a(f"{w}-{b}-a")]
            outcome = await store.append(sid, batch, create_if_missing=True)
            versions[sid].append(outcome.session.version)

    async def reader() -> None:
        # Each read is one snapshot: the header always matches the window.
        for _ in range(30):
            for sid in sessions[:2]:
                try:
                    session, window = await store.active_window(sid)
                except SessionNotFound:  # not created yet
                    continue
                assert session.counters.active_events == len(window) == session.total_events
            await asyncio.sleep(0)

    await asyncio.gather(
        *(writer(sid, w) for sid in sessions for w in range(writers_per_session)), reader()
    )
    expected = writers_per_session * batches_per_writer
    for sid in sessions:
        assert sorted(versions[sid]) == list(range(1, expected + 1))
        session, window = await store.active_window(sid)
        assert session.version == expected
        assert [e.position for e in window] == list(range(1, 2 * expected + 1))
        assert len({e.id for e in window}) == 2 * expected
        # Each writer's own batches landed in the order it sent them.
        for w in range(writers_per_session):
            mine = [e.id for e in window if e.id.startswith(f"{w}-")]
            assert mine == [f"{w}-{b}-{r}" for b in range(batches_per_writer) for r in "qa"]


async def writer_committing(store: SqliteStore) -> None:
    """Wait until the writer's thread is committing a group."""
    writer = store._writer
    assert writer is not None
    for _ in range(500):
        if writer._committing:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the writer never started its group")


async def test_writes_queued_together_commit_together_and_fail_alone(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.errors import VersionConflict
    from sidecar.store import sqlite_writer

    groups: list[int] = []
    real_in_group = sqlite_writer.in_group

    def counting(bodies):  # type: ignore[no-untyped-def]
        groups.append(len(bodies))
        return real_in_group(bodies)

    monkeypatch.setattr(sqlite_writer, "in_group", counting)
    for n in range(10):
        await store.create_session(f"s{n}", policy_json=None, labels={})
    # The writer is busy, so the appends queue (an idle writer takes a light one at once).
    gate = threading.Event()
    busy = asyncio.ensure_future(store._write(lambda db: gate.wait(5)))
    await writer_committing(store)
    asyncio.get_running_loop().call_later(0.05, gate.set)
    outcomes = await asyncio.gather(
        *(store.append(f"s{n}", [u(f"e{n}")]) for n in range(10)),
        store.append("s0", [u("stale")], expected_version=1),  # s0 is at 2 by then
        store.append("missing", [u("x")]),
        return_exceptions=True,
    )
    await busy
    assert sum(groups) >= 11  # queued writes shared transactions
    assert len(groups) < 12
    assert all(not isinstance(o, BaseException) for o in outcomes[:10])
    assert isinstance(outcomes[10], VersionConflict)
    assert isinstance(outcomes[11], SessionNotFound)
    for n in range(10):
        session, window = await store.active_window(f"s{n}")
        assert [e.id for e in window] == [f"e{n}"]
        assert session.version == 2
    with pytest.raises(SessionNotFound):
        await store.get_session("missing")


async def test_append_many_queues_each_session_fairly_as_its_own_write(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each append is queued under its own session and weight, as ``append`` would be:
    a heavy session riding in a batch with quiet ones is charged for itself alone."""
    from sidecar.store import sqlite_writes
    from sidecar.store.fair_queue import write_weight
    from sidecar.store.protocol import AppendOutcome, PlainAppend

    assert store._writer is not None  # white-box: how the appends are queued
    writer = store._writer
    queued: list[tuple[str, int]] = []
    real_submit_many, real_append = writer.submit_many, sqlite_writes.append

    def submit_many(writes):  # type: ignore[no-untyped-def]
        queued.extend((session_id, weight) for _, session_id, weight in writes)
        return real_submit_many(writes)

    def append(db, session_id, *args, **kwargs):  # type: ignore[no-untyped-def]
        if session_id == "s20":
            raise sqlite3.OperationalError("disk I/O error")
        return real_append(db, session_id, *args, **kwargs)

    monkeypatch.setattr(writer, "submit_many", submit_many)
    monkeypatch.setattr(sqlite_writes, "append", append)
    heavy = u("e7", "x" * (100 << 10))
    appends = [
        PlainAppend(f"s{n}", (heavy if n == 7 else u(f"e{n}"),), create_if_missing=True)
        for n in range(40)
    ]
    appends.append(PlainAppend("absent", (u("x"),)))  # fails alone, in its savepoint
    outcomes = await store.append_many(appends)
    expected = [(f"s{n}", 1) for n in range(40)] + [("absent", 1)]
    expected[7] = ("s7", write_weight(1, heavy.content_bytes()))
    assert queued == expected
    assert isinstance(outcomes[-1], SessionNotFound)
    # A database error fails the transaction it is in, and no other: each session is
    # stored whole or answered StoreUnavailable with nothing stored.
    assert isinstance(outcomes[20], StoreUnavailable)
    for n, outcome in enumerate(outcomes[:40]):
        if isinstance(outcome, AppendOutcome):
            assert [e.id for e in (await store.active_window(f"s{n}"))[1]] == [f"e{n}"]
        else:
            assert isinstance(outcome, StoreUnavailable)
            with pytest.raises(SessionNotFound):
                await store.get_session(f"s{n}")


async def test_sequential_writes_reuse_one_drain_and_close_does_not_wait_for_it(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that come milliseconds apart: a drain that stopped between them cost each a
    task, an aiosqlite job and a loop wake-up. The drain waits for the next one, and
    closing the store ends that wait at once. (Not appends: an idle writer commits a
    light one on the loop's thread, see the inline tests.)"""
    from sidecar.store import sqlite_writer

    starts: list[object] = []
    real = sqlite_writer.run_in_connection_thread  # type: ignore[attr-defined]

    def counting(connection, fn):  # type: ignore[no-untyped-def]
        starts.append(fn)
        return real(connection, fn)

    monkeypatch.setattr(sqlite_writer, "run_in_connection_thread", counting)
    for n in range(5):
        await store.create_session(f"s{n}", policy_json=None, labels={})
        await asyncio.sleep(0.02)  # ten times the drain's old linger
    assert len(starts) == 1
    loop = asyncio.get_running_loop()
    began = loop.time()
    await store.close()
    assert loop.time() - began < sqlite_writer.LINGER_S / 2
    await store.open()
    for n in range(5):
        assert (await store.get_session(f"s{n}")).version == 1


def file_bytes(path: str) -> int:
    return Path(path).stat().st_size


async def test_the_writer_never_checkpoints_and_the_checkpointer_does(
    path: str, unindexed: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint inside a commit made every write queued behind it wait: the writer
    leaves them to a connection of its own, which copies the WAL into the file."""
    from sidecar.store import sqlite_checkpoints

    monkeypatch.setattr(sqlite_checkpoints, "CHECKPOINT_EVERY_S", 0.05)
    store = SqliteStore(path)
    await store.open()
    try:
        assert store._writer is not None
        (pages,) = await run_in_connection_thread(
            store._writer.connection,
            lambda db: db.execute("PRAGMA wal_autocheckpoint").fetchone(),
        )
        assert pages == 0
        empty = file_bytes(path)
        big = "x" * 20_000
        for n in range(40):  # 800 KB: far below the 4 MB an autocheckpoint would wait for
            await store.append("s", [u(f"e{n}", big)], create_if_missing=True)
        for _ in range(100):
            if file_bytes(path) > empty + 500_000:
                break
            await asyncio.sleep(0.05)
        assert file_bytes(path) > empty + 500_000  # the pages reached the file
    finally:
        await store.close()
    reopened = SqliteStore(path)
    await reopened.open()
    try:
        _, window = await reopened.active_window("s")
        assert len(window) == 40
    finally:
        await reopened.close()


# -- full-text indexing, off the appends' transactions ----------------------------


@pytest.fixture
async def unindexed(path: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[SqliteStore]:
    """A store whose background indexing never comes: only a search indexes."""
    from sidecar.store import sqlite_indexing

    monkeypatch.setattr(sqlite_indexing, "INDEX_AFTER_S", 60.0)
    opened = SqliteStore(path)
    await opened.open()
    yield opened
    await opened.close()


async def found_ids(store: SqliteStore, text: str) -> list[str]:
    """The ids a search of every session's whole log finds for ``text``."""
    page = await store.search(SearchQuery(text, include_active=True), page_size=1000, page_token="")
    return [hit.event.id for hit in page.items]


def pending(path: str) -> int:
    (count,) = query(path, "SELECT count(*) FROM fts_pending")[0]
    assert isinstance(count, int)
    return count


def pending_in(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT count(*) FROM fts_pending").fetchone()[0])


async def test_a_search_finds_every_event_acknowledged_before_it_though_indexing_waits(
    path: str, unindexed: SqliteStore
) -> None:
    from sidecar.compaction.formatting import format_event
    from sidecar.model import ToolResult

    result = Event(
        id="r",
        role=Role.TOOL,
        tool_results=(ToolResult(call_id="c", name="grep", content="walrus output"),),
        token_count=3,
    )
    events = [u(f"e{n}", f"walrus number {n}") for n in range(30)] + [result]
    for event in events:
        await unindexed.append("s", [event], create_if_missing=True)
    assert pending(path) == 31  # in the appends' transactions, only the pending rows
    assert sorted(await found_ids(unindexed, "walrus")) == sorted(e.id for e in events)
    assert pending(path) == 0
    bodies = [str(body) for (body,) in query(path, "SELECT body FROM events_fts")]
    assert sorted(bodies) == sorted(format_event(e) for e in events)


async def test_pending_events_are_indexed_in_batches_in_the_background(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.store import sqlite_indexing, sqlite_writes

    monkeypatch.setattr(sqlite_indexing, "INDEX_AFTER_S", 0.3)
    monkeypatch.setattr(sqlite_writes, "INDEX_BATCH", 7)  # a backlog takes several batches
    batches: list[int] = []
    real = sqlite_writes.index_pending

    def counting(db: sqlite3.Connection, limit: int = 7, through: int | None = None) -> bool:
        batches.append(pending_in(db))
        return real(db, limit, through)

    monkeypatch.setattr(sqlite_writes, "index_pending", counting)
    store = SqliteStore(path)
    await store.open()
    try:
        await asyncio.gather(
            *(store.append(f"s{n}", [u(f"e{n}")], create_if_missing=True) for n in range(20))
        )
        for _ in range(100):
            if pending(path) == 0:
                break
            await asyncio.sleep(0.05)
        assert pending(path) == 0
        assert batches == [20, 13, 6]  # one background write after another, 7 at a time
        assert query(path, "SELECT count(*) FROM events_fts") == [(20,)]
    finally:
        await store.close()


async def test_events_left_pending_by_a_close_or_crash_are_indexed_after_reopening(
    path: str, unindexed: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.store import sqlite_indexing

    await unindexed.append("s", [u("e1", "narwhal")], create_if_missing=True)
    await unindexed.close()
    assert pending(path) == 1  # durable, as a crash would leave it
    monkeypatch.setattr(sqlite_indexing, "INDEX_AFTER_S", 0.01)
    await unindexed.open()
    for _ in range(100):  # the background write takes it, with no search asking
        if pending(path) == 0:
            break
        await asyncio.sleep(0.02)
    assert pending(path) == 0
    assert await found_ids(unindexed, "narwhal") == ["e1"]


async def test_deleting_a_session_drops_its_pending_rows_and_a_reused_rowid_is_indexed(
    path: str, unindexed: SqliteStore
) -> None:
    """The newest rows deleted, SQLite hands their rowids out again: the index must follow
    the pending rows, not a high-water mark."""
    await unindexed.append("old", [u("o1", "okapi")], create_if_missing=True)
    assert await found_ids(unindexed, "okapi") == ["o1"]
    await unindexed.append("gone", [u("g1", "gazelle")], create_if_missing=True)
    await unindexed.delete_session("gone")
    assert pending(path) == 0
    await unindexed.append("new", [u("n1", "newt")], create_if_missing=True)
    for text, ids in (("gazelle", []), ("newt", ["n1"]), ("okapi", ["o1"])):
        assert await found_ids(unindexed, text) == ids, text


async def test_a_search_that_cannot_index_first_fails_rather_than_miss_events(
    unindexed: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.store import sqlite_writes

    await unindexed.append("s", [u("e1", "quokka")], create_if_missing=True)

    def full(db: sqlite3.Connection, limit: int = 32, through: int | None = None) -> bool:
        raise sqlite3.OperationalError("database or disk is full")

    with monkeypatch.context() as patched:
        patched.setattr(sqlite_writes, "index_pending", full)
        with pytest.raises(StoreUnavailable):
            await found_ids(unindexed, "quokka")
    assert await found_ids(unindexed, "quokka") == ["e1"]


async def test_searches_at_once_each_wait_for_the_indexing_they_need(
    unindexed: SqliteStore,
) -> None:
    """The second of two searches found the first's indexing write under way and ran
    without waiting for it: it missed every event that write was indexing."""
    text = "walrus " + "filler " * 500
    await unindexed.append("s", [u(f"e{n}", text) for n in range(300)], create_if_missing=True)
    query = SearchQuery("walrus", include_active=True)
    pages = await asyncio.gather(
        *(unindexed.search(query, page_size=1000, page_token="") for _ in range(3))
    )
    assert [len(page.items) for page in pages] == [300, 300, 300]


async def test_a_search_indexes_in_batches_only_what_was_pending_when_it_began(
    path: str, unindexed: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search after a bulk load indexed the whole backlog in one transaction, every
    other client's writes waiting behind it; and appends made meanwhile lengthened it."""
    from sidecar.store import sqlite_writes

    monkeypatch.setattr(sqlite_writes, "INDEX_BATCH", 7)
    real = sqlite_writes.index_pending
    batches: list[int] = []

    def counting(db: sqlite3.Connection, limit: int = 7, through: int | None = None) -> bool:
        batches.append(pending_in(db))
        more = real(db, limit, through)
        if len(batches) == 1:  # an append lands between the search's batches
            db.execute("INSERT INTO fts_pending (pk) VALUES (1000000)")
        return more

    monkeypatch.setattr(sqlite_writes, "index_pending", counting)
    for n in range(20):
        await unindexed.append("s", [u(f"e{n}", "walrus")], create_if_missing=True)
    assert len(await found_ids(unindexed, "walrus")) == 20
    assert batches == [20, 14, 7]  # 7 at a time, and never the row that came later
    assert pending(path) == 1
