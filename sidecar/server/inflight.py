"""The in-flight budget: the bytes of requests and answers the whole server holds at once.

Every append counts here — a streamed request from when it is read until its
answer is produced, that answer until it is written, a unary request while
it is handled — so what the server holds is bounded in bytes, whatever the
number of streams and the size of their messages. Past ``limit`` a request
waits before it is taken in, and a stream reads no further meanwhile: HTTP/2
flow control then holds the rest on the client.

Requests wait fairly between connections (``key``: the caller's peer), by
fair queueing on virtual time as the SQLite writer's queue does
(``sidecar.store.fair_queue``): each connection's clock advances by the bytes
it is let in, and the waiting request whose connection's clock is lowest goes
next. A quiet call therefore waits for about the request being let in, not
for one request of every stream a flooding connection holds open; a
connection returning after a pause is credited at most ``CREDIT_BYTES``
behind the present, so it cannot save up a turn. One connection's requests
keep their order. When the chosen request does not fit, nobody passes it, so
small ones cannot starve a big one; a request larger than the whole budget is
taken alone, once nothing else is held. Answers are counted without waiting
(they already exist, and making them wait for requests to finish would
deadlock); the per-stream bound on queued answers (``streams.py``) keeps that
overshoot small.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator

CREDIT_BYTES = 1 << 20
"""How far behind the present a connection returning after a pause starts: one large request."""

MAX_CLOCKS = 4096
"""Connections whose clocks are kept before those a full credit behind are forgotten."""

_Waiter = tuple[int, "asyncio.Future[None]"]


class InflightBudget:
    """A byte budget shared by all calls; ``admit`` waits its turn, ``release`` gives back."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"an in-flight budget needs at least 1 byte, got {limit}")
        self.limit = limit
        self.held = 0
        """Bytes counted now (requests being handled, answers not yet written)."""
        self.high_water = 0
        """The most ``held`` has been since start."""
        self._queues: dict[str, collections.deque[_Waiter]] = {}
        """Waiting requests per connection, in arrival order; no empty ones."""
        self._clocks: dict[str, int] = {}
        """Each contending connection's virtual time: the bytes it was let in, from its start."""
        self._now = 0  # virtual time: the start of the latest request let in
        self._count = 0

    @property
    def waiting(self) -> int:
        """Requests waiting to be taken in."""
        return self._count

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.limit

    async def admit(self, size: int, key: str = "") -> None:
        """Count ``size`` bytes, first waiting for a fair turn until they fit (or nothing is held).

        ``key`` is the connection the request came on. Cancel-safe: when it
        raises, nothing was counted.
        """
        if not self._count and self._fits(size):
            self._let_in(key, size)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, turn)
        self._queues.setdefault(key, collections.deque()).append(entry)
        self._count += 1
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(size)  # admitted as it was cancelled: give it back
            else:
                self._drop(key, entry)
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

    def _drop(self, key: str, entry: _Waiter) -> None:
        queue = self._queues.get(key)
        if queue is None or entry not in queue:  # ``_wake`` may have dropped it
            return
        queue.remove(entry)
        self._count -= 1
        if not queue:
            del self._queues[key]

    def _start(self, key: str) -> int:
        """Where ``key``'s next request starts on the virtual clock (credit bounded)."""
        return max(self._clocks.get(key, 0), self._now - CREDIT_BYTES)

    def _wake(self) -> None:
        while self._queues:
            key = min(self._queues, key=self._start)
            queue = self._queues[key]
            size, turn = queue[0]
            if turn.done():  # cancelled while waiting
                self._drop(key, queue[0])
                continue
            if not self._fits(size):
                return
            self._drop(key, queue[0])
            self._let_in(key, size)
            turn.set_result(None)
        if self.held == 0:  # idle: nothing to be fair about, nothing kept per connection
            self._clocks.clear()
            self._now = 0

    def _let_in(self, key: str, size: int) -> None:
        """Count a request of ``key`` and move its connection's clock on by its bytes."""
        start = self._start(key)
        self._clocks[key] = start + size
        self._now = max(self._now, start)
        self.charge(size)
        if len(self._clocks) > MAX_CLOCKS:
            # Those a full credit behind the present start there anyway: forget them.
            behind = self._now - CREDIT_BYTES
            self._clocks = {k: c for k, c in self._clocks.items() if c > behind}

    @contextlib.asynccontextmanager
    async def holding(self, size: int, key: str = "") -> AsyncIterator[None]:
        """``size`` bytes counted for the duration of the block."""
        await self.admit(size, key)
        try:
            yield
        finally:
            self.release(size)
