"""Running one compaction step and landing its plan.

A step plans on exact counts: the session's pending counts land first
(``exact_counts``). A window step is planned while the caller holds the session's lock, from the
window's head where that makes the same plan (``sidecar.compaction.head``),
growing the head until it does, else from the whole active window. A summary
reads the window under the lock, calls the summarizer without it, and takes
the lock again only to land its plan. A plan
lands with a check that no other compaction landed since its window was read
and that what it archives is still active; losing that race makes the step a
no-op (superseded), and appends made meanwhile stand. Every landed compaction
is published to the session's watchers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.head import first_head, plan_from_head
from sidecar.compaction.pipeline import WindowStep, plan_step
from sidecar.compaction.summarize import Summarize
from sidecar.engine import answer_window
from sidecar.engine.host import EngineHost
from sidecar.engine.results import CAUSE, skipped
from sidecar.errors import SummarizerTimeout, SummarizerUnavailable, VersionConflict
from sidecar.model import CompactionPlan, CompactionResult, Event, Session, SkipReason

# The engine's logger: log pipelines filter on its name (see sidecar.server.logs).
log = logging.getLogger("sidecar.engine.engine")


class StepRunner:
    """Runs window steps and summaries over the engine's store; see the module docstring."""

    def __init__(self, host: EngineHost) -> None:
        self._host = host

    async def window_locked(
        self,
        session_id: str,
        strategy: WindowStep,
        expected_version: int | None,
        *,
        with_window: bool = False,
    ) -> tuple[CompactionResult, Session]:
        """Plan a window step on the active window and land it (caller holds the lock).

        ``with_window``: a step that changes nothing answers the window it was
        planned on (unchanged, the lock is held), so a Compact that clears
        nothing does not read and decode the whole window a second time; as
        every result, it lists the window only while it is small
        (``sidecar.engine.answer_window``).
        """
        host = self._host
        session, plan, window = await self._planned(session_id, strategy)
        if expected_version is not None and session.version != expected_version:
            raise VersionConflict(
                f"session {session_id!r} changed to version {session.version}",
                current_version=session.version,
            )
        result, after = await self.land(session_id, session, plan)
        if with_window and plan.is_empty:
            listed = (
                answer_window.listed(window)
                if window is not None
                else await answer_window.window_after(host.store, session_id, session)
            )
            result = answer_window.with_window(result, listed)
        return result, after

    async def _planned(
        self, session_id: str, strategy: WindowStep
    ) -> tuple[Session, CompactionPlan, tuple[Event, ...] | None]:
        """The session, ``strategy``'s plan, and the whole window when it was read.

        From the head while that decides, each head twice the last; from the
        whole window once the head cannot (``plan_from_head``).
        """
        host = self._host
        store = host.store
        session = await host.counts.exact(session_id)
        size = first_head(strategy, session.counters.real_events)
        count_calls = isinstance(strategy, ClearToolResults)
        while size is not None:
            session, head = await store.window_head(session_id, size, count_calls=count_calls)
            if not session.counters.tokens_exact:  # another replica appended meanwhile
                await host.counts.exact(session_id, session)
                continue
            made = await host.window_work.run(plan_from_head, strategy, head, host.estimator)
            if isinstance(made, CompactionPlan):
                return session, made, head.events if head.complete else None
            size = made.events if made.events is None else max(made.events, 2 * size + 1)
        session, window = await self.exact_window(session_id)
        plan = await host.window_work.run(plan_step, strategy, window, host.estimator)
        return session, plan, window

    async def exact_window(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        """The session and its active window, every event of it counted exactly: strategies
        plan on exact counts (``sidecar.engine.exact_counts``)."""
        host = self._host
        while True:
            session, window = await host.store.active_window(session_id)
            if session.counters.tokens_exact:
                return session, window
            await host.counts.exact(session_id, session)

    async def summary(
        self, session_id: str, strategy: Summarize, timeout_s: float
    ) -> CompactionResult:
        """Summarize the active window, holding the lock only to read it and to land."""
        host = self._host
        async with host.locks.hold(session_id):
            session, window = await self.exact_window(session_id)
        job = await host.window_work.run(strategy.prepare, window, host.estimator)
        if isinstance(job, CompactionPlan):
            async with host.locks.hold(session_id):
                return (await self.land(session_id, session, job))[0]
        summarizer = host.summarizer
        if summarizer is None:
            raise SummarizerUnavailable(
                "the session's policy summarizes, but no summarizer is configured"
            )
        started = time.perf_counter()
        try:
            response = await asyncio.wait_for(summarizer.summarize(job.request), timeout_s)
        except TimeoutError:
            host.observer.summarizer_failed("timeout")
            raise SummarizerTimeout(
                f"the summarizer did not answer within {timeout_s:g} s"
            ) from None
        except SummarizerUnavailable:
            host.observer.summarizer_failed("unavailable")
            raise
        except Exception:
            host.observer.summarizer_failed("error")
            raise
        elapsed = time.perf_counter() - started
        host.observer.summarized(elapsed, response.input_tokens, response.output_tokens)
        latency_ms = elapsed * 1000
        plan = await host.window_work.run(
            strategy.finish, job, response, host.estimator, latency_ms
        )
        async with host.locks.hold(session_id):
            return (await self.land(session_id, session, plan))[0]

    async def land(
        self, session_id: str, session: Session, plan: CompactionPlan
    ) -> tuple[CompactionResult, Session]:
        """Apply a plan made on ``session`` (caller holds the lock); an empty plan
        writes nothing. The store refuses it, and so the pass is superseded, if
        another compaction landed since or the session is not the one it was made on
        (deleted and created again under its id while a summary ran).

        Returns the result and the session header after it.
        """
        host = self._host
        if plan.is_empty:
            loss = (plan.identifiers_dropped, plan.dropped_identifiers)
            result = skipped(plan.strategy, plan.skipped_reason, session.version, dropped=loss)
            return self.observed(result), session
        try:
            based = replace(
                plan,
                cause=CAUSE.get(),
                base_compaction_id=session.last_compaction_id,
                base_incarnation=session.incarnation,
            )
            outcome = await host.store.apply(session_id, based)
        except VersionConflict:
            # Another compaction landed first, what we archive is gone, or the session
            # is another incarnation: ours is a no-op.
            current = await host.store.get_session(session_id)
            result = skipped(plan.strategy, SkipReason.SUPERSEDED, current.version)
            return self.observed(result), current
        window = await answer_window.window_after(host.store, session_id, outcome.session)
        result = CompactionResult(
            compacted=True,
            strategy=plan.strategy,
            archived_events=outcome.archived,
            tokens_estimated_saved=plan.tokens_estimated_saved,
            skipped_reason=plan.skipped_reason,
            version=outcome.session.version,
            compaction_id=outcome.compaction_id,
            cleared_ids=tuple(e.id for e in plan.clears),
            identifiers_dropped=plan.identifiers_dropped,
            dropped_identifiers=plan.dropped_identifiers,
        )
        result = answer_window.with_window(result, window)
        self.observed(result)
        log.info(
            "compacted %s: %d events archived, %d cleared, ~%d tokens saved",
            session_id,
            len(outcome.archived),
            len(plan.clears),
            plan.tokens_estimated_saved,
            extra={
                "session_id": session_id,
                "compaction_id": outcome.compaction_id,
                "strategy": plan.strategy,
                "archived": len(outcome.archived),
                "cleared": len(plan.clears),
                "tokens_saved": plan.tokens_estimated_saved,
                "identifiers_dropped": plan.identifiers_dropped,
                "version": outcome.session.version,
            },
        )
        host.watchers.publish(session_id, result)
        return result, outcome.session

    def observed(self, result: CompactionResult) -> CompactionResult:
        """Report a finished pass to the observer, and hand it on."""
        self._host.observer.compaction(result)
        return result
