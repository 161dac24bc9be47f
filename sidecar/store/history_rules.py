"""The rules of the compaction history and of restores, free of SQL: one place, both stores.

A restore undoes the newest compaction still standing (neither a restore nor
restored already), so restores walk the history back one pass at a time and
never have to reason about a later pass that built on an undone one. The
store reads the candidates and the window; these functions decide and
compute the header that follows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sidecar.errors import CompactionNotFound, RestoreRefused
from sidecar.model import Cause, Session, SessionCounters
from sidecar.store.protocol import CompactionRecord

RECORD_COLUMNS = """pk, id, version_before, version_after, strategy, archived_ids,
    inserted_ids, tokens_saved, summarizer_latency_ms, summary_input_tokens,
    summary_output_tokens, create_time, cleared_ids, cause, restored_by, restores,
    restored_ids, identifiers_dropped, dropped_identifiers"""
"""A history row's columns, in the order ``record_from_row`` reads them (both stores)."""


def record_from_row(
    session_id: str,
    row: Sequence[Any],
    *,
    ids: Callable[[Any], tuple[str, ...]],
    time: Callable[[Any], datetime],
) -> CompactionRecord:
    """The record of a row of ``RECORD_COLUMNS``; ``ids`` and ``time`` decode the store's
    id lists (JSON text, or text[]) and times (micros, or timestamptz)."""
    cause = row[13]
    return CompactionRecord(
        compaction_id=row[1],
        session_id=session_id,
        version_before=row[2],
        version_after=row[3],
        strategy=row[4],
        archived_ids=ids(row[5]),
        inserted_ids=ids(row[6]),
        tokens_saved=row[7],
        summarizer_latency_ms=row[8],
        summary_input_tokens=row[9],
        summary_output_tokens=row[10],
        create_time=time(row[11]),
        cleared_ids=ids(row[12]),
        cause=Cause(cause) if cause in Cause._value2member_map_ else Cause.UNKNOWN,
        restored_by=row[14] or "",
        restores=row[15] or "",
        restored_ids=ids(row[16]),
        identifiers_dropped=row[17] or 0,
        dropped_identifiers=ids(row[18]) if row[18] is not None else (),
    )


RECORD_OVERHEAD = 256
"""What a history record costs on the wire beyond its ids: numbers, times, field tags."""


@dataclass(frozen=True, slots=True)
class Standing:
    """The compaction a restore would undo, with the interval counts around it."""

    compaction_id: str
    turns_before: int | None
    turns_after: int | None


def record_size(record: CompactionRecord) -> int:
    """Roughly the bytes of one history record as answered."""
    ids = (
        *record.archived_ids,
        *record.inserted_ids,
        *record.cleared_ids,
        *record.restored_ids,
        *record.dropped_identifiers,
    )
    return RECORD_OVERHEAD + sum(len(i) + 2 for i in ids) + len(record.strategy)


def choose_target(
    session_id: str,
    standing: Standing | None,
    requested: str,
    found: CompactionRecord | None,
) -> Standing:
    """The compaction to undo for a request naming ``requested`` ("" for the newest).

    ``found`` is the requested record when it is not the standing one.
    Refused (FailedPrecondition) when nothing stands, when the requested one
    was restored already or is a restore, or when a newer one stands (named,
    to restore first); CompactionNotFound when there is no such record.
    """
    if requested and (standing is None or requested != standing.compaction_id):
        if found is None:
            raise CompactionNotFound(session_id, requested)
        if found.is_restore:
            raise RestoreRefused(
                f"compaction {requested!r} is a restore; a restore is undone by compacting again"
            )
        if found.restored_by:
            raise RestoreRefused(
                f"compaction {requested!r} was restored already (by {found.restored_by!r})"
            )
        assert standing is not None  # a record that is not restored stands, or a newer one does
        raise RestoreRefused(
            f"compaction {standing.compaction_id!r} is newer than {requested!r}: restore it first",
            first=standing.compaction_id,
        )
    if standing is None:
        raise RestoreRefused(f"session {session_id!r} has no compaction to restore")
    return standing


def after_restore(
    session: Session,
    target: Standing,
    window: SessionCounters,
    restore_id: str,
    *,
    pause: bool,
    now: datetime,
) -> Session:
    """The header once ``target`` is undone; ``window`` holds the counters of the window
    it leaves (``counter_rules.window_counters``).

    Counters are those of the window. ``turns_since_compaction`` goes
    back to what it was before the undone pass, plus the turns appended
    since (what it has counted past its value right after the pass); for a
    pass recorded before these counts were kept, it stays as it is.
    """
    turns = session.counters.turns_since_compaction
    if target.turns_before is not None and target.turns_after is not None:
        turns = max(0, target.turns_before + turns - target.turns_after)
    counters = replace(window, turns_since_compaction=turns)
    return replace(
        session,
        version=session.version + 1,
        update_time=now,
        counters=counters,
        stable_prefix_tokens=counters.tokens,
        stable_prefix_events=counters.active_events,
        last_compaction_id=restore_id,
        auto_compaction_paused=pause or session.auto_compaction_paused,
    )
