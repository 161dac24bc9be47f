"""Plain appends to many sessions, written in one go: a few statements for a whole group.

A stream's batch over many sessions, and the writer's group that gathers
several streams' batches, are appends of a few events to each of many
sessions. Written one by one (``sqlite_writes.append``, each in its
savepoint), each costs six statements or more: the savepoint and its
release, the header's read, the event's insert and its ``fts_pending`` row,
the header's update. On the writer's thread every statement also hands the
GIL to the event loop and waits to get it back, so with 100 sessions the
writer, not the loop, bounded the stream. Here a group of them reads every
header in one statement, finds retried events in one more, and writes the
events, their ``fts_pending`` rows and the new headers with one statement
(or one ``executemany``) each, in no savepoint (``sqlite_writer._together``).

The outcome is the one ``sqlite_writes.append`` would give for each append
in order, and the rows are the same (``tests/store/test_sqlite_append_groups.py``
holds the two paths equal on random groups). What this path does not take,
it hands back as ``None``, to be written one by one after it: an append to
a session not stored yet (it is created, or refused), one that retries
stored events or events an earlier append of the group wrote, and every
later append to the same session (so each session's appends still land in
order). A domain error (an event without an id, two events of the batch
with one id and different payloads) is found before anything is written,
and fails that append alone; any other failure here has the group written
again, each append alone (``sqlite_writer.NotTogether``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from sidecar.model import Session
from sidecar.store import rules
from sidecar.store.protocol import AppendOutcome, PlainAppend
from sidecar.store.sqlite_reads import SESSION_COLUMNS, session_from_row
from sidecar.store.sqlite_writes import (
    INSERT_EVENT,
    INSERT_TOOL_LINK,
    UPDATE_HEADER,
    event_row,
    header_row,
    tool_link_rows,
)

_MAX_ROWID = 2**63 - 1

_CHUNK = 400
"""Headers or (session, event id) pairs per statement: well under SQLite's bound on
parameters."""


def append_together(
    db: sqlite3.Connection, appends: Sequence[PlainAppend], *, now: datetime
) -> list[AppendOutcome | Exception | None]:
    """Write the ``appends`` this path takes (see the module docstring); for each, in
    order, its outcome, its error (nothing of it written), or None: left to be
    written alone, after these."""
    headers = _headers(db, list(dict.fromkeys(append.session_id for append in appends)))
    retried = _sessions_with_any(
        db,
        [
            (headers[append.session_id][0], event.id)
            for append in appends
            if append.session_id in headers
            for event in append.events
        ],
    )
    outcomes: list[AppendOutcome | Exception | None] = []
    left: set[str] = set()  # sessions whose appends, from the first one left, go alone
    changed: dict[int, tuple[int, Session]] = {}
    written: dict[int, set[str]] = {}  # each session's event ids written here
    rows: list[tuple[object, ...]] = []
    links: list[tuple[int, str, int, int]] = []
    for append in appends:
        found = headers.get(append.session_id)
        if found is None or found[0] in retried or append.session_id in left:
            left.add(append.session_id)
            outcomes.append(None)
            continue
        session_pk, session = found
        if not written.setdefault(session_pk, set()).isdisjoint(e.id for e in append.events):
            left.add(append.session_id)  # retries an event written here: alone, after these
            outcomes.append(None)
            continue
        try:
            rules.require_ids(append.events)
            batch = rules.sort_batch(session, append.events, {})
        except Exception as exc:  # this append's own error: nothing of it is written
            outcomes.append(exc)
            continue
        if not batch.new:  # an empty append stores nothing and leaves the version
            outcomes.append(AppendOutcome(batch.result, session, 0))
            continue
        for event in batch.new:
            written[session_pk].add(event.id)
            rows.append(event_row(session_pk, event, sort_key=2 * event.position + 1))
            if event.tool_calls or event.tool_results:
                links.extend(tool_link_rows(session_pk, event))
        session = rules.after_append(session, batch, now)
        headers[append.session_id] = changed[session_pk] = session_pk, session
        outcomes.append(AppendOutcome(batch.result, session, len(batch.new)))
    if rows:
        # New rowids follow the highest one (no AUTOINCREMENT), unless it is at SQLite's
        # limit: then they are picked at random, and only one by one finds each.
        (highest,) = db.execute("SELECT coalesce(max(pk), 0) FROM events").fetchone()
        if highest > _MAX_ROWID - len(rows):
            return [None] * len(appends)
        db.executemany(INSERT_EVENT, rows)
        db.execute("INSERT INTO fts_pending (pk) SELECT pk FROM events WHERE pk > ?", (highest,))
        if links:
            db.executemany(INSERT_TOOL_LINK, links)
        db.executemany(UPDATE_HEADER, [header_row(pk, session) for pk, session in changed.values()])
    return outcomes


def _headers(db: sqlite3.Connection, session_ids: list[str]) -> dict[str, tuple[int, Session]]:
    """The stored sessions among ``session_ids``, by id, with their surrogate keys."""
    found: dict[str, tuple[int, Session]] = {}
    for start in range(0, len(session_ids), _CHUNK):
        chunk = session_ids[start : start + _CHUNK]
        rows = db.execute(
            f"SELECT {SESSION_COLUMNS} FROM sessions s"
            f" WHERE s.id IN ({', '.join('?' * len(chunk))})",
            chunk,
        )
        for row in rows:
            session_pk, session = session_from_row(row)
            found[session.session_id] = session_pk, session
    return found


def _sessions_with_any(db: sqlite3.Connection, pairs: list[tuple[int, str]]) -> set[int]:
    """The sessions (surrogate keys) that hold an event of theirs among ``pairs``.

    A join on a list of values: ``(session, id) IN (VALUES ...)`` would scan the
    whole index instead of looking each pair up.
    """
    found: set[int] = set()
    for start in range(0, len(pairs), _CHUNK):
        chunk = pairs[start : start + _CHUNK]
        rows = db.execute(
            f"WITH q (session, id) AS (VALUES {', '.join('(?, ?)' for _ in chunk)})"
            " SELECT DISTINCT e.session FROM q JOIN events e"
            " ON e.session = q.session AND e.id = q.id",
            [value for pair in chunk for value in pair],
        )
        found.update(session_pk for (session_pk,) in rows)
    return found
