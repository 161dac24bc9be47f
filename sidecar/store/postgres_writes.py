"""The PostgreSQL store's write transactions: coroutines of one ``asyncpg`` connection.

The SQL twin of ``sqlite_writes``. Each runs inside one READ COMMITTED
transaction opened by ``PostgresStore``, and its first statement locks the
session's row (``SELECT ... FOR UPDATE``). That lock is what makes several
replicas safe on one database: two sidecars appending to, or compacting, the
same session queue on it, so positions are assigned one transaction at a
time (dense, in commit order), the version check and the counters are read
after the previous writer committed, and a plan made from a snapshot that
another compaction has since replaced is refused. The header update also
repeats the version check in its WHERE clause, and fails loudly if it ever
matched no row.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from sidecar.compaction.formatting import format_event
from sidecar.errors import (
    InvalidArgument,
    SessionExists,
    SessionNotFound,
    VersionConflict,
)
from sidecar.model import (
    CompactionPlan,
    Event,
    LabelUpdate,
    Session,
    SessionCounters,
    UsageReport,
    int32,
)
from sidecar.store import counter_rules, rules
from sidecar.store.codec import encode_content, encode_labels
from sidecar.store.postgres_reads import (
    EVENT_COLUMNS,
    active_with_ids,
    event_from_row,
    find_session,
    get_session,
    marked_rows,
    window_counters,
)
from sidecar.store.postgres_schema import Db
from sidecar.store.protocol import AppendOutcome, ApplyOutcome
from sidecar.store.tool_links import links_of

MAX_ID_BYTES = 2048
"""The longest session or event id PostgreSQL takes, in UTF-8 bytes.

Each is a key of a unique B-tree index, whose entries PostgreSQL caps at
2,704 bytes (with the row's header and the session's key): a longer id failed
the write with ``ProgramLimitExceededError``, answered INTERNAL.
"""


def _indexable(value: str, field: str) -> None:
    """InvalidArgument naming ``field`` if ``value`` is too long to be an index key."""
    size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES:
        raise InvalidArgument(
            field, f"is {size:,} bytes, more than the {MAX_ID_BYTES:,} an id may have"
        )


async def create_session(
    db: Db,
    session_id: str,
    *,
    policy_json: str | None,
    labels: Mapping[str, str],
    now: datetime,
    version: int = 1,
    model: str = "",
) -> tuple[int, Session]:
    """Insert an empty session at ``version``; SessionExists if the id is taken.

    ``ON CONFLICT DO NOTHING`` rather than a read first: two replicas creating
    one id at once get one row and one SessionExists, never a unique violation.
    """
    if not session_id:
        raise InvalidArgument("session_id", "must not be empty")
    _indexable(session_id, "session_id")
    pk = await db.fetchval(
        "INSERT INTO sessions (id, version, policy_json, labels, create_time, update_time, model)"
        " VALUES ($1, $2, $3, $4::jsonb, $5, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING pk",
        session_id,
        version,
        policy_json,
        encode_labels(labels),
        now,
        model,
    )
    if pk is None:
        raise SessionExists(session_id)
    return pk, Session(
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


async def stored_events(db: Db, session_pk: int, ids: Sequence[str]) -> dict[str, Event]:
    rows = await db.fetch(
        f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.session = $1 AND e.id = ANY($2::text[])",
        session_pk,
        list(dict.fromkeys(ids)),
    )
    return {row[0]: event_from_row(row) for row in rows}


async def _insert_events(
    db: Db,
    session_pk: int,
    events: Sequence[Event],
    sort_keys: Sequence[int],
    *,
    synthetic: bool = False,
    written_by: str | None = None,
) -> None:
    """Insert a batch in one statement (one round trip, however many events)."""
    await db.execute(
        """INSERT INTO events (session, position, sort_key, id, role, content, token_count,
               synthetic, written_by, create_time, body, token_low, token_high)
           SELECT $1, x.position, x.sort_key, x.id, x.role, x.content, x.token_count,
               $2, $3, x.create_time, x.body, x.token_low, x.token_high
           FROM unnest($4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[],
                       $9::integer[], $10::timestamptz[], $11::text[], $12::integer[],
                       $13::integer[])
               AS x(position, sort_key, id, role, content, token_count, create_time, body,
                    token_low, token_high)""",
        session_pk,
        synthetic,
        written_by,
        [e.position for e in events],
        list(sort_keys),
        [e.id for e in events],
        [e.role.value for e in events],
        [encode_content(e) for e in events],
        [e.token_count for e in events],
        [e.create_time for e in events],
        # PostgreSQL text cannot hold U+0000; the JSON content keeps it, escaped.
        [format_event(e).replace("\x00", " ") for e in events],
        [e.token_bounds[0] if e.token_bounds else None for e in events],
        [e.token_bounds[1] if e.token_bounds else None for e in events],
    )
    links = [(e.id, kind, key) for e in events for kind, key in links_of(e)]
    if links:
        await db.execute(
            """INSERT INTO tool_links (session, event, kind, call_key)
               SELECT $1, x.event, x.kind, x.call_key
               FROM unnest($2::text[], $3::smallint[], $4::bigint[]) AS x(event, kind, call_key)""",
            session_pk,
            *(list(column) for column in zip(*links, strict=True)),
        )


async def save_header(db: Db, session_pk: int, session: Session, *, previous_version: int) -> None:
    """Write the header fields a write changes, guarded by the version it was read at."""
    c = session.counters
    status = await db.execute(
        """UPDATE sessions SET version = $1, policy_json = $2, labels = $3::jsonb,
               update_time = $4, active_events = $5, real_events = $6, turns = $7,
               tokens = $8, system_tokens = $9, turns_since_compaction = $10,
               total_events = $11, last_compaction_id = $12, model = $13,
               calibration_factor = $14, calibration_samples = $15,
               auto_compaction_paused = $16, stable_prefix_tokens = $17,
               stable_prefix_events = $18, pending_below = $19, pending_above = $20
           WHERE pk = $21 AND version = $22""",
        session.version,
        session.policy_json,
        encode_labels(session.labels),
        session.update_time,
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
        session.auto_compaction_paused,
        int32(session.stable_prefix_tokens),  # an integer column
        session.stable_prefix_events,
        c.pending_below,
        c.pending_above,
        session_pk,
        previous_version,
    )
    if status != "UPDATE 1":  # the row lock makes this impossible; refuse to go on if not
        raise VersionConflict(
            f"session {session.session_id!r} changed under a held lock",
            current_version=previous_version,
        )


async def append(
    db: Db,
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
    without checking ``expected_version``, as in the SQLite store.
    """
    rules.require_ids(events)
    _indexable(session_id, "session_id")
    for index, event in enumerate(events):
        _indexable(event.id, f"events[{index}].id")
    for index, update in enumerate(label_updates):
        _indexable(update.session_id, f"label_updates[{index}].session_id")
    created = False
    shared = sorted({u.session_id for u in label_updates} - {"", session_id})
    if shared:
        # Every session this append writes, locked in one id order: two appends that
        # update each other's labels queue on the first lock instead of deadlocking.
        await db.execute(
            "SELECT 1 FROM sessions WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE",
            sorted([session_id, *shared]),
        )
    found = await find_session(db, session_id, for_update=True)
    if found is None:
        if not create_if_missing:
            raise SessionNotFound(session_id)
        rules.check_absent_version(session_id, expected_version)
        # Created at version 0 so that creation and the first batch are one write. A
        # replica that created it first wins; this one then appends to that session.
        pk = await db.fetchval(
            "INSERT INTO sessions (id, version, policy_json, create_time, update_time)"
            " VALUES ($1, 0, $2, $3, $3) ON CONFLICT (id) DO NOTHING RETURNING pk",
            session_id,
            policy_json,
            now,
        )
        created = pk is not None
        found = await get_session(db, session_id, for_update=True)
    session_pk, session = found

    stored = await stored_events(db, session_pk, [e.id for e in events])
    batch = rules.sort_batch(session, events, stored)
    if not batch.new and not created:
        return AppendOutcome(batch.result, session, 0)
    rules.check_version(session, expected_version)
    own, others = rules.split_label_updates(session_id, label_updates)
    labels = rules.labels_after(session_id, session, own, max_labels) if own else session.labels
    for update in others:  # in id order: two appends lock shared sessions in one order
        await _update_labels(db, update, max_labels, now)
    if batch.new:
        await _insert_events(db, session_pk, batch.new, [2 * e.position + 1 for e in batch.new])
    previous = session.version
    counted = rules.counts_usage(session, batch, usage)
    session = rules.after_append(session, batch, now, usage, labels)
    await save_header(db, session_pk, session, previous_version=previous)
    return AppendOutcome(batch.result, session, len(batch.new), counted)


async def _update_labels(db: Db, update: LabelUpdate, max_labels: int, now: datetime) -> None:
    """Another session's labels, changed within an append (created when absent)."""
    found = await find_session(db, update.session_id, for_update=True)
    if found is None:
        labels = rules.labels_after(update.session_id, None, update, max_labels)
        pk = await db.fetchval(
            "INSERT INTO sessions (id, version, policy_json, labels, create_time, update_time)"
            " VALUES ($1, 1, NULL, $2::jsonb, $3, $3) ON CONFLICT (id) DO NOTHING RETURNING pk",
            update.session_id,
            encode_labels(labels),
            now,
        )
        if pk is not None:
            return
        # Another replica created it meanwhile: update that row under its lock.
        found = await get_session(db, update.session_id, for_update=True)
    session_pk, session = found
    labels = rules.labels_after(update.session_id, session, update, max_labels)
    previous = session.version
    session = replace(session, version=previous + 1, update_time=now, labels=labels)
    await save_header(db, session_pk, session, previous_version=previous)


NOTIFY_CHANNEL = "compaction_sidecar"
"""Where each landed compaction is announced, for the watchers of the other replicas."""


async def apply(
    db: Db,
    session_id: str,
    plan: CompactionPlan,
    *,
    now: datetime,
    origin: str = "",
) -> ApplyOutcome:
    """Apply a compaction plan (see ``Store.apply`` and ``sqlite_writes.apply``).

    The plan's own events are looked up by id and the counters moved by what
    its rows changed (summed by the server only when a system message is among
    them): nothing of the window is read.
    """
    rules.check_plan_shape(plan)
    session_pk, session = await get_session(db, session_id, for_update=True)
    own = [*plan.archive_ids, *(e.id for e in plan.clears)]
    if plan.insert_before is not None:
        own.append(plan.insert_before)
    archived, target = rules.check_plan(session, plan, await active_with_ids(db, session_pk, own))
    # The rows the plan changes, as they count before it: archived and cleared ones.
    touched = [
        row[0]
        for row in await db.fetch(
            "SELECT pk FROM events WHERE session = $1 AND id = ANY($2::text[])",
            session_pk,
            list(dict.fromkeys([*(e.id for e in archived), *(e.id for e in plan.clears)])),
        )
    ]
    was = await marked_rows(db, touched)

    compaction_id = uuid.uuid4().hex
    if plan.inserts:
        assert target is not None  # check_plan_shape refused inserts without a target
        sort_key = await db.fetchval(
            "SELECT sort_key FROM events WHERE session = $1 AND id = $2", session_pk, target.id
        )
        rules.check_insert_slot(target, sort_key)
        taken = await stored_events(db, session_pk, [e.id for e in plan.inserts])
        inserts = rules.placed_inserts(session, plan, taken)
        await _insert_events(
            db,
            session_pk,
            inserts,
            [2 * target.position] * len(inserts),
            synthetic=True,
            written_by=compaction_id,
        )

    if plan.clears:  # the original content stays where it is
        await db.executemany(
            "UPDATE events SET cleared_content = $1, cleared_token_count = $2, cleared_by = $3"
            " WHERE session = $4 AND id = $5",
            [
                (encode_content(e), e.token_count, compaction_id, session_pk, e.id)
                for e in plan.clears
            ],
        )
    archived_ids = [e.id for e in archived]
    await db.execute(
        "UPDATE events SET archived = true, archived_by = $1"
        " WHERE session = $2 AND id = ANY($3::text[])",
        compaction_id,
        session_pk,
        archived_ids,
    )
    before = session.version
    turns_before = session.counters.turns_since_compaction
    inserted = [
        row[0]
        for row in await db.fetch(
            "SELECT pk FROM events WHERE session = $1 AND written_by = $2",
            session_pk,
            compaction_id,
        )
    ]
    now_marked = await marked_rows(db, touched + inserted)
    moved = counter_rules.counters_moved(session.counters, was, now_marked)
    counters = await window_counters(db, session_pk) if moved is None else moved
    session = rules.after_compaction(session, plan, counters, compaction_id, now)
    await save_header(db, session_pk, session, previous_version=before)
    await db.execute(
        """INSERT INTO compactions (id, session, version_before, version_after, strategy,
               archived_ids, inserted_ids, tokens_saved, summarizer_latency_ms,
               summary_input_tokens, summary_output_tokens, create_time, cleared_ids,
               cause, turns_before, turns_after, identifiers_dropped, dropped_identifiers)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
                   $17, $18)""",
        compaction_id,
        session_pk,
        before,
        session.version,
        plan.strategy,
        archived_ids,
        [e.id for e in plan.inserts],
        int32(plan.tokens_estimated_saved),  # an integer column
        plan.summarizer_latency_ms,
        plan.summary_input_tokens,
        plan.summary_output_tokens,
        now,
        [e.id for e in plan.clears],
        str(plan.cause),
        turns_before,
        session.counters.turns_since_compaction,
        plan.identifiers_dropped,
        list(plan.dropped_identifiers),
    )
    await notify(db, session_id, compaction_id, origin)
    return ApplyOutcome(session, compaction_id, archived)


async def notify(db: Db, session_id: str, compaction_id: str, origin: str) -> None:
    """Tell other replicas a compaction landed: delivered when (and only if) the transaction
    commits.

    PostgreSQL refuses a payload past 8,000 bytes, and the transaction with it. This one
    stays near 700 at most: the schema's name (63 bytes, six each once escaped in JSON),
    the session id as the engine stores it (193 characters needing no escape) and two
    32-character hex ids (tests/store/test_postgres_notices.py holds both bounds).
    """
    await db.execute(
        "SELECT pg_notify($1, json_build_object('schema', current_schema(), 'session', $2::text,"
        " 'compaction', $3::text, 'origin', $4::text)::text)",
        NOTIFY_CHANNEL,
        session_id,
        compaction_id,
        origin,
    )


async def update_session(
    db: Db,
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
    session_pk, session = await get_session(db, session_id, for_update=True)
    rules.check_version(session, expected_version)
    updated = rules.after_update(
        session, policy_json=policy_json, set_policy=set_policy, labels=labels, model=model, now=now
    )
    if updated is None:
        return session
    await save_header(db, session_pk, updated, previous_version=session.version)
    return updated


async def delete_session(db: Db, session_id: str) -> None:
    """Delete the session; its log and compaction records go with it (ON DELETE CASCADE)."""
    status = await db.execute("DELETE FROM sessions WHERE id = $1", session_id)
    if status != "DELETE 1":
        raise SessionNotFound(session_id)
