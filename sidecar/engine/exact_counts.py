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
from enum import StrEnum
from typing import Protocol

from sidecar.compaction.formatting import format_event
from sidecar.compaction.token_bounds import DEFAULT_BYTES_PER_TOKEN, estimate, settled_fires
from sidecar.compaction.tokens import opaque_tokens
from sidecar.compaction.triggers import Trigger
from sidecar.engine.landings import Landing, LandingHost, Landings
from sidecar.errors import SessionNotFound
from sidecar.model import Event, ModelUsage, Role, Session, UsageReport, new_event_id
from sidecar.tokenizer import TokenEstimator

log = logging.getLogger(__name__)

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


class CountingHost(LandingHost, Protocol):
    """What counting reads from the engine on each use: what landing does, and the
    estimator."""

    @property
    def estimator(self) -> TokenEstimator: ...


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
        self._ratio_samples = 0
        self.landings = Landings(host, self._exact_events)
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
        (decided,) = await self.fires_many([(session_id, trigger, session)])
        if isinstance(decided, Exception):
            raise decided
        return decided

    async def fires_many(
        self, checks: Sequence[tuple[str, Trigger, Session]]
    ) -> list[tuple[bool, Session] | Exception]:
        """``fires`` for each of several sessions (distinct), or the error that stopped it.

        Those whose bounds settle it are decided at once; the others' pending
        counts land together, in the same rounds (one count of all their text,
        their writes side by side), so no session waits behind another's
        landing.
        """
        out: list[tuple[bool, Session] | Exception] = []
        left: list[int] = []
        for index, (_, trigger, session) in enumerate(checks):
            settled = settled_fires(trigger, *session.counters.ends())
            out.append((bool(settled), session))
            if settled is None:
                left.append(index)
        while left:  # more than once only if events were appended while landing
            session_ids = [checks[index][0] for index in left]
            async with self.landings.holding(session_ids):
                landed = await self.landings.land_all(session_ids)
            unsettled = []
            for index, after in zip(left, landed, strict=True):
                if isinstance(after, Exception):
                    out[index] = after
                    continue
                settled = settled_fires(checks[index][1], *after.counters.ends())
                out[index] = (bool(settled), after)
                if settled is None:
                    unsettled.append(index)
            left = unsettled
        return out

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
        """``Landings.land``: the session's pending counts landed (up to ``through``)."""
        return await self.landings.land(session_id, through=through)

    # -- counting -------------------------------------------------------------

    async def _exact_events(self, events: Sequence[Event]) -> list[int]:
        """The exact counts of ``events``; the bytes-per-token ratio learns from them."""
        texts = [format_event(e) for e in events]
        counts = await self._exact(texts)
        size = sum(len(text.encode()) for text in texts)
        tokens = sum(counts)
        if tokens > 0:
            self._ratio_samples += 1
            weight = 1 / min(self._ratio_samples, RATIO_HORIZON)
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

    # -- the background counter -----------------------------------------------

    async def _background(self) -> None:
        """Count the queued sessions' pending events, a batch of sessions at a time."""
        while self._queued:
            await asyncio.sleep(BACKGROUND_DELAY_S)
            sessions, self._queued = list(self._queued), {}
            await self._land_many(sessions)

    async def _land_many(self, session_ids: list[str]) -> None:
        """Land several sessions' pending counts: one count of all their text, a write each.

        A session another landing holds is queued again for the next batch, and
        so is one with more pending than a round takes.
        """
        claimed = await self.landings.claim(session_ids)
        for session_id in session_ids:
            if session_id not in claimed:
                self._queued[session_id] = None
        try:
            landings = await self.landings.round(claimed)
        finally:
            self.landings.release(claimed)
        for session_id, landing in zip(claimed, landings, strict=True):
            if isinstance(landing, Landing):
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
