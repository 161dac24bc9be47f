"""Counting appends: estimated in O(bytes), counted exactly where a decision needs it (issue 37).

The exact tokenizer costs 26 MiB once built and about a third of an
append's CPU, yet most trigger checks are nowhere near their threshold. So
unless told to count on append (``TokenCounting.ON_APPEND``), the engine:

- estimates each appended event from its bytes (``token_bounds.estimate``):
  its bounds, and an estimate between them at the process's running ratio
  of bytes to tokens. A system message is counted exactly: it is rare, in
  every prompt, and only the latest one counts, which a pending count would
  make a second set of counters;
- decides a trigger from the two ends of the window's bounds when they agree
  (``settled_fires``: every trigger is monotone in the window's tokens, so
  exact counting decides the same); only when they straddle a threshold does
  it count the session's pending events first (``fires``);
- counts every pending event of a session before a strategy plans (``exact``):
  strategies compare and answer counts (a budget's cut, ``min_saved_tokens``,
  clearing's ``min_cleared_tokens``, ``tokens_estimated_saved``);
- counts a version's pending events before a usage report is held against it
  (``usage_report``), once the report is known to be usable, and only those
  the version holds: a calibration divides by exact counts only;
- with ``TokenCounting.BACKGROUND``, also counts each session's pending events
  soon after they are stored, many sessions' in one batch on the counting
  threads (``appended``), so that reads show exact counts a moment later.

Each landing is a store write of its own that bumps no version
(``Store.land_counts``); until it lands, every count a client reads says it
is an estimate. The encoding must bound its tokens in bytes
(``TiktokenEstimator.longest_token_bytes``): with any other estimator every
append is counted on append.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar

from sidecar.compaction.formatting import format_event
from sidecar.compaction.token_bounds import DEFAULT_BYTES_PER_TOKEN, estimate, settled_fires
from sidecar.compaction.tokens import opaque_tokens
from sidecar.compaction.triggers import Trigger
from sidecar.engine.locks import LockRegistry
from sidecar.engine.session_model import SessionModels
from sidecar.errors import SessionNotFound
from sidecar.model import Event, ModelUsage, Role, Session, UsageReport, new_event_id
from sidecar.store.protocol import CountsLanded, Store
from sidecar.tokenizer import TokenEstimator

log = logging.getLogger(__name__)

_T = TypeVar("_T")

COUNT_IN_THREAD_CHARS = 8_192
"""Texts with at least this many characters in all are counted on a worker thread.

tiktoken releases the GIL while it encodes, so a big batch (a 100 KB tool
result, a stream's folded appends) is counted on another core while the event
loop goes on serving other calls. Below this size the hop to the thread
(about 60 us) costs more than the counting itself. The first count of all goes
to the thread whatever its size: the default estimator builds its encoding
then (100-200 ms, see ``sidecar.tokenizer``), which on the loop would hold up
every other call, health checks included.
"""

LAND_BATCH = 512
"""At most this many of a session's pending events are counted and landed in one write."""

BACKGROUND_DELAY_S = 0.05
"""How long the background counter lets a stream's appends gather before counting them."""

RATIO_HORIZON = 64
"""Landings up to this many are averaged into the bytes-per-token ratio; later ones move it
by 1/64 each."""


class TokenCounting(StrEnum):
    """When an appended event's tokens are counted exactly."""

    ON_APPEND = "on_append"
    """Before it is stored, as before issue 37: every count is exact, the tokenizer is built
    on the first append."""
    WHEN_NEEDED = "when_needed"
    """Only where a decision needs it (see the module docstring); reads say "estimated"
    until then. A server whose sessions never come near a threshold never builds the
    tokenizer."""
    BACKGROUND = "background"
    """As ``WHEN_NEEDED``, and soon after each append, batched on the counting threads."""


class CountingHost(Protocol):
    """What counting reads from the engine on each use."""

    @property
    def store(self) -> Store: ...

    @property
    def estimator(self) -> TokenEstimator: ...

    @property
    def models(self) -> SessionModels: ...


class ExactCounts:
    """Counts appends and lands exact counts where they decide; see the module docstring."""

    def __init__(
        self, host: CountingHost, threads: Executor, mode: TokenCounting = TokenCounting.WHEN_NEEDED
    ) -> None:
        self._host = host
        self._threads = threads
        longest = getattr(host.estimator, "longest_token_bytes", None)
        self._longest: int | None = longest if isinstance(longest, int) else None
        self.mode = mode if self._longest is not None else TokenCounting.ON_APPEND
        self._counted_before = False  # until a count has finished, counts go to a thread
        self._bytes_per_token = DEFAULT_BYTES_PER_TOKEN
        self._landings = 0
        # One landing per session at a time: a landing that finds another's counts landed
        # already must not return before that one has moved the kept estimates (``_noted``).
        self._landing = LockRegistry()
        self._queued: dict[str, None] = {}  # sessions for the background counter, in order
        self._worker: asyncio.Task[None] | None = None

    @property
    def deferred(self) -> bool:
        """Whether appends are estimated, their exact counts landing later."""
        return self.mode is not TokenCounting.ON_APPEND

    # -- the append path ----------------------------------------------------

    async def counted(self, batches: Sequence[Sequence[Event]]) -> list[tuple[Event, ...]]:
        """Each batch with ids where events came without one, and token counts: exact, or
        estimated with their bounds (a system message always exact)."""
        longest = self._longest
        if longest is None or not self.deferred:
            texts = [format_event(e) for events in batches for e in events]
            each = iter(await self._exact(texts))
            return [
                tuple(
                    e.evolve(id=e.id or new_event_id(), token_count=next(each) + opaque_tokens(e))
                    for e in events
                )
                for events in batches
            ]
        systems = [e for events in batches for e in events if e.role is Role.SYSTEM]
        exact = iter(await self._exact([format_event(e) for e in systems]) if systems else ())
        ratio = self._bytes_per_token
        out: list[tuple[Event, ...]] = []
        for events in batches:
            batch = []
            for e in events:
                if e.role is Role.SYSTEM:
                    count, bounds = next(exact) + opaque_tokens(e), None
                else:
                    count, low, high = estimate(e, ratio, longest)
                    bounds = (low, high)
                batch.append(
                    e.evolve(id=e.id or new_event_id(), token_count=count, token_bounds=bounds)
                )
            out.append(tuple(batch))
        return out

    def appended(self, session: Session) -> None:
        """An append stored events; with ``BACKGROUND``, count the session's pending ones soon."""
        if self.mode is not TokenCounting.BACKGROUND or session.counters.tokens_exact:
            return
        self._queued[session.session_id] = None
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._background())

    # -- decisions ------------------------------------------------------------

    async def fires(
        self, session_id: str, trigger: Trigger, session: Session
    ) -> tuple[bool, Session]:
        """Whether ``trigger`` fires on the session's exact counters, and the session it was
        decided on: from the bounds when they settle it, else once the pending events'
        exact counts have landed."""
        while True:
            settled = settled_fires(trigger, *session.counters.ends())
            if settled is not None:
                return settled, session
            session = await self.land(session_id)

    async def exact(self, session_id: str, session: Session | None = None) -> Session:
        """The session once every event of its window has its exact count (before a plan)."""
        if session is None:
            session = await self._host.store.get_session(session_id)
        while not session.counters.tokens_exact:
            session = await self.land(session_id)
        return session

    async def usage_report(
        self, session_id: str, usage: ModelUsage | None
    ) -> tuple[UsageReport | None, str]:
        """The report held against the exact count of the context it reports on, or None and
        why not (``SessionModels.usage_report``).

        A malformed report is refused (InvalidArgument) before anything is
        counted. A version kept with estimates has the pending events it holds
        counted and landed first (those up to its highest position, not the
        ones appended since), which moves its kept estimate: that is read
        again, once.
        """
        if usage is None:
            return None, ""
        models = self._host.models
        models.check_usage(usage)
        kept = models.estimates.estimate(session_id, usage.context_version)
        if kept is not None and not kept.exact:
            with contextlib.suppress(SessionNotFound):  # the store says why, later
                await self.land(session_id, through=kept.through)
            kept = models.estimates.estimate(session_id, usage.context_version)
        return models.usage_report(usage, kept)

    async def land(self, session_id: str, *, through: int | None = None) -> Session:
        """Count the session's pending events exactly (with ``through``, only those up to that
        position) and land the counts; the session after."""
        async with self._landing.hold(session_id):
            while True:
                (landing,) = await self._land_round([session_id], through)
                if isinstance(landing, Exception):
                    raise landing
                if landing.landed is None:  # nothing was pending
                    session = await self._host.store.get_session(session_id)
                    if through is None and not session.counters.tokens_exact:
                        raise RuntimeError(f"session {session_id!r} counts pending events it lacks")
                    return session
                if not landing.more:
                    return landing.landed.session

    async def _land_round(
        self, session_ids: Sequence[str], through: int | None = None
    ) -> list[_Landing | Exception]:
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
        events = [e for pending in each if isinstance(pending, tuple) for e in pending]
        try:
            counts = iter(await self._exact_events(events))
        except Exception as exc:
            return [
                p if isinstance(p, Exception) else exc if p else _Landing(0, None) for p in each
            ]
        writes = {
            index: store.land_counts(session_id, {e.id: next(counts) for e in pending})
            for index, (session_id, pending) in enumerate(zip(session_ids, each, strict=True))
            if isinstance(pending, tuple) and pending
        }
        written = await asyncio.gather(*writes.values(), return_exceptions=True)
        landed = dict(zip(writes, map(_settled, written), strict=True))
        out: list[_Landing | Exception] = []
        for index, pending in enumerate(each):
            outcome = landed.get(index)
            if isinstance(pending, Exception):
                out.append(pending)
            elif isinstance(outcome, Exception):
                out.append(outcome)
            else:
                if outcome is not None:
                    self._noted(outcome)
                out.append(_Landing(len(pending), outcome))
        return out

    # -- counting -------------------------------------------------------------

    async def _exact_events(self, events: Sequence[Event]) -> list[int]:
        """The exact counts of ``events``; the bytes-per-token ratio learns from them."""
        texts = [format_event(e) for e in events]
        counts = await self._exact(texts)
        size = sum(len(text.encode()) for text in texts)
        tokens = sum(counts)
        if tokens > 0:
            self._landings += 1
            weight = 1 / min(self._landings, RATIO_HORIZON)
            self._bytes_per_token += weight * (size / tokens - self._bytes_per_token)
        return [count + opaque_tokens(e) for e, count in zip(events, counts, strict=True)]

    async def _exact(self, texts: list[str]) -> list[int]:
        """``texts`` counted by the estimator: on a worker thread when big, or the first time."""
        inline = self._counted_before and sum(map(len, texts)) < COUNT_IN_THREAD_CHARS
        if inline or not texts:
            return self._count_all(texts)
        loop = asyncio.get_running_loop()
        counts = await loop.run_in_executor(self._threads, self._count_all, texts)
        self._counted_before = True
        return counts

    def _count_all(self, texts: list[str]) -> list[int]:
        count = self._host.estimator.count
        return [count(text) for text in texts]

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

    # -- the background counter -----------------------------------------------

    async def _background(self) -> None:
        """Count the queued sessions' pending events, a batch of sessions at a time."""
        while self._queued:
            await asyncio.sleep(BACKGROUND_DELAY_S)
            sessions, self._queued = list(self._queued), {}
            await self._land_many(sessions)

    async def _land_many(self, session_ids: list[str]) -> None:
        """Land several sessions' pending counts: one count of all their text, a write each.

        A session another landing holds is queued again for the next batch.
        """
        claimed = []
        for session_id in session_ids:
            if await self._landing.claim(session_id):
                claimed.append(session_id)
            else:
                self._queued[session_id] = None
        try:
            await self._land_claimed(claimed)
        finally:
            for session_id in claimed:
                self._landing.release(session_id)

    async def _land_claimed(self, session_ids: list[str]) -> None:
        for session_id, landing in zip(
            session_ids, await self._land_round(session_ids), strict=True
        ):
            if isinstance(landing, _Landing):
                if landing.more:
                    self._queued[session_id] = None
            elif not isinstance(landing, SessionNotFound):
                log.warning("landing the exact counts of %s failed: %r", session_id, landing)

    async def close(self) -> None:
        """Stop the background counter; what it had not counted yet stays pending, durably."""
        worker, self._worker = self._worker, None
        self._queued = {}
        if worker is not None and not worker.done():
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class _Landing:
    """A session's round of landing: how many of its events were pending (``LAND_BATCH`` at
    most), and what landed of them (None when none was pending)."""

    pending: int
    landed: CountsLanded | None

    @property
    def more(self) -> bool:
        """Whether more events may be pending: the round took as many as it could."""
        return self.pending == LAND_BATCH


def _settled(outcome: _T | BaseException) -> _T | Exception:
    """A gathered outcome, with a cancellation (no answer, the call was stopped) raised."""
    if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
        raise outcome
    return outcome
