"""Per-session locks that vanish when nobody holds or waits for them.

A plain ``dict[str, asyncio.Lock]`` grows by one entry per session ever seen:
with millions of sessions that is a leak. Here an entry lives only while a
task holds or waits for its lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class LockRegistry:
    """Hands out one asyncio lock per key; idle keys are dropped at once."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]

    @asynccontextmanager
    async def hold_many(self, keys: Iterable[str]) -> AsyncIterator[None]:
        """Hold each key's lock (a key named twice, once), taken in sorted order: two callers
        holding keys in common take them in the same order, so neither can wait for the
        other while holding what it waits for."""
        async with AsyncExitStack() as stack:
            for key in sorted(set(keys)):
                await stack.enter_async_context(self.hold(key))
            yield

    async def claim(self, key: str) -> bool:
        """Take ``key``'s lock if nobody holds or waits for it, without waiting; ``release``
        gives it back. False, and nothing taken, when somebody does."""
        if key in self._entries:
            return False
        entry = self._entries[key] = _Entry(users=1)
        await entry.lock.acquire()  # a new lock: taken at once, the loop does not turn
        return True

    def release(self, key: str) -> None:
        """Give back a lock ``claim`` took."""
        entry = self._entries[key]
        entry.lock.release()
        entry.users -= 1
        if entry.users == 0:
            del self._entries[key]
