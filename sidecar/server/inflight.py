"""The in-flight budget: the bytes of requests and answers the whole server holds at once.

Every append counts here — a streamed request from when it is read until its
answer is produced, that answer until it is written, a unary request while
it is handled — so what the server holds is bounded in bytes, whatever the
number of streams and the size of their messages. Past ``limit`` a request
waits before it is taken in, and a stream reads no further meanwhile: HTTP/2
flow control then holds the rest on the client.

Requests are taken in arrival order, so small ones cannot starve a big one;
a request larger than the whole budget is taken alone, once nothing else is
held. Answers are counted without waiting (they already exist, and making
them wait for requests to finish would deadlock); the per-stream bound on
queued answers (``streams.py``) keeps that overshoot small.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator


class InflightBudget:
    """A byte budget shared by all calls; ``admit`` waits in line, ``release`` gives back."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an in-flight budget needs at least 1 byte, got {limit}")
        self.limit = limit
        self.held = 0
        """Bytes counted now (requests being handled, answers not yet written)."""
        self.high_water = 0
        """The most ``held`` has been since start."""
        self._waiting: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    @property
    def waiting(self) -> int:
        """Requests waiting to be taken in."""
        return len(self._waiting)

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.limit

    async def admit(self, size: int) -> None:
        """Count ``size`` bytes, first waiting in line until they fit (or nothing is held).

        Cancel-safe: when it raises, nothing was counted.
        """
        if not self._waiting and self._fits(size):
            self.charge(size)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, turn)
        self._waiting.append(entry)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(size)  # admitted as it was cancelled: give it back
            else:
                with contextlib.suppress(ValueError):  # ``_wake`` may have dropped it
                    self._waiting.remove(entry)
                self._wake()  # the one behind may fit now
            raise

    def charge(self, size: int) -> None:
        """Count ``size`` bytes now, over the limit if need be (answers that exist already)."""
        self.held += size
        self.high_water = max(self.high_water, self.held)

    def release(self, size: int) -> None:
        """Give back bytes counted by ``admit`` or ``charge``, and take in who now fits."""
        self.held -= size
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            size, turn = self._waiting[0]
            if turn.done():  # cancelled while waiting
                self._waiting.popleft()
                continue
            if not self._fits(size):
                return
            self._waiting.popleft()
            self.charge(size)
            turn.set_result(None)

    @contextlib.asynccontextmanager
    async def holding(self, size: int) -> AsyncIterator[None]:
        """``size`` bytes counted for the duration of the block."""
        await self.admit(size)
        try:
            yield
        finally:
            self.release(size)
