"""The PostgreSQL store's queries: coroutines of one ``asyncpg`` connection.

The SQL twin of ``sqlite_reads``: same results, same page tokens, same rules.
Every value is a bound parameter; the only SQL assembled at run time joins
fixed fragments chosen by which filters are set.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from sidecar.errors import SessionNotFound
from sidecar.model import Event, Session, SessionCounters, TokenCalibration
from sidecar.store import counter_rules, rules
from sidecar.store.codec import decode_event, to_micros
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
from sidecar.store.postgres_schema import INDEXED_TEXT_CHARS, SEARCH_CONFIG, WORD_SEPARATORS, Db
from sidecar.store.protocol import (
    Page,
    SearchHit,
    SearchQuery,
    SessionFilter,
)
from sidecar.store.search_terms import query_terms
from sidecar.store.sqlite_reads import SNIPPET_END, SNIPPET_START

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

# ``NOT archived`` spelled as in the partial index's predicate, so the planner uses it.
_HEADLINE_OPTIONS = (
    f"StartSel={SNIPPET_START}, StopSel={SNIPPET_END}, MaxWords=16, MinWords=6,"
    ' MaxFragments=1, FragmentDelimiter=" … "'
)


def session_from_row(row: asyncpg.Record) -> tuple[int, Session]:
    """The surrogate key and the Session of a row selected with SESSION_COLUMNS."""
    return row[0], Session(
        session_id=row[1],
        version=row[2],
        policy_json=row[3],
        labels=json.loads(row[4]),
        create_time=row[5],
        update_time=row[6],
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


def event_from_row(row: asyncpg.Record | tuple[Any, ...]) -> Event:
    """The Event of a row (or a slice of one) whose first columns are EVENT_COLUMNS."""
    return decode_event(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        row[6],
        to_micros(row[7]),
        row[8],
        row[9],
        row[10],
    )


async def find_session(
    db: Db, session_id: str, *, for_update: bool = False
) -> tuple[int, Session] | None:
    """The session row; ``for_update`` locks it until the transaction ends.

    Every write transaction takes this lock first, so writes to one session
    are serialized across every replica sharing the database, and no two
    write transactions ever wait on each other in opposite orders.
    """
    lock = " FOR UPDATE" if for_update else ""
    row = await db.fetchrow(
        f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = $1{lock}", session_id
    )
    return None if row is None else session_from_row(row)


async def get_session(db: Db, session_id: str, *, for_update: bool = False) -> tuple[int, Session]:
    found = await find_session(db, session_id, for_update=for_update)
    if found is None:
        raise SessionNotFound(session_id)
    return found


# As on SQLite (``sqlite_reads.window_counters``): summed by the server, nothing decoded.
_WINDOW_COUNTERS_SQL = f"""SELECT count(*),
        count(*) FILTER (WHERE e.role <> 'system' AND NOT e.synthetic),
        count(*) FILTER (WHERE e.role = 'user' AND NOT e.synthetic),
        coalesce(sum(coalesce(e.cleared_token_count, e.token_count))
            FILTER (WHERE e.role <> 'system' OR e.synthetic), 0),
        {counter_rules.PENDING_SUMS}
    FROM events e WHERE e.session = $1 AND NOT e.archived"""
_LATEST_SYSTEM_SQL = """SELECT coalesce(e.cleared_token_count, e.token_count) FROM events e
    WHERE e.session = $1 AND NOT e.archived AND e.role = 'system' AND NOT e.synthetic
    ORDER BY e.sort_key DESC, e.position DESC LIMIT 1"""


async def window_counters(db: Db, session_pk: int) -> SessionCounters:
    """The active window's counters (``counter_rules.window_counters``), summed by PostgreSQL."""
    row = await db.fetchrow(_WINDOW_COUNTERS_SQL, session_pk)
    assert row is not None  # an aggregate always has its row
    system = await db.fetchval(_LATEST_SYSTEM_SQL, session_pk)
    return counter_rules.window_counters(
        row[0], row[1], row[2], int(row[3]), system or 0, int(row[4]), int(row[5])
    )


async def active_with_ids(db: Db, session_pk: int, ids: Sequence[str]) -> tuple[Event, ...]:
    """The still-active events among ``ids``, as the window shows them, in log order
    (``sqlite_reads.active_with_ids``): looked up by key, not found in the window."""
    rows = await db.fetch(
        f"SELECT {VIEW_COLUMNS} FROM events e WHERE e.session = $1 AND NOT e.archived"
        " AND e.id = ANY($2::text[]) ORDER BY e.sort_key, e.position",
        session_pk,
        list(dict.fromkeys(ids)),
    )
    return tuple(event_from_row(row) for row in rows)


_ACTIVE_ROWS_SQL = (
    f"SELECT e.pk, {VIEW_COLUMNS} FROM events e"
    " WHERE e.session = $1 AND NOT e.archived ORDER BY e.sort_key, e.position"
)


WINDOW_CHUNK_ROWS = 4_096
"""A window of more events than this is read in chunks of it, each decoded on a worker thread.

asyncpg hands its rows over on the event loop, and decoding a row into an
Event is Python (a few microseconds each): a 200,000-event window decoded in
one piece would hold the loop, and every other session's call, for a second
or more. In chunks from a cursor (the read is one REPEATABLE READ
transaction, so the chunks are one snapshot), each decoded on a thread, the
loop serves other calls between them. The decoded-event cache is shared with
those threads as the SQLite store's readers share theirs (one dictionary
access per operation, atomic under the GIL). A smaller window is one fetch,
decoded in place: the hop to a thread would cost more than it saves.
"""


async def active_window(
    db: Db, session_id: str, cache: DecodedEvents | None = None
) -> tuple[Session, tuple[Event, ...]]:
    """The session and its active window; with a cache, unchanged rows are not decoded again."""
    pk, session = await get_session(db, session_id)
    cache = None if cache is None else cache.for_session(pk)
    if session.counters.active_events <= WINDOW_CHUNK_ROWS:
        rows = await db.fetch(_ACTIVE_ROWS_SQL, pk)
        return session, decoded_rows(rows, cache)
    events: list[Event] = []
    cursor = await db.cursor(_ACTIVE_ROWS_SQL, pk)
    while rows := await cursor.fetch(WINDOW_CHUNK_ROWS):
        events += await asyncio.to_thread(decoded_rows, rows, cache)
    return session, tuple(events)


def decoded_rows(rows: Sequence[asyncpg.Record], cache: DecodedEvents | None) -> tuple[Event, ...]:
    """Rows whose key is followed by VIEW_COLUMNS (``_ACTIVE_ROWS_SQL``'s) as events,
    unchanged ones taken from ``cache``."""
    if cache is None:
        return tuple(event_from_row(row[1:]) for row in rows)
    return tuple(cache.event(row[0], (*row[1:8], to_micros(row[8]), *row[9:12])) for row in rows)


async def list_events(
    db: Db,
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
    pk, _ = await get_session(db, session_id)
    active_only = "" if include_archived else " AND NOT e.archived"
    page = (
        f"FROM events e WHERE e.session = $1{active_only}"
        " AND (e.sort_key, e.position) > ($2, $3) ORDER BY e.sort_key, e.position LIMIT $4"
    )
    # Stored sizes first: a page of 1,000 large events cut to a few by bytes would
    # otherwise read and decode every one of them.
    sizes = await db.fetch(f"SELECT octet_length({content}) {page}", pk, *after, size + 1)
    fit = rules.fitting_sizes([row[0] for row in sizes[:size]], max_bytes)
    rows = await db.fetch(f"SELECT {columns}, e.sort_key {page}", pk, *after, fit)
    items = tuple(event_from_row(row) for row in rows)
    kept = rules.fitting(items, max_bytes)
    next_token = ""
    if kept and (kept < len(rows) or len(sizes) > fit):
        last = rows[kept - 1]
        next_token = encode_token("events", bound, (last[EVENT_WIDTH], last[3]))
    return Page(items[:kept], next_token)


async def list_sessions(db: Db, filter: SessionFilter, *, size: int, token: str) -> Page[Session]:
    """Sessions in id order whose labels include every pair of the filter; keyset on id."""
    labels = sorted(filter.labels.items())
    bound = fingerprint(labels, filter.id_prefix)
    after = decode_str_key(token, kind="sessions", bound=bound) if token else ""
    # Every id is non-empty, so "" sorts before them all. ``@>`` uses the GIN index;
    # ``starts_with`` holds whatever the database's collation.
    rows = await db.fetch(
        f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id > $1 AND s.labels @> $2::jsonb"
        " AND starts_with(s.id, $3) ORDER BY s.id LIMIT $4",
        after,
        json.dumps(dict(labels)),
        filter.id_prefix,
        size + 1,
    )
    items = tuple(session_from_row(row)[1] for row in rows[:size])
    next_token = ""
    if len(rows) > size:
        next_token = encode_token("sessions", bound, (items[-1].session_id,))
    return Page(items, next_token)


_AS_SPACES = str.maketrans(WORD_SEPARATORS, " " * len(WORD_SEPARATORS))


def query_words(text: str) -> str:
    """User text as ``plainto_tsquery`` input: its distinct terms (``query_terms``), NULs gone.

    ``plainto_tsquery`` reads its input as plain words, all required, and
    ignores punctuation: ``"foo AND (`` finds events holding both foo and and,
    as the SQLite store does. ``websearch_to_tsquery`` would read ``or``,
    ``-`` and quotes as operators, so the same query would mean two things
    depending on the store behind the API. Dropping a repeated term changes
    nothing that matches, and spares a lexeme ranked and highlighted per hit.
    Punctuation is read as spaces, as the indexed text's is (``WORD_SEPARATORS``).
    """
    return " ".join(query_terms(text)).translate(_AS_SPACES)


async def search(
    db: Db, query: SearchQuery, *, size: int, token: str, max_bytes: int | None = None
) -> Page[SearchHit]:
    """Matches best first (``ts_rank``, ties by write order), a block of the newest
    ``SEARCH_BLOCK`` matches at a time; paged as SQLite's are (``sqlite_reads.search``)."""
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
    words = query_words(query.text)
    if not words.strip():
        return Page(())
    if place is None:  # the first page: the listing sees the events stored now
        place = SearchPlace(0, 0, await db.fetchval("SELECT coalesce(max(pk), 0) FROM events"))
    block, offset = place.block, place.offset
    clauses = ["e.search @@ q.query"]
    params: list[object] = [words]
    if place.newest is not None:
        params.append(place.newest)
        clauses.append(f"e.pk <= ${len(params)}")
    if query.session_id is not None:
        session_pk, _ = await get_session(db, query.session_id)
        params.append(session_pk)
        clauses.append(f"e.session = ${len(params)}")
    if query.session_prefix:
        params.append(query.session_prefix)
        clauses.append(f"starts_with(s.id, ${len(params)})")
    if not query.include_active:
        clauses.append("e.archived")
    if query.roles:
        params.append([role.value for role in query.roles])
        clauses.append(f"e.role = ANY(${len(params)}::text[])")
    if query.since is not None:  # inclusive
        params.append(query.since)
        clauses.append(f"e.create_time >= ${len(params)}")
    if query.until is not None:  # exclusive: [since, until) tiles time without overlap
        params.append(query.until)
        clauses.append(f"e.create_time < ${len(params)}")
    filters = len(params)
    params += [SEARCH_BLOCK, block * SEARCH_BLOCK, size + 1, offset]
    joins = f"""FROM events e
           JOIN sessions s ON s.pk = e.session
           CROSS JOIN plainto_tsquery('{SEARCH_CONFIG}', $1) AS q(query)"""
    # First the page's hits in rank order with their stored sizes only: a page of 1,000
    # large events cut to a few by bytes would otherwise read and highlight every one.
    where = " AND ".join(clauses)
    # The block's keys first, newest first, then only those are ranked: ts_rank reads
    # each event's tsvector, which for every match would cost the whole result set.
    ranked = await db.fetch(
        f"""SELECT e.pk, octet_length(e.content) + octet_length(s.id)
           FROM (SELECT e.pk {joins} WHERE {where}
                 ORDER BY e.pk DESC LIMIT ${filters + 1} OFFSET ${filters + 2}) AS block
           JOIN events e ON e.pk = block.pk
           JOIN sessions s ON s.pk = e.session
           CROSS JOIN plainto_tsquery('{SEARCH_CONFIG}', $1) AS q(query)
           ORDER BY ts_rank(e.search, q.query) DESC, e.pk
           LIMIT ${filters + 3} OFFSET ${filters + 4}""",
        *params,
    )
    fit = rules.fitting_sizes([row[1] for row in ranked[:size]], max_bytes)
    wanted = [row[0] for row in ranked[:fit]]
    rows = await db.fetch(
        f"""SELECT e.pk, {EVENT_COLUMNS}, s.id, ts_rank(e.search, q.query),
               ts_headline('{SEARCH_CONFIG}', left(e.body, {INDEXED_TEXT_CHARS}), q.query,
                           '{_HEADLINE_OPTIONS}'), e.archived_by
           {joins}
           WHERE e.pk = ANY($2::bigint[])""",
        words,
        wanted,
    )
    found = {row[0]: row[1:] for row in rows}
    # In rank order, with each hit's place in it (one deleted in between is skipped).
    present = [(place, found[pk]) for place, pk in enumerate(wanted) if pk in found]
    items = tuple(
        SearchHit(
            session_id=row[EVENT_WIDTH],
            event=event_from_row(row),
            rank=float(row[EVENT_WIDTH + 1]),
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
        await db.fetchval(
            f"SELECT 1 {joins} WHERE {where} ORDER BY e.pk DESC LIMIT 1 OFFSET ${filters + 1}",
            *params[:filters],
            (block + 1) * SEARCH_BLOCK,
        )
        is not None
    )
    return Page(items[:kept], place.next_token(bound, read, more_in_block, more_blocks))


async def marked_rows(db: Db, pks: list[int]) -> list[counter_rules.Marked]:
    """``counter_rules.MARKED_COLUMNS`` of the rows ``pks``, in that order."""
    rows = await db.fetch(
        f"SELECT e.pk, {counter_rules.MARKED_COLUMNS} FROM events e WHERE e.pk = ANY($1::bigint[])",
        pks,
    )
    found = {
        row[0]: (row[1], bool(row[2]), bool(row[3]), int(row[4]), int(row[5]), int(row[6]))
        for row in rows
    }
    return [found[pk] for pk in pks]
