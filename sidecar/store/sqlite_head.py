"""The SQLite store's read of a window's head (``sidecar.compaction.head``).

What a pass needs of the rest of the window is read by index, never by a
walk of it: the session's counters, the pinned events past the head
(``events_pinned``), the head's calls that are answered or called again past
it (``tool_links``) and, for a clearing, how many calls the window holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from sidecar.compaction.head import WindowHead
from sidecar.model import Event, Session
from sidecar.store.event_cache import DecodedEvents
from sidecar.store.sqlite_reads import EVENT_WIDTH, VIEW_COLUMNS, event_from_row, get_session
from sidecar.store.tool_links import CALL, RESULT, head_calls
from sidecar.store.tool_links import window_head as window_head_of

_CHUNK = 500

_HEAD_SQL = (
    f"SELECT e.pk, {VIEW_COLUMNS}, e.sort_key FROM events e"
    " WHERE e.session = ? AND e.archived = 0 ORDER BY e.sort_key, e.position LIMIT ?"
)
# ``archived = 0 AND (role = 'system' OR synthetic = 1)`` spelled as the partial index is.
_PINNED_AFTER_SQL = (
    f"SELECT e.pk, {VIEW_COLUMNS} FROM events e WHERE e.session = ?"
    " AND e.archived = 0 AND (e.role = 'system' OR e.synthetic = 1)"
    " AND (e.sort_key, e.position) > (?, ?) ORDER BY e.sort_key, e.position"
)
_REAL = "e.archived = 0 AND e.synthetic = 0 AND e.role != 'system'"
_CALLS_SQL = (
    "SELECT count(*) FROM tool_links l JOIN events e ON e.session = l.session AND e.id = l.event"
    f" WHERE l.session = ? AND l.kind = {CALL} AND {_REAL}"
)


def window_head(
    db: sqlite3.Connection,
    session_id: str,
    events: int,
    *,
    count_calls: bool,
    cache: DecodedEvents | None = None,
) -> tuple[Session, WindowHead]:
    """The session and the first ``events`` events of its active window, with the rest summed up."""
    pk, session = get_session(db, session_id)
    cache = None if cache is None else cache.for_session(pk)
    rows = db.execute(_HEAD_SQL, (pk, events)).fetchall()
    head = _decoded(rows, cache)
    calls = db.execute(_CALLS_SQL, (pk,)).fetchone()[0] if count_calls else 0
    if len(head) >= session.counters.active_events:
        return session, window_head_of(session, head, calls=calls)
    after = (rows[-1][-1], rows[-1][4]) if rows else (-1, -1)
    pinned = _decoded(db.execute(_PINNED_AFTER_SQL, (pk, *after)).fetchall(), cache)
    answered, called = _links_after(db, pk, head, after)
    return session, window_head_of(
        session, head, calls=calls, pinned=pinned, answered=answered, called=called
    )


def _decoded(rows: Sequence[sqlite3.Row], cache: DecodedEvents | None) -> tuple[Event, ...]:
    if cache is None:
        return tuple(event_from_row(row[1 : 1 + EVENT_WIDTH]) for row in rows)
    return tuple(cache.event(row[0], row[1 : 1 + EVENT_WIDTH]) for row in rows)


def _links_after(
    db: sqlite3.Connection, pk: int, head: Sequence[Event], after: tuple[int, int]
) -> tuple[frozenset[str], frozenset[str]]:
    """Of the head's real calls, the ids answered past the head, and those called again there."""
    by_key = head_calls(head)
    answered: set[str] = set()
    called: set[str] = set()
    keys = list(by_key)
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        rows = db.execute(
            "SELECT DISTINCT l.kind, l.call_key FROM tool_links l"
            " JOIN events e ON e.session = l.session AND e.id = l.event"
            f" WHERE l.session = ? AND l.kind IN ({CALL}, {RESULT})"
            f" AND l.call_key IN ({', '.join('?' for _ in chunk)})"
            f" AND {_REAL} AND (e.sort_key, e.position) > (?, ?)",
            (pk, *chunk, *after),
        )
        for kind, key in rows:
            (answered if kind == RESULT else called).update(by_key[key])
    return frozenset(answered), frozenset(called)
