"""Full-text indexing of the SQLite store, off the appends' transactions.

An append records its events in ``fts_pending`` (``sqlite_writes``); this
indexes them in batches, in writes of their own on the writer's queue: a
moment after the first one (``INDEX_AFTER_S``), so many share a
transaction, and at once, up to the newest, before any search. A search
therefore finds every event acknowledged before it began: those appends
committed, and the indexing write that runs first sees them.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable

from sidecar.store import sqlite_writes as writes

log = logging.getLogger(__name__)

INDEX_AFTER_S = 0.2
"""How long after an append its events wait before a background write indexes them."""

RETRY_AFTER_S = 5.0
"""When indexing failed (the store is unavailable: a full disk), how long before it tries again."""

Write = Callable[[Callable[[sqlite3.Connection], bool]], Awaitable[bool]]
Read = Callable[[Callable[[sqlite3.Connection], int | None]], Awaitable[int | None]]


class SearchIndexer:
    """Indexes pending events in the background, and all of them when a search asks.

    Appends are counted as they are acknowledged. An indexing write that
    started after the first ``n`` and left nothing pending has indexed all
    ``n``: a search waits until that holds for the count it began with,
    joining the write in flight when that one is enough, else starting one.
    """

    def __init__(self, write: Write, read: Read) -> None:
        self._write = write
        self._read = read
        self._written = 0  # appends acknowledged so far
        self._indexed = 0  # the first this many are indexed
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._flight: tuple[int, asyncio.Task[None]] | None = None  # a search's: all pending

    def appended(self) -> None:
        """Events were written (counted before the write is acknowledged): index them soon."""
        self._written += 1
        self._schedule(INDEX_AFTER_S)

    async def before_search(self) -> None:
        """Index every event written so far; StoreUnavailable when that cannot be done."""
        need = self._written
        while self._indexed < need:
            if self._flight is None or self._flight[0] < need:
                target = self._written
                task = asyncio.create_task(self._index_all(target))
                task.add_done_callback(_retrieved)  # its searches may all have gone
                self._flight = (target, task)
            # Shielded: one search giving up must not stop the write the others wait for.
            await asyncio.shield(self._flight[1])

    async def close(self) -> None:
        """Stop indexing in the background (what is pending stays pending, on disk)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        tasks = [t for t in (self._task, self._flight and self._flight[1]) if t is not None]
        self._task = self._flight = None
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _index_all(self, target: int) -> None:
        """Index what the first ``target`` appends left pending, a batch per write.

        Those appends have committed, so a reader sees their rowids, all at or
        below the newest pending one; batches up to it let other writes in
        between, and appends made meanwhile do not lengthen the wait.
        """
        try:
            through = await self._read(writes.newest_pending)
            if through is not None:
                while await self._write(lambda db: writes.index_pending(db, through=through)):
                    pass
            self._indexed = max(self._indexed, target)
        finally:
            if self._flight is not None and self._flight[0] == target:
                self._flight = None

    def _schedule(self, delay: float) -> None:
        if self._timer is None and self._task is None:
            self._timer = asyncio.get_running_loop().call_later(delay, self._start)

    def _start(self) -> None:
        self._timer = None
        self._task = asyncio.create_task(self._index())

    async def _index(self) -> None:
        delay = INDEX_AFTER_S
        try:
            more = True
            while more:  # a backlog bigger than a batch: the next batch at once
                target = self._written
                try:
                    more = await self._write(writes.index_pending)
                except Exception as exc:  # StoreUnavailable (a full disk), or a bug
                    delay = RETRY_AFTER_S
                    log.warning("indexing events for search failed, retrying: %s", exc)
                    break
                if not more:
                    self._indexed = max(self._indexed, target)
        finally:
            self._task = None
        if self._indexed < self._written:  # appends landed meanwhile: the next batch
            self._schedule(delay)


def _retrieved(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
