"""The compaction history on PostgreSQL: listing it, a landed pass as a result, and restores.

As on SQLite (``sqlite_history``): a restore is flag updates on the marks the
undone pass left, in one transaction holding the session's row lock, and a
notice to the other replicas when it commits.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sidecar.errors import CompactionNotFound
from sidecar.model import Cause, CompactionResult, int32
from sidecar.store import counter_rules, history_rules, rules
from sidecar.store.paging import decode_int_key, encode_token, fingerprint
from sidecar.store.postgres_reads import (
    VIEW_COLUMNS,
    event_from_row,
    get_session,
    marked_rows,
    window_counters,
)
from sidecar.store.postgres_schema import Db
from sidecar.store.postgres_writes import notify, save_header
from sidecar.store.protocol import RESTORE_STRATEGY, CompactionRecord, Page, RestoreOutcome


def _as_is(moment: datetime) -> datetime:
    return moment


def _record(session_id: str, row: Any) -> CompactionRecord:
    return history_rules.record_from_row(session_id, row, ids=tuple, time=_as_is)


async def list_compactions(
    db: Db,
    session_id: str,
    *,
    size: int,
    token: str,
    newest_first: bool = False,
    max_bytes: int | None = None,
) -> Page[CompactionRecord]:
    """The history in either order; keyset on the record's identity key, which only grows."""
    bound = fingerprint(session_id)
    kind = "compactions-newest" if newest_first else "compactions"
    pk, _ = await get_session(db, session_id)
    if newest_first:
        before = decode_int_key(token, kind=kind, bound=bound, length=1)[0] if token else 2**62
        rows = await db.fetch(
            f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = $1 AND pk < $2"
            " ORDER BY pk DESC LIMIT $3",
            pk,
            before,
            size + 1,
        )
    else:
        after = decode_int_key(token, kind=kind, bound=bound, length=1)[0] if token else 0
        rows = await db.fetch(
            f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = $1 AND pk > $2"
            " ORDER BY pk LIMIT $3",
            pk,
            after,
            size + 1,
        )
    records = [_record(session_id, row) for row in rows]
    fit = rules.fitting_sizes([history_rules.record_size(r) for r in records[:size]], max_bytes)
    next_token = ""
    if len(rows) > fit:
        next_token = encode_token(kind, bound, (rows[fit - 1][0],))
    return Page(tuple(records[:fit]), next_token)


async def compaction_result(db: Db, session_id: str, compaction_id: str) -> CompactionResult:
    """A landed pass (or restore) as its result: what it archived and cleared or restored
    (the window now is the engine's to add, see ``Store.compaction_result``)."""
    pk, _ = await get_session(db, session_id)
    row = await db.fetchrow(
        "SELECT strategy, tokens_saved, version_after, cleared_ids, restored_ids"
        " FROM compactions WHERE session = $1 AND id = $2",
        pk,
        compaction_id,
    )
    if row is None:
        raise KeyError(compaction_id)
    # As the pass itself answered: archived events as the window showed them.
    archived = await db.fetch(
        f"SELECT {VIEW_COLUMNS} FROM events e WHERE e.session = $1 AND e.archived_by = $2"
        " ORDER BY e.sort_key, e.position",
        pk,
        compaction_id,
    )
    return CompactionResult(
        compacted=True,
        strategy=row[0],
        archived_events=tuple(event_from_row(r) for r in archived),
        tokens_estimated_saved=row[1],
        version=row[2],
        compaction_id=compaction_id,
        cleared_ids=tuple(row[3]),
        restored_ids=tuple(row[4]),
    )


async def restore(
    db: Db,
    session_id: str,
    compaction_id: str,
    *,
    expected_version: int | None,
    pause: bool,
    now: datetime,
    origin: str = "",
) -> RestoreOutcome:
    """Undo the newest standing compaction (see ``Store.restore`` and
    ``sqlite_history.restore``: it costs the rows the undone pass marked)."""
    session_pk, session = await get_session(db, session_id, for_update=True)
    rules.check_version(session, expected_version)
    row = await db.fetchrow(
        "SELECT id, turns_before, turns_after FROM compactions"
        " WHERE session = $1 AND strategy != $2 AND restored_by IS NULL"
        " ORDER BY pk DESC LIMIT 1",
        session_pk,
        RESTORE_STRATEGY,
    )
    standing = None if row is None else history_rules.Standing(row[0], row[1], row[2])
    found = None
    if compaction_id and (standing is None or compaction_id != standing.compaction_id):
        named = await db.fetchrow(
            f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions"
            " WHERE session = $1 AND id = $2",
            session_pk,
            compaction_id,
        )
        found = None if named is None else _record(session_id, named)
    target = history_rules.choose_target(session_id, standing, compaction_id, found)
    undone = target.compaction_id
    restore_id = uuid.uuid4().hex
    # Every lookup and update below goes through the partial indexes on the marks
    # (migration 8): a restore touches the rows the undone pass marked, not the window.
    back = await db.fetch(
        "SELECT id, sort_key, position FROM events WHERE session = $1 AND archived_by = $2"
        " UNION SELECT id, sort_key, position FROM events WHERE session = $1 AND cleared_by = $2"
        " ORDER BY 2, 3",
        session_pk,
        undone,
    )
    marked = [
        row[0]
        for row in await db.fetch(
            "SELECT pk FROM events WHERE session = $1 AND archived_by = $2"
            " UNION SELECT pk FROM events WHERE session = $1 AND cleared_by = $2"
            " UNION SELECT pk FROM events WHERE session = $1 AND written_by = $2",
            session_pk,
            undone,
        )
    ]
    was = await marked_rows(db, marked)
    await db.execute(
        "UPDATE events SET archived = false, archived_by = NULL"
        " WHERE session = $1 AND archived_by = $2",
        session_pk,
        undone,
    )
    await db.execute(
        "UPDATE events SET cleared_content = NULL, cleared_token_count = NULL, cleared_by = NULL"
        " WHERE session = $1 AND cleared_by = $2",
        session_pk,
        undone,
    )
    await db.execute(  # the summary turn it inserted leaves the window, and stays in the log
        "UPDATE events SET archived = true, archived_by = $1"
        " WHERE session = $2 AND written_by = $3 AND NOT archived",
        restore_id,
        session_pk,
        undone,
    )
    moved = counter_rules.counters_moved(session.counters, was, await marked_rows(db, marked))
    counters = await window_counters(db, session_pk) if moved is None else moved
    after = history_rules.after_restore(session, target, counters, restore_id, pause=pause, now=now)
    await save_header(db, session_pk, after, previous_version=session.version)
    archived = tuple(
        event_from_row(r)
        for r in await db.fetch(
            f"SELECT {VIEW_COLUMNS} FROM events e WHERE e.session = $1 AND e.archived_by = $2"
            " ORDER BY e.sort_key, e.position",
            session_pk,
            restore_id,
        )
    )
    # What the pass had archived is active again, what it had cleared is still active:
    # all of it is back, in log order.
    restored = tuple(r[0] for r in back)
    saved = session.counters.tokens - after.counters.tokens
    await db.execute(
        """INSERT INTO compactions (id, session, version_before, version_after, strategy,
               archived_ids, inserted_ids, tokens_saved, summarizer_latency_ms,
               summary_input_tokens, summary_output_tokens, create_time, cleared_ids,
               cause, restores, restored_ids, turns_before, turns_after)
           VALUES ($1, $2, $3, $4, $5, $6, '{}', $7, 0, 0, 0, $8, '{}', $9, $10, $11, $12, $13)""",
        restore_id,
        session_pk,
        session.version,
        after.version,
        RESTORE_STRATEGY,
        [e.id for e in archived],
        int32(saved),  # an integer column
        now,
        str(Cause.RESTORE),
        undone,
        list(restored),
        session.counters.turns_since_compaction,
        after.counters.turns_since_compaction,
    )
    await db.execute(
        "UPDATE compactions SET restored_by = $1 WHERE session = $2 AND id = $3",
        restore_id,
        session_pk,
        undone,
    )
    await notify(db, session_id, restore_id, origin)
    return RestoreOutcome(after, restore_id, archived, restored, saved)


async def compaction_record(db: Db, session_id: str, compaction_id: str) -> CompactionRecord:
    """One entry of the history, by its id; CompactionNotFound when there is none."""
    pk, _ = await get_session(db, session_id)
    row = await db.fetchrow(
        f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = $1 AND id = $2",
        pk,
        compaction_id,
    )
    if row is None:
        raise CompactionNotFound(session_id, compaction_id)
    return _record(session_id, row)
