"""Work on an aiosqlite connection's own thread: the one door to it every SQLite module uses."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar, cast

import aiosqlite

from sidecar.errors import StoreUnavailable

T = TypeVar("T")


async def run_in_connection_thread(
    connection: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]
) -> T:
    """Run ``fn(raw_connection)`` on the aiosqlite connection's own thread, as one job.

    aiosqlite is pinned at 0.22.1, whose ``Connection._execute(fn, *args)``
    queues ``fn(*args)`` on the connection's worker thread and awaits its
    result. It is private API: re-check this helper when upgrading aiosqlite.
    """
    try:
        result = await connection._execute(fn, connection._conn)  # type: ignore[no-untyped-call]
    except sqlite3.DatabaseError as exc:
        error = store_error(exc)
        if error is exc:
            raise
        raise error from exc
    return cast(T, result)


THREAD_END_S = 5.0
"""How long a failed connect waits for its thread to end."""


async def connect(path: str, **options: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect(path, **options)``, whose thread has ended if it fails.

    aiosqlite 0.22.1 stops the thread of a connection that could not open
    without waiting for it. A ``serve`` that then exits at once (a store
    path that is a directory) may close its event loop first, and the thread
    prints a traceback reporting to the closed loop. ``_thread`` is private
    API, like ``_execute`` above.
    """
    connection = aiosqlite.connect(path, **options)
    try:
        return await connection
    except Exception:
        await asyncio.to_thread(connection._thread.join, THREAD_END_S)
        raise


def store_error(exc: Exception) -> Exception:
    """What the store raises for ``exc``: StoreUnavailable for a state of the database.

    Locked past busy_timeout, an I/O error, a full disk or a corrupt file is
    StoreUnavailable; an integrity or programming error is a bug in this
    store and stays as it is, like every other exception.
    """
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return exc
    if isinstance(exc, sqlite3.DatabaseError):
        error = StoreUnavailable(f"sqlite: {exc}")
        error.__cause__ = exc
        return error
    return exc
