"""Compactions other replicas land, heard as PostgreSQL notices.

Each compaction is announced with NOTIFY in the transaction that applies it
(``postgres_writes.NOTIFY_CHANNEL``); one connection per replica LISTENs,
reconnecting after an outage. Notices sent while it was not listening are
gone — during an outage, and before its first connection was up (a first
connect can fail while the pool's succeed): each time it is up, the catch-up
callbacks are called so their owners can look for what they missed in the
database, and the notices that come meanwhile are held and passed on after,
so that they arrive in order.

A connection that only listens sends nothing, so a peer gone without a word
(a host that died, a NAT entry or proxy that dropped the flow: no FIN, no
reset) would leave it waiting for ever, deaf to every other replica. So it
is asked to answer every ``LIVENESS_INTERVAL_S``, and one that does not
within the connect timeout is dropped and replaced like any lost one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import asyncpg

from sidecar.store.postgres_writes import NOTIFY_CHANNEL

log = logging.getLogger("sidecar.store.postgres")  # the store's own: operators filter on it

LIVENESS_INTERVAL_S = 10.0
"""How long the notice connection may stay quiet before it is asked to answer."""


class CompactionNotices:
    """One replica's LISTEN connection, and the callbacks it calls (see the module docstring).

    A notice from this replica's own store (``origin``) or from another
    schema of the same database is skipped.
    """

    def __init__(
        self,
        dsn: str,
        *,
        connect_timeout_s: float,
        origin: str,
        liveness_interval_s: float = LIVENESS_INTERVAL_S,
    ) -> None:
        self.dsn = dsn
        self.connect_timeout_s = connect_timeout_s
        self.origin = origin
        self.liveness_interval_s = liveness_interval_s
        self._compaction_callbacks: list[Callable[[str, str], None]] = []
        self._catch_up_callbacks: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._held: list[str] | None = None  # notices that came during a catch-up
        self._listener: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()
        """Set while the notice connection is up (tests wait on it)."""

    def subscribe(
        self,
        callback: Callable[[str, str], None],
        catch_up: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        """Call ``callback(session_id, compaction_id)`` for each notice; listen if not yet."""
        self._compaction_callbacks.append(callback)
        if catch_up is not None:
            self._catch_up_callbacks.append(catch_up)
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen())

    async def close(self) -> None:
        """Stop listening."""
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
            self._listener = None

    async def _listen(self) -> None:
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # down, or refused: try again shortly
                log.info("postgres notice connection lost (%s); reconnecting", exc)
            await asyncio.sleep(1.0)

    async def _listen_once(self) -> None:
        """One LISTEN connection, until it drops or stops answering."""
        connection = await asyncpg.connect(self.dsn, timeout=self.connect_timeout_s)
        try:
            schema = await connection.fetchval("SELECT current_schema()")
            lost = asyncio.Event()
            connection.add_termination_listener(lambda _: lost.set())

            def notice(_conn: object, _pid: int, _channel: str, payload: object) -> None:
                if self._held is not None:
                    self._held.append(str(payload))
                else:
                    self._notice(str(payload), schema)

            await connection.add_listener(NOTIFY_CHANNEL, notice)
            self.listening.set()
            await self._catch_up(schema)
            while not lost.is_set():
                try:
                    async with asyncio.timeout(self.liveness_interval_s):
                        await lost.wait()
                except TimeoutError:  # quiet a while: still there? (see the module docstring)
                    await self._answers(connection)
        finally:
            self.listening.clear()
            if not connection.is_closed():
                connection.terminate()

    async def _answers(self, connection: asyncpg.Connection) -> None:
        """Return once ``connection`` answers a query; ConnectionError if it does not in time."""
        try:
            await connection.fetchval("SELECT 1", timeout=self.connect_timeout_s)
        except TimeoutError:
            raise ConnectionError(f"no answer within {self.connect_timeout_s:g} s") from None

    async def _catch_up(self, schema: str) -> None:
        """Listening again, or at last: let the callers look up what they missed, then
        pass on the notices that came meanwhile (after, so that they arrive in order)."""
        self._held = []
        try:
            outcomes = await asyncio.gather(
                *(catch_up() for catch_up in self._catch_up_callbacks), return_exceptions=True
            )
            for outcome in outcomes:
                if isinstance(outcome, Exception):
                    log.warning("catching up after a notice outage failed: %r", outcome)
        finally:
            held, self._held = self._held, None
            for payload in held:
                self._notice(payload, schema)

    def _notice(self, payload: str, schema: str) -> None:
        try:
            notice = json.loads(payload)
        except ValueError:
            return
        if notice.get("schema") != schema or notice.get("origin") == self.origin:
            return
        for callback in self._compaction_callbacks:
            callback(str(notice["session"]), str(notice["compaction"]))
