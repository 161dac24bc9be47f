"""SIGKILL a ``serve`` process (SQLite) over and over while clients load it.

Clients keep appending, compacting, reading and retrying through every kill
(UNAVAILABLE is retried with the same event ids). Between a kill and the
restart the file must pass ``PRAGMA integrity_check``; after each restart
every event acknowledged before the kill must be there; at the end the whole
history is checked (``history.py``).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import grpc

from sidecar.gen.compaction.v1 import compaction_service_pb2_grpc as pb_grpc
from tests.reliability.budget import BUDGET, FIGURES
from tests.reliability.history import History, check_history, read_log
from tests.reliability.load import (
    CHANNEL_OPTIONS,
    background,
    clients_for,
    create_sessions,
    retry,
)
from tests.reliability.serve import ServeProcess
from tests.server.harness import free_port


def integrity_ok(path: Path) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db.execute("INSERT INTO events_fts (events_fts) VALUES ('integrity-check')")
    finally:
        db.close()


async def assert_present(address: str, acknowledged: dict[str, set[str]]) -> int:
    """Every id acknowledged before the kill is in its session's log; returns how many."""
    async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.CompactionServiceStub(channel)
        for session, ids in acknowledged.items():
            # Retried: the channel may still be backing off from the kill.
            log = await retry(lambda s=session: read_log(stub, s), None, give_up_s=30)
            stored = {e.id for e in log}
            lost = sorted(ids - stored)
            assert not lost, f"{session}: {len(lost)} acknowledged events lost, e.g. {lost[:5]}"
    return sum(len(ids) for ids in acknowledged.values())


async def test_acknowledged_events_survive_sigkill_under_load(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    db_path = tmp_path / "crash.db"
    server = ServeProcess(db_path, free_port(), tmp_path / "serve.log")
    history = History()
    sessions = [f"k{i}" for i in range(BUDGET.sessions)]
    await asyncio.to_thread(server.start)
    try:
        await create_sessions(server.address, sessions)
        clients = clients_for(
            server.address, history, sessions=sessions, clients=BUDGET.clients, seed=seed
        )
        async with background(clients):
            for kill in range(BUDGET.kills):
                await asyncio.sleep(rng.uniform(*BUDGET.load_between_kills_s))
                before = {s: set(history.acked(s)) for s in sessions}
                server.kill()
                integrity_ok(db_path)
                await asyncio.sleep(rng.uniform(0.0, 0.3))
                await asyncio.to_thread(server.start)
                try:
                    await assert_present(server.address, before)
                except AssertionError as error:
                    raise AssertionError(f"after kill {kill + 1} (seed {seed}): {error}") from None
                FIGURES["crashes_survived"] += 1
            await asyncio.sleep(0.5)  # load on the last restart too
        report = await check_history(server.address, history, db_path)
    except BaseException:
        print(server.tail())
        raise
    finally:
        server.stop()
    integrity_ok(db_path)
    assert history.unavailable > 0  # the clients did see the kills
    assert report.acknowledged > 0
    FIGURES["histories_checked"] += report.sessions
    FIGURES["operations_checked"] += report.operations
    FIGURES["snapshots_checked"] += report.snapshots
    FIGURES["acknowledged_events"] += report.acknowledged
    FIGURES["lost_acks_retried"] += history.lost_acks
