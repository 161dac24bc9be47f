"""Landing exact counts: a session's pending events counted and their counts written.

A landing reads a session's pending events (``Store.pending_counts``),
counts them exactly and writes the counts (``Store.land_counts``), a write of
its own that bumps no version; then it moves the estimates usage reports are
held to (``ContextEstimates.counted``). Several sessions land in the same
rounds: their pending events read side by side, one count of all their text,
their writes side by side.

One landing per session at a time, here: a landing that finds another's
counts landed already must not return before that one has moved the kept
estimates, and the estimates must hear of a session's landings in the order
they were written (``sidecar.engine.estimates`` says why). So each session's
estimates are moved before its landing is released.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sidecar.engine.locks import LockRegistry
from sidecar.engine.observer import EngineObserver
from sidecar.engine.session_model import SessionModels
from sidecar.model import Event, Session
from sidecar.store.protocol import CountsLanded, Store

_T = TypeVar("_T")

LAND_BATCH = 512
"""At most this many of a session's pending events are counted and landed in one write."""


class LandingHost(Protocol):
    """What landing reads from the engine on each use."""

    @property
    def store(self) -> Store: ...

    @property
    def models(self) -> SessionModels: ...

    @property
    def observer(self) -> EngineObserver: ...


@dataclass(frozen=True, slots=True)
class Landing:
    """A session's round of landing: how many of its events were pending (``LAND_BATCH`` at
    most), and what landed of them (None when none was pending)."""

    pending: int
    landed: CountsLanded | None

    @property
    def more(self) -> bool:
        """Whether more events may be pending: the round took as many as it could."""
        return self.pending == LAND_BATCH


class Landings:
    """Lands sessions' exact counts, one landing per session at a time; see the module
    docstring. ``count`` gives the exact counts of events."""

    def __init__(
        self, host: LandingHost, count: Callable[[Sequence[Event]], Awaitable[list[int]]]
    ) -> None:
        self._host = host
        self._count = count
        self._locks = LockRegistry()

    async def land(self, session_id: str, *, through: int | None = None) -> Session:
        """Count the session's pending events exactly (with ``through``, only those up to that
        position) and land the counts; the session after."""
        async with self._locks.hold(session_id):
            (session,) = await self.land_all([session_id], through)
        if isinstance(session, Exception):
            raise session
        return session

    @asynccontextmanager
    async def holding(self, session_ids: Sequence[str]) -> AsyncIterator[None]:
        """Hold these sessions' landings (waiting for any in flight) while the block runs."""
        async with self._locks.hold_many(session_ids):
            yield

    async def claim(self, session_ids: Sequence[str]) -> list[str]:
        """Those of the sessions whose landings nobody holds or waits for, now held; each is
        given back with ``release``."""
        return [s for s in session_ids if await self._locks.claim(s)]

    def release(self, session_ids: Sequence[str]) -> None:
        for session_id in session_ids:
            self._locks.release(session_id)

    async def land_all(
        self, session_ids: Sequence[str], through: int | None = None
    ) -> list[Session | Exception]:
        """Rounds of landing (``round``) until none of these sessions, whose landings
        the caller holds, has anything left pending (up to ``through``, when given); each
        session after, or the error that stopped it."""
        out: dict[int, Session | Exception] = {}
        left = list(range(len(session_ids)))
        unread = []  # nothing was pending: read as they are
        while left:
            more = []
            landings = await self.round([session_ids[i] for i in left], through)
            for index, landing in zip(left, landings, strict=True):
                if isinstance(landing, Exception):
                    out[index] = landing
                elif landing.landed is None:
                    unread.append(index)
                elif landing.more:
                    more.append(index)
                else:
                    out[index] = landing.landed.session
            left = more
        read = await asyncio.gather(
            *(self._found(session_ids[index], through) for index in unread),
            return_exceptions=True,
        )
        out.update(zip(unread, map(_settled, read), strict=True))
        return [out[index] for index in range(len(session_ids))]

    async def _found(self, session_id: str, through: int | None) -> Session:
        """The session, found with nothing pending (up to ``through``).

        Its header may still show pending counts: another replica appended
        between the read of the pending events and this one (the two are
        reads of their own). Then the session is returned as it is, and the
        caller, which loops until its decision is settled, lands those next.
        Only a header that says so with nothing pending and no write in
        between is a store that contradicts itself.
        """
        store = self._host.store
        session = await store.get_session(session_id)
        if through is not None or session.counters.tokens_exact:
            return session
        if (await store.pending_counts(session_id, 1))[1]:
            return session  # appended meanwhile: the caller's next round lands them
        again = await store.get_session(session_id)
        if again.version == session.version and not again.counters.tokens_exact:
            raise RuntimeError(f"session {session_id!r} counts pending events it lacks")
        return again

    async def round(
        self, session_ids: Sequence[str], through: int | None = None
    ) -> list[Landing | Exception]:
        """One round of landing for sessions whose landings the caller holds: up to
        ``LAND_BATCH`` pending events of each (up to position ``through``, when given), one
        count of all their text, a write each, the kept estimates moved; per session, what
        landed or the error that stopped it.

        A count that fails fails each session that had events to count.
        """
        store = self._host.store
        found = await asyncio.gather(
            *(store.pending_counts(s, LAND_BATCH, through=through) for s in session_ids),
            return_exceptions=True,
        )
        each = [_settled(outcome) for outcome in found]
        events = [e for read in each if isinstance(read, tuple) for e in read[1]]
        try:
            counts = iter(await self._count(events))
        except Exception as exc:
            return [
                read if isinstance(read, Exception) else exc if read[1] else Landing(0, None)
                for read in each
            ]
        # Each session's counts land only on the incarnation they were read from: one
        # deleted and created again meanwhile may have events of the same ids.
        writes = {
            index: store.land_counts(
                session_id, {e.id: next(counts) for e in read[1]}, incarnation=read[0].incarnation
            )
            for index, (session_id, read) in enumerate(zip(session_ids, each, strict=True))
            if isinstance(read, tuple) and read[1]
        }
        written = await asyncio.gather(*writes.values(), return_exceptions=True)
        landed = dict(zip(writes, map(_settled, written), strict=True))
        out: list[Landing | Exception] = []
        for index, read in enumerate(each):
            outcome = landed.get(index)
            if isinstance(read, Exception):
                out.append(read)
            elif isinstance(outcome, Exception):
                out.append(outcome)
            else:
                if outcome is not None:
                    self._noted(outcome)
                    self._host.observer.counts_landed(len(outcome.landed))
                out.append(Landing(len(read[1]), outcome))
        return out

    def _noted(self, landed: CountsLanded) -> None:
        """Move the kept estimates of the versions that held the landed events; keep the
        version landed at as the landing left it.

        Called once the write returns, before the session's landing is
        released: this replica's landings of a session are heard in the order
        they were written, which ``ContextEstimates.counted`` relies on.
        """
        self._host.models.estimates.counted(
            landed.session,
            [
                (e.position, exact - e.token_count, e.token_count - b[0], b[1] - e.token_count)
                for e, exact in landed.landed
                if (b := e.token_bounds) is not None and not e.archived and not e.cleared
            ],
        )


def _settled(outcome: _T | BaseException) -> _T | Exception:
    """A gathered outcome, with a cancellation (no answer, the call was stopped) raised."""
    if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
        raise outcome
    return outcome
