"""Planning a pass from the window's head: what changes, not the whole window.

A cut strategy archives from the oldest end, so on a window of 200,000 events
a pass that archives two of them should not read the other 199,998. The
store hands over the window's head (its first events in log order) with what
the rest of the window adds up to, counted or looked up by index:

- the session's counters: its real events, turns and conversation tokens;
- the pinned events past the head (system messages and summaries), which
  every pass partitions off and a superseded system message leaves with;
- of the head's tool calls, which ones a result past the head answers, and
  which ones past the head are called again;
- how many tool calls the whole window holds.

``plan_from_head`` makes the plan that ``plan_step`` would make on the whole
window, or says how much more of it it needs (``Wanted``). It plans on the
head only where the outcome is provably the same:

- sliding_window, turn_window and token_budget: the proposed cut comes from
  the counters (or the head's turn starts and token counts); it settles
  inside the head (a turn start found there; under TOOL_PAIR, a newest turn
  that starts past the head); a result past the head pulls it back as it
  would on the whole window (``boundary.settle_head_cut``); and the loss
  report reads nothing past the head's kept events
  (``loss.reads_end_within``), else the head grows;
- clear_tool_results with no call older than the ``keep_tool_uses`` newest
  (and no reasoning to clear): nothing to clear, known from the call count.

Everything else (a clearing with calls to clear, a token budget with nothing
left for the conversation, a call id used twice across the head's end) asks
for the whole window, and is planned
on it as before: correct always, fast where it counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.compaction.boundary import settle_head_cut
from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.loss import judged, reads_end_within
from sidecar.compaction.pipeline import WindowStep, plan_step
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.turn_window import TurnWindow
from sidecar.compaction.window import Window, plan_for_cut
from sidecar.model import Boundary, CompactionPlan, Event, Role, SkipReason
from sidecar.tokenizer import TokenEstimator

HEAD_EVENTS = 2_048
"""The head a pass reads first, past the events its proposal already says it archives."""


@dataclass(frozen=True, slots=True)
class WindowHead:
    """The active window's first events, and what the rest of it adds up to.

    ``complete``: the head is the whole window (the other fields then say
    nothing ``events`` does not). ``real_events``, ``turns`` and
    ``conversation_tokens`` count the whole window: its real events, its turn
    starts and their tokens. ``pinned_after`` are the system messages and
    summaries past the head, in log order. ``answered_after``: the head's
    call ids a real event past the head answers; ``called_after``: the head's
    call ids a real event past the head calls again. ``tool_calls``: the
    calls of the whole window's real events.
    """

    events: tuple[Event, ...]
    complete: bool
    real_events: int
    turns: int
    conversation_tokens: int
    pinned_after: tuple[Event, ...] = ()
    answered_after: frozenset[str] = frozenset()
    called_after: frozenset[str] = frozenset()
    tool_calls: int = 0


@dataclass(frozen=True, slots=True)
class Wanted:
    """More of the window is needed: a head of ``events`` events, or all of it (None)."""

    events: int | None


def first_head(step: WindowStep, real_events: int) -> int | None:
    """How big a head ``step`` reads first on a window of ``real_events``; None: all of it."""
    if isinstance(step, ClearToolResults):
        return 0 if step.keep_reasoning_turns is None else None
    archives = real_events - step.max_events if isinstance(step, SlidingWindow) else 0
    return max(0, archives) + HEAD_EVENTS


def plan_from_head(
    step: WindowStep, head: WindowHead, estimator: TokenEstimator | None = None
) -> CompactionPlan | Wanted:
    """``plan_step(step, window)`` made from ``head``, or how much more it needs."""
    if head.complete:
        return plan_step(step, head.events, estimator)
    if isinstance(step, ClearToolResults):
        if step.keep_reasoning_turns is None and head.tool_calls <= step.keep_tool_uses:
            return CompactionPlan(strategy=step.name, skipped_reason=SkipReason.WITHIN_LIMIT)
        return Wanted(None)
    more = Wanted(2 * len(head.events))
    window = _window(head)
    real = window.real
    beyond = _earliest_answered_after(real, head)
    if beyond is _TWICE:
        return Wanted(None)
    keep_from = 0
    if isinstance(step, SlidingWindow):
        proposed = head.real_events - step.max_events
    elif isinstance(step, TurnWindow):
        starts = [i for i, e in enumerate(real) if e.is_turn_start]
        proposed = 0
        if head.turns > step.max_turns:
            at = head.turns - step.max_turns
            if at >= len(starts):
                return more
            proposed, keep_from = starts[at], starts[0]
    else:
        remaining = step.max_tokens - window.pinned_tokens
        if remaining <= 0:
            return Wanted(None)  # everything is proposed: the newest turn start decides
        found = _budget_proposal(real, head.conversation_tokens, remaining)
        if found is None:
            return more
        proposed = found
    cut = settle_head_cut(
        real,
        proposed,
        Boundary.TURN if isinstance(step, TurnWindow) else step.boundary,  # as turn_window's own
        beyond=beyond if isinstance(beyond, int) else None,
        real_events=head.real_events,
        turns=head.turns,
    )
    if cut is None:
        return more
    plan = plan_for_cut(
        window,
        max(cut, keep_from),
        strategy=step.name,
        proposed=proposed,
        keep_from=keep_from,
        min_saved_tokens=step.min_saved_tokens,
    )
    if plan.is_empty:
        return plan
    if not reads_end_within(real[max(cut, keep_from) :]):
        return more
    return judged(window.events, plan, step.max_dropped_identifiers)


def _window(head: WindowHead) -> Window:
    """The partition ``Window.of`` makes of the whole window, from the head."""
    events = head.events + head.pinned_after
    systems = [e for e in events if e.role is Role.SYSTEM and not e.synthetic]
    return Window(
        events=events,
        real=tuple(e for e in head.events if e.is_real),
        latest_system=systems[-1] if systems else None,
        superseded_systems=tuple(systems[:-1]),
        summaries=tuple(e for e in events if e.synthetic),
    )


_TWICE = object()
"""A call id of the head called again past it: which call its result answers needs the window."""


def _earliest_answered_after(real: tuple[Event, ...], head: WindowHead) -> int | object | None:
    """The earliest index of ``real`` whose call a result past the head answers.

    A result answers the newest call of its id before it (``boundary``): the
    head's last call of that id, unless the id is called again past the head,
    where it may be answered instead (``_TWICE``: the window decides).
    """
    if not head.answered_after:
        return None
    if head.answered_after & head.called_after:
        return _TWICE
    newest: dict[str, int] = {}
    for index, event in enumerate(real):
        for call in event.tool_calls:
            if call.id in head.answered_after:
                newest[call.id] = index
    return min(newest.values(), default=None)


def _budget_proposal(real: tuple[Event, ...], tokens: int, remaining: int) -> int | None:
    """``budget_cut``'s proposal from the head of ``real`` (whose whole window holds
    ``tokens``): the oldest event of the newest suffix that fits. Suffix sums only
    fall, so it is the first index whose suffix fits; None when past the head."""
    suffix = tokens
    for index, event in enumerate(real):
        if suffix <= remaining:
            return index
        suffix -= event.token_count
    return None
