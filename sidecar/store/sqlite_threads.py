"""Work on an aiosqlite connection's own thread: the one door to it every SQLite module uses."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar, cast

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
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
        raise  # a bug in this store, not a state of the database
    except sqlite3.DatabaseError as exc:  # locked past busy_timeout, I/O error, full, corrupt
        raise StoreUnavailable(f"sqlite: {exc}") from exc
    return cast(T, result)
