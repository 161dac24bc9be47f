"""Running a pipeline over a session: its steps in order, each landing on its own.

The rules are ``sidecar.compaction.pipeline``'s: steps run in order, each on
the window the previous one left; after each step the trigger is checked again
on the new counters and the pipeline stops once it no longer fires (a forced
pass runs every step); a superseded step ends it, the steps before it stand.
This module keeps them over the store. On an append the leading window steps
run at once, under the session's lock; a summarize step, and whatever follows
it, goes on in the background, single-flight with the session's other passes.
"""

from __future__ import annotations

import functools

from sidecar.compaction.pipeline import Pipeline, pipeline_result, still_fires
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.triggers import Trigger
from sidecar.engine.host import EngineHost
from sidecar.engine.results import AppendResult
from sidecar.engine.single_flight import SingleFlight
from sidecar.engine.step_runner import StepRunner
from sidecar.model import CompactionResult, Event, Session, SkipReason


class PipelineRunner:
    """Runs pipelines step by step; see the module docstring."""

    def __init__(self, host: EngineHost, steps: StepRunner, flights: SingleFlight) -> None:
        self._host = host
        self._steps = steps
        self._flights = flights

    async def on_append_locked(
        self,
        session_id: str,
        pipeline: Pipeline,
        trigger: Trigger,
        events: tuple[Event, ...],
        session: Session,
        written: int,
    ) -> AppendResult:
        """An append's pipeline: window steps now, a summarize step on in the background.

        Nothing runs while a pass of the session is in flight: a step landing
        during its LLM call would only make that pass superseded.
        """
        if self._flights.busy(session_id):
            return AppendResult(events, session, written=written)
        results: list[CompactionResult] = []
        for index, step in enumerate(pipeline.steps):
            if isinstance(step, Summarize):
                scheduled = self._flights.schedule(
                    session_id,
                    functools.partial(
                        self.run, session_id, pipeline, trigger, force=False, start=index
                    ),
                    step.name,
                )
                compaction = pipeline_result(results) if results else None
                return AppendResult(
                    events, session, compaction, compaction_scheduled=scheduled, written=written
                )
            result, session = await self._steps.window_locked(session_id, step, None)
            results.append(result)
            if result.skipped_reason is SkipReason.SUPERSEDED:
                break
            if not await self._still_fires(session_id, trigger, session):
                break
        return AppendResult(events, session, pipeline_result(results), written=written)

    async def run(
        self,
        session_id: str,
        pipeline: Pipeline,
        trigger: Trigger | None,
        *,
        force: bool,
        start: int = 0,
        expected_version: int | None = None,
        timeout_s: float | None = None,
    ) -> CompactionResult:
        """The steps from ``start`` on, each landing on its own, while the trigger fires.

        Only the first step is held to ``expected_version``: the later ones
        start from the versions the earlier ones left. A superseded step ends
        the pipeline.
        """
        host = self._host
        timeout = host.summary_timeout_s if timeout_s is None else timeout_s
        results: list[CompactionResult] = []
        for step in pipeline.steps[start:]:
            if isinstance(step, Summarize):
                result = await self._steps.summary(session_id, step, timeout)
            else:
                async with host.locks.hold(session_id):
                    result, _ = await self._steps.window_locked(session_id, step, expected_version)
            expected_version = None
            results.append(result)
            if result.skipped_reason is SkipReason.SUPERSEDED:
                break
            if not force and not await self._still_fires(
                session_id, trigger, await host.store.get_session(session_id)
            ):
                break
        return pipeline_result(results)

    async def _still_fires(
        self, session_id: str, trigger: Trigger | None, session: Session
    ) -> bool:
        """``still_fires`` on the session's exact counters: events appended while a summary
        was written may still be pending (``ExactCounts.fires``)."""
        if trigger is None:
            return still_fires(trigger, session.counters)
        fires, _ = await self._host.counts.fires(session_id, trigger, session)
        return fires
