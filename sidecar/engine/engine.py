"""The session engine: serializes work per session and compacts automatically.

- Appends and plan applications on one session run under that session's lock;
  different sessions run in parallel. Locks of idle sessions are dropped.
- After each append the session's trigger is checked from the stored counters
  (O(1)). A window strategy is applied at once, under the same lock, and its
  result returned with the append. A summarizing strategy is scheduled in the
  background, single-flight per session.
- A summarizing pass holds the lock only to read the window and to apply the
  plan, never during the LLM call. The plan is applied with a check that no
  other compaction landed and that what it archives is still active; appends
  made during the call stand. Losing that race makes the pass a no-op.
- A pipeline lands step by step (see ``sidecar.compaction.pipeline``): its
  leading window steps run at once under the lock while the trigger fires; a
  summarize step, and whatever follows it, runs in the background as a
  summarizing strategy does. Each step that changes the window is a
  compaction of its own.
- Every landed compaction is published to the session's watchers.

The engine decides what runs and when; the parts live beside it: the append
path, and appends to many sessions at once, in ``appends``; running a
step and landing its plan in ``step_runner``, pipelines in
``pipeline_runner``, the in-flight registry and background passes in
``single_flight``, other replicas' news in ``replicas``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from sidecar.compaction.calibration import resolved
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.engine.answer_window import window_after, with_window
from sidecar.engine.appends import Appends
from sidecar.engine.exact_counts import COUNT_IN_THREAD_CHARS, ExactCounts, TokenCounting
from sidecar.engine.locks import LockRegistry
from sidecar.engine.observer import EngineObserver, NoObserver
from sidecar.engine.pipeline_runner import PipelineRunner
from sidecar.engine.replicas import ReplicaRelay
from sidecar.engine.restores import Restorer
from sidecar.engine.results import CAUSE, AppendResult, skipped
from sidecar.engine.session_model import SessionModels
from sidecar.engine.sessions import Sessions, parse_policy, policy_json
from sidecar.engine.single_flight import SingleFlight
from sidecar.engine.step_runner import StepRunner
from sidecar.engine.validation import (
    Limits,
    check_stored_session_id,
)
from sidecar.engine.watchers import Watcher, WatcherHub
from sidecar.engine.window_work import WindowWork
from sidecar.errors import VersionConflict
from sidecar.model import (
    Cause,
    CompactionResult,
    Event,
    LabelUpdate,
    ModelUsage,
    Session,
    SkipReason,
)
from sidecar.providers.profiles import ModelProfiles
from sidecar.store.protocol import PlainAppend, Store
from sidecar.summarizer.protocol import Summarizer
from sidecar.tokenizer import TokenEstimator, default_estimator

__all__ = [
    "COUNT_IN_THREAD_CHARS",
    "DEFAULT_SUMMARY_TIMEOUT_S",
    "AppendResult",
    "SessionEngine",
    "TokenCounting",
    "parse_policy",
    "policy_json",
    "skipped",
]

log = logging.getLogger(__name__)

DEFAULT_SUMMARY_TIMEOUT_S = 60.0


class SessionEngine:
    """Runs appends and compactions over a Store; see the module docstring."""

    def __init__(
        self,
        store: Store,
        *,
        summarizer: Summarizer | None = None,
        estimator: TokenEstimator | None = None,
        default_policy: CompactionPolicy | None = None,
        limits: Limits | None = None,
        summary_timeout_s: float = DEFAULT_SUMMARY_TIMEOUT_S,
        observer: EngineObserver | None = None,
        log_event_content: bool = False,
        profiles: ModelProfiles | None = None,
        token_counting: TokenCounting = TokenCounting.WHEN_NEEDED,
    ) -> None:
        """``token_counting`` says when an appended event is counted exactly
        (``sidecar.engine.exact_counts``)."""
        self.store = store
        self.models = SessionModels(profiles)
        self.observer: EngineObserver = observer or NoObserver()
        self.log_event_content = log_event_content
        self.summarizer = summarizer
        self.estimator = estimator or default_estimator()
        self.default_policy = default_policy
        self.limits = limits or Limits()
        self.summary_timeout_s = summary_timeout_s
        self.locks = LockRegistry()
        self.watchers = WatcherHub()
        # The parts read the engine's attributes on each use (see engine.host).
        self._flights = SingleFlight(self)
        self._steps = StepRunner(self)
        self._pipelines = PipelineRunner(self, self._steps, self._flights)
        self._replicas = ReplicaRelay(self)
        self.restores = Restorer(self)
        self.sessions = Sessions(self, self.models, self.limits, default_policy)
        self._counters = ThreadPoolExecutor(
            max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="token-count"
        )
        self.counts = ExactCounts(self, self._counters, token_counting)
        self._appends = Appends(
            self,
            self._steps,
            self._pipelines,
            self.counts,
            schedule_summary=self._schedule_summary,
            default_policy_json=policy_json(default_policy),  # once, not per append
        )
        # Planning over a whole window runs on threads of its own, never on the loop,
        # and never in front of another session's token counting.
        self._window_threads = ThreadPoolExecutor(
            max_workers=min(4, os.cpu_count() or 1), thread_name_prefix="window-work"
        )
        self.window_work = WindowWork(self._window_threads)

    # -- sessions ---------------------------------------------------------

    async def create_session(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | None = None,
        use_default_policy: bool = True,
        labels: dict[str, str] | None = None,
        model: str = "",
    ) -> Session:
        """Create a session (``Sessions.create``)."""
        return await self.sessions.create(
            session_id,
            policy=policy,
            use_default_policy=use_default_policy,
            labels=labels,
            model=model,
        )

    async def update_session(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | None = None,
        set_policy: bool = False,
        labels: dict[str, str] | None = None,
        model: str | None = None,
        expected_version: int | None = None,
    ) -> Session:
        """Update a session's header (``Sessions.update``)."""
        return await self.sessions.update(
            session_id,
            policy=policy,
            set_policy=set_policy,
            labels=labels,
            model=model,
            expected_version=expected_version,
        )

    def check_policy(self, policy: CompactionPolicy | None, field: str = "policy") -> None:
        self.sessions.check_policy(policy, field)

    def policy_of(self, session: Session, *, raw: bool = False) -> CompactionPolicy | None:
        return self.sessions.policy_of(session, raw=raw)

    # -- appends ----------------------------------------------------------

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        *,
        expected_version: int | None = None,
        create_if_missing: bool = False,
        label_updates: Sequence[LabelUpdate] = (),
        usage: ModelUsage | None = None,
    ) -> AppendResult:
        """Store a batch (and its label updates, in one transaction), then compact if the
        session's trigger fires.

        Token counts are computed here, outside the lock; ids are assigned to
        events that came without one. ``usage`` (the provider's report for an
        earlier version's context) calibrates the session in the same
        transaction, or is ignored with a reason in the result.
        """
        return await self._appends.one(
            session_id,
            events,
            expected_version=expected_version,
            create_if_missing=create_if_missing,
            label_updates=label_updates,
            usage=usage,
        )

    async def append_many(self, appends: Sequence[PlainAppend]) -> list[AppendResult | Exception]:
        """Several sessions' appends at once, each as ``append`` without options would make it.

        One append per session. Each gets its own result or its own error, in
        order; one failing stores nothing of itself and stops none of the
        others. Costs less than an ``append`` each: see ``sidecar.engine.appends``.
        """
        return await self._appends.many(appends)

    # -- compaction -------------------------------------------------------

    async def compact(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | None = None,
        force: bool = False,
        expected_version: int | None = None,
        deadline_s: float | None = None,
    ) -> CompactionResult:
        """Run one compaction pass now and wait for its result.

        Without ``force`` the trigger decides. ``policy`` overrides the
        session's for this pass. A summarizing pass already in flight for the
        session is waited for first. ``deadline_s`` (the caller's remaining
        time) bounds the summarizer call. The result carries the active window
        whether or not the pass changed anything (a skipped pass's is read
        after it), as every strategy's contract says, while it is small
        (``sidecar.engine.answer_window``).
        """
        result = await self._compact(
            session_id,
            policy=policy,
            force=force,
            expected_version=expected_version,
            deadline_s=deadline_s,
        )
        if result.compacted or result.active_events or result.active_events_omitted:
            return result  # a window step's skip has its window already
        session = await self.store.get_session(session_id)
        window = await window_after(self.store, session_id, session)
        return replace(with_window(result, window), version=session.version)

    async def _compact(
        self,
        session_id: str,
        *,
        policy: CompactionPolicy | None,
        force: bool,
        expected_version: int | None,
        deadline_s: float | None,
    ) -> CompactionResult:
        check_stored_session_id(session_id)
        self.check_policy(policy)
        CAUSE.set(Cause.FORCE if force else Cause.TRIGGER)
        running = self._flights.running(session_id)
        if running is not None:
            await asyncio.wait({running})
        session = await self.store.get_session(session_id)
        if expected_version is not None and session.version != expected_version:
            raise VersionConflict(
                f"session {session_id!r} is at version {session.version}, not {expected_version}",
                current_version=session.version,
            )
        if policy is not None:
            self.models.check_policy(policy, session.model, "policy", "model")
            policy = resolved(policy, self.models.scale(session))
        else:
            policy = self.policy_of(session)
        if policy is None:
            return self._observed(skipped("none", SkipReason.NO_POLICY, session.version))
        if not force and (
            policy.trigger is None
            or session.auto_compaction_paused
            or not (await self.counts.fires(session_id, policy.trigger, session))[0]
        ):
            return self._observed(
                skipped(policy.strategy.name, SkipReason.TRIGGER_NOT_FIRED, session.version)
            )
        timeout = self.summary_timeout_s
        if deadline_s is not None:
            timeout = max(0.0, min(timeout, deadline_s))
        strategy = policy.strategy
        if isinstance(strategy, Pipeline | Summarize):
            # Registered as the session's in-flight pass, so a trigger firing
            # meanwhile does not start a second LLM call (or a step of its own).
            if isinstance(strategy, Pipeline):
                work = self._pipelines.run(
                    session_id,
                    strategy,
                    policy.trigger,
                    force=force,
                    expected_version=expected_version,
                    timeout_s=timeout,
                )
                task = self._flights.start(session_id, work)
            else:
                task = self._start_summary(
                    session_id, strategy, background=False, timeout_s=timeout
                )
            try:
                return await task
            except Exception as exc:  # the caller gets the error; metrics get a FAILED pass
                self._observed(
                    skipped(strategy.name, SkipReason.FAILED, 0, error=type(exc).__name__)
                )
                raise
        async with self.locks.hold(session_id):
            result, _ = await self._steps.window_locked(
                session_id, strategy, expected_version, with_window=True
            )
            return result

    def _schedule_summary(self, session_id: str, strategy: Summarize) -> bool:
        """Start a background summarizing pass unless one is in flight (single-flight)."""
        if self._flights.busy(session_id):
            return False
        self._start_summary(session_id, strategy, background=True)
        return True

    def _start_summary(
        self,
        session_id: str,
        strategy: Summarize,
        *,
        background: bool,
        timeout_s: float | None = None,
    ) -> asyncio.Task[CompactionResult]:
        timeout = self.summary_timeout_s if timeout_s is None else timeout_s
        work = self._steps.summary(session_id, strategy, timeout)
        if background:
            return self._flights.start(
                session_id, self._flights.in_background(session_id, work, strategy.name)
            )
        return self._flights.start(session_id, work)

    def _observed(self, result: CompactionResult) -> CompactionResult:
        return self._steps.observed(result)

    # -- reads ------------------------------------------------------------

    async def context(self, session_id: str) -> tuple[Session, tuple[Event, ...]]:
        """The active window to send to the model, in log order."""
        check_stored_session_id(session_id)
        session, window = await self.store.active_window(session_id)
        self.models.note(session)
        return session, window

    def watch(self, session_id: str) -> Watcher:
        check_stored_session_id(session_id)
        watcher = self.watchers.subscribe(session_id)
        self._replicas.watching(session_id)
        return watcher

    def follow_other_replicas(self) -> None:
        """The store is shared: keep what ``catch_up`` needs for watched sessions."""
        self._replicas.follow()

    async def catch_up(self) -> None:
        """Publish the compactions other replicas landed while their news could not arrive.

        Called by a shared store once its notice connection is back after an
        outage, before it passes on the notices that arrive meanwhile. For
        each watched session whose starting version is known, the compactions
        landed after it are published oldest first; the hub drops any its
        watchers were told already.
        """
        await self._replicas.catch_up()

    def relay_compaction(self, session_id: str, compaction_id: str) -> None:
        """Tell this replica's watchers of a compaction another replica landed.

        Called by a shared store as the news arrives; costs nothing for
        sessions nobody here watches.
        """
        self._replicas.relay(session_id, compaction_id)

    def in_flight(self) -> int:
        return len(self._flights)

    async def wait_idle(self) -> None:
        """Wait until no summarizing pass is in flight."""
        await self._flights.wait_idle()

    # -- lifecycle --------------------------------------------------------

    async def close(self, grace_s: float = 5.0, *, threads: bool = True) -> None:
        """Let in-flight summaries finish within ``grace_s``, then cancel the rest.

        A cancelled pass has written nothing: plans are applied in one
        transaction after the summary arrives. ``threads=False`` leaves the
        counting and planning threads to ``close_threads``: a server draining
        its calls meanwhile still counts and plans for them (an append that
        landed must not fail in its pass because the threads went first).
        """
        self._replicas.close()
        await self.counts.close()
        await self._flights.close(grace_s)
        if threads:
            self.close_threads()

    def close_threads(self) -> None:
        """Stop the counting and planning threads (once nothing will hand them work)."""
        self._counters.shutdown(wait=False)
        self._window_threads.shutdown(wait=False)
