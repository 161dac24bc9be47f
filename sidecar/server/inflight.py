"""The in-flight budget: the bytes of requests and answers the whole server holds at once.

Every append counts here — a streamed request from when it is read until its
answer is produced, that answer until it is written, a unary request while
it is handled — so what the server holds is bounded in bytes, whatever the
number of streams and the size of their messages. Past ``limit`` a request
waits before it is taken in, and a stream reads no further meanwhile: HTTP/2
flow control then holds the rest on the client.

Requests wait fairly between tenants, and between the connections of each
tenant, by fair queueing on virtual time in two levels, as the SQLite
writer's queue does (``sidecar.store.fair_queue``). Each tenant's clock
advances by the bytes its requests are let in, and so does each connection's
within its tenant: the tenant whose clock is lowest goes next, and of its
connections the one whose clock is lowest. Without tenants (no token file, or
one without tenant names) every call is of one tenant, and requests wait
fairly between connections alone. A connection is what grpc's ``peer()``
names it: every client of a Unix socket is the one peer ``unix:``, so
there its clients share one connection's turn (tenants still take turns
apart). So a quiet tenant waits for about the
request being let in, not for one of every connection a flooding tenant
opened, nor one of every stream those connections hold open; and within a
tenant, a quiet connection waits the same way beside a flooding one. A tenant
or a connection returning after a pause is credited at most ``CREDIT_BYTES``
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
from collections.abc import AsyncIterator, Hashable

CREDIT_BYTES = 1 << 20
"""How far behind the present a tenant or connection back from a pause starts: a large request."""

MAX_CLOCKS = 4096
"""Clocks kept at one level before those a full credit behind are forgotten."""

_Waiter = tuple[int, "asyncio.Future[None]"]


class _Clocks:
    """The virtual clocks at one level of the budget: of the tenants, or of one's connections.

    A key's clock is where it started plus the bytes it was let in since.
    """

    def __init__(self) -> None:
        self.clocks: dict[Hashable, int] = {}
        self.now = 0  # virtual time: the start of the latest request let in at this level

    def start(self, key: Hashable) -> int:
        """Where ``key``'s next request starts (credit bounded)."""
        return max(self.clocks.get(key, 0), self.now - CREDIT_BYTES)

    def advance(self, key: Hashable, size: int) -> None:
        """Move ``key``'s clock on by a request of ``size`` bytes let in now."""
        start = self.start(key)
        self.clocks[key] = start + size
        self.now = max(self.now, start)
        if len(self.clocks) > MAX_CLOCKS:
            # Those a full credit behind the present start there anyway: forget them.
            behind = self.now - CREDIT_BYTES
            self.clocks = {k: c for k, c in self.clocks.items() if c > behind}


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
        self._queues: dict[str | None, dict[str, collections.deque[_Waiter]]] = {}
        """Waiting requests per tenant and connection, in arrival order; no empty ones."""
        self._tenants = _Clocks()
        self._connections: dict[str | None, _Clocks] = {}
        """Each tenant's connections' clocks, on the tenant's own virtual time."""
        self._count = 0

    @property
    def waiting(self) -> int:
        """Requests waiting to be taken in."""
        return self._count

    def _fits(self, size: int) -> bool:
        return self.held == 0 or self.held + size <= self.limit

    async def admit(self, size: int, connection: str = "", tenant: str | None = None) -> None:
        """Count ``size`` bytes, first waiting for a fair turn until they fit (or nothing is held).

        ``connection`` is the connection the request came on, ``tenant`` the
        caller's tenant (None without tenants). Cancel-safe: when it raises,
        nothing was counted.
        """
        if not self._count and self._fits(size):
            self._let_in(tenant, connection, size)
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, turn)
        queues = self._queues.setdefault(tenant, {})
        queues.setdefault(connection, collections.deque()).append(entry)
        self._connections.setdefault(tenant, _Clocks())
        self._count += 1
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(size)  # admitted as it was cancelled: give it back
            else:
                self._drop(tenant, connection, entry)
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

    def _drop(self, tenant: str | None, connection: str, entry: _Waiter) -> None:
        queues = self._queues.get(tenant, {})
        queue = queues.get(connection)
        if queue is None or entry not in queue:  # ``_wake`` may have dropped it
            return
        queue.remove(entry)
        self._count -= 1
        if not queue:
            del queues[connection]
            if not queues:
                del self._queues[tenant]

    def _wake(self) -> None:
        while self._queues:
            # The tenant furthest behind, then the connection of its furthest behind.
            tenant = min(self._queues, key=self._tenants.start)
            queues = self._queues[tenant]
            connection = min(queues, key=self._connections[tenant].start)
            size, turn = entry = queues[connection][0]
            if turn.done():  # cancelled while waiting
                self._drop(tenant, connection, entry)
                continue
            if not self._fits(size):
                return
            self._drop(tenant, connection, entry)
            self._let_in(tenant, connection, size)
            turn.set_result(None)
        if self.held == 0:  # idle: nothing to be fair about, no clock kept
            self._tenants = _Clocks()
            self._connections.clear()

    def _let_in(self, tenant: str | None, connection: str, size: int) -> None:
        """Count a request and move its tenant's clock and its connection's on by its bytes."""
        self._tenants.advance(tenant, size)
        self._connections.setdefault(tenant, _Clocks()).advance(connection, size)
        if len(self._connections) > MAX_CLOCKS:
            # Tenants forgotten at their level take their connections' clocks with them.
            self._connections = {
                t: clocks
                for t, clocks in self._connections.items()
                if t in self._tenants.clocks or t in self._queues
            }
        self.charge(size)

    @contextlib.asynccontextmanager
    async def holding(
        self, size: int, connection: str = "", tenant: str | None = None
    ) -> AsyncIterator[None]:
        """``size`` bytes counted for the duration of the block."""
        await self.admit(size, connection, tenant)
        try:
            yield
        finally:
            self.release(size)
