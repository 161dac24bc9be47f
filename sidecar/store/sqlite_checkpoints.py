"""WAL checkpoints of the SQLite store, off the writer's path.

By default SQLite checkpoints inside the COMMIT that grows the WAL past 1,000
pages: that commit copies 4 MB into the database file and fsyncs it, and
every write queued behind it waits — the p99 of a lone append went from
3 ms to over 20 ms for it, and the appends of a busy server waited tens of
milliseconds more each time. So the writer never checkpoints
(``wal_autocheckpoint = 0``, set in ``configure_writer``) and a connection
of its own, on its own thread, runs a PASSIVE checkpoint every
``CHECKPOINT_EVERY_S``: it copies what no reader still needs and never
blocks the writer or the readers. Once a checkpoint has copied the whole
WAL, the writer starts it over from the beginning, so the file stays about
one interval of writes long.

Durability is unchanged: a commit is durable once it is in the WAL (see the
note in ``sqlite.py``); checkpoints only move pages into the database file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3

import aiosqlite

from sidecar.errors import StoreUnavailable
from sidecar.store.sqlite_schema import BUSY_TIMEOUT_MS
from sidecar.store.sqlite_threads import run_in_connection_thread

log = logging.getLogger(__name__)

CHECKPOINT_EVERY_S = 1.0
"""How often the checkpointer copies the WAL into the database file."""


def _checkpoint(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()


class Checkpointer:
    """A connection that checkpoints the WAL every ``every_s`` until closed."""

    def __init__(self, every_s: float | None = None) -> None:
        self.every_s = CHECKPOINT_EVERY_S if every_s is None else every_s
        self._connection: aiosqlite.Connection | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self, path: str) -> None:
        connection = await aiosqlite.connect(path, isolation_level=None)
        try:
            await run_in_connection_thread(
                connection, lambda db: db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            )
        except BaseException:
            await connection.close()
            raise
        self._connection = connection
        self._task = asyncio.create_task(self._run(connection))

    async def _run(self, connection: aiosqlite.Connection) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            try:
                await run_in_connection_thread(connection, _checkpoint)
            except StoreUnavailable as exc:  # a full disk: the next interval tries again
                log.warning("WAL checkpoint failed: %s", exc)

    async def close(self) -> None:
        """Stop checkpointing (a checkpoint under way finishes) and disconnect."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
