"""``compaction-sidecar inspect SESSION``: a session's whole log, readable in a terminal.

Kept, archived and summary events are told apart by a marker in the first
column; the header shows the version, the policy and the running counters.
"""

from __future__ import annotations

import asyncio
import json

from sidecar.client import AsyncClient
from sidecar.client.errors import ClientError
from sidecar.render import LEGEND, event_line


async def render(address: str, session_id: str, token: str | None) -> str:
    async with AsyncClient(address, token=token) as client:
        session = await client.get_session(session_id)
        log = [event async for event in client.session(session_id).events()]
    counters = session.counters
    policy = json.loads(session.policy_json) if session.policy_json else None
    archived = sum(e.archived for e in log)
    summaries = sum(e.synthetic and not e.archived for e in log)
    lines = [
        f"session {session.session_id}  version {session.version}",
        f"policy   {json.dumps(policy) if policy else 'none (never compacts on its own)'}",
        f"active   {counters.active_events} events, {counters.turns} turns,"
        f" {counters.tokens} tokens  (log: {len(log)} events, {archived} archived,"
        f" {summaries} active summary events)",
        LEGEND,
        "",
        *(event_line(e) for e in log),
    ]
    return "\n".join(lines)


def main(address: str, session_id: str, token: str | None) -> int:
    try:
        print(asyncio.run(render(address, session_id, token)))
    except ClientError as exc:
        print(f"compaction-sidecar inspect: {exc}")
        return 1
    return 0
