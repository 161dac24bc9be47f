"""Pipelines: strategies run in order, cheapest first, while the trigger still fires.

Steps run in order, each on the window the previous one left. After each
step the session's trigger is checked again on the new counters and the
pipeline stops as soon as it no longer fires; a forced pass runs every step.
Typical: ``clear_tool_results`` first, ``summarize`` only if still over. A
clearing moves nothing, so it does not restart an interval trigger's count:
with ``interval_turns`` the summarize step after it still runs. The summarize
step summarizes the window the clearing left (placeholders, not the cleared
originals, which stay in the log and searchable).

A pipeline lands step by step, not atomically: each step that changes the
window is a compaction of its own (one version-checked write, its own
compaction id and version, its step's strategy name, published to watchers),
so the version rules are exactly those of its steps and a summarize step keeps
the lock free during its LLM call. A step that loses its race to another
compaction (``superseded``) ends the pipeline; the steps before it stand.

``run_in_memory`` is the reference the engine's durable loop follows, for
window steps (a summarize step needs the engine's summarizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.loss import MAX_REPORTED, judged
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.triggers import Trigger
from sidecar.compaction.turn_window import TurnWindow
from sidecar.compaction.window import apply_plan
from sidecar.errors import InvalidConfig
from sidecar.model import CompactionPlan, CompactionResult, Event, SessionCounters
from sidecar.tokenizer import TokenEstimator

WindowStep = SlidingWindow | TurnWindow | TokenBudget | ClearToolResults
Step = WindowStep | Summarize

_FIELD = "strategy.pipeline.steps"
MAX_STEPS = 8
"""How many steps a pipeline may hold: a pass may plan every one of them, on every append."""


def plan_step(
    step: WindowStep, events: Sequence[Event], estimator: TokenEstimator | None = None
) -> CompactionPlan:
    """A window step's plan, with its loss report; clearing counts its placeholders
    with ``estimator``. A plan dropping more than the step's
    ``max_dropped_identifiers`` is skipped (``would_drop_identifiers``)."""
    return judged(events, _planned(step, events, estimator), step.max_dropped_identifiers)


def _planned(
    step: WindowStep, events: Sequence[Event], estimator: TokenEstimator | None
) -> CompactionPlan:
    if isinstance(step, ClearToolResults):
        return step.plan(events, estimator)
    return step.plan(events)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Strategies run in order while the trigger fires (see the module docstring).

    At least one step, at most ``MAX_STEPS``; no step is itself a pipeline.
    """

    steps: tuple[Step, ...]
    name = "pipeline"

    def __post_init__(self) -> None:
        if not self.steps:
            raise InvalidConfig(_FIELD, "must hold at least one step")
        if len(self.steps) > MAX_STEPS:
            raise InvalidConfig(_FIELD, f"holds {len(self.steps)} steps, the most is {MAX_STEPS}")
        for index, step in enumerate(self.steps):
            if isinstance(step, Pipeline):
                raise InvalidConfig(f"{_FIELD}[{index}].pipeline", "pipelines do not nest")
        object.__setattr__(self, "steps", tuple(self.steps))

    def run_in_memory(
        self,
        events: Sequence[Event],
        trigger: Trigger | None,
        *,
        force: bool = False,
        estimator: TokenEstimator | None = None,
    ) -> list[CompactionResult]:
        """The step results of one pass over ``events``, applied in memory, in order.

        Stops once the trigger no longer fires on the window a step left
        (unless ``force``). Steps that change nothing are in the list too.
        """
        results: list[CompactionResult] = []
        window = tuple(events)
        counters = SessionCounters.of_window(window)
        for step in self.steps:
            if isinstance(step, Summarize):
                raise TypeError("a summarize step needs the engine's summarizer")
            result = apply_plan(window, plan_step(step, window, estimator))
            results.append(result)
            if result.compacted:  # as a store does: only a landed step rewrites the counters
                window = result.active_events
                counters = (
                    SessionCounters.after_compaction(window)
                    if result.archived_events  # window steps archive; a clearing moves nothing
                    else counters.after_clearing(window)
                )
            if not force and not still_fires(trigger, counters):
                break
        return results


def still_fires(trigger: Trigger | None, counters: SessionCounters) -> bool:
    """Whether a pipeline goes on to its next step (a forced pass does regardless)."""
    return trigger is not None and trigger.fires(counters)


def pipeline_result(results: Sequence[CompactionResult]) -> CompactionResult:
    """One answer for a pipeline's steps (at least one), named ``pipeline``.

    Landed steps: the last one's window, version and compaction id, every
    step's archived events and still-active cleared ids, and the tokens they
    saved together. None landed: the last step's skip.
    """
    landed = [r for r in results if r.compacted]
    if not landed:
        return replace(results[-1], strategy=Pipeline.name)
    archived = tuple(e for r in landed for e in r.archived_events)
    gone = {e.id for e in archived}
    cleared = dict.fromkeys(i for r in landed for i in r.cleared_ids if i not in gone)
    return replace(
        landed[-1],
        strategy=Pipeline.name,
        archived_events=archived,
        cleared_ids=tuple(cleared),
        tokens_estimated_saved=sum(r.tokens_estimated_saved for r in landed),
        skipped_reason=None,
        identifiers_dropped=sum(r.identifiers_dropped for r in landed),
        dropped_identifiers=tuple(dict.fromkeys(i for r in landed for i in r.dropped_identifiers))[
            :MAX_REPORTED
        ],
    )
