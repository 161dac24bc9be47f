"""The PostgreSQL store: one database shared by every replica of the service.

Selected by a ``postgres://`` or ``postgresql://`` store URL (any PostgreSQL
13+ behind it: Cloud SQL, AlloyDB, RDS...). The URL is libpq's, read by
asyncpg: ``postgresql://user:password@host:5432/db?sslmode=require``, and any
other query parameter is a server setting, e.g. ``?search_path=compaction``
to keep the tables in their own schema.

Connections come from an asyncpg pool (``pool_size``). Each store call is one
transaction on one pooled connection: writes in READ COMMITTED, serialized
per session by a row lock (see ``postgres_writes``); reads that need one
snapshot (a session and its window) in a REPEATABLE READ, READ ONLY one.

Failures. Anything that means "the database cannot answer now" — refused or
dropped connections, a shutdown or failover in progress, too many
connections, a full disk, a statement timeout, a serialization failure — is
StoreUnavailable (gRPC UNAVAILABLE), so clients retry and health turns
NOT_SERVING. The pool replaces broken connections as they are returned, so
service resumes by itself when the database is back. Reads and appends (which
are idempotent by event id) are retried once at once on such a failure: the
first call after a database restart usually meets a pooled connection the
server has closed, and should not fail for that.

Searches. At most half the pool searches at once (at least one search), so
context reads always find a connection. A search past its budget is
stopped twice over: asyncpg cancels its statement when the waiting call
gives up, and ``SET LOCAL statement_timeout`` has the server stop it should
that cancel not get through. Either is a ``TimeoutError``, not an outage:
the connection is fine, and the search is not retried.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import asyncpg

from sidecar.errors import InvalidConfig, StoreUnavailable
from sidecar.model import (
    CompactionPlan,
    CompactionResult,
    Event,
    LabelUpdate,
    Session,
    UsageReport,
    utcnow,
)
from sidecar.store import postgres_history as history
from sidecar.store import postgres_reads as reads
from sidecar.store import postgres_writes as writes
from sidecar.store.event_cache import DEFAULT_MAX_BYTES, DecodedEvents
from sidecar.store.paging import page_size as effective_page_size
from sidecar.store.postgres_schema import Db, folds_accents, migrate
from sidecar.store.protocol import (
    AppendOutcome,
    ApplyOutcome,
    CompactionRecord,
    Page,
    PlainAppend,
    RestoreOutcome,
    SearchHit,
    SearchQuery,
    SessionFilter,
)
from sidecar.store.urls import is_postgres_url, redact

T = TypeVar("T")
log = logging.getLogger(__name__)

UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable, DNS
    TimeoutError,
    ssl.SSLError,
    asyncpg.PostgresConnectionError,  # dropped connection, rejected login
    asyncpg.InterfaceError,  # connection closed under us, pool closing
    asyncpg.exceptions.InternalClientError,  # protocol state left behind by a dropped link
    asyncpg.exceptions.OperatorInterventionError,  # shutdown, crash, statement timeout
    asyncpg.exceptions.InsufficientResourcesError,  # disk full, too many connections
    asyncpg.exceptions.TransactionRollbackError,  # serialization failure, deadlock
    asyncpg.exceptions.ReadOnlySQLTransactionError,  # connected to a standby after failover
)


class _SearchStopped(Exception):
    """The server stopped a search at its statement_timeout (kept apart from outages)."""


class PostgresStore:
    """The Store protocol on a PostgreSQL database (see the module docstring)."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 10,
        connect_timeout_s: float = 5.0,
        statement_timeout_s: float = 30.0,
        decoded_cache_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if not is_postgres_url(dsn):
            raise ValueError(f"not a PostgreSQL URL: {redact(dsn)!r}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        self.dsn = dsn
        self.where = redact(dsn)
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self._pool: asyncpg.Pool | None = None
        self._decoded = DecodedEvents(decoded_cache_bytes)
        self._searching = asyncio.Semaphore(max(1, pool_size // 2))
        self.folds_accents = False
        """Whether search folds accents (the unaccent extension was there); set by open."""
        self.origin = uuid.uuid4().hex
        """This store's id in compaction notices, so it can skip its own."""
        self._compaction_callbacks: list[Callable[[str, str], None]] = []
        self._catch_up_callbacks: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._listened_before = False
        self._held: list[str] | None = None  # notices that came during a catch-up
        self._listener: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        """Set while the notice connection is up (tests wait on it)."""

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Connect, and run pending migrations (SchemaTooNew if the database is newer)."""
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(
                self.dsn,
                min_size=min(2, self.pool_size),
                max_size=self.pool_size,
                timeout=self.connect_timeout_s,
                command_timeout=self.statement_timeout_s,
                # Statements differ per batch size; a server-side cache per shape is
                # cheap, and it is dropped with the connection.
                statement_cache_size=256,
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"postgres {self.where}: {exc}") from exc
        except asyncpg.PostgresError as exc:  # bad credentials, no such database
            raise InvalidConfig("store", f"postgres {self.where}: {exc}") from exc
        try:
            async with pool.acquire() as db:
                await migrate(db, self.where)
                self.folds_accents = await folds_accents(db)
        except BaseException:
            await pool.close()
            raise
        if not self.folds_accents:
            log.warning(
                "postgres %s: the unaccent extension could not be installed, so search"
                ' does not fold accents ("cafe" will not find "café"); install'
                " PostgreSQL's contrib package, or have an owner run CREATE EXTENSION"
                " unaccent, then run ALTER TEXT SEARCH CONFIGURATION"
                " compaction_search ALTER MAPPING FOR hword, hword_part, word WITH"
                " unaccent, simple and rebuild the search column",
                self.where,
            )
        self._pool = pool

    async def close(self) -> None:
        """Wait for the calls in flight, then disconnect."""
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- compactions made by other replicas ------------------------------------

    def on_compaction_elsewhere(
        self,
        callback: Callable[[str, str], None],
        catch_up: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        """Call ``callback(session_id, compaction_id)`` for compactions other replicas land.

        Each compaction is announced with NOTIFY in the transaction that
        applies it; one connection per replica LISTENs, reconnecting after
        an outage. Notices sent while it was disconnected are gone: once it
        is back, ``catch_up()`` is called so the caller can look for what it
        missed in the database.
        """
        self._compaction_callbacks.append(callback)
        if catch_up is not None:
            self._catch_up_callbacks.append(catch_up)
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # down, or refused: try again shortly
                log.info("postgres notice connection lost (%s); reconnecting", exc)
            await asyncio.sleep(1.0)

    async def _listen_once(self) -> None:
        """One LISTEN connection, until it drops."""
        connection = await asyncpg.connect(self.dsn, timeout=self.connect_timeout_s)
        try:
            schema = await connection.fetchval("SELECT current_schema()")
            lost = asyncio.Event()
            connection.add_termination_listener(lambda _: lost.set())

            def notice(_conn: object, _pid: int, _channel: str, payload: object) -> None:
                if self._held is not None:
                    self._held.append(str(payload))
                else:
                    self._notice(str(payload), schema)

            await connection.add_listener(writes.NOTIFY_CHANNEL, notice)
            self.listening.set()
            if self._listened_before:
                await self._catch_up(schema)
            self._listened_before = True
            await lost.wait()
        finally:
            self.listening.clear()
            if not connection.is_closed():
                connection.terminate()

    async def _catch_up(self, schema: str) -> None:
        """Back after an outage: let the callers look up what they missed, then pass on
        the notices that came meanwhile (after, so that they arrive in order)."""
        self._held = []
        try:
            outcomes = await asyncio.gather(
                *(catch_up() for catch_up in self._catch_up_callbacks), return_exceptions=True
            )
            for outcome in outcomes:
                if isinstance(outcome, Exception):
                    log.warning("catching up after a notice outage failed: %r", outcome)
        finally:
            held, self._held = self._held, None
            for payload in held:
                self._notice(payload, schema)

    def _notice(self, payload: str, schema: str) -> None:
        try:
            notice = json.loads(payload)
        except ValueError:
            return
        if notice.get("schema") != schema or notice.get("origin") == self.origin:
            return
        for callback in self._compaction_callbacks:
            callback(str(notice["session"]), str(notice["compaction"]))

    async def ping(self) -> None:
        """Rewrite the heartbeat row; StoreUnavailable if the database does not take it.

        A write, not just a query: a full disk or a read-only standby still
        answers reads, and health must turn NOT_SERVING while appends cannot
        be stored. One row for every replica: a probe every few seconds each
        is no contention.
        """
        await self._run(
            lambda db: db.execute(
                "INSERT INTO heartbeat (id, at) VALUES (1, now())"
                " ON CONFLICT (id) DO UPDATE SET at = excluded.at"
            ),
            retry=False,
        )

    # -- plumbing ------------------------------------------------------------

    async def _run(self, body: Callable[[Db], Awaitable[T]], *, retry: bool) -> T:
        """Run ``body`` on a pooled connection; map outages to StoreUnavailable."""
        attempts = 2 if retry else 1
        for attempt in range(1, attempts + 1):
            pool = self._pool
            if pool is None:
                raise StoreUnavailable("postgres store is not open")
            try:
                async with pool.acquire(timeout=self.connect_timeout_s) as db:
                    try:
                        return await body(db)
                    except UNAVAILABLE_ERRORS:
                        # A connection in doubt is never handed to the next caller, and
                        # its siblings likely died with it (a restart, a failover): the
                        # pool reconnects each before its next use.
                        db.terminate()
                        await pool.expire_connections()
                        raise
            except UNAVAILABLE_ERRORS as exc:
                if attempt < attempts:
                    log.info("postgres call failed (%s), retrying once", exc)
                    continue
                raise StoreUnavailable(f"postgres {self.where}: {exc}") from exc
        raise AssertionError("unreachable")

    async def _write(self, body: Callable[[Db], Awaitable[T]], *, retry: bool = False) -> T:
        """Run ``body`` as one READ COMMITTED transaction."""

        async def in_transaction(db: Db) -> T:
            async with db.transaction():
                return await body(db)

        return await self._run(in_transaction, retry=retry)

    async def _read(self, body: Callable[[Db], Awaitable[T]]) -> T:
        """Run ``body`` as one read-only snapshot (REPEATABLE READ)."""

        async def in_snapshot(db: Db) -> T:
            async with db.transaction(isolation="repeatable_read", readonly=True):
                return await body(db)

        return await self._run(in_snapshot, retry=True)

    def drop_caches(self) -> None:
        """Forget the decoded events (the server does when it has been idle a while)."""
        self._decoded.clear()

    def cache_bytes(self) -> int:
        """Content bytes the decoded-event cache holds."""
        return self._decoded.bytes_held

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
            )
        )
        return session

    async def get_session(self, session_id: str) -> Session:
        _, session = await self._run(lambda db: reads.get_session(db, session_id), retry=True)
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
            )
        )

    async def list_sessions(
        self, filter: SessionFilter, *, page_size: int, page_token: str
    ) -> Page[Session]:
        size = effective_page_size(page_size)
        return await self._run(
            lambda db: reads.list_sessions(db, filter, size=size, token=page_token), retry=True
        )

    async def delete_session(self, session_id: str) -> None:
        await self._write(lambda db: writes.delete_session(db, session_id))

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
        # Retried once on an outage: a batch that did land comes back as a retry.
        return await self._write(
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
            retry=True,
        )

    async def append_many(
        self, appends: Sequence[PlainAppend], *, policy_json: str | None = None
    ) -> list[AppendOutcome | Exception]:
        """Each its own transaction, side by side on the pool: PostgreSQL commits
        concurrent transactions together itself, and one slow session's row
        lock holds up only its own append."""
        settled = await asyncio.gather(
            *(
                self.append(
                    append.session_id,
                    append.events,
                    create_if_missing=append.create_if_missing,
                    policy_json=policy_json,
                )
                for append in appends
            ),
            return_exceptions=True,
        )
        # The caller's own cancellation is raised by gather; one append's (nothing here
        # cancels one alone) is that append's failure, whether or not it committed.
        return [
            outcome
            if isinstance(outcome, AppendOutcome | Exception)
            else StoreUnavailable(f"the append to {append.session_id!r} was cancelled")
            for append, outcome in zip(appends, settled, strict=True)
        ]

    async def active_window(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        return await self._read(lambda db: reads.active_window(db, session_id, self._decoded))

    async def apply(self, session_id: str, plan: CompactionPlan) -> ApplyOutcome:
        if plan.is_empty:
            raise ValueError("an empty compaction plan writes nothing; do not apply it")
        return await self._write(
            lambda db: writes.apply(db, session_id, plan, now=utcnow(), origin=self.origin)
        )

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
        size = effective_page_size(page_size)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        async def search(db: Db) -> Page[SearchHit]:
            if deadline is not None:
                left_ms = math.ceil((deadline - time.monotonic()) * 1000)
                await db.execute(f"SET LOCAL statement_timeout = {max(left_ms, 1)}")
            try:
                return await reads.search(
                    db, query, size=size, token=page_token, max_bytes=max_bytes
                )
            except asyncpg.QueryCanceledError as exc:
                if deadline is None:
                    raise  # someone else's cancel: an outage like any other
                raise _SearchStopped() from exc

        try:
            async with asyncio.timeout(timeout_s), self._searching:
                return await self._read(search)
        except _SearchStopped:
            raise TimeoutError("search stopped at its statement_timeout") from None

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
        return await self._write(
            lambda db: history.restore(
                db,
                session_id,
                compaction_id,
                expected_version=expected_version,
                pause=pause_auto_compaction,
                now=utcnow(),
                origin=self.origin,
            )
        )
