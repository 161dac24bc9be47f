"""``compaction-sidecar inspect SESSION``: a session's whole log, readable in a terminal.

Kept, archived, cleared and summary events are told apart by a marker in the
first column (a cleared event is shown with its original content, as the log
holds it); the header shows the version, the policy and the running counters.
A summary turn's rows say what it stands for: the events the compaction that
wrote it archived (its provenance, from the compaction history). With
``--compactions`` the history itself is listed, newest first, restores and
what each undid included; ``compaction-sidecar restore`` undoes the newest.

Rows come in log order, the order the model reads the kept ones, while the
position column is the order events were written in. The two differ where a
compaction inserted a summary turn: it is written after the events it folds
in and placed right before the kept window, so its positions are higher than
the rows below it. The view says so: such rows are marked with where they
were placed, and a note above the rows explains it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence

from sidecar.client import AsyncClient, Tls
from sidecar.client.errors import ClientError
from sidecar.compaction.identifiers import trail_of
from sidecar.model import Event, Role
from sidecar.render import LEGEND, event_line
from sidecar.store.protocol import CompactionRecord

ORDER_NOTE = (
    "rows: log order, the order the model reads the kept ones; pos: the order events were written."
    "\na summary turn is written after the events it folds in and placed before the window it"
    "\nprecedes, so its pos is out of sequence: such rows end with '^ placed before pos N'."
)


def placed_before(log: Sequence[Event]) -> dict[int, int]:
    """For each row written later than a row below it, the position of the row it was placed before.

    Those are the events a compaction inserted (summary turns): the first row
    below them that is in write order is the one they were placed before.
    """
    placed: dict[int, int] = {}
    lowest_below = float("inf")
    following = 0  # position of the nearest row below that is not itself placed
    for index in range(len(log) - 1, -1, -1):
        position = log[index].position
        if position > lowest_below:
            placed[index] = following
        else:
            following = position
        lowest_below = min(lowest_below, position)
    return placed


def sources(records: Sequence[CompactionRecord]) -> dict[str, CompactionRecord]:
    """For each summary event a compaction inserted, that compaction (what it stands for)."""
    return {event_id: r for r in records for event_id in r.inserted_ids}


def history_lines(records: Sequence[CompactionRecord]) -> list[str]:
    """The compaction history, newest first: one line per pass (or restore)."""
    lines = [
        f"  {'compaction':<32} {'when (UTC)':<19} {'strategy':<18} {'cause':<10}"
        f" {'archived':>8} {'cleared':>7} {'inserted':>8} {'saved':>7} {'dropped':>7}  state"
    ]
    for r in records:
        if r.is_restore:
            state = f"undid {r.restores}"
        elif r.restored_by:
            state = f"restored by {r.restored_by}"
        else:
            state = "standing"
        lines.append(
            f"  {r.compaction_id:<32} {r.create_time:%Y-%m-%d %H:%M:%S} {r.strategy:<18}"
            f" {r.cause or '-':<10} {len(r.archived_ids):>8} {len(r.cleared_ids):>7}"
            f" {len(r.inserted_ids):>8} {r.tokens_saved:>7} {r.identifiers_dropped:>7}  {state}"
        )
        if r.dropped_identifiers:
            more = r.identifiers_dropped - len(r.dropped_identifiers)
            lines.append(
                f"    dropped identifiers: {', '.join(r.dropped_identifiers)}"
                + (f" (+{more} more)" if more > 0 else "")
            )
    return lines


async def render(
    address: str,
    session_id: str,
    token: str | None,
    *,
    compactions: bool = False,
    tls: Tls | None = None,
) -> str:
    async with AsyncClient(address, token=token, tls=tls) as client:
        session = await client.get_session(session_id)
        handle = client.session(session_id)
        log = [event async for event in handle.events()]
        records = [record async for record in handle.compactions()]
    if compactions:
        return "\n".join(
            [
                f"session {session.session_id}  version {session.version}"
                f"  {len(records)} compactions, newest first",
                *history_lines(records),
            ]
        )
    wrote = sources(records)
    counters = session.counters
    policy = json.loads(session.policy_json) if session.policy_json else None
    archived = sum(e.archived for e in log)
    summaries = sum(e.synthetic and not e.archived for e in log)
    cleared = sum(e.cleared and not e.archived for e in log)
    placed = placed_before(log)
    rows = []
    for i, e in enumerate(log):
        row = event_line(e) + (f"  ^ placed before pos {placed[i]}" if i in placed else "")
        source = wrote.get(e.id)
        if source is not None and e.role is Role.ASSISTANT:
            row += (
                f"\n        ^ summary of {len(source.archived_ids)} events archived by"
                f" {source.compaction_id}: {' '.join(source.archived_ids[:12])}"
                + (" ..." if len(source.archived_ids) > 12 else "")
            )
            kept = trail_of(e.text)
            if kept:
                row += f"\n        ^ identifier trail ({len(kept)}): {', '.join(kept)}"
        rows.append(row)
    lines = [
        f"session {session.session_id}  version {session.version}",
        f"policy   {json.dumps(policy) if policy else 'none (never compacts on its own)'}",
        f"active   {counters.active_events} events, {counters.turns} turns,"
        f" {'~' if session.active_tokens_estimated else ''}{counters.tokens} tokens"
        f"  (log: {len(log)} events, {archived} archived,"
        f" {summaries} active summary events, {cleared} active cleared events)",
        LEGEND,
        *([ORDER_NOTE] if placed else []),
        "",
        f"  {'pos':>5} {'event':<80} {'tokens':>9}",
        *rows,
    ]
    return "\n".join(lines)


def main(
    address: str,
    session_id: str,
    token: str | None,
    *,
    compactions: bool = False,
    tls: Tls | None = None,
) -> int:
    try:
        print(asyncio.run(render(address, session_id, token, compactions=compactions, tls=tls)))
    except ClientError as exc:
        print(f"compaction-sidecar inspect: {exc}", file=sys.stderr)
        return 1
    return 0


async def _restore(
    address: str,
    session_id: str,
    compaction_id: str,
    token: str | None,
    pause: bool,
    tls: Tls | None = None,
) -> str:
    async with AsyncClient(address, token=token, tls=tls) as client:
        session = client.session(session_id)
        result = await session.restore(compaction_id, pause_auto_compaction=pause)
        undone = compaction_id
        async for record in session.compactions():  # the restore's record names what it undid
            if record.compaction_id == result.compaction_id:
                undone = record.restores
                break
    return (
        f"restored {session_id}: undid compaction {undone} (the restore is compaction"
        f" {result.compaction_id}, version {result.version});"
        f" {len(result.restored_ids)} events back in the window, {len(result.archived_events)}"
        f" summary events archived; the window holds {len(result.active_events)} events"
        + ("; auto-compaction paused until the policy is next set" if pause else "")
    )


def restore_main(
    address: str,
    session_id: str,
    compaction_id: str,
    token: str | None,
    *,
    pause: bool,
    tls: Tls | None = None,
) -> int:
    """``compaction-sidecar restore SESSION [COMPACTION_ID]``: one line, and the exit status."""
    try:
        print(asyncio.run(_restore(address, session_id, compaction_id, token, pause, tls)))
    except ClientError as exc:
        print(f"compaction-sidecar restore: {exc}", file=sys.stderr)
        return 1
    return 0
