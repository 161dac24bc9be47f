"""The SQLite store: the embedded default, one file, no server.

Connections. One writer, a small pool of readers, and connections of their
own for searches and for checkpoints, each on its own thread; a whole
transaction is queued to that thread as ONE function (``sqlite_connections``).
The transaction bodies are plain functions of a ``sqlite3.Connection``, in
``sqlite_writes``, ``sqlite_reads`` and ``sqlite_history``; this module only
routes them.

Group commit. Writes that arrive while the writer is busy are queued, fairly
between tenants and then sessions (``fair_queue``), and the next transaction runs a group of
them, each inside its own SAVEPOINT, then commits once (``sqlite_writer``).
A write that fails (a version conflict, an unknown session) rolls back to
its savepoint and gets its own error; the others still commit. A stream's
appends to many sessions (``append_many``) that meet in a group are written
together, with a few statements for all of them and no savepoints, each
append's own errors found before anything is written
(``sqlite_append_groups``). Every write
is acknowledged only after the COMMIT that holds it, so durability is
unchanged, while a hundred sessions appending at once cost a few commits
(and fsyncs with FULL) instead of a hundred. A lone write runs alone: no
savepoint, no waiting for company.

Durability. The file is in WAL mode with ``synchronous=NORMAL`` by default
(``FULL`` through the constructor). An acknowledged append (the awaitable
returned, so its COMMIT is done) survives:

- a crash or SIGKILL of this process: always. The commit is in the WAL file,
  in the OS page cache; the next open replays it. (``tests/store/test_crash.py``
  checks this by killing a writer twenty times.)
- power loss or an OS crash: with NORMAL, the last transactions before the
  loss may roll back, since the WAL is only fsynced at checkpoints (about
  every second, off the writer's path: ``sqlite_checkpoints``); the file
  stays consistent (never corrupt, never half a transaction). With FULL the
  WAL is fsynced on every commit, and no acknowledged write is lost, at the
  cost of one fsync per transaction.

The path must name a file: readers are separate connections, so ``:memory:``
would give each its own empty database.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from sidecar.compaction.head import WindowHead
from sidecar.model import (
    CompactionPlan,
    CompactionResult,
    Event,
    LabelUpdate,
    Session,
    UsageReport,
    utcnow,
)
from sidecar.store import sqlite_append_groups as append_groups
from sidecar.store import sqlite_counts as counts
from sidecar.store import sqlite_head as head
from sidecar.store import sqlite_history as history
from sidecar.store import sqlite_reads as reads
from sidecar.store import sqlite_writes as writes
from sidecar.store.codec import to_micros
from sidecar.store.event_cache import DEFAULT_MAX_BYTES, DecodedEvents
from sidecar.store.fair_queue import write_weight
from sidecar.store.paging import page_size as effective_page_size
from sidecar.store.protocol import (
    AppendOutcome,
    ApplyOutcome,
    CompactionRecord,
    CountsLanded,
    Page,
    PlainAppend,
    RestoreOutcome,
    SearchHit,
    SearchQuery,
    SessionFilter,
)
from sidecar.store.sqlite_connections import SqliteConnections
from sidecar.store.sqlite_indexing import SearchIndexer
from sidecar.store.sqlite_threads import run_in_connection_thread
from sidecar.store.sqlite_writer import SqliteWriter

__all__ = ["SqliteStore", "run_in_connection_thread"]

T = TypeVar("T")


class SqliteStore:
    """The Store protocol on one SQLite file (see the module docstring)."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "NORMAL",
        readers: int = 2,
        search_connections: int = 2,
        decoded_cache_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._connections = SqliteConnections(
            path, synchronous=synchronous, readers=readers, search_connections=search_connections
        )
        self.path = path
        self.synchronous = self._connections.synchronous
        self._indexer = SearchIndexer(lambda body: self._write(body), lambda body: self._read(body))
        self._decoded = DecodedEvents(decoded_cache_bytes)

    @property
    def _writer(self) -> SqliteWriter | None:
        """The writer while open (white-box tests reach its connection and queue)."""
        return self._connections.writer

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Connect, set the pragmas, run pending migrations (SchemaTooNew if the file is newer)."""
        if self._connections.writer is not None:
            return
        await self._connections.open()
        if await self._read(lambda db: db.execute("SELECT 1 FROM fts_pending LIMIT 1").fetchone()):
            self._indexer.appended()  # left pending by a crash or a close

    async def close(self) -> None:
        """Refuse new calls, let the ones in flight finish (stopping searches), then disconnect."""
        if self._connections.writer is None:
            return
        await self._indexer.close()
        await self._connections.close()

    async def ping(self) -> None:
        """Write the heartbeat row and read through a reader; StoreUnavailable if either fails.

        A write, not just a query: a full disk still serves reads, and health
        must turn NOT_SERVING while appends cannot be stored.
        """
        self._connections.require_writer()

        def beat(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO heartbeat (id, at) VALUES (1, ?)"
                " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                (to_micros(utcnow()),),
            )

        def probe(db: sqlite3.Connection) -> None:
            db.execute("SELECT count(*) FROM schema_version").fetchone()

        await self._write(beat)
        await self._read(probe)

    # -- plumbing ------------------------------------------------------------

    async def _write(
        self,
        body: Callable[[sqlite3.Connection], T],
        *,
        session_id: str = "",
        weight: int = 1,
        inline: bool = False,
    ) -> T:
        """Run ``body`` in an IMMEDIATE transaction on the writer's thread (``sqlite_writer``).

        Queued fairly between tenants, then sessions, by ``weight`` and committed in groups.
        Bodies read the clock themselves (``utcnow()`` inside the lambda), so
        update times follow commit order. ``inline``: an append's body, which
        may commit at once on the loop's thread when the writer is idle and
        the write is light.
        """
        return await self._connections.write(
            body, session_id=session_id, weight=weight, inline=inline
        )

    async def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` as one read transaction (one snapshot) on an idle reader."""
        return await self._connections.read(body)

    def drop_caches(self) -> None:
        """Forget the decoded events (the server does when it has been idle a while)."""
        self._decoded.clear()

    def cache_bytes(self) -> int:
        """Content bytes the decoded-event cache holds."""
        return self._decoded.bytes_held

    def write_counts(self) -> tuple[int, int, int]:
        """Writes committed at once on the event loop's thread, writes queued for the
        writer's thread, and the transactions it committed them in, since the store opened
        (zeros while closed)."""
        writer = self._connections.writer
        if writer is None:
            return 0, 0, 0
        return writer.inline_writes, writer.queued_writes, writer.groups

    # -- sessions ------------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        *,
        policy_json: str | None,
        labels: Mapping[str, str],
        model: str = "",
    ) -> Session:
        _, session = await self._write(
            lambda db: writes.create_session(
                db, session_id, policy_json=policy_json, labels=labels, now=utcnow(), model=model
            ),
            session_id=session_id,
        )
        return session

    async def get_session(self, session_id: str) -> Session:
        _, session = await self._read(lambda db: reads.get_session(db, session_id))
        return session

    async def update_session(
        self,
        session_id: str,
        *,
        policy_json: str | None = None,
        set_policy: bool = False,
        labels: Mapping[str, str] | None = None,
        expected_version: int | None = None,
        model: str | None = None,
    ) -> Session:
        return await self._write(
            lambda db: writes.update_session(
                db,
                session_id,
                policy_json=policy_json,
                set_policy=set_policy,
                labels=labels,
                expected_version=expected_version,
                now=utcnow(),
                model=model,
            ),
            session_id=session_id,
        )

    async def list_sessions(
        self, filter: SessionFilter, *, page_size: int, page_token: str
    ) -> Page[Session]:
        size = effective_page_size(page_size)
        return await self._read(
            lambda db: reads.list_sessions(db, filter, size=size, token=page_token)
        )

    async def delete_session(self, session_id: str) -> None:
        await self._write(lambda db: writes.delete_session(db, session_id), session_id=session_id)

    # -- the log -------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        *,
        expected_version: int | None = None,
        create_if_missing: bool = False,
        policy_json: str | None = None,
        label_updates: Sequence[LabelUpdate] = (),
        max_labels: int = 64,
        usage: UsageReport | None = None,
    ) -> AppendOutcome:
        batch = tuple(events)
        outcome: AppendOutcome = await self._write(
            lambda db: writes.append(
                db,
                session_id,
                batch,
                expected_version=expected_version,
                create_if_missing=create_if_missing,
                policy_json=policy_json,
                now=utcnow(),
                label_updates=label_updates,
                max_labels=max_labels,
                usage=usage,
            ),
            session_id=session_id,
            weight=write_weight(len(batch), sum(e.content_bytes() for e in batch)),
            inline=True,
        )
        if outcome.written:
            self._indexer.appended()
        return outcome

    async def append_many(
        self, appends: Sequence[PlainAppend], *, policy_json: str | None = None
    ) -> list[AppendOutcome | Exception]:
        """Each session's append queued as its own write, all before any is awaited.

        So each is queued fairly under its own session, as ``append`` would
        be, and the writer commits them in groups; they cost no task each,
        and the group's outcomes come back in one wake-up. Together as light
        as one light append, they commit at once when the writer is idle
        (``sqlite_writer``). In a group, those to stored sessions are written
        together (``sqlite_append_groups``), the others each in its savepoint.
        """
        outcomes = await self._connections.write_many(
            [
                (
                    PlainAppendWrite(append, policy_json),
                    append.session_id,
                    write_weight(len(append.events), sum(e.content_bytes() for e in append.events)),
                )
                for append in appends
            ],
            inline=True,
        )
        if any(isinstance(o, AppendOutcome) and o.written for o in outcomes):
            self._indexer.appended()
        return outcomes

    async def pending_counts(
        self, session_id: str, limit: int, *, through: int | None = None
    ) -> tuple[Session, tuple[Event, ...]]:
        return await self._read(lambda db: counts.pending_counts(db, session_id, limit, through))

    async def land_counts(
        self, session_id: str, exact: Mapping[str, int], *, incarnation: int | None = None
    ) -> CountsLanded:
        return await self._write(
            lambda db: counts.land_counts(db, session_id, exact, incarnation),
            session_id=session_id,
            weight=write_weight(len(exact)),
        )

    async def active_window(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        return await self._read(lambda db: reads.active_window(db, session_id, self._decoded))

    async def window_head(
        self, session_id: str, events: int, *, count_calls: bool = False
    ) -> tuple[Session, WindowHead]:
        return await self._read(
            lambda db: head.window_head(
                db, session_id, events, count_calls=count_calls, cache=self._decoded
            )
        )

    async def apply(self, session_id: str, plan: CompactionPlan) -> ApplyOutcome:
        if plan.is_empty:
            raise ValueError("an empty compaction plan writes nothing; do not apply it")
        outcome: ApplyOutcome = await self._write(
            lambda db: writes.apply(db, session_id, plan, now=utcnow()),
            session_id=session_id,
            weight=write_weight(len(plan.inserts) + len(plan.archive_ids)),
        )
        if plan.inserts:
            self._indexer.appended()
        return outcome

    async def list_events(
        self,
        session_id: str,
        *,
        page_size: int,
        page_token: str,
        include_archived: bool = True,
        max_bytes: int | None = None,
    ) -> Page[Event]:
        size = effective_page_size(page_size)
        return await self._read(
            lambda db: reads.list_events(
                db,
                session_id,
                size=size,
                token=page_token,
                include_archived=include_archived,
                max_bytes=max_bytes,
            )
        )

    async def search(
        self,
        query: SearchQuery,
        *,
        page_size: int,
        page_token: str,
        timeout_s: float | None = None,
        max_bytes: int | None = None,
    ) -> Page[SearchHit]:
        self._connections.require_writer()
        size = effective_page_size(page_size)
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(timeout_s):  # waiting for the writer counts against it
            await self._indexer.before_search()  # exact for everything acknowledged before it
        left = None if timeout_s is None else max(0.0, timeout_s - (loop.time() - began))
        return await self._connections.search(
            lambda db: reads.search(db, query, size=size, token=page_token, max_bytes=max_bytes),
            left,
        )

    async def compaction_result(self, session_id: str, compaction_id: str) -> CompactionResult:
        return await self._read(lambda db: history.compaction_result(db, session_id, compaction_id))

    async def compaction_record(self, session_id: str, compaction_id: str) -> CompactionRecord:
        return await self._read(lambda db: history.compaction_record(db, session_id, compaction_id))

    async def list_compactions(
        self,
        session_id: str,
        *,
        page_size: int,
        page_token: str,
        newest_first: bool = False,
        max_bytes: int | None = None,
    ) -> Page[CompactionRecord]:
        size = effective_page_size(page_size)
        return await self._read(
            lambda db: history.list_compactions(
                db,
                session_id,
                size=size,
                token=page_token,
                newest_first=newest_first,
                max_bytes=max_bytes,
            )
        )

    async def restore(
        self,
        session_id: str,
        compaction_id: str,
        *,
        expected_version: int | None = None,
        pause_auto_compaction: bool = False,
    ) -> RestoreOutcome:
        outcome: RestoreOutcome = await self._write(
            lambda db: history.restore(
                db,
                session_id,
                compaction_id,
                expected_version=expected_version,
                pause=pause_auto_compaction,
                now=utcnow(),
            ),
            session_id=session_id,
        )
        return outcome


@dataclass(frozen=True, slots=True)
class PlainAppendWrite:
    """One session's part of ``append_many`` as the writer's body: alone,
    ``sqlite_writes.append``; beside others of its kind in a group, written with them
    (``sqlite_append_groups``). A ``sqlite_writer.Batchable``."""

    append: PlainAppend
    policy_json: str | None

    def __call__(self, db: sqlite3.Connection) -> AppendOutcome:
        return writes.append(
            db,
            self.append.session_id,
            self.append.events,
            expected_version=None,
            create_if_missing=self.append.create_if_missing,
            policy_json=self.policy_json,
            now=utcnow(),
        )

    @staticmethod
    def together(
        db: sqlite3.Connection, bodies: Sequence[PlainAppendWrite]
    ) -> list[tuple[bool, Any] | None]:
        outcomes = append_groups.append_together(db, [b.append for b in bodies], now=utcnow())
        return [None if o is None else (not isinstance(o, Exception), o) for o in outcomes]
