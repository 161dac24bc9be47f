"""The SQLite store's queries: plain functions of a ``sqlite3.Connection``.

Each runs inside a connection's own thread (see ``SqliteStore``), so it may
issue several statements with no await between them. Every value is a bound
parameter; the only SQL assembled at run time joins fixed fragments chosen by
which filters are set.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from sidecar.errors import SessionNotFound
from sidecar.model import Event, Session, SessionCounters, TokenCalibration
from sidecar.store import counter_rules, rules
from sidecar.store.codec import decode_event, decode_labels, from_micros, to_micros
from sidecar.store.event_cache import DecodedEvents
from sidecar.store.paging import (
    SEARCH_BLOCK,
    SearchPlace,
    decode_int_key,
    decode_search_place,
    decode_str_key,
    encode_token,
    fingerprint,
)
from sidecar.store.protocol import (
    Page,
    SearchHit,
    SearchQuery,
    SessionFilter,
)
from sidecar.store.search_terms import query_terms

SESSION_COLUMNS = """s.pk, s.id, s.version, s.policy_json, s.labels, s.create_time,
    s.update_time, s.active_events, s.real_events, s.turns, s.tokens, s.system_tokens,
    s.turns_since_compaction, s.total_events, s.last_compaction_id, s.model,
    s.calibration_factor, s.calibration_samples, s.auto_compaction_paused,
    s.stable_prefix_tokens, s.stable_prefix_events, s.pending_below, s.pending_above"""

EVENT_COLUMNS = """e.id, e.role, e.content, e.position, e.token_count, e.synthetic,
    e.archived, e.create_time, e.cleared_content IS NOT NULL, e.token_low, e.token_high"""
"""An event as the log holds it: a cleared one with its original content (ListEvents, search)."""
VIEW_COLUMNS = """e.id, e.role, coalesce(e.cleared_content, e.content), e.position,
    coalesce(e.cleared_token_count, e.token_count), e.synthetic, e.archived, e.create_time,
    e.cleared_content IS NOT NULL, CASE WHEN e.cleared_content IS NULL THEN e.token_low END,
    CASE WHEN e.cleared_content IS NULL THEN e.token_high END"""
"""An event as the active window shows it: a cleared one with its placeholder and its count
(counted exactly when it was cleared)."""
EVENT_WIDTH = 11

# ``archived = 0`` spelled literally, so the planner can use the partial index.
ACTIVE_WINDOW_SQL = (
    f"SELECT {VIEW_COLUMNS} FROM events e"
    " WHERE e.session = ? AND e.archived = 0 ORDER BY e.sort_key, e.position"
)

SNIPPET_START = "**"
SNIPPET_END = "**"
_SNIPPET_TOKENS = 16


def session_from_row(row: Sequence[Any]) -> tuple[int, Session]:
    """The surrogate key and the Session of a row selected with SESSION_COLUMNS."""
    return row[0], Session(
        session_id=row[1],
        version=row[2],
        policy_json=row[3],
        labels=decode_labels(row[4]),
        create_time=from_micros(row[5]),
        update_time=from_micros(row[6]),
        counters=SessionCounters(
            active_events=row[7],
            real_events=row[8],
            turns=row[9],
            tokens=row[10],
            system_tokens=row[11],
            turns_since_compaction=row[12],
            pending_below=row[21],
            pending_above=row[22],
        ),
        total_events=row[13],
        last_compaction_id=row[14],
        model=row[15],
        calibration=TokenCalibration(row[16], row[17]),
        auto_compaction_paused=bool(row[18]),
        stable_prefix_tokens=row[19],
        stable_prefix_events=row[20],
    )


def event_from_row(row: Sequence[Any]) -> Event:
    """The Event of a row whose first columns are EVENT_COLUMNS."""
    return decode_event(*row[:EVENT_WIDTH])


def find_session(db: sqlite3.Connection, session_id: str) -> tuple[int, Session] | None:
    row = db.execute(f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?", (session_id,))
    found = row.fetchone()
    return None if found is None else session_from_row(found)


def get_session(db: sqlite3.Connection, session_id: str) -> tuple[int, Session]:
    found = find_session(db, session_id)
    if found is None:
        raise SessionNotFound(session_id)
    return found


def active_events(db: sqlite3.Connection, session_pk: int) -> tuple[Event, ...]:
    """The active window in log order, read through the partial index ``events_active``."""
    rows = db.execute(ACTIVE_WINDOW_SQL, (session_pk,))
    return tuple(event_from_row(row) for row in rows)


# Summed in SQL over the partial index: no row of the window is decoded in Python.
_WINDOW_COUNTERS_SQL = f"""SELECT count(*),
        coalesce(sum(e.role != 'system' AND e.synthetic = 0), 0),
        coalesce(sum(e.role = 'user' AND e.synthetic = 0), 0),
        coalesce(sum(CASE WHEN e.role = 'system' AND e.synthetic = 0 THEN 0
                     ELSE coalesce(e.cleared_token_count, e.token_count) END), 0),
        {counter_rules.PENDING_SUMS}
    FROM events e WHERE e.session = ? AND e.archived = 0"""
_LATEST_SYSTEM_SQL = """SELECT coalesce(e.cleared_token_count, e.token_count) FROM events e
    WHERE e.session = ? AND e.archived = 0 AND e.role = 'system' AND e.synthetic = 0
    ORDER BY e.sort_key DESC, e.position DESC LIMIT 1"""


def window_counters(db: sqlite3.Connection, session_pk: int) -> SessionCounters:
    """The active window's counters (``counter_rules.window_counters``), summed by SQLite.

    Still a walk of the window's index entries, but in C with the GIL released,
    not a decode of every event: what a write that changes a few events costs.
    """
    events, real, turns, other, below, above = db.execute(
        _WINDOW_COUNTERS_SQL, (session_pk,)
    ).fetchone()
    system = db.execute(_LATEST_SYSTEM_SQL, (session_pk,)).fetchone()
    return counter_rules.window_counters(
        events, real, turns, other, system[0] if system else 0, below, above
    )


def active_with_ids(
    db: sqlite3.Connection, session_pk: int, ids: Sequence[str], chunk: int = 500
) -> tuple[Event, ...]:
    """The still-active events among ``ids``, as the window shows them, in log order.

    Looked up by the ``(session, id)`` key, so a plan is checked in the time of
    its own events (``rules.check_plan``), not of the window.
    """
    unique = list(dict.fromkeys(ids))
    found: list[tuple[int, int, Event]] = []
    for start in range(0, len(unique), chunk):
        part = unique[start : start + chunk]
        rows = db.execute(
            f"SELECT {VIEW_COLUMNS}, e.sort_key FROM events e WHERE e.session = ?"
            f" AND e.archived = 0 AND e.id IN ({', '.join('?' for _ in part)})",
            (session_pk, *part),
        )
        found.extend((row[EVENT_WIDTH], row[3], event_from_row(row)) for row in rows)
    found.sort(key=lambda item: (item[0], item[1]))
    return tuple(event for _, _, event in found)


ACTIVE_ROWS_SQL = (
    f"SELECT e.pk, {VIEW_COLUMNS} FROM events e"
    " WHERE e.session = ? AND e.archived = 0 ORDER BY e.sort_key, e.position"
)
"""The active window with each row's key, so the decoded-event cache can skip unchanged rows."""


def active_window(
    db: sqlite3.Connection, session_id: str, cache: DecodedEvents | None = None
) -> tuple[Session, tuple[Event, ...]]:
    """The session and its active window; with a cache, unchanged rows are not decoded again."""
    pk, session = get_session(db, session_id)
    cache = None if cache is None else cache.for_session(pk)
    if cache is None:
        return session, active_events(db, pk)
    rows = db.execute(ACTIVE_ROWS_SQL, (pk,))
    return session, tuple(cache.event(row[0], row[1:]) for row in rows)


def list_events(
    db: sqlite3.Connection,
    session_id: str,
    *,
    size: int,
    token: str,
    include_archived: bool,
    max_bytes: int | None = None,
) -> Page[Event]:
    """A page of the log in log order; keyset on ``(sort_key, position)``.

    The whole log comes as stored, a cleared event with its original content;
    the active window alone comes as GetContext shows it (placeholders), so a
    window read in pages is the window the model is sent.
    """
    content, columns = (
        ("e.content", EVENT_COLUMNS)
        if include_archived
        else ("coalesce(e.cleared_content, e.content)", VIEW_COLUMNS)
    )
    bound = fingerprint(session_id, include_archived)
    after = (-1, -1)
    if token:
        sort_key, position = decode_int_key(token, kind="events", bound=bound, length=2)
        after = (sort_key, position)
    pk, _ = get_session(db, session_id)
    # Two literal queries, so the active listing can use the partial index.
    active_only = "" if include_archived else " AND e.archived = 0"
    page = (
        f"FROM events e WHERE e.session = ?{active_only}"
        " AND (e.sort_key, e.position) > (?, ?) ORDER BY e.sort_key, e.position LIMIT ?"
    )
    # Stored sizes first: a page of 1,000 large events cut to a few by bytes would
    # otherwise read and decode every one of them.
    sizes = db.execute(
        f"SELECT length(CAST({content} AS BLOB)) {page}", (pk, *after, size + 1)
    ).fetchall()
    fit = rules.fitting_sizes([n for (n,) in sizes[:size]], max_bytes)
    rows = db.execute(f"SELECT {columns}, e.sort_key {page}", (pk, *after, fit)).fetchall()
    items = tuple(event_from_row(row) for row in rows)
    kept = rules.fitting(items, max_bytes)
    next_token = ""
    if kept and (kept < len(rows) or len(sizes) > fit):
        last = rows[kept - 1]
        next_token = encode_token("events", bound, (last[EVENT_WIDTH], last[3]))
    return Page(items[:kept], next_token)


def list_sessions(
    db: sqlite3.Connection, filter: SessionFilter, *, size: int, token: str
) -> Page[Session]:
    """Sessions in id order whose labels include every pair of the filter; keyset on id."""
    labels = sorted(filter.labels.items())
    bound = fingerprint(labels, filter.id_prefix)
    after = decode_str_key(token, kind="sessions", bound=bound) if token else None
    clauses = ["1"]
    params: list[object] = []
    if filter.id_prefix:
        clauses.append("substr(s.id, 1, ?) = ?")
        params += [len(filter.id_prefix), filter.id_prefix]
    if after is not None:
        clauses.append("s.id > ?")
        params.append(after)
    for key, value in labels:
        clauses.append(
            "EXISTS (SELECT 1 FROM json_each(s.labels) WHERE json_each.key = ?"
            " AND json_each.value = ?)"
        )
        params += [key, value]
    rows = db.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE {' AND '.join(clauses)}"
        " ORDER BY s.id LIMIT ?",
        (*params, size + 1),
    ).fetchall()
    items = tuple(session_from_row(row)[1] for row in rows[:size])
    next_token = ""
    if len(rows) > size:
        next_token = encode_token("sessions", bound, (items[-1].session_id,))
    return Page(items, next_token)


def fts_match(text: str) -> str:
    """The FTS5 query for user text: every distinct term an FTS string literal, all required.

    Quoting each whitespace-separated term (doubling its quotes) means no user
    text is ever read as FTS syntax (AND, NEAR, ``*``, parentheses, column
    filters): ``"foo AND (`` searches for the words foo and and. A term that
    tokenizes to nothing (``"*"``) is an empty phrase, which FTS5 ignores.
    Terms are ANDed: a hit contains every word, in any order. Repeats are
    dropped and the rest bounded by ``query_terms``.
    """
    return " ".join('"' + term.replace('"', '""') + '"' for term in query_terms(text))


def search(
    db: sqlite3.Connection,
    query: SearchQuery,
    *,
    size: int,
    token: str,
    max_bytes: int | None = None,
) -> Page[SearchHit]:
    """Matches best first (bm25, ties by write order), a block at a time; bounded in bytes.

    Ranked results have no stable sort key (bm25 moves as the corpus grows),
    so the token carries a block and an offset in it (``paging.SEARCH_BLOCK``),
    bound to the query it was issued for. A page ranks one block: the
    ``SEARCH_BLOCK`` newest matches past the blocks before it, found newest
    first through the full-text index's rowid order.
    """
    bound = fingerprint(
        query.text,
        query.session_id,
        query.session_prefix,
        sorted(r.value for r in query.roles),
        query.include_active,
        query.since.isoformat() if query.since else None,
        query.until.isoformat() if query.until else None,
    )
    place = decode_search_place(token, bound=bound)
    match = fts_match(query.text)
    if not match:
        return Page(())
    if place is None:  # the first page: the listing sees the events stored now
        (newest,) = db.execute("SELECT coalesce(max(pk), 0) FROM events").fetchone()
        place = SearchPlace(0, 0, newest)
    block, offset = place.block, place.offset
    clauses = ["events_fts MATCH ?"]
    params: list[object] = [match]
    if place.newest is not None:
        clauses.append("events_fts.rowid <= ?")
        params.append(place.newest)
    if query.session_id is not None:
        session_pk, _ = get_session(db, query.session_id)
        clauses.append("e.session = ?")
        params.append(session_pk)
    if query.session_prefix:
        clauses.append("substr(s.id, 1, ?) = ?")
        params += [len(query.session_prefix), query.session_prefix]
    if not query.include_active:
        clauses.append("e.archived = 1")
    if query.roles:
        clauses.append(f"e.role IN ({', '.join('?' for _ in query.roles)})")
        params += [role.value for role in query.roles]
    if query.since is not None:  # inclusive
        clauses.append("e.create_time >= ?")
        params.append(to_micros(query.since))
    if query.until is not None:  # exclusive: [since, until) tiles time without overlap
        clauses.append("e.create_time < ?")
        params.append(to_micros(query.until))
    joins = """FROM events_fts
           JOIN events e ON e.pk = events_fts.rowid
           JOIN sessions s ON s.pk = e.session"""
    # First the page's hits in rank order with their stored sizes only: a page of 1,000
    # large events cut to a few by bytes would otherwise decode and snippet every one.
    candidates = f"""{joins} WHERE {" AND ".join(clauses)}
           ORDER BY events_fts.rowid DESC LIMIT ? OFFSET ?"""
    in_block = (*params, SEARCH_BLOCK, block * SEARCH_BLOCK)
    ranked = db.execute(
        f"""SELECT pk, n FROM (
               SELECT e.pk AS pk, length(CAST(e.content AS BLOB)) + length(s.id) AS n,
                   bm25(events_fts) AS score {candidates})
           ORDER BY score, pk LIMIT ? OFFSET ?""",
        (*in_block, size + 1, offset),
    ).fetchall()
    fit = rules.fitting_sizes([n for _, n in ranked[:size]], max_bytes)
    wanted = [pk for pk, _ in ranked[:fit]]
    rows = db.execute(
        f"""SELECT e.pk, {EVENT_COLUMNS}, s.id, bm25(events_fts),
               snippet(events_fts, 0, ?, ?, '…', {_SNIPPET_TOKENS}), e.archived_by
           {joins}
           WHERE events_fts MATCH ? AND events_fts.rowid IN (SELECT value FROM json_each(?))""",
        (SNIPPET_START, SNIPPET_END, match, json.dumps(wanted)),
    ).fetchall()
    found = {row[0]: row[1:] for row in rows}
    # In rank order, with each hit's place in it (one deleted in between is skipped).
    present = [(place, found[pk]) for place, pk in enumerate(wanted) if pk in found]
    items = tuple(
        SearchHit(
            session_id=row[EVENT_WIDTH],
            event=event_from_row(row),
            # bm25 is lower-is-better (negative); the protocol's rank is higher-is-better.
            rank=-row[EVENT_WIDTH + 1],
            snippet=row[EVENT_WIDTH + 2],
            archived_by=row[EVENT_WIDTH + 3] or "",
        )
        for _, row in present
    )
    # A hit carries its whole event: a page also stops before the hits' bytes pass max_bytes.
    kept = rules.fitting_hits(items, max_bytes)
    read = present[kept - 1][0] + 1 if kept else len(wanted)
    more_in_block = len(ranked) > read
    more_blocks = not more_in_block and (
        db.execute(
            f"SELECT 1 {joins} WHERE {' AND '.join(clauses)}"
            " ORDER BY events_fts.rowid DESC LIMIT 1 OFFSET ?",
            (*params, (block + 1) * SEARCH_BLOCK),
        ).fetchone()
        is not None
    )
    return Page(items[:kept], place.next_token(bound, read, more_in_block, more_blocks))


def marked_rows(
    db: sqlite3.Connection, pks: list[int], chunk: int = 500
) -> list[counter_rules.Marked]:
    """``counter_rules.MARKED_COLUMNS`` of the rows ``pks``, in that order."""
    found: dict[int, counter_rules.Marked] = {}
    for start in range(0, len(pks), chunk):
        part = pks[start : start + chunk]
        for pk, role, synthetic, archived, tokens, below, above in db.execute(
            f"SELECT e.pk, {counter_rules.MARKED_COLUMNS} FROM events e"
            f" WHERE e.pk IN ({', '.join('?' for _ in part)})",
            part,
        ):
            found[pk] = (role, bool(synthetic), bool(archived), tokens, below, above)
    return [found[pk] for pk in pks]
