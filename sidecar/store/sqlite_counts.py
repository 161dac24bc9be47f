"""The SQLite store's exact counts that land after the append (issue 37).

An event appended with an estimate (``Event.token_bounds``) keeps its bounds
in ``token_low`` and ``token_high`` until its exact count lands. Landing is a
write of its own: it sets each pending row's count, clears its bounds, and
moves the session's ``tokens`` and pending slack by what changed for the
window, without bumping the version or the update time, so a client's
``expected_version`` and every read cached by version stay valid (those
reads said their counts were estimates). Plain functions of a
``sqlite3.Connection``, run on the writer's or a reader's thread like
``sqlite_writes`` and ``sqlite_reads``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import replace

from sidecar.model import Event, Session
from sidecar.store import counter_rules, rules
from sidecar.store.protocol import CountsLanded
from sidecar.store.sqlite_reads import EVENT_COLUMNS, event_from_row, get_session, window_counters
from sidecar.store.sqlite_writes import stored_events

# ``token_low IS NOT NULL`` spelled as the partial index ``events_pending`` is.
_PENDING_SQL = (
    f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.session = ? AND e.token_low IS NOT NULL"
    " AND e.position <= ? ORDER BY e.position LIMIT ?"
)


def pending_counts(
    db: sqlite3.Connection, session_id: str, limit: int, through: int | None = None
) -> tuple[Session, tuple[Event, ...]]:
    """The session and up to ``limit`` of its pending events, oldest first, up to position
    ``through`` when given (``Store.pending_counts``)."""
    pk, session = get_session(db, session_id)
    last = rules.last_position(through)
    rows = db.execute(_PENDING_SQL, (pk, last, limit))
    return session, tuple(event_from_row(row) for row in rows)


def land_counts(
    db: sqlite3.Connection,
    session_id: str,
    counts: Mapping[str, int],
    incarnation: int | None = None,
) -> CountsLanded:
    """Set the exact counts of the session's pending events among ``counts`` (see
    ``Store.land_counts``)."""
    pk, session = get_session(db, session_id)
    if incarnation is not None and session.incarnation != incarnation:
        return CountsLanded(session, ())
    stored = stored_events(db, pk, list(counts))
    pending = [event for event in stored.values() if event.token_bounds is not None]
    if not pending:
        return CountsLanded(session, ())
    landed = tuple((event, counts[event.id]) for event in pending)
    db.executemany(
        "UPDATE events SET token_count = ?, token_low = NULL, token_high = NULL"
        " WHERE session = ? AND id = ?",
        [(exact, pk, event.id) for event, exact in landed],
    )
    counters = counter_rules.counters_counted(session.counters, landed)
    if counters is None:
        since = session.counters.turns_since_compaction
        counters = replace(window_counters(db, pk), turns_since_compaction=since)
    db.execute(
        "UPDATE sessions SET tokens = ?, pending_below = ?, pending_above = ? WHERE pk = ?",
        (counters.tokens, counters.pending_below, counters.pending_above, pk),
    )
    return CountsLanded(replace(session, counters=counters), landed)
