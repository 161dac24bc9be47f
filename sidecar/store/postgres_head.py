"""The PostgreSQL store's read of a window's head (``sidecar.compaction.head``).

The same reads as SQLite's (``sqlite_head``), in one REPEATABLE READ
snapshot: the counters, the pinned events past the head (``events_pinned``),
the head's calls answered or called again past it (``tool_links``) and, for
a clearing, the window's call count. A big head is decoded on a worker
thread, as a big window is (``postgres_reads.WINDOW_CHUNK_ROWS``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sidecar.compaction.head import WindowHead
from sidecar.model import Event, Session
from sidecar.store.event_cache import DecodedEvents
from sidecar.store.postgres_reads import (
    VIEW_COLUMNS,
    WINDOW_CHUNK_ROWS,
    decoded_rows,
    get_session,
)
from sidecar.store.postgres_schema import Db
from sidecar.store.tool_links import CALL, RESULT, head_calls
from sidecar.store.tool_links import window_head as window_head_of

_HEAD_SQL = (
    f"SELECT e.pk, {VIEW_COLUMNS}, e.sort_key FROM events e"
    " WHERE e.session = $1 AND NOT e.archived ORDER BY e.sort_key, e.position LIMIT $2"
)
# ``NOT archived AND (role = 'system' OR synthetic)`` spelled as the partial index is.
_PINNED_AFTER_SQL = (
    f"SELECT e.pk, {VIEW_COLUMNS} FROM events e WHERE e.session = $1"
    " AND NOT e.archived AND (e.role = 'system' OR e.synthetic)"
    " AND (e.sort_key, e.position) > ($2, $3) ORDER BY e.sort_key, e.position"
)
_REAL = "NOT e.archived AND NOT e.synthetic AND e.role <> 'system'"
_CALLS_SQL = (
    "SELECT count(*) FROM tool_links l JOIN events e ON e.session = l.session AND e.id = l.event"
    f" WHERE l.session = $1 AND l.kind = {CALL} AND {_REAL}"
)
_LINKS_AFTER_SQL = (
    "SELECT DISTINCT l.kind, l.call_key FROM tool_links l"
    " JOIN events e ON e.session = l.session AND e.id = l.event"
    " WHERE l.session = $1 AND l.call_key = any($2::bigint[])"
    f" AND {_REAL} AND (e.sort_key, e.position) > ($3, $4)"
)


async def window_head(
    db: Db,
    session_id: str,
    events: int,
    *,
    count_calls: bool,
    cache: DecodedEvents | None = None,
) -> tuple[Session, WindowHead]:
    """The session and the first ``events`` events of its active window, with the rest summed up."""
    pk, session = await get_session(db, session_id)
    cache = None if cache is None else cache.for_session(pk)
    rows = await db.fetch(_HEAD_SQL, pk, events)
    if len(rows) > WINDOW_CHUNK_ROWS:
        head = await asyncio.to_thread(decoded_rows, rows, cache)
    else:
        head = decoded_rows(rows, cache)
    calls = int(await db.fetchval(_CALLS_SQL, pk)) if count_calls else 0
    if len(head) >= session.counters.active_events:
        return session, window_head_of(session, head, calls=calls)
    after = (rows[-1][-1], rows[-1][4]) if rows else (-1, -1)
    pinned = decoded_rows(await db.fetch(_PINNED_AFTER_SQL, pk, *after), cache)
    answered, called = await _links_after(db, pk, head, after)
    return session, window_head_of(
        session, head, calls=calls, pinned=pinned, answered=answered, called=called
    )


async def _links_after(
    db: Db, pk: int, head: Sequence[Event], after: tuple[int, int]
) -> tuple[frozenset[str], frozenset[str]]:
    """Of the head's real calls, the ids answered past the head, and those called again there."""
    by_key = head_calls(head)
    answered: set[str] = set()
    called: set[str] = set()
    if by_key:
        for kind, key in await db.fetch(_LINKS_AFTER_SQL, pk, list(by_key), *after):
            (answered if kind == RESULT else called).update(by_key[key])
    return frozenset(answered), frozenset(called)
