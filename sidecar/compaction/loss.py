"""A pass's loss report: the identifiers of what it archived or cleared that the window lost.

Every plan is judged against the window it was made from: the identifiers
(``sidecar.compaction.identifiers``) of the events it archives and of the
originals it clears, ranked, are looked for in the window it leaves — its
events as the model reads them, summaries and placeholders included. Those
found nowhere are dropped: the agent can reach them only by a search. The
report is their count and the best ``MAX_REPORTED`` of them. A strategy's
``max_dropped_identifiers`` refuses a pass that would drop more
(``would_drop_identifiers``). Bounded as the identifiers are: one pass reads
at most ``MAX_SPAN_CHARS`` of what leaves and ``MAX_WINDOW_CHARS`` of what
stays, and at most ``MAX_IDENTIFIERS`` are counted. So a plan made on the
window's head is judged as on the whole window once the head's kept events
alone hold all the judge reads (``reads_end_within``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sidecar.compaction.formatting import format_event
from sidecar.compaction.identifiers import (
    MAX_SPAN_CHARS,
    MAX_WINDOW_CHARS,
    Presence,
    action_chars,
    of_span,
)
from sidecar.compaction.window import apply_plan
from sidecar.model import CompactionPlan, Event, SkipReason

MAX_REPORTED = 16
"""How many dropped identifiers a report names."""


def judged(
    window: Sequence[Event], plan: CompactionPlan, max_dropped: int | None = None
) -> CompactionPlan:
    """``plan`` with its loss report; skipped as ``would_drop_identifiers`` past ``max_dropped``.

    An empty plan drops nothing and is returned as it is.
    """
    if plan.is_empty:
        return plan
    leaving = set(plan.archive_ids) | {e.id for e in plan.clears}
    gone = [e for e in window if e.id in leaving]  # the originals, before clearing
    after = apply_plan(window, plan).active_events
    ranked = of_span(gone, later=after)
    held = Presence(after)
    dropped = [i.text for i in ranked if not held.holds(i.text)]
    report = replace(
        plan, identifiers_dropped=len(dropped), dropped_identifiers=tuple(dropped[:MAX_REPORTED])
    )
    if max_dropped is not None and len(dropped) > max_dropped:
        return CompactionPlan(
            strategy=plan.strategy,
            skipped_reason=SkipReason.WOULD_DROP_IDENTIFIERS,
            identifiers_dropped=report.identifiers_dropped,
            dropped_identifiers=report.dropped_identifiers,
            summary_input_tokens=plan.summary_input_tokens,
            summary_output_tokens=plan.summary_output_tokens,
            summarizer_latency_ms=plan.summarizer_latency_ms,
        )
    return report


def reads_end_within(kept: Sequence[Event]) -> bool:
    """Whether judging a plan reads nothing of the window past ``kept``.

    ``kept`` are the events the plan leaves right after its cut, in log
    order. ``Presence`` reads the window left from its start, ``MAX_WINDOW_CHARS``
    in all; the later actions are read from its start too, ``MAX_SPAN_CHARS``
    at most: both budgets are spent before ``kept`` ends.
    """
    shown = actions = 0
    for event in kept:
        shown += len(format_event(event)) + 1
        actions += action_chars(event)
        if shown > MAX_WINDOW_CHARS and actions >= MAX_SPAN_CHARS:
            return True
    return False
