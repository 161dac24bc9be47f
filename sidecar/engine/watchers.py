"""Watchers: subscribers to a session's compaction results.

Each watcher has a queue bounded in results and in bytes (a result lists
the window it left, up to a thousand events). Publishing never waits: a
watcher whose queue is full loses the result and is told, on its next read,
how many it missed, so a slow watcher can never block appends nor hold
memory without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sidecar.model import CompactionResult

DEFAULT_QUEUE_SIZE = 64
DEFAULT_QUEUE_BYTES = 16 << 20
"""What a watcher's queued results may hold, by their events' content (``result_bytes``);
one result alone is always taken, whatever its size."""


def result_bytes(result: CompactionResult) -> int:
    """About what a result holds: its events' content and ids."""
    return sum(e.content_bytes() + len(e.id) for e in result.active_events) + sum(
        e.content_bytes() + len(e.id) for e in result.archived_events
    )


@dataclass(frozen=True, slots=True)
class Lagged:
    """The watcher fell behind and ``missed`` results were dropped for it."""

    missed: int


@dataclass(frozen=True, slots=True)
class Gone:
    """The session was deleted: no more results will come for it (after those queued)."""


class Watcher:
    """One subscription; iterate it for results (and Lagged notices, and Gone at the end)."""

    def __init__(self, hub: WatcherHub, session_id: str, size: int, max_bytes: int) -> None:
        self._hub = hub
        self.session_id = session_id
        # Each result with its size (result_bytes), counted once however many watch it.
        self._queue: asyncio.Queue[tuple[CompactionResult, int] | None] = asyncio.Queue(
            maxsize=size
        )
        self._max_bytes = max_bytes
        self._bytes = 0  # of the results queued (result_bytes)
        self._missed = 0
        self._gone = False

    def offer(self, result: CompactionResult, size: int) -> None:
        """Queue ``result`` of ``size`` bytes (``result_bytes``), or count it missed."""
        if self._queue.full() or (not self._queue.empty() and self._bytes + size > self._max_bytes):
            self._missed += 1
            self._hub.dropped += 1
            return
        self._queue.put_nowait((result, size))
        self._bytes += size

    def end(self) -> None:
        """The session was deleted: ``next`` gives Gone once the results queued are read."""
        self._gone = True
        with contextlib.suppress(asyncio.QueueFull):  # full: a reader is not waiting
            self._queue.put_nowait(None)  # wakes a reader waiting

    async def next(self) -> CompactionResult | Lagged | Gone:
        """The next result; once the queued ones are read, a Lagged notice if any were lost,
        and Gone for good once the session was deleted."""
        if self._queue.empty() and self._missed:
            missed, self._missed = self._missed, 0
            return Lagged(missed)
        if self._gone and self._queue.empty():
            return Gone()
        item = await self._queue.get()
        if item is None:
            return Gone()
        result, size = item
        self._bytes -= size
        return result

    async def __aiter__(self) -> AsyncIterator[CompactionResult | Lagged | Gone]:
        while True:
            yield await self.next()

    def queued(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        self._hub.remove(self)


class WatcherHub:
    """The watchers of every session; sessions without watchers take no memory."""

    def __init__(
        self, queue_size: int = DEFAULT_QUEUE_SIZE, queue_bytes: int = DEFAULT_QUEUE_BYTES
    ) -> None:
        self._by_session: dict[str, set[Watcher]] = {}
        # Per watched session: the version its watchers are known to have seen,
        # from the last compaction published or the session's version when the
        # watch began. Compactions at or below it are not published again, so
        # one announced twice (live and by a catch-up) reaches watchers once,
        # and never after a later one.
        self._known: dict[str, int] = {}
        self._queue_size = queue_size
        self._queue_bytes = queue_bytes
        self.watchers = 0
        self.dropped = 0
        """Results lost by watchers that fell behind, since start."""

    def __len__(self) -> int:
        return len(self._by_session)

    def watched(self, session_id: str) -> bool:
        return session_id in self._by_session

    def subscribe(self, session_id: str) -> Watcher:
        watcher = Watcher(self, session_id, self._queue_size, self._queue_bytes)
        self._by_session.setdefault(session_id, set()).add(watcher)
        self.watchers += 1
        return watcher

    def remove(self, watcher: Watcher) -> None:
        watchers = self._by_session.get(watcher.session_id)
        if watchers is None or watcher not in watchers:
            return
        watchers.discard(watcher)
        self.watchers -= 1
        if not watchers:
            del self._by_session[watcher.session_id]
            self._known.pop(watcher.session_id, None)

    def end(self, session_id: str) -> None:
        """The session was deleted: each of its watchers ends (``Watcher.end``)."""
        for watcher in tuple(self._by_session.get(session_id, ())):
            watcher.end()
            self.remove(watcher)

    def queued(self) -> int:
        """Results waiting in watchers' queues, not yet read."""
        return sum(w.queued() for ws in self._by_session.values() for w in ws)

    def sessions(self) -> list[str]:
        """The sessions watched now."""
        return list(self._by_session)

    def known(self, session_id: str) -> int | None:
        """The version a watched session's watchers are known to have seen, if known."""
        return self._known.get(session_id)

    def note(self, session_id: str, version: int) -> None:
        """The session's version when its watch began, unless a result came first."""
        if session_id in self._by_session:
            self._known.setdefault(session_id, version)

    def publish(self, session_id: str, result: CompactionResult) -> None:
        watchers = self._by_session.get(session_id)
        if not watchers:
            return
        if result.compacted:
            if result.version <= self._known.get(session_id, -1):
                return  # told already, or older than what they were told
            self._known[session_id] = result.version
        size = result_bytes(result)
        for watcher in tuple(watchers):
            watcher.offer(result, size)
