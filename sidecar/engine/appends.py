"""Appends: counting, storing under the session's lock, and the compaction they set off.

An append is counted outside the lock (estimated, or exactly: see
``exact_counts``), stored under it, and then the session's trigger is checked
from the stored counters (O(1), exact counts landed first only when the
bounds cannot settle it): a window strategy runs at once under the same lock
and its result comes back with the append; a summarizing strategy is
scheduled in the background; a pipeline lands its leading window steps at
once (see ``pipeline_runner``).

``many`` is the same for several sessions at once, for a stream's batch of
appends to many sessions: one count of all their text, one store call, and
no task per session. Only sessions nobody holds or waits for are taken that
way, so an append never waits behind another session's compaction; the
others go through ``one`` side by side.

The path is handed what it needs (the engine as an ``AppendHost``, its step
and pipeline runners, its counting, and how to schedule a summary); it does
not import the engine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import cast

from sidecar.compaction.formatting import format_event
from sidecar.compaction.pipeline import Pipeline
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import Trigger
from sidecar.engine.exact_counts import ExactCounts
from sidecar.engine.host import AppendHost
from sidecar.engine.pipeline_runner import PipelineRunner
from sidecar.engine.results import CAUSE, AppendResult
from sidecar.engine.session_model import NOT_THIS_SESSION
from sidecar.engine.step_runner import StepRunner
from sidecar.engine.validation import check_events, check_label_updates, check_stored_session_id
from sidecar.model import Cause, Event, LabelUpdate, ModelUsage, Session
from sidecar.store.protocol import AppendOutcome, PlainAppend

# The engine's logger: log pipelines filter on its name (see sidecar.server.logs).
log = logging.getLogger("sidecar.engine.engine")

_Check = tuple[CompactionPolicy, Trigger]
"""A stored append whose trigger is to be checked: its policy, and that trigger."""


class Appends:
    """The engine's append path; see the module docstring."""

    def __init__(
        self,
        engine: AppendHost,
        steps: StepRunner,
        pipelines: PipelineRunner,
        counts: ExactCounts,
        *,
        schedule_summary: Callable[[str, Summarize], bool],
        default_policy_json: str | None,
    ) -> None:
        """``schedule_summary`` starts a background summarizing pass unless one is in
        flight, and says whether it did; ``default_policy_json`` is stored with each
        session an append creates."""
        self._engine = engine
        self._steps = steps
        self._pipelines = pipelines
        self._counts = counts
        self._schedule_summary = schedule_summary
        self._default_policy_json = default_policy_json

    async def one(
        self,
        session_id: str,
        events: Sequence[Event],
        *,
        expected_version: int | None,
        create_if_missing: bool,
        label_updates: Sequence[LabelUpdate],
        usage: ModelUsage | None,
    ) -> AppendResult:
        """``SessionEngine.append``."""
        engine = self._engine
        check_stored_session_id(session_id)
        check_events(events, engine.limits)
        check_label_updates(session_id, label_updates, engine.limits)
        report, ignored = await self._counts.usage_report(session_id, usage)
        (counted,) = await self._counts.counted([events])
        CAUSE.set(Cause.TRIGGER)  # any pass this append sets off (a copy of the caller's context)
        async with engine.locks.hold(session_id):
            outcome = await engine.store.append(
                session_id,
                counted,
                expected_version=expected_version,
                create_if_missing=create_if_missing,
                policy_json=self._default_policy_json,
                label_updates=label_updates,
                max_labels=engine.limits.max_labels,
                usage=report,
            )
            result = await self._landed(session_id, outcome)
        engine.models.note(result.session)
        if usage is not None and result.written == 0:
            ignored = ignored or "the append stored nothing new (a retry): not counted again"
        elif report is not None and not outcome.usage_counted:
            ignored = NOT_THIS_SESSION.format(version=report.context_version)
        if ignored:
            return replace(result, usage_ignored_reason=ignored)
        return result

    async def many(self, appends: Sequence[PlainAppend]) -> list[AppendResult | Exception]:
        """``SessionEngine.append_many``."""
        engine = self._engine
        if len({append.session_id for append in appends}) != len(appends):
            raise ValueError("append_many takes one append per session")
        results: list[AppendResult | Exception | None] = [None] * len(appends)
        checked: list[int] = []
        for index, append in enumerate(appends):
            try:
                check_stored_session_id(append.session_id)
                check_events(append.events, engine.limits)
            except Exception as exc:
                results[index] = exc
            else:
                checked.append(index)
        try:
            counted = await self._counts.counted([appends[index].events for index in checked])
        except Exception as exc:  # the counter itself failed (shut down): nothing was stored
            for index in checked:
                results[index] = exc
            return cast(list[AppendResult | Exception], results)
        CAUSE.set(Cause.TRIGGER)
        free: list[tuple[int, PlainAppend]] = []
        busy: list[tuple[int, tuple[Event, ...]]] = []
        for index, events in zip(checked, counted, strict=True):
            if await engine.locks.claim(appends[index].session_id):
                free.append((index, replace(appends[index], events=events)))
            else:
                busy.append((index, events))
        others = [
            asyncio.ensure_future(self._alone(appends[index], events)) for index, events in busy
        ]
        try:
            await self._many_claimed(free, results)
        except BaseException:
            # Cancelled: the sessions still waiting for their locks append nothing, as
            # their own cancelled appends would not.
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            raise
        settled = await asyncio.gather(*others, return_exceptions=True)
        for (index, _), result in zip(busy, settled, strict=True):
            if not isinstance(result, AppendResult | Exception):
                raise result  # a cancellation, not an answer
            results[index] = result
        return cast(list[AppendResult | Exception], results)  # each has its answer now

    async def _many_claimed(
        self, claimed: list[tuple[int, PlainAppend]], results: list[AppendResult | Exception | None]
    ) -> None:
        """Store the appends whose locks were claimed, decide each one's trigger, and release
        each lock once its answer is known.

        The triggers are decided together (``ExactCounts.fires_many``): the
        sessions whose bounds straddle a threshold have their counts landed in
        the same rounds, so none waits behind another's landing.
        """
        engine = self._engine
        unreleased = {append.session_id for _, append in claimed}
        passes: list[tuple[int, str, CompactionPolicy, AppendOutcome]] = []

        def release(session_id: str) -> None:
            unreleased.discard(session_id)
            engine.locks.release(session_id)

        def answer(index: int, session_id: str, result: AppendResult | Exception) -> None:
            release(session_id)
            if isinstance(result, AppendResult):
                engine.models.note(result.session)
            results[index] = result

        try:
            outcomes = await self._stored([append for _, append in claimed])
            checks: list[tuple[int, str, AppendOutcome, _Check]] = []
            for (index, append), outcome in zip(claimed, outcomes, strict=True):
                session_id = append.session_id
                if isinstance(outcome, Exception):
                    answer(index, session_id, outcome)
                    continue
                try:
                    check = self._check(session_id, outcome)
                except Exception as exc:  # this session's alone, as its own append's would be
                    answer(index, session_id, exc)
                    continue
                if isinstance(check, AppendResult):
                    answer(index, session_id, check)
                else:
                    checks.append((index, session_id, outcome, check))
            decisions = await self._counts.fires_many(
                [
                    (session_id, check[1], outcome.session)
                    for _, session_id, outcome, check in checks
                ]
            )
            for (index, session_id, outcome, (policy, _)), decision in zip(
                checks, decisions, strict=True
            ):
                try:
                    if isinstance(decision, Exception):
                        raise decision
                    noted = self._decided(session_id, outcome, policy, *decision)
                except Exception as exc:
                    answer(index, session_id, exc)
                    continue
                if isinstance(noted, CompactionPolicy):  # a window pass runs now, under the lock
                    passes.append((index, session_id, noted, outcome))
                else:
                    answer(index, session_id, noted)
            for index, session_id, policy, outcome in passes:
                try:
                    result: AppendResult | Exception = await self._pass_locked(
                        session_id, policy, outcome
                    )
                except Exception as exc:
                    result = exc
                answer(index, session_id, result)
        finally:
            for session_id in list(unreleased):
                release(session_id)

    async def _stored(self, appends: list[PlainAppend]) -> list[AppendOutcome | Exception]:
        """The store's outcome of each; the store's error for each when the call failed."""
        if not appends:
            return []
        engine = self._engine
        try:
            return await engine.store.append_many(appends, policy_json=self._default_policy_json)
        except Exception as exc:  # the store as a whole (closed, unreachable): each failed
            return [exc] * len(appends)

    async def _alone(self, append: PlainAppend, events: tuple[Event, ...]) -> AppendResult:
        engine = self._engine
        async with engine.locks.hold(append.session_id):
            outcome = await engine.store.append(
                append.session_id,
                events,
                create_if_missing=append.create_if_missing,
                policy_json=self._default_policy_json,
                max_labels=engine.limits.max_labels,
            )
            result = await self._landed(append.session_id, outcome)
        engine.models.note(result.session)
        return result

    async def _landed(self, session_id: str, outcome: AppendOutcome) -> AppendResult:
        """The append's result, after the pass it sets off (the caller holds the lock)."""
        noted = await self._noted(session_id, outcome)
        if isinstance(noted, AppendResult):
            return noted
        return await self._pass_locked(session_id, noted, outcome)

    async def _noted(
        self, session_id: str, outcome: AppendOutcome
    ) -> AppendResult | CompactionPolicy:
        """The result of a stored append, or the policy whose window pass runs now.

        The trigger is decided as exact counting would decide it: from the
        bounds of the events still pending when they settle it, else once their
        exact counts have landed (``ExactCounts.fires``).
        """
        check = self._check(session_id, outcome)
        if isinstance(check, AppendResult):
            return check
        policy, trigger = check
        fires, session = await self._counts.fires(session_id, trigger, outcome.session)
        return self._decided(session_id, outcome, policy, fires, session)

    def _check(self, session_id: str, outcome: AppendOutcome) -> AppendResult | _Check:
        """A stored append, told to whom it concerns: its result when no trigger is to be
        checked, else the policy and the trigger that is."""
        engine = self._engine
        session = outcome.session
        written = outcome.written
        if written:
            engine.observer.appended(written)
            self._counts.appended(session)
            if log.isEnabledFor(logging.DEBUG):
                self._log(session_id, outcome.events, session.version)
        policy = engine.policy_of(session)
        if (
            written == 0
            or policy is None
            or policy.trigger is None
            or session.auto_compaction_paused  # a restore paused it
        ):
            return AppendResult(outcome.events, session, written=written)
        return policy, policy.trigger

    def _decided(
        self,
        session_id: str,
        outcome: AppendOutcome,
        policy: CompactionPolicy,
        fires: bool,
        session: Session,
    ) -> AppendResult | CompactionPolicy:
        """What a trigger decided on ``session`` sets off: nothing, a summary in the
        background, or (the policy returned) a window pass now."""
        written = outcome.written
        if not fires:
            return AppendResult(outcome.events, session, written=written)
        if isinstance(policy.strategy, Summarize):
            scheduled = self._schedule_summary(session_id, policy.strategy)
            return AppendResult(
                outcome.events, session, compaction_scheduled=scheduled, written=written
            )
        return policy

    async def _pass_locked(
        self, session_id: str, policy: CompactionPolicy, outcome: AppendOutcome
    ) -> AppendResult:
        """A window strategy's pass, or a pipeline's leading window steps, now."""
        # _noted returns a policy only when its trigger fired, for a strategy that runs now
        assert policy.trigger is not None
        assert not isinstance(policy.strategy, Summarize)
        if isinstance(policy.strategy, Pipeline):
            return await self._pipelines.on_append_locked(
                session_id,
                policy.strategy,
                policy.trigger,
                outcome.events,
                outcome.session,
                outcome.written,
            )
        result, after = await self._steps.window_locked(session_id, policy.strategy, None)
        return AppendResult(outcome.events, after, compaction=result, written=outcome.written)

    def _log(self, session_id: str, events: Sequence[Event], version: int) -> None:
        """A DEBUG record per append: ids and sizes; the content only if asked for."""
        fields: dict[str, object] = {
            "session_id": session_id,
            "version": version,
            "event_ids": [e.id for e in events],
            "tokens": sum(e.token_count for e in events),
        }
        if self._engine.log_event_content:
            fields["content"] = [format_event(e) for e in events]
        log.debug("appended %d events to %s", len(events), session_id, extra=fields)
