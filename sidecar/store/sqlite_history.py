"""The compaction history on SQLite: listing it, a landed pass as a result, and restores.

Every pass leaves a row in ``compactions`` and marks the events it touched
(``archived_by``, ``cleared_by``, ``written_by``), so a restore is three
flag updates on those marks, in place, in one IMMEDIATE transaction; nothing
is deleted or moved. See ``history_rules`` for what may be restored.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime
from typing import Any

from sidecar.errors import CompactionNotFound
from sidecar.model import Cause, CompactionResult
from sidecar.store import counter_rules, history_rules, rules
from sidecar.store.codec import dump_json, from_micros, to_micros
from sidecar.store.paging import decode_int_key, encode_token, fingerprint
from sidecar.store.protocol import RESTORE_STRATEGY, CompactionRecord, Page, RestoreOutcome
from sidecar.store.sqlite_reads import (
    VIEW_COLUMNS,
    event_from_row,
    get_session,
    marked_rows,
    window_counters,
)
from sidecar.store.sqlite_writes import save_header


def _json_ids(raw: str) -> tuple[str, ...]:
    return tuple(json.loads(raw))


def _record(session_id: str, row: Any) -> CompactionRecord:
    return history_rules.record_from_row(session_id, row, ids=_json_ids, time=from_micros)


def list_compactions(
    db: sqlite3.Connection,
    session_id: str,
    *,
    size: int,
    token: str,
    newest_first: bool = False,
    max_bytes: int | None = None,
) -> Page[CompactionRecord]:
    """The history in either order; keyset on the record's rowid, which only grows."""
    bound = fingerprint(session_id)
    kind = "compactions-newest" if newest_first else "compactions"
    pk, _ = get_session(db, session_id)
    if newest_first:
        before = decode_int_key(token, kind=kind, bound=bound, length=1)[0] if token else 2**62
        rows = db.execute(
            f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = ? AND pk < ?"
            " ORDER BY pk DESC LIMIT ?",
            (pk, before, size + 1),
        ).fetchall()
    else:
        after = decode_int_key(token, kind=kind, bound=bound, length=1)[0] if token else 0
        rows = db.execute(
            f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = ? AND pk > ?"
            " ORDER BY pk LIMIT ?",
            (pk, after, size + 1),
        ).fetchall()
    records = [_record(session_id, row) for row in rows]
    fit = rules.fitting_sizes([history_rules.record_size(r) for r in records[:size]], max_bytes)
    next_token = ""
    if len(rows) > fit:
        next_token = encode_token(kind, bound, (rows[fit - 1][0],))
    return Page(tuple(records[:fit]), next_token)


def compaction_result(
    db: sqlite3.Connection, session_id: str, compaction_id: str
) -> CompactionResult:
    """A landed pass (or restore) as its result: what it archived and cleared or restored
    (the window now is the engine's to add, see ``Store.compaction_result``)."""
    pk, _ = get_session(db, session_id)
    row = db.execute(
        "SELECT strategy, tokens_saved, version_after, cleared_ids, restored_ids"
        " FROM compactions WHERE session = ? AND id = ?",
        (pk, compaction_id),
    ).fetchone()
    if row is None:
        raise KeyError(compaction_id)
    # As the pass itself answered: archived events as the window showed them.
    archived = db.execute(
        f"SELECT {VIEW_COLUMNS} FROM events e WHERE e.session = ? AND e.archived_by = ?"
        " ORDER BY e.sort_key, e.position",
        (pk, compaction_id),
    )
    return CompactionResult(
        compacted=True,
        strategy=row[0],
        archived_events=tuple(event_from_row(r) for r in archived),
        tokens_estimated_saved=row[1],
        version=row[2],
        compaction_id=compaction_id,
        cleared_ids=tuple(json.loads(row[3])),
        restored_ids=tuple(json.loads(row[4])),
    )


def _standing(db: sqlite3.Connection, session_pk: int) -> history_rules.Standing | None:
    row = db.execute(
        "SELECT id, turns_before, turns_after FROM compactions"
        " WHERE session = ? AND strategy != ? AND restored_by IS NULL"
        " ORDER BY pk DESC LIMIT 1",
        (session_pk, RESTORE_STRATEGY),
    ).fetchone()
    return None if row is None else history_rules.Standing(row[0], row[1], row[2])


def restore(
    db: sqlite3.Connection,
    session_id: str,
    compaction_id: str,
    *,
    expected_version: int | None,
    pause: bool,
    now: datetime,
) -> RestoreOutcome:
    """Undo the newest standing compaction (see ``Store.restore``).

    Costs the rows the undone pass marked (found through the partial indexes
    on the marks, migration 8) and its summary turn, not the window: the
    counters move by what those rows changed (``counter_rules.counters_moved``).
    """
    session_pk, session = get_session(db, session_id)
    rules.check_version(session, expected_version)
    standing = _standing(db, session_pk)
    found = None
    if compaction_id and (standing is None or compaction_id != standing.compaction_id):
        row = db.execute(
            f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = ? AND id = ?",
            (session_pk, compaction_id),
        ).fetchone()
        found = None if row is None else _record(session_id, row)
    target = history_rules.choose_target(session_id, standing, compaction_id, found)
    undone = target.compaction_id
    restore_id = uuid.uuid4().hex
    # Every lookup and update below goes through the partial indexes on the marks
    # (migration 8): a restore touches the rows the undone pass marked, not the window.
    back = db.execute(
        "SELECT id, sort_key, position FROM events WHERE session = ? AND archived_by = ?"
        " UNION SELECT id, sort_key, position FROM events WHERE session = ? AND cleared_by = ?"
        " ORDER BY 2, 3",
        (session_pk, undone, session_pk, undone),
    ).fetchall()
    marked = [
        row[0]
        for row in db.execute(
            "SELECT pk FROM events WHERE session = ? AND archived_by = ?"
            " UNION SELECT pk FROM events WHERE session = ? AND cleared_by = ?"
            " UNION SELECT pk FROM events WHERE session = ? AND written_by = ?",
            (session_pk, undone) * 3,
        )
    ]
    was = marked_rows(db, marked)
    db.execute(
        "UPDATE events SET archived = 0, archived_by = NULL WHERE session = ? AND archived_by = ?",
        (session_pk, undone),
    )
    db.execute(
        "UPDATE events SET cleared_content = NULL, cleared_token_count = NULL, cleared_by = NULL"
        " WHERE session = ? AND cleared_by = ?",
        (session_pk, undone),
    )
    db.execute(  # the summary turn it inserted leaves the window, and stays in the log
        "UPDATE events SET archived = 1, archived_by = ?"
        " WHERE session = ? AND written_by = ? AND archived = 0",
        (restore_id, session_pk, undone),
    )
    moved = counter_rules.counters_moved(session.counters, was, marked_rows(db, marked))
    counters = window_counters(db, session_pk) if moved is None else moved
    after = history_rules.after_restore(session, target, counters, restore_id, pause=pause, now=now)
    save_header(db, session_pk, after)
    archived = tuple(
        event_from_row(row)
        for row in db.execute(
            f"SELECT {VIEW_COLUMNS} FROM events e WHERE e.session = ? AND e.archived_by = ?"
            " ORDER BY e.sort_key, e.position",
            (session_pk, restore_id),
        )
    )
    # What the pass had archived is active again, what it had cleared is still active:
    # all of it is back, in log order.
    restored = tuple(row[0] for row in back)
    saved = session.counters.tokens - after.counters.tokens
    db.execute(
        """INSERT INTO compactions (id, session, version_before, version_after, strategy,
               archived_ids, inserted_ids, tokens_saved, summarizer_latency_ms,
               summary_input_tokens, summary_output_tokens, create_time, cleared_ids,
               cause, restores, restored_ids, turns_before, turns_after)
           VALUES (?, ?, ?, ?, ?, ?, '[]', ?, 0, 0, 0, ?, '[]', ?, ?, ?, ?, ?)""",
        (
            restore_id,
            session_pk,
            session.version,
            after.version,
            RESTORE_STRATEGY,
            dump_json([e.id for e in archived]),
            saved,
            to_micros(now),
            str(Cause.RESTORE),
            undone,
            dump_json(list(restored)),
            session.counters.turns_since_compaction,
            after.counters.turns_since_compaction,
        ),
    )
    db.execute(
        "UPDATE compactions SET restored_by = ? WHERE session = ? AND id = ?",
        (restore_id, session_pk, undone),
    )
    return RestoreOutcome(after, restore_id, archived, restored, saved)


def compaction_record(
    db: sqlite3.Connection, session_id: str, compaction_id: str
) -> CompactionRecord:
    """One entry of the history, by its id; CompactionNotFound when there is none."""
    session_pk, _ = get_session(db, session_id)
    row = db.execute(
        f"SELECT {history_rules.RECORD_COLUMNS} FROM compactions WHERE session = ? AND id = ?",
        (session_pk, compaction_id),
    ).fetchone()
    if row is None:
        raise CompactionNotFound(session_id, compaction_id)
    return _record(session_id, row)
