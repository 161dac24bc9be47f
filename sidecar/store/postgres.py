"""The PostgreSQL store: one database shared by every replica of the service.

Selected by a ``postgres://`` or ``postgresql://`` store URL (any PostgreSQL
13+ behind it: Cloud SQL, AlloyDB, RDS...). The URL is libpq's, read by
asyncpg: ``postgresql://user:password@host:5432/db?sslmode=require``, and any
other query parameter is a server setting, e.g. ``?search_path=compaction``
to keep the tables in their own schema.

Connections come from an asyncpg pool (``pool_size``), and each store call is
one transaction on one pooled connection; an outage is StoreUnavailable, and
reads and appends are retried once on one (``postgres_pool``). At most half
the pool searches at once, each stopped at its budget (``postgres_search``).
Compactions other replicas land are heard as notices (``postgres_notices``).
The transaction bodies are functions of a connection, in ``postgres_writes``,
``postgres_reads`` and ``postgres_history``; this module only routes them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import asyncpg

from sidecar.compaction.head import WindowHead
from sidecar.errors import StoreUnavailable
from sidecar.model import (
    CompactionPlan,
    CompactionResult,
    Event,
    LabelUpdate,
    Session,
    UsageReport,
    utcnow,
)
from sidecar.store import postgres_counts as counts
from sidecar.store import postgres_head as head
from sidecar.store import postgres_history as history
from sidecar.store import postgres_reads as reads
from sidecar.store import postgres_writes as writes
from sidecar.store.event_cache import DEFAULT_MAX_BYTES, DecodedEvents
from sidecar.store.paging import page_size as effective_page_size
from sidecar.store.postgres_notices import CompactionNotices
from sidecar.store.postgres_pool import PostgresPool
from sidecar.store.postgres_search import PostgresSearches
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
from sidecar.store.urls import is_postgres_url, redact


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
        self._connections = PostgresPool(
            dsn,
            self.where,
            pool_size=pool_size,
            connect_timeout_s=connect_timeout_s,
            statement_timeout_s=statement_timeout_s,
        )
        self._decoded = DecodedEvents(decoded_cache_bytes)
        self._searches = PostgresSearches(self._connections)
        self.origin = uuid.uuid4().hex
        """This store's id in compaction notices, so it can skip its own."""
        self._notices = CompactionNotices(
            dsn, connect_timeout_s=connect_timeout_s, origin=self.origin
        )
        self.listening = self._notices.listening
        """Set while the notice connection is up (tests wait on it)."""

    @property
    def folds_accents(self) -> bool:
        """Whether search folds accents (the unaccent extension was there); set by open."""
        return self._connections.folds_accents

    @property
    def _pool(self) -> asyncpg.Pool | None:
        """The asyncpg pool while open (white-box tests expire its connections)."""
        return self._connections.pool

    # -- lifecycle -----------------------------------------------------------

    async def open(self) -> None:
        """Connect, and run pending migrations (SchemaTooNew if the database is newer)."""
        await self._connections.open()

    async def close(self) -> None:
        """Wait for the calls in flight, then disconnect."""
        await self._notices.close()
        await self._connections.close()

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
        self._notices.subscribe(callback, catch_up)

    async def ping(self) -> None:
        """Rewrite the heartbeat row; StoreUnavailable if the database does not take it.

        A write, not just a query: a full disk or a read-only standby still
        answers reads, and health must turn NOT_SERVING while appends cannot
        be stored. One row for every replica: a probe every few seconds each
        is no contention.
        """
        await self._connections.run(
            lambda db: db.execute(
                "INSERT INTO heartbeat (id, at) VALUES (1, now())"
                " ON CONFLICT (id) DO UPDATE SET at = excluded.at"
            ),
            retry=False,
        )

    # -- caches --------------------------------------------------------------

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
        _, session = await self._connections.write(
            lambda db: writes.create_session(
                db, session_id, policy_json=policy_json, labels=labels, now=utcnow(), model=model
            )
        )
        return session

    async def get_session(self, session_id: str) -> Session:
        _, session = await self._connections.run(
            lambda db: reads.get_session(db, session_id), retry=True
        )
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
        return await self._connections.write(
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
        return await self._connections.run(
            lambda db: reads.list_sessions(db, filter, size=size, token=page_token), retry=True
        )

    async def delete_session(self, session_id: str) -> None:
        await self._connections.write(lambda db: writes.delete_session(db, session_id))

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
        return await self._connections.write(
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

    async def pending_counts(
        self, session_id: str, limit: int, *, through: int | None = None
    ) -> tuple[Session, tuple[Event, ...]]:
        return await self._connections.read(
            lambda db: counts.pending_counts(db, session_id, limit, through)
        )

    async def land_counts(
        self, session_id: str, exact: Mapping[str, int], *, incarnation: int | None = None
    ) -> CountsLanded:
        return await self._connections.write(
            lambda db: counts.land_counts(db, session_id, exact, incarnation), retry=True
        )

    async def active_window(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        return await self._connections.read(
            lambda db: reads.active_window(db, session_id, self._decoded)
        )

    async def window_head(
        self, session_id: str, events: int, *, count_calls: bool = False
    ) -> tuple[Session, WindowHead]:
        return await self._connections.read(
            lambda db: head.window_head(
                db, session_id, events, count_calls=count_calls, cache=self._decoded
            )
        )

    async def apply(self, session_id: str, plan: CompactionPlan) -> ApplyOutcome:
        if plan.is_empty:
            raise ValueError("an empty compaction plan writes nothing; do not apply it")
        return await self._connections.write(
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
        return await self._connections.read(
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
        return await self._searches.run(
            lambda db: reads.search(db, query, size=size, token=page_token, max_bytes=max_bytes),
            timeout_s,
        )

    async def compaction_result(self, session_id: str, compaction_id: str) -> CompactionResult:
        return await self._connections.read(
            lambda db: history.compaction_result(db, session_id, compaction_id)
        )

    async def compaction_record(self, session_id: str, compaction_id: str) -> CompactionRecord:
        return await self._connections.read(
            lambda db: history.compaction_record(db, session_id, compaction_id)
        )

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
        return await self._connections.read(
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
        return await self._connections.write(
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
