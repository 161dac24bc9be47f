"""``compaction-sidecar inspect SESSION``: a session's whole log, readable in a terminal.

Kept, archived, cleared and summary events are told apart by a marker in the
first column (a cleared event is shown with its original content, as the log
holds it); the header shows the version, the policy and the running counters.

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
from collections.abc import Sequence

from sidecar.client import AsyncClient
from sidecar.client.errors import ClientError
from sidecar.model import Event
from sidecar.render import LEGEND, event_line

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


async def render(address: str, session_id: str, token: str | None) -> str:
    async with AsyncClient(address, token=token) as client:
        session = await client.get_session(session_id)
        log = [event async for event in client.session(session_id).events()]
    counters = session.counters
    policy = json.loads(session.policy_json) if session.policy_json else None
    archived = sum(e.archived for e in log)
    summaries = sum(e.synthetic and not e.archived for e in log)
    cleared = sum(e.cleared and not e.archived for e in log)
    placed = placed_before(log)
    rows = [
        event_line(e) + (f"  ^ placed before pos {placed[i]}" if i in placed else "")
        for i, e in enumerate(log)
    ]
    lines = [
        f"session {session.session_id}  version {session.version}",
        f"policy   {json.dumps(policy) if policy else 'none (never compacts on its own)'}",
        f"active   {counters.active_events} events, {counters.turns} turns,"
        f" {counters.tokens} tokens  (log: {len(log)} events, {archived} archived,"
        f" {summaries} active summary events, {cleared} active cleared events)",
        LEGEND,
        *([ORDER_NOTE] if placed else []),
        "",
        f"  {'pos':>5} {'event':<80} {'tokens':>9}",
        *rows,
    ]
    return "\n".join(lines)


def main(address: str, session_id: str, token: str | None) -> int:
    try:
        print(asyncio.run(render(address, session_id, token)))
    except ClientError as exc:
        print(f"compaction-sidecar inspect: {exc}")
        return 1
    return 0
