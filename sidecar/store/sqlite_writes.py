"""The SQLite store's write transactions: plain functions of a ``sqlite3.Connection``.

Each is the body of exactly one transaction, run whole on the writer
connection's thread by ``SqliteStore`` (which opens and commits or rolls back
around it). An exception anywhere rolls everything back, which is how "nothing
of the batch is written" holds. Every write bumps the session's version by
exactly 1 and rewrites its counters from values read in the same transaction.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sidecar.compaction.formatting import format_event
from sidecar.errors import (
    InvalidArgument,
    SessionExists,
    SessionNotFound,
)
from sidecar.model import CompactionPlan, Event, LabelUpdate, Session, SessionCounters, UsageReport
from sidecar.store import counter_rules, rules
from sidecar.store.codec import dump_json, encode_content, encode_labels, to_micros
from sidecar.store.protocol import AppendOutcome, ApplyOutcome
from sidecar.store.sqlite_reads import (
    EVENT_COLUMNS,
    SESSION_COLUMNS,
    active_with_ids,
    event_from_row,
    find_session,
    get_session,
    marked_rows,
    session_from_row,
    window_counters,
)
from sidecar.store.tool_links import links_of

# Well under SQLite's bound-parameter limit, for ``id IN (...)`` lookups.
_CHUNK = 500

INDEX_BATCH = 32
"""At most this many events indexed for search per background transaction (``index_pending``).

Small, so that one never holds the writer long: at 500 (a batch of 10-20 ms under a
stream) the p99 of an append waiting behind it rose by a fifth; at 32 it matched the
old in-transaction indexing. A search indexes what it needs in such batches too."""

INDEX_BATCH_BYTES = 256 * 1024
"""And at most about this much of their text."""


def create_session(
    db: sqlite3.Connection,
    session_id: str,
    *,
    policy_json: str | None,
    labels: Mapping[str, str],
    now: datetime,
    version: int = 1,
    model: str = "",
) -> tuple[int, Session]:
    """Insert an empty session at ``version``; SessionExists if the id is taken."""
    if not session_id:
        raise InvalidArgument("session_id", "must not be empty")
    if find_session(db, session_id) is not None:
        raise SessionExists(session_id)
    micros = to_micros(now)
    cursor = db.execute(
        "INSERT INTO sessions (id, version, policy_json, labels, create_time, update_time, model)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, version, policy_json, encode_labels(labels), micros, micros, model),
    )
    session = Session(
        session_id=session_id,
        version=version,
        policy_json=policy_json,
        labels=dict(labels),
        create_time=now,
        update_time=now,
        counters=SessionCounters(),
        total_events=0,
        model=model,
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid, session


def stored_events(db: sqlite3.Connection, session_pk: int, ids: Sequence[str]) -> dict[str, Event]:
    found: dict[str, Event] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        rows = db.execute(
            f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.session = ?"
            f" AND e.id IN ({', '.join('?' for _ in chunk)})",
            (session_pk, *chunk),
        )
        for row in rows:
            found[row[0]] = event_from_row(row)
    return found


INSERT_EVENT = (
    "INSERT INTO events (session, position, sort_key, id, role, content, token_count,"
    " synthetic, archived, written_by, create_time, token_low, token_high)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)"
)
"""A new event's row, with ``event_row``'s parameters."""

INSERT_TOOL_LINK = "INSERT INTO tool_links (session, event, kind, call_key) VALUES (?, ?, ?, ?)"


def event_row(
    session_pk: int, event: Event, *, sort_key: int, written_by: str | None = None
) -> tuple[object, ...]:
    """``INSERT_EVENT``'s parameters for ``event``."""
    low, high = event.token_bounds or (None, None)
    return (
        session_pk,
        event.position,
        sort_key,
        event.id,
        event.role.value,
        encode_content(event),
        event.token_count,
        1 if event.synthetic else 0,
        written_by,
        to_micros(event.create_time),
        low,
        high,
    )


def tool_link_rows(session_pk: int, event: Event) -> list[tuple[int, str, int, int]]:
    """``INSERT_TOOL_LINK``'s parameters for each of ``event``'s tool calls and results."""
    return [(session_pk, event.id, kind, key) for kind, key in links_of(event)]


def _insert_event(
    db: sqlite3.Connection,
    session_pk: int,
    event: Event,
    *,
    sort_key: int,
    written_by: str | None = None,
) -> None:
    """One event row, and its rowid in ``fts_pending``: it is indexed for search later.

    Indexing here made each transaction write a new FTS5 segment (its terms,
    its copy of the text, its size, the index's structure record) for one
    row; ``index_pending`` indexes many in one transaction instead, and a
    search runs it first (``SqliteStore.search``).
    """
    row = event_row(session_pk, event, sort_key=sort_key, written_by=written_by)
    cursor = db.execute(INSERT_EVENT, row)
    db.execute("INSERT INTO fts_pending (pk) VALUES (?)", (cursor.lastrowid,))
    if event.tool_calls or event.tool_results:
        db.executemany(INSERT_TOOL_LINK, tool_link_rows(session_pk, event))


def index_pending(
    db: sqlite3.Connection, limit: int = INDEX_BATCH, through: int | None = None
) -> bool:
    """Index a batch of pending events for search, oldest first; ``through``: only rowids
    up to it. True when some (up to ``through``) are still pending.

    A batch ends at ``limit`` events or ``INDEX_BATCH_BYTES`` of text, so one
    write never holds the writer long. Rows are read and indexed one at a
    time, so memory holds one event. Each gets its full-text row from what is
    stored, the original content (a cleared tool result stays searchable as
    appended).
    """
    up_to, bound = ("", ()) if through is None else (" WHERE p.pk <= ?", (through,))
    last: list[int] = []

    def bodies() -> Iterator[tuple[int, str]]:
        size = 0
        rows = db.execute(
            f"SELECT p.pk, {EVENT_COLUMNS} FROM fts_pending p JOIN events e ON e.pk = p.pk"
            f"{up_to} ORDER BY p.pk",
            bound,
        )
        for count, row in enumerate(rows, start=1):
            body = format_event(event_from_row(row[1:]))
            yield row[0], body
            last[:] = [row[0]]
            size += len(body)
            if count >= limit or size >= INDEX_BATCH_BYTES:
                return

    db.executemany("INSERT INTO events_fts (rowid, body) VALUES (?, ?)", bodies())
    if not last:  # rows whose event is gone (none expected)
        db.execute(f"DELETE FROM fts_pending AS p{up_to}", bound)
        return False
    db.execute("DELETE FROM fts_pending WHERE pk <= ?", (last[0],))
    return (
        db.execute(f"SELECT 1 FROM fts_pending AS p{up_to} LIMIT 1", bound).fetchone() is not None
    )


def newest_pending(db: sqlite3.Connection) -> int | None:
    """The highest rowid waiting to be indexed, or None."""
    (pk,) = db.execute("SELECT max(pk) FROM fts_pending").fetchone()
    return None if pk is None else int(pk)


UPDATE_HEADER = """UPDATE sessions SET version = ?, policy_json = ?, labels = ?, update_time = ?,
       active_events = ?, real_events = ?, turns = ?, tokens = ?, system_tokens = ?,
       turns_since_compaction = ?, total_events = ?, last_compaction_id = ?,
       model = ?, calibration_factor = ?, calibration_samples = ?,
       auto_compaction_paused = ?, stable_prefix_tokens = ?, stable_prefix_events = ?,
       pending_below = ?, pending_above = ?
   WHERE pk = ?"""
"""The header fields a write changes, with ``header_row``'s parameters."""


def header_row(session_pk: int, session: Session) -> tuple[object, ...]:
    """``UPDATE_HEADER``'s parameters: version, counters, totals, policy, labels."""
    c = session.counters
    return (
        session.version,
        session.policy_json,
        encode_labels(session.labels),
        to_micros(session.update_time),
        c.active_events,
        c.real_events,
        c.turns,
        c.tokens,
        c.system_tokens,
        c.turns_since_compaction,
        session.total_events,
        session.last_compaction_id,
        session.model,
        session.calibration.factor,
        session.calibration.samples,
        1 if session.auto_compaction_paused else 0,
        session.stable_prefix_tokens,
        session.stable_prefix_events,
        c.pending_below,
        c.pending_above,
        session_pk,
    )


def save_header(db: sqlite3.Connection, session_pk: int, session: Session) -> None:
    """Write the header fields a write changes: version, counters, totals, policy, labels."""
    db.execute(UPDATE_HEADER, header_row(session_pk, session))


def append(
    db: sqlite3.Connection,
    session_id: str,
    events: Sequence[Event],
    *,
    expected_version: int | None,
    create_if_missing: bool,
    policy_json: str | None,
    now: datetime,
    label_updates: Sequence[LabelUpdate] = (),
    max_labels: int = 64,
    usage: UsageReport | None = None,
) -> AppendOutcome:
    """Append a batch (see ``Store.append``); the returned events match ``events`` one to one.

    A batch made only of events already stored (a client retry) returns them
    without checking ``expected_version``: the retry of an append that landed
    would otherwise fail against the version its own first attempt bumped.
    """
    rules.require_ids(events)
    ids = [e.id for e in events]
    found, retried = _session_and_retries(db, session_id, ids)
    created = found is None
    if found is None:
        if not create_if_missing:
            raise SessionNotFound(session_id)
        rules.check_absent_version(session_id, expected_version)
        # Created at version 0 so that creation and the first batch are one write.
        found = create_session(
            db, session_id, policy_json=policy_json, labels={}, now=now, version=0
        )
    session_pk, session = found

    stored = stored_events(db, session_pk, ids) if retried else {}
    batch = rules.sort_batch(session, events, stored)
    if not batch.new and not created:
        return AppendOutcome(batch.result, session, 0)
    rules.check_version(session, expected_version)
    own, others = rules.split_label_updates(session_id, label_updates)
    labels = rules.labels_after(session_id, session, own, max_labels) if own else session.labels
    for update in others:
        _update_labels(db, update, max_labels, now)
    for event in batch.new:
        _insert_event(db, session_pk, event, sort_key=2 * event.position + 1)
    counted = rules.counts_usage(session, batch, usage)
    session = rules.after_append(session, batch, now, usage, labels)
    save_header(db, session_pk, session)
    return AppendOutcome(batch.result, session, len(batch.new), counted)


def _pks(db: sqlite3.Connection, session_pk: int, ids: Sequence[str]) -> list[int]:
    """The surrogate keys of the session's events ``ids`` (those stored), by its id index."""
    found: list[int] = []
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        found.extend(
            pk
            for (pk,) in db.execute(
                "SELECT pk FROM events WHERE session = ?"
                f" AND id IN ({', '.join('?' * len(chunk))})",
                (session_pk, *chunk),
            )
        )
    return found


def _session_and_retries(
    db: sqlite3.Connection, session_id: str, ids: Sequence[str]
) -> tuple[tuple[int, Session] | None, bool]:
    """The session (None if absent), and whether any of ``ids`` is stored in it already.

    One statement instead of two: the retry check rides on the header's read,
    and the retried events are read only when there are some (a stream's
    append to one of many sessions spends its time per statement).
    """
    if len(ids) > _CHUNK:
        found = find_session(db, session_id)
        return found, found is not None
    row = db.execute(
        f"SELECT {SESSION_COLUMNS}, EXISTS (SELECT 1 FROM events e WHERE e.session = s.pk"
        f" AND e.id IN ({', '.join('?' * len(ids))})) FROM sessions s WHERE s.id = ?",
        (*ids, session_id),
    ).fetchone()
    if row is None:
        return None, False
    return session_from_row(row), bool(row[-1])


def _update_labels(
    db: sqlite3.Connection, update: LabelUpdate, max_labels: int, now: datetime
) -> None:
    """Another session's labels, changed within an append (created when absent)."""
    found = find_session(db, update.session_id)
    if found is None:
        labels = rules.labels_after(update.session_id, None, update, max_labels)
        create_session(db, update.session_id, policy_json=None, labels=labels, now=now)
        return
    session_pk, session = found
    labels = rules.labels_after(update.session_id, session, update, max_labels)
    session = replace(session, version=session.version + 1, update_time=now, labels=labels)
    save_header(db, session_pk, session)


def apply(
    db: sqlite3.Connection, session_id: str, plan: CompactionPlan, *, now: datetime
) -> ApplyOutcome:
    """Apply a compaction plan (see ``Store.apply``); the in-memory reference is ``apply_plan``.

    Costs what the plan changes, not the window: the plan's own events are
    looked up by id, and the counters move by what its rows changed
    (``counter_rules.counters_moved``; summed over the window in SQL only when
    a system message is among them). The outcome's ``active`` is left empty;
    ``SqliteStore.apply`` reads the window after the commit, on a reader, so
    the one writer never decodes a window.
    """
    rules.check_plan_shape(plan)
    session_pk, session = get_session(db, session_id)
    own = [*plan.archive_ids, *(e.id for e in plan.clears)]
    if plan.insert_before is not None:
        own.append(plan.insert_before)
    archived, target = rules.check_plan(session, plan, active_with_ids(db, session_pk, own))
    # The rows the plan changes, as they count before it: archived and cleared ones.
    touched = _pks(db, session_pk, [*(e.id for e in archived), *(e.id for e in plan.clears)])
    was = marked_rows(db, touched)

    compaction_id = uuid.uuid4().hex
    if plan.inserts:
        assert target is not None  # check_plan_shape refused inserts without a target
        (sort_key,) = db.execute(
            "SELECT sort_key FROM events WHERE session = ? AND id = ?",
            (session_pk, target.id),
        ).fetchone()
        rules.check_insert_slot(target, sort_key)
        taken = stored_events(db, session_pk, [e.id for e in plan.inserts])
        for event in rules.placed_inserts(session, plan, taken):
            _insert_event(
                db, session_pk, event, sort_key=2 * target.position, written_by=compaction_id
            )

    db.executemany(  # the original content stays where it is
        "UPDATE events SET cleared_content = ?, cleared_token_count = ?, cleared_by = ?"
        " WHERE session = ? AND id = ?",
        [(encode_content(e), e.token_count, compaction_id, session_pk, e.id) for e in plan.clears],
    )
    archived_ids = [e.id for e in archived]
    for start in range(0, len(archived_ids), _CHUNK):
        chunk = archived_ids[start : start + _CHUNK]
        db.execute(
            "UPDATE events SET archived = 1, archived_by = ? WHERE session = ?"
            f" AND id IN ({', '.join('?' for _ in chunk)})",
            (compaction_id, session_pk, *chunk),
        )
    before = session.version
    turns_before = session.counters.turns_since_compaction
    inserted = [
        pk
        for (pk,) in db.execute(
            "SELECT pk FROM events WHERE session = ? AND written_by = ?",
            (session_pk, compaction_id),
        )
    ]
    moved = counter_rules.counters_moved(session.counters, was, marked_rows(db, touched + inserted))
    counters = window_counters(db, session_pk) if moved is None else moved
    session = rules.after_compaction(session, plan, counters, compaction_id, now)
    save_header(db, session_pk, session)
    db.execute(
        """INSERT INTO compactions (id, session, version_before, version_after, strategy,
               archived_ids, inserted_ids, tokens_saved, summarizer_latency_ms,
               summary_input_tokens, summary_output_tokens, create_time, cleared_ids,
               cause, turns_before, turns_after, identifiers_dropped, dropped_identifiers)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            compaction_id,
            session_pk,
            before,
            session.version,
            plan.strategy,
            dump_json(archived_ids),
            dump_json([e.id for e in plan.inserts]),
            plan.tokens_estimated_saved,
            plan.summarizer_latency_ms,
            plan.summary_input_tokens,
            plan.summary_output_tokens,
            to_micros(now),
            dump_json([e.id for e in plan.clears]),
            str(plan.cause),
            turns_before,
            session.counters.turns_since_compaction,
            plan.identifiers_dropped,
            dump_json(list(plan.dropped_identifiers)),
        ),
    )
    return ApplyOutcome(session, compaction_id, archived)


def update_session(
    db: sqlite3.Connection,
    session_id: str,
    *,
    policy_json: str | None,
    set_policy: bool,
    labels: Mapping[str, str] | None,
    expected_version: int | None,
    now: datetime,
    model: str | None = None,
) -> Session:
    """Replace the policy, labels and/or model. Asking to change nothing writes nothing."""
    session_pk, session = get_session(db, session_id)
    rules.check_version(session, expected_version)
    updated = rules.after_update(
        session, policy_json=policy_json, set_policy=set_policy, labels=labels, model=model, now=now
    )
    if updated is None:
        return session
    save_header(db, session_pk, updated)
    return updated


def delete_session(db: sqlite3.Connection, session_id: str) -> None:
    """Delete the session, its whole log, its full-text rows and its compaction records."""
    session_pk, _ = get_session(db, session_id)
    # The FTS table has no foreign key to cascade from; clear it first, by rowid.
    db.execute(
        "DELETE FROM events_fts WHERE rowid IN (SELECT pk FROM events WHERE session = ?)",
        (session_pk,),
    )
    db.execute(
        "DELETE FROM fts_pending WHERE pk IN (SELECT pk FROM events WHERE session = ?)",
        (session_pk,),
    )
    db.execute("DELETE FROM tool_links WHERE session = ?", (session_pk,))
    db.execute("DELETE FROM events WHERE session = ?", (session_pk,))
    db.execute("DELETE FROM compactions WHERE session = ?", (session_pk,))
    db.execute("DELETE FROM sessions WHERE pk = ?", (session_pk,))
