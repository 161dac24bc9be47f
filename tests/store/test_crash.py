"""Acknowledged appends survive SIGKILL, and the file is never left corrupt.

A writer subprocess (crash_writer.py) appends in a loop and prints each id
once its append returned; we kill it at a random moment, twenty times over the
same file, and check the file with plain sqlite3 after each kill.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KILLS = 20


def start_writer(path: Path, run: int, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("a") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", str(path), f"r{run}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def kill_at_random(proc: subprocess.Popen[str], rng: random.Random) -> list[str]:
    """Wait for the first acknowledged id, kill 0.2-1.0 s later, return every acknowledged id."""
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.endswith("\n"), "the writer died before acknowledging anything"
    time.sleep(rng.uniform(0.2, 1.0))
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # A line cut short by the kill was never fully acknowledged.
    return [first.strip(), *rest.split("\n")[:-1]]


def check_file(path: Path, acknowledged: list[str]) -> None:
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        db.execute("INSERT INTO events_fts (events_fts) VALUES ('integrity-check')")
        stored = dict(db.execute("SELECT id, count(*) FROM events GROUP BY id").fetchall())
        missing = [i for i in acknowledged if i not in stored]
        assert not missing, f"{len(missing)} acknowledged events lost, e.g. {missing[:3]}"
        assert all(stored[i] == 1 for i in acknowledged)
        positions = [row[0] for row in db.execute("SELECT position FROM events ORDER BY position")]
        assert positions == list(range(1, len(positions) + 1))
        total, active = db.execute("SELECT total_events, active_events FROM sessions").fetchone()
        assert total == len(positions)
        (active_rows,) = db.execute("SELECT count(*) FROM events WHERE archived = 0").fetchone()
        assert active == active_rows
        # Every event is indexed for search or waiting to be (durably), never both.
        indexed = {pk for (pk,) in db.execute("SELECT rowid FROM events_fts")}
        pending = {pk for (pk,) in db.execute("SELECT pk FROM fts_pending")}
        events = {pk for (pk,) in db.execute("SELECT pk FROM events")}
        assert not indexed & pending
        assert indexed | pending == events
    finally:
        db.close()


@pytest.mark.slow
def test_acknowledged_appends_survive_sigkill(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    path = tmp_path / "crash.db"
    log = tmp_path / "writer.log"
    acknowledged: list[str] = []
    for run in range(KILLS):
        proc = start_writer(path, run, log)
        try:
            acknowledged += kill_at_random(proc, rng)
        except AssertionError:
            proc.kill()
            proc.wait()
            raise AssertionError(f"run {run} (seed {seed}): {log.read_text()[-2000:]}") from None
        check_file(path, acknowledged)
    assert len(acknowledged) > KILLS
