"""Many clients append, compact, read and retry against one server; the history checks out.

See ``history.py`` for what is checked and ``load.py`` for what the clients do.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.reliability.budget import BUDGET, FIGURES
from tests.reliability.history import History, check_history
from tests.reliability.load import clients_for, create_sessions
from tests.server.harness import address, running


async def test_concurrent_clients_with_lost_acks_leave_a_history_that_checks_out(
    tmp_path: Path,
) -> None:
    history = History()
    sessions = [f"h{i}" for i in range(BUDGET.sessions)]
    async with running(tmp_path, default_policy="none") as sidecar:
        target = address(sidecar)
        await create_sessions(target, sessions)
        clients = clients_for(target, history, sessions=sessions, clients=BUDGET.clients, seed=1)
        await asyncio.gather(*(c.run(ops=BUDGET.ops_per_client) for c in clients))
        report = await check_history(target, history, tmp_path / "sidecar.db")
    assert report.sessions == len(sessions)
    assert report.snapshots > 0
    assert history.lost_acks > 0
    assert sum(len(ids) for ids in history.refused.values()) > 0
    FIGURES["histories_checked"] += report.sessions
    FIGURES["operations_checked"] += report.operations
    FIGURES["snapshots_checked"] += report.snapshots
    FIGURES["acknowledged_events"] += report.acknowledged
    FIGURES["lost_acks_retried"] += history.lost_acks
