"""The SQLite store's searches: connections of their own, and every search stopped on time.

A search can cost seconds (a page of a thousand hits, a snippet made for each
from every phrase of the query), a context read a millisecond. So searches
never run on the readers: they have connections of their own, and wait for a
free one within their budget, while GetContext and the other reads always
find a reader, however many searches run.

A search stops

- when its deadline passes (the server's budget or the call's own, the
  sooner): ``TimeoutError``;
- at once when the call awaiting it is cancelled (the client went away or
  gave up, the server is stopping): the cancellation goes on up.

Stopping is SQLite's interrupt, asked from the event loop the moment the
caller goes or the budget is spent (``sqlite3.Connection.interrupt`` is
thread-safe), and a progress handler every PROGRESS_STEPS steps of the
search's statements that answers "stop" in the same cases, for a deadline or
an ask that falls between two statements. Either way SQLite abandons the
statement (SQLITE_INTERRUPT). The handler is removed before the ROLLBACK,
which must not be stopped in turn, so the connection is clean for the next
search; and it goes back to the pool only when its thread is done, never
while a stopped search still runs on it.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import aiosqlite

from sidecar.store.sqlite_schema import configure_reader
from sidecar.store.sqlite_threads import run_in_connection_thread

T = TypeVar("T")

PROGRESS_STEPS = 1000
"""Virtual-machine steps between two looks at the clock and at whether the caller has gone:
a millisecond of plain work, or a few dozen rows' snippets (an interrupt asked from the
loop stops a statement within a step; this covers a deadline and an ask between statements)."""


class _Stop:
    """When a search must stop: read on the connection's thread, asked from the loop's."""

    __slots__ = ("_asked", "deadline", "running_on")

    def __init__(self, timeout_s: float | None) -> None:
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._asked = threading.Event()
        self.running_on: sqlite3.Connection | None = None
        """The connection while the search's job is on it (set and cleared on the loop)."""

    def ask(self) -> None:
        """Stop now: a statement running ends at its next step, one about to start at once."""
        self._asked.set()
        if self.running_on is not None:
            self.running_on.interrupt()  # thread-safe; the progress handler covers the gaps

    def due(self) -> bool:
        if self._asked.is_set():
            return True
        return self.deadline is not None and time.monotonic() >= self.deadline


def _stoppable(
    body: Callable[[sqlite3.Connection], T], stop: _Stop
) -> Callable[[sqlite3.Connection], T]:
    """``body`` as one read transaction that SQLite abandons as soon as ``stop`` is due."""

    def run(db: sqlite3.Connection) -> T:
        if stop.due():  # asked before the job began
            raise TimeoutError("search stopped before it began")
        if db.in_transaction:  # left open by a search stopped during its own ROLLBACK
            db.execute("ROLLBACK")
        db.execute("BEGIN")
        try:
            db.set_progress_handler(stop.due, PROGRESS_STEPS)
            try:
                result = body(db)
            finally:
                db.set_progress_handler(None, 0)
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            stopped = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_INTERRUPT
            if stopped and stop.due():
                raise TimeoutError("search stopped: past its deadline, or its caller gone") from exc
            raise
        return result

    return run


class SearchConnections:
    """``count`` connections only searches use; see the module docstring."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"search connections must be at least 1, got {count}")
        self.count = count
        self._connections: list[aiosqlite.Connection] = []
        self._idle: asyncio.Queue[aiosqlite.Connection] = asyncio.Queue()
        self._running: set[_Stop] = set()

    async def open(self, path: str) -> None:
        for _ in range(self.count):
            connection = await aiosqlite.connect(path, isolation_level=None)
            self._connections.append(connection)
            await run_in_connection_thread(connection, configure_reader)
            self._idle.put_nowait(connection)

    async def close(self, *, wait: bool = True) -> None:
        """Stop the searches running, wait for their threads (if ``wait``), disconnect."""
        for stop in self._running:
            stop.ask()
        if wait:
            for _ in self._connections:
                await self._idle.get()
        connections, self._connections = self._connections, []
        self._idle = asyncio.Queue()
        for connection in connections:
            await connection.close()

    async def run(self, body: Callable[[sqlite3.Connection], T], timeout_s: float | None) -> T:
        """``body`` as one read transaction on a free search connection, stopped on time.

        Waiting for the connection counts against ``timeout_s``.
        """
        stop = _Stop(timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                connection = await self._idle.get()
                job = asyncio.create_task(
                    run_in_connection_thread(connection, _stoppable(body, stop))
                )
                self._running.add(stop)
                stop.running_on = connection._conn  # aiosqlite's own; see run_in_connection_thread
                job.add_done_callback(functools.partial(self._returned, connection, stop))
                # Shielded: cancelling the caller must not let go of the job before its
                # thread is done, or the connection would go back to the pool still busy.
                return await asyncio.shield(job)
        finally:
            stop.ask()  # nothing if the search is done; else it stops at its next step

    def _returned(
        self, connection: aiosqlite.Connection, stop: _Stop, job: asyncio.Task[Any]
    ) -> None:
        self._running.discard(stop)
        stop.running_on = None  # before the next search can have it
        if not job.cancelled():
            job.exception()  # retrieved: a stopped search's caller has gone
        self._idle.put_nowait(connection)
