"""The PostgreSQL store's searches: a share of the pool, and every search stopped on time.

At most half the pool searches at once (at least one search), so context
reads always find a connection. A search past its budget is stopped twice
over: asyncpg cancels its statement when the waiting call gives up, and
``SET LOCAL statement_timeout`` has the server stop it should that cancel
not get through. Either is a ``TimeoutError``, not an outage: the
connection is fine, and the search is not retried.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

from sidecar.store.postgres_pool import PostgresPool
from sidecar.store.postgres_schema import Db

T = TypeVar("T")


class _SearchStopped(Exception):
    """The server stopped a search at its statement_timeout (kept apart from outages)."""


class PostgresSearches:
    """Searches on a share of the pool's connections, each stopped at its budget."""

    def __init__(self, pool: PostgresPool) -> None:
        self._pool = pool
        self._searching = asyncio.Semaphore(max(1, pool.pool_size // 2))

    async def run(self, body: Callable[[Db], Awaitable[T]], timeout_s: float | None) -> T:
        """``body`` as one read snapshot, within ``timeout_s`` (waiting for a turn counts)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        async def search(db: Db) -> T:
            if deadline is not None:
                left_ms = math.ceil((deadline - time.monotonic()) * 1000)
                await db.execute(f"SET LOCAL statement_timeout = {max(left_ms, 1)}")
            try:
                return await body(db)
            except asyncpg.QueryCanceledError as exc:
                if deadline is None:
                    raise  # someone else's cancel: an outage like any other
                raise _SearchStopped() from exc

        try:
            async with asyncio.timeout(timeout_s), self._searching:
                return await self._pool.read(search)
        except _SearchStopped:
            raise TimeoutError("search stopped at its statement_timeout") from None
