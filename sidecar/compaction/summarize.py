"""Summarize: roll the archived conversation into an LLM summary turn.

A pass runs in two halves so that the engine can hold the session lock for
neither the LLM call nor its wait:

1. ``prepare`` (pure, under the lock): pick the cut and build the summarizer
   input — the previous summary, the events leaving the window, and the first
   ``overlap`` kept events for continuity (never system messages). When there
   is nothing to summarize it returns a finished plan and no call is made.
2. the summarizer call (outside the lock);
3. ``finish`` (pure): turn the answer into a plan that archives the events and
   the previous summary pair and inserts the new pair
   ``[USER shadow prompt, ASSISTANT summary]`` right before the kept window.

A blank answer skips the pass (superseded system messages are still archived);
an exception propagates and nothing is changed. Unless
``identifier_trail_tokens`` is 0, the summary ends with its identifier trail
(``sidecar.compaction.trail``): chosen in ``prepare``, asked of the summarizer
as must-keep, and completed in ``finish`` with what its answer left out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from sidecar.compaction import trail
from sidecar.compaction.boundary import settle_cut
from sidecar.compaction.history import (
    DEFAULT_MAX_INPUT_TOKENS,
    DEFAULT_MAX_TOOL_RESULT_TOKENS,
    FormattedHistory,
    format_history,
)
from sidecar.compaction.loss import judged
from sidecar.compaction.tokens import count_event
from sidecar.compaction.window import (
    Window,
    check_max_dropped_identifiers,
    check_min_saved_tokens,
    plan_for_cut,
)
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, CompactionPlan, Event, Role, SkipReason, new_event_id
from sidecar.summarizer.prompts import DEFAULT_SHADOW_PROMPT, DEFAULT_SYSTEM_PROMPT
from sidecar.summarizer.protocol import Summarizer, SummaryRequest, SummaryResponse, trail_line
from sidecar.tokenizer import TokenEstimator, default_estimator

DEFAULT_MAX_EVENTS_TO_KEEP = 10
DEFAULT_OVERLAP = 2


def default_overlap(max_events_to_keep: int) -> int:
    """An unset ``overlap``: 2, or all the kept events but the last of a smaller window."""
    return max(0, min(DEFAULT_OVERLAP, max_events_to_keep - 1))


DEFAULT_MAX_SUMMARY_TOKENS = 1024

_FIELD = "strategy.summarize"


@dataclass(frozen=True, slots=True)
class SummaryJob:
    """A prepared pass waiting for its summary: everything ``finish`` needs."""

    window: Window
    cut: int
    proposed: int
    previous_summary: tuple[Event, ...]
    request: SummaryRequest
    history: FormattedHistory
    trail: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Summarize:
    """Keeps the last ``max_events_to_keep`` conversation events and summarizes the rest.

    ``overlap`` kept events are shown to the summarizer as context; it must be
    smaller than ``max_events_to_keep``. ``max_summary_tokens`` caps the
    summary, so a rolling summary cannot grow without bound; a pass that would
    archive no more than the shadow prompt and a summary of that cap is
    skipped as ``not_worth_it``, before any LLM call. ``identifier_trail_tokens``
    of those are the closing ``Identifiers:`` line's (None: an eighth; 0: no
    trail): the summarizer is asked for the rest.
    """

    max_events_to_keep: int = DEFAULT_MAX_EVENTS_TO_KEEP
    overlap: int = DEFAULT_OVERLAP
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    shadow_prompt: str = DEFAULT_SHADOW_PROMPT
    model: str = ""
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    max_input_tokens: int = DEFAULT_MAX_INPUT_TOKENS
    max_tool_result_tokens: int = DEFAULT_MAX_TOOL_RESULT_TOKENS
    temperature: float | None = None
    thinking_budget: int | None = None
    identifier_trail_tokens: int | None = None
    boundary: Boundary = Boundary.TURN
    min_saved_tokens: int | None = None
    max_dropped_identifiers: int | None = None
    name = "summarize"

    def __post_init__(self) -> None:
        check_min_saved_tokens(self.min_saved_tokens)
        check_max_dropped_identifiers(self.max_dropped_identifiers)

        def at_least(field: str, value: int, low: int) -> None:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidConfig(f"{_FIELD}.{field}", f"must be at least {low}, got {value!r}")

        at_least("max_events_to_keep", self.max_events_to_keep, 1)
        at_least("overlap", self.overlap, 0)
        at_least("max_summary_tokens", self.max_summary_tokens, 1)
        at_least("max_input_tokens", self.max_input_tokens, 256)
        at_least("max_tool_result_tokens", self.max_tool_result_tokens, 16)
        trail_tokens = self.identifier_trail_tokens
        if trail_tokens is not None:
            at_least("identifier_trail_tokens", trail_tokens, 0)
            if trail_tokens >= self.max_summary_tokens:
                raise InvalidConfig(
                    f"{_FIELD}.identifier_trail_tokens",
                    f"must be smaller than max_summary_tokens ({self.max_summary_tokens}),"
                    f" got {trail_tokens}",
                )
        if self.overlap >= self.max_events_to_keep:
            raise InvalidConfig(
                f"{_FIELD}.overlap",
                f"must be smaller than max_events_to_keep ({self.max_events_to_keep}),"
                f" got {self.overlap}",
            )
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise InvalidConfig(
                f"{_FIELD}.temperature", f"must be between 0 and 2, got {self.temperature}"
            )
        if self.thinking_budget is not None and self.thinking_budget < -1:
            raise InvalidConfig(
                f"{_FIELD}.thinking_budget", f"must be -1, 0 or more, got {self.thinking_budget}"
            )
        if not self.shadow_prompt.strip():
            raise InvalidConfig(f"{_FIELD}.shadow_prompt", "must not be blank")
        if not self.system_prompt.strip():
            raise InvalidConfig(f"{_FIELD}.system_prompt", "must not be blank")

    @property
    def trail_tokens(self) -> int:
        """The identifier trail's share of the summary, in tokens (0: no trail)."""
        if self.identifier_trail_tokens is None:
            return trail.default_trail_tokens(self.max_summary_tokens)
        return self.identifier_trail_tokens

    def shadow_tokens(self, estimator: TokenEstimator) -> int:
        """Tokens of the summary turn's USER half, as the window will count them."""
        return count_event(Event(id="", role=Role.USER, text=self.shadow_prompt), estimator)

    def _worth_it(self, leaving: int, previous: Sequence[Event], estimator: TokenEstimator) -> bool:
        """The cost check, before any LLM call.

        By default a pass must pay at worst: the new pair adds the shadow
        prompt and a summary of ``max_summary_tokens``, and if that is not less
        than what would leave the window, compacting could grow the context
        and a session near its threshold would compact every turn. With
        ``min_saved_tokens`` the new summary is expected to be as long as the
        previous one (ADK's rule: output length is the summarizer's; none yet,
        zero) and the pass must free at least that many tokens.
        """
        shadow = self.shadow_tokens(estimator)
        if self.min_saved_tokens is None:
            return leaving > shadow + self.max_summary_tokens
        expected = min(
            self.max_summary_tokens,
            max((e.token_count for e in previous if e.role is Role.ASSISTANT), default=0),
        )
        return leaving - shadow - expected >= self.min_saved_tokens

    def prepare(
        self, events: Sequence[Event], estimator: TokenEstimator | None = None
    ) -> SummaryJob | CompactionPlan:
        """The summarizer input for this window, or a finished plan when no call is needed."""
        estimator = estimator or default_estimator()
        window = Window.of(events)
        proposed = len(window.real) - self.max_events_to_keep
        cut = settle_cut(window.real, proposed, self.boundary)
        if cut <= 0:
            # No turn boundary, or everything fits: no LLM call.
            return plan_for_cut(window, 0, strategy=self.name, proposed=proposed)
        previous = window.summaries
        leaving = sum(e.token_count for e in window.real[:cut]) + sum(
            e.token_count for e in previous
        )
        if not self._worth_it(leaving, previous, estimator):
            return plan_for_cut(
                window, 0, strategy=self.name, proposed=proposed, skipped=SkipReason.NOT_WORTH_IT
            )
        previous_text = next((e.text for e in reversed(previous) if e.role is Role.ASSISTANT), None)
        overlap = window.real[cut : cut + self.overlap]
        history = format_history(
            previous_summary=previous_text,
            archived=window.real[:cut],
            overlap=overlap,
            estimator=estimator,
            max_input_tokens=self.max_input_tokens,
            max_tool_result_tokens=self.max_tool_result_tokens,
        )
        kept = (*((window.latest_system,) if window.latest_system else ()), *window.real[cut:])
        chosen = trail.choose(
            window.real[:cut], previous_text or "", kept, self.trail_tokens, estimator
        )
        # The trail's share is kept for it: completed, the summary stays within its cap.
        reserved = estimator.count(trail_line(chosen)) if chosen else 0
        request = SummaryRequest(
            system_prompt=self.system_prompt,
            history=history.text,
            model=self.model,
            max_output_tokens=max(1, self.max_summary_tokens - reserved),
            temperature=self.temperature,
            thinking_budget=self.thinking_budget,
            identifiers=chosen,
        )
        return SummaryJob(window, cut, proposed, previous, request, history, chosen)

    def finish(
        self,
        job: SummaryJob,
        response: SummaryResponse,
        estimator: TokenEstimator | None = None,
        latency_ms: float = 0.0,
    ) -> CompactionPlan:
        """The plan for a summary answer. A blank answer archives only superseded systems."""
        estimator = estimator or default_estimator()

        def with_usage(plan: CompactionPlan) -> CompactionPlan:
            return replace(
                plan,
                summary_input_tokens=response.input_tokens,
                summary_output_tokens=response.output_tokens,
                summarizer_latency_ms=latency_ms,
            )

        text = response.text.strip()
        if not text:
            plan = plan_for_cut(
                job.window,
                0,
                strategy=self.name,
                proposed=job.proposed,
                skipped=SkipReason.BLANK_SUMMARY,
            )
            return with_usage(plan)
        text = trail.completed(text, job.trail)
        shadow = Event(id=new_event_id(), role=Role.USER, text=self.shadow_prompt, synthetic=True)
        summary = Event(id=new_event_id(), role=Role.ASSISTANT, text=text, synthetic=True)
        inserts = (
            shadow.evolve(token_count=count_event(shadow, estimator)),
            summary.evolve(token_count=count_event(summary, estimator)),
        )
        plan = plan_for_cut(
            job.window,
            job.cut,
            strategy=self.name,
            proposed=job.proposed,
            inserts=inserts,
            also_archive=job.previous_summary,
        )
        return with_usage(judged(job.window.events, plan, self.max_dropped_identifiers))

    async def plan(
        self,
        events: Sequence[Event],
        summarizer: Summarizer,
        estimator: TokenEstimator | None = None,
    ) -> CompactionPlan:
        """prepare, call the summarizer, finish: one whole pass (for callers without locks)."""
        job = self.prepare(events, estimator)
        if isinstance(job, CompactionPlan):
            return job
        started = time.perf_counter()
        response = await summarizer.summarize(job.request)
        latency_ms = (time.perf_counter() - started) * 1000
        return self.finish(job, response, estimator, latency_ms)
