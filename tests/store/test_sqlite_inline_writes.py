"""A light append that finds the SQLite writer idle commits at once on the loop's thread.

Everything else queues for the writer's thread as before: a write while a
group is committing, a heavy one, any write when commits sync to disk, and
one while another process holds the file's write lock (the loop must not
wait ``busy_timeout`` for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sidecar.errors import SessionNotFound, StoreUnavailable, VersionConflict
from sidecar.store import sqlite_append_groups, sqlite_connections, sqlite_schema, sqlite_writes
from sidecar.store.protocol import PlainAppend
from sidecar.store.sqlite import SqliteStore
from tests.store.test_contract import u
from tests.store.test_sqlite import writer_committing


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "inline.db")


@pytest.fixture
async def store(path: str) -> AsyncIterator[SqliteStore]:
    async with contextlib.AsyncExitStack() as stack:
        opened = SqliteStore(path)
        await opened.open()
        stack.push_async_callback(opened.close)
        yield opened


def threads_of_appends(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The thread each append is written on, in order (one by one or with others)."""
    seen: list[int] = []
    real, real_together = sqlite_writes.append, sqlite_append_groups.append_together

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(threading.get_ident())
        return real(*args, **kwargs)

    def recording_together(*args, **kwargs):  # type: ignore[no-untyped-def]
        outcomes = real_together(*args, **kwargs)
        seen.extend(threading.get_ident() for o in outcomes if o is not None)
        return outcomes

    monkeypatch.setattr(sqlite_writes, "append", recording)
    monkeypatch.setattr(sqlite_append_groups, "append_together", recording_together)
    return seen


async def first_append_on_the_loop(store: SqliteStore, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the first append to the (unopened) store committed on this thread."""
    seen = threads_of_appends(monkeypatch)
    await store.open()
    try:
        await store.append("s", [u("e1")], create_if_missing=True)
    finally:
        await store.close()
    assert len(seen) == 1
    return seen[0] == threading.get_ident()


async def test_a_light_append_to_an_idle_writer_commits_on_the_loops_thread(
    store: SqliteStore, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_of_appends(monkeypatch)
    outcome = await store.append("s", [u("e1")], create_if_missing=True)
    assert outcome.written == 1
    assert seen == [threading.get_ident()]
    # Committed, as any write: another connection reads it at once.
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM events").fetchone() == (1,)
    finally:
        db.close()
    # The store's own errors, as from the writer's thread; nothing of them stored.
    with pytest.raises(VersionConflict):
        await store.append("s", [u("e2")], expected_version=7)
    with pytest.raises(SessionNotFound):
        await store.append("missing", [u("e3")])
    session, window = await store.active_window("s")
    assert (session.version, [e.id for e in window]) == (1, ["e1"])


async def test_an_append_while_a_group_commits_waits_for_the_writers_thread(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_of_appends(monkeypatch)
    gate = threading.Event()
    busy = asyncio.ensure_future(store._write(lambda db: gate.wait(5)))
    await writer_committing(store)
    append = asyncio.ensure_future(store.append("s", [u("e1")], create_if_missing=True))
    await asyncio.sleep(0.05)
    assert not append.done()  # queued behind the group, not run beside it
    gate.set()
    await busy
    assert (await append).written == 1
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


async def test_a_heavy_append_goes_to_the_writers_thread(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = threads_of_appends(monkeypatch)
    await store.append("s", [u(f"e{n}") for n in range(5)], create_if_missing=True)
    await store.append("s", [u("big", "x" * (80 << 10))])
    assert len(seen) == 2
    assert threading.get_ident() not in seen


async def test_commits_that_sync_to_disk_stay_off_the_loop(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (
        await first_append_on_the_loop(SqliteStore(path, synchronous="FULL"), monkeypatch) is False
    )


async def test_another_process_holding_the_write_lock_does_not_stall_the_loop(
    store: SqliteStore, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append queues for the writer's thread (which waits busy_timeout there) and the
    loop goes on serving meanwhile; it lands once the lock is let go."""
    await store.append("s", [u("e1")], create_if_missing=True)
    seen = threads_of_appends(monkeypatch)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        loop = asyncio.get_running_loop()
        began = loop.time()
        append = asyncio.ensure_future(store.append("s", [u("e2")]))
        ticks = 0
        while loop.time() - began < 0.3:
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks >= 10  # the loop kept turning while the lock was held
        assert not append.done()
        other.execute("COMMIT")
    finally:
        other.close()
    assert (await append).written == 1
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()
    # The inline path's wait was set back: the writer still waits for a lock.
    writer = store._writer
    assert writer is not None
    (timeout,) = writer.connection._conn.execute("PRAGMA busy_timeout").fetchone()
    assert timeout == 5000
    _, window = await store.active_window("s")
    assert [e.id for e in window] == ["e1", "e2"]


async def test_a_database_error_inline_is_store_unavailable_and_rolls_back(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.append("s", [u("e1")], create_if_missing=True)
    real = sqlite_writes.append

    def failing(db, *args, **kwargs):  # type: ignore[no-untyped-def]
        real(db, *args, **kwargs)  # the rows are written, then the disk fails
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(sqlite_writes, "append", failing)
    with pytest.raises(StoreUnavailable):
        await store.append("s", [u("e2")])
    monkeypatch.setattr(sqlite_writes, "append", real)
    session, window = await store.active_window("s")
    assert (session.version, [e.id for e in window]) == (1, ["e1"])
    assert (await store.append("s", [u("e3")])).written == 1


async def test_a_light_batch_of_appends_to_sessions_commits_at_once_each_alone(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's batch over a few sessions, as light as one light append: on the loop's
    thread too, each in its savepoint, so one session's error is its own."""
    await store.append("a", [u("a0")], create_if_missing=True)
    seen = threads_of_appends(monkeypatch)
    outcomes = await store.append_many(
        [
            PlainAppend("a", (u("a1"),), False),
            PlainAppend("missing", (u("m1"),), False),
            PlainAppend("b", (u("b1"),), True),
        ]
    )
    assert seen == [threading.get_ident()] * 3
    kinds = [type(o).__name__ for o in outcomes]
    assert kinds == ["AppendOutcome", "SessionNotFound", "AppendOutcome"]
    for session_id, ids in (("a", ["a0", "a1"]), ("b", ["b1"])):
        _, window = await store.active_window(session_id)
        assert [e.id for e in window] == ids
    with pytest.raises(SessionNotFound):
        await store.get_session("missing")
    # Heavier together than one light append: the writer's thread, as before.
    await store.append_many([PlainAppend(f"s{n}", (u(f"e{n}"),), True) for n in range(5)])
    assert len(seen) == 8
    assert threading.get_ident() not in seen[3:]


class FailingOnce:
    """The writer's sqlite3 connection, one statement of which fails once (after it ran,
    for a PRAGMA)."""

    def __init__(self, real: sqlite3.Connection, statement: str, error: Exception) -> None:
        self.real, self.statement, self.error, self.fired = real, statement, error, False

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if not self.fired and sql.strip().upper() == self.statement:
            self.fired = True
            if self.statement.startswith("PRAGMA"):
                self.real.execute(sql, *args)
            raise self.error
        return self.real.execute(sql, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


def fail_once(store: SqliteStore, statement: str, error: Exception) -> sqlite3.Connection:
    writer = store._writer
    assert writer is not None
    real = writer.connection._conn
    writer.connection._connection = FailingOnce(real, statement, error)  # type: ignore[assignment]
    return real


async def test_a_busy_snapshot_at_begin_queues_the_append_as_any_busy_code(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process committed between BEGIN IMMEDIATE's snapshot and its write lock:
    SQLITE_BUSY_SNAPSHOT, an extended busy code, which the writer's thread waits out."""
    await store.append("s", [u("e0")], create_if_missing=True)
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = 517  # SQLITE_BUSY_SNAPSHOT
    fail_once(store, "BEGIN IMMEDIATE", busy)
    seen = threads_of_appends(monkeypatch)
    assert (await store.append("s", [u("e1")])).written == 1
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


async def test_a_busy_timeout_not_set_back_leaves_no_transaction_open(store: SqliteStore) -> None:
    await store.append("s", [u("e0")], create_if_missing=True)
    real = fail_once(store, "PRAGMA BUSY_TIMEOUT = 5000", sqlite3.OperationalError("out of memory"))
    with pytest.raises(StoreUnavailable):
        await store.append("s", [u("e1")])
    assert not real.in_transaction  # no write lock kept: the next append lands
    assert (await store.append("s", [u("e2")])).written == 1
    _, window = await store.active_window("s")
    assert [e.id for e in window] == ["e0", "e2"]


async def test_without_wal_every_commit_stays_off_the_loop(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that cannot be in WAL mode commits past its readers' locks: not on the loop."""
    real = sqlite_schema.configure_writer

    def rollback_journal(db: sqlite3.Connection, synchronous: str) -> str:
        real(db, synchronous)
        return "delete"

    monkeypatch.setattr(sqlite_connections, "configure_writer", rollback_journal)
    assert await first_append_on_the_loop(SqliteStore(path), monkeypatch) is False
