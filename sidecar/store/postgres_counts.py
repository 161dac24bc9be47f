"""The PostgreSQL store's exact counts that land after the append (issue 37).

The SQL twin of ``sqlite_counts``: landing locks the session's row (as every
write does, so it queues behind an append or a compaction of the same
session on any replica), sets each pending row's count, and moves the
session's ``tokens`` and pending slack by what changed for the window,
without bumping the version or the update time. Counting twice on two
replicas lands once: a row no longer pending is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sidecar.model import Event, Session
from sidecar.store import counter_rules, rules
from sidecar.store.postgres_reads import EVENT_COLUMNS, event_from_row, get_session, window_counters
from sidecar.store.postgres_schema import Db
from sidecar.store.postgres_writes import stored_events
from sidecar.store.protocol import CountsLanded

# ``token_low IS NOT NULL`` spelled as the partial index ``events_pending`` is.
_PENDING_SQL = (
    f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.session = $1 AND e.token_low IS NOT NULL"
    " AND e.position <= $2 ORDER BY e.position LIMIT $3"
)


async def pending_counts(
    db: Db, session_id: str, limit: int, through: int | None = None
) -> tuple[Session, tuple[Event, ...]]:
    """The session and up to ``limit`` of its pending events, oldest first, up to position
    ``through`` when given (``Store.pending_counts``)."""
    pk, session = await get_session(db, session_id)
    last = rules.last_position(through)
    rows = await db.fetch(_PENDING_SQL, pk, last, limit)
    return session, tuple(event_from_row(row) for row in rows)


async def land_counts(
    db: Db, session_id: str, counts: Mapping[str, int], incarnation: int | None = None
) -> CountsLanded:
    """Set the exact counts of the session's pending events among ``counts`` (see
    ``Store.land_counts``)."""
    pk, session = await get_session(db, session_id, for_update=True)
    if incarnation is not None and session.incarnation != incarnation:
        return CountsLanded(session, ())
    stored = await stored_events(db, pk, list(counts))
    pending = [event for event in stored.values() if event.token_bounds is not None]
    if not pending:
        return CountsLanded(session, ())
    landed = tuple((event, counts[event.id]) for event in pending)
    await db.execute(
        """UPDATE events SET token_count = x.exact, token_low = NULL, token_high = NULL
           FROM unnest($2::text[], $3::integer[]) AS x(id, exact)
           WHERE events.session = $1 AND events.id = x.id""",
        pk,
        [event.id for event, _ in landed],
        [exact for _, exact in landed],
    )
    counters = counter_rules.counters_counted(session.counters, landed)
    if counters is None:
        since = session.counters.turns_since_compaction
        counters = replace(await window_counters(db, pk), turns_since_compaction=since)
    await db.execute(
        "UPDATE sessions SET tokens = $1, pending_below = $2, pending_above = $3 WHERE pk = $4",
        counters.tokens,
        counters.pending_below,
        counters.pending_above,
        pk,
    )
    return CountsLanded(replace(session, counters=counters), landed)
