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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sidecar.compaction.formatting import format_event
from sidecar.errors import (
    EventConflict,
    InvalidArgument,
    SessionExists,
    SessionNotFound,
    VersionConflict,
)
from sidecar.model import CompactionPlan, Event, Session, SessionCounters
from sidecar.store.codec import dump_json, encode_content, encode_labels, to_micros
from sidecar.store.protocol import AppendOutcome, ApplyOutcome
from sidecar.store.sqlite_reads import (
    EVENT_COLUMNS,
    active_events,
    event_from_row,
    find_session,
    get_session,
)

# Well under SQLite's bound-parameter limit, for ``id IN (...)`` lookups.
_CHUNK = 500


def create_session(
    db: sqlite3.Connection,
    session_id: str,
    *,
    policy_json: str | None,
    labels: Mapping[str, str],
    now: datetime,
    version: int = 1,
) -> tuple[int, Session]:
    """Insert an empty session at ``version``; SessionExists if the id is taken."""
    if not session_id:
        raise InvalidArgument("session_id", "must not be empty")
    if find_session(db, session_id) is not None:
        raise SessionExists(session_id)
    micros = to_micros(now)
    cursor = db.execute(
        "INSERT INTO sessions (id, version, policy_json, labels, create_time, update_time)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, version, policy_json, encode_labels(labels), micros, micros),
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
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid, session


def _check_version(session: Session, expected_version: int | None) -> None:
    if expected_version is not None and expected_version != session.version:
        raise VersionConflict(
            f"session {session.session_id!r} is at version {session.version},"
            f" not {expected_version}",
            current_version=session.version,
        )


def _stored_events(db: sqlite3.Connection, session_pk: int, ids: Sequence[str]) -> dict[str, Event]:
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


def _insert_event(
    db: sqlite3.Connection,
    session_pk: int,
    event: Event,
    *,
    sort_key: int,
    written_by: str | None = None,
) -> None:
    """One event row and its full-text row (keyed by the event's rowid)."""
    cursor = db.execute(
        "INSERT INTO events (session, position, sort_key, id, role, content, token_count,"
        " synthetic, archived, written_by, create_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
        (
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
        ),
    )
    db.execute(
        "INSERT INTO events_fts (rowid, body) VALUES (?, ?)",
        (cursor.lastrowid, format_event(event)),
    )


def _save_header(db: sqlite3.Connection, session_pk: int, session: Session) -> None:
    """Write the header fields a write changes: version, counters, totals, policy, labels."""
    c = session.counters
    db.execute(
        """UPDATE sessions SET version = ?, policy_json = ?, labels = ?, update_time = ?,
               active_events = ?, real_events = ?, turns = ?, tokens = ?, system_tokens = ?,
               turns_since_compaction = ?, total_events = ?, last_compaction_id = ?
           WHERE pk = ?""",
        (
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
            session_pk,
        ),
    )


def append(
    db: sqlite3.Connection,
    session_id: str,
    events: Sequence[Event],
    *,
    expected_version: int | None,
    create_if_missing: bool,
    policy_json: str | None,
    now: datetime,
) -> AppendOutcome:
    """Append a batch (see ``Store.append``); the returned events match ``events`` one to one.

    A batch made only of events already stored (a client retry) returns them
    without checking ``expected_version``: the retry of an append that landed
    would otherwise fail against the version its own first attempt bumped.
    """
    for index, event in enumerate(events):
        if not event.id:
            raise InvalidArgument(f"events[{index}].id", "must not be empty")
    found = find_session(db, session_id)
    created = found is None
    if found is None:
        if not create_if_missing:
            raise SessionNotFound(session_id)
        if expected_version not in (None, 0):  # an absent session is at version 0
            raise VersionConflict(
                f"session {session_id!r} does not exist yet (version 0),"
                f" not version {expected_version}",
                current_version=0,
            )
        # Created at version 0 so that creation and the first batch are one write.
        found = create_session(
            db, session_id, policy_json=policy_json, labels={}, now=now, version=0
        )
    session_pk, session = found

    stored = _stored_events(db, session_pk, [e.id for e in events])
    result: list[Event] = []
    new: list[Event] = []
    counters = session.counters
    for event in events:
        prior = stored.get(event.id)
        if prior is not None:
            if not prior.same_payload(event):
                raise EventConflict(session_id, event.id)
            result.append(prior)
            continue
        position = session.total_events + len(new) + 1
        event = event.evolve(position=position, archived=False)
        stored[event.id] = event  # a later duplicate in the batch is a retry of this one
        new.append(event)
        result.append(event)
        counters = counters.after_append(event)
    if not new and not created:
        return AppendOutcome(tuple(result), session, 0)
    _check_version(session, expected_version)

    for event in new:
        _insert_event(db, session_pk, event, sort_key=2 * event.position + 1)
    session = replace(
        session,
        version=session.version + 1,
        update_time=now,
        counters=counters,
        total_events=session.total_events + len(new),
    )
    _save_header(db, session_pk, session)
    return AppendOutcome(tuple(result), session, len(new))


def apply(
    db: sqlite3.Connection, session_id: str, plan: CompactionPlan, *, now: datetime
) -> ApplyOutcome:
    """Apply a compaction plan (see ``Store.apply``); the in-memory reference is ``apply_plan``.

    Only the plan's own events are checked, so events appended after the plan
    was made (they sit after the kept window) do not make it fail.
    """
    if plan.is_empty:
        raise ValueError("an empty compaction plan writes nothing; do not apply it")
    if plan.inserts and plan.insert_before is None:
        raise ValueError("a plan with inserts must say which event they go before")
    session_pk, session = get_session(db, session_id)

    def conflict(reason: str) -> VersionConflict:
        return VersionConflict(
            f"compaction plan for session {session_id!r} is stale: {reason}",
            current_version=session.version,
        )

    if session.last_compaction_id != plan.base_compaction_id:
        raise conflict(
            f"compaction {session.last_compaction_id!r} landed after"
            f" {plan.base_compaction_id!r}, which the plan was made from"
        )
    # The window is read anyway for the counters, and costs O(window): check
    # the plan against it rather than against ids bound into one huge IN list.
    window = active_events(db, session_pk)
    wanted = set(plan.archive_ids)
    archived = tuple(e.evolve(archived=True) for e in window if e.id in wanted)
    if len(archived) != len(wanted):
        missing = sorted(wanted - {e.id for e in archived})
        raise conflict(f"events {missing[:5]} are no longer active")

    target = next((e for e in window if e.id == plan.insert_before), None)
    if plan.insert_before is not None and target is None:
        raise conflict(f"event {plan.insert_before!r} to insert before is no longer active")

    compaction_id = uuid.uuid4().hex
    if plan.inserts:
        assert target is not None  # inserts without insert_before were refused above
        (sort_key,) = db.execute(
            "SELECT sort_key FROM events WHERE session = ? AND id = ?",
            (session_pk, target.id),
        ).fetchone()
        if sort_key != 2 * target.position + 1:
            # Only an appended event has a free slot right before it (sort_key 2p).
            raise ValueError(f"cannot insert before {target.id!r}: a compaction wrote it")
        taken = _stored_events(db, session_pk, [e.id for e in plan.inserts])
        if taken or len({e.id for e in plan.inserts}) != len(plan.inserts):
            raise EventConflict(session_id, next(iter(taken), plan.inserts[0].id))
        for offset, event in enumerate(plan.inserts, start=1):
            event = event.evolve(position=session.total_events + offset, synthetic=True)
            _insert_event(
                db, session_pk, event, sort_key=2 * target.position, written_by=compaction_id
            )

    archived_ids = [e.id for e in archived]
    for start in range(0, len(archived_ids), _CHUNK):
        chunk = archived_ids[start : start + _CHUNK]
        db.execute(
            "UPDATE events SET archived = 1, archived_by = ? WHERE session = ?"
            f" AND id IN ({', '.join('?' for _ in chunk)})",
            (compaction_id, session_pk, *chunk),
        )
    active = active_events(db, session_pk)
    before = session.version
    session = replace(
        session,
        version=before + 1,
        update_time=now,
        counters=SessionCounters.after_compaction(active),
        total_events=session.total_events + len(plan.inserts),
        last_compaction_id=compaction_id,
    )
    _save_header(db, session_pk, session)
    db.execute(
        """INSERT INTO compactions (id, session, version_before, version_after, strategy,
               archived_ids, inserted_ids, tokens_saved, summarizer_latency_ms,
               summary_input_tokens, summary_output_tokens, create_time)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
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
        ),
    )
    return ApplyOutcome(session, compaction_id, active, archived)


def update_session(
    db: sqlite3.Connection,
    session_id: str,
    *,
    policy_json: str | None,
    set_policy: bool,
    labels: Mapping[str, str] | None,
    expected_version: int | None,
    now: datetime,
) -> Session:
    """Replace the policy and/or labels. Asking to change nothing writes nothing."""
    session_pk, session = get_session(db, session_id)
    _check_version(session, expected_version)
    if not set_policy and labels is None:
        return session
    session = replace(
        session,
        version=session.version + 1,
        update_time=now,
        policy_json=policy_json if set_policy else session.policy_json,
        labels=dict(labels) if labels is not None else session.labels,
    )
    _save_header(db, session_pk, session)
    return session


def delete_session(db: sqlite3.Connection, session_id: str) -> None:
    """Delete the session, its whole log, its full-text rows and its compaction records."""
    session_pk, _ = get_session(db, session_id)
    # The FTS table has no foreign key to cascade from; clear it first, by rowid.
    db.execute(
        "DELETE FROM events_fts WHERE rowid IN (SELECT pk FROM events WHERE session = ?)",
        (session_pk,),
    )
    db.execute("DELETE FROM events WHERE session = ?", (session_pk,))
    db.execute("DELETE FROM compactions WHERE session = ?", (session_pk,))
    db.execute("DELETE FROM sessions WHERE pk = ?", (session_pk,))
