"""Invariants over random well-formed sessions, for every strategy and both boundaries.

Nothing lost or duplicated, log order kept, newest turn kept, no tool result
kept without its request, the latest system message kept, and a second pass
right after the first archives nothing more.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.turn_window import TurnWindow
from sidecar.compaction.window import apply_plan
from sidecar.model import (
    Boundary,
    CompactionPlan,
    CompactionResult,
    Event,
    Role,
    ToolCall,
    ToolResult,
)
from tests.compaction.fakes import FakeSummarizer


@st.composite
def sessions(draw: st.DrawFn) -> list[Event]:
    counter = itertools.count()

    def new_id(prefix: str) -> str:
        return f"{prefix}{next(counter)}"

    def tokens() -> int:
        return draw(st.integers(min_value=1, max_value=120))

    events: list[Event] = []

    def maybe_system() -> None:
        if draw(st.integers(0, 9)) == 0:
            events.append(
                Event(id=new_id("s"), role=Role.SYSTEM, text="rules", token_count=tokens())
            )

    maybe_system()
    for _ in range(draw(st.integers(0, 2))):  # preamble
        events.append(
            Event(id=new_id("p"), role=Role.ASSISTANT, text="hello", token_count=tokens())
        )
    if draw(st.booleans()):  # a prior summary pair
        events.append(
            Event(
                id=new_id("su"),
                role=Role.USER,
                text="Summarize",
                synthetic=True,
                token_count=tokens(),
            )
        )
        events.append(
            Event(
                id=new_id("sa"),
                role=Role.ASSISTANT,
                text="so far",
                synthetic=True,
                token_count=tokens(),
            )
        )
    turns = draw(st.integers(0, 12))
    for turn in range(turns):
        events.append(Event(id=new_id("u"), role=Role.USER, text="ask", token_count=tokens()))
        for _ in range(draw(st.integers(0, 4))):
            maybe_system()
            n_calls = draw(st.integers(0, 3))
            if n_calls == 0:
                events.append(
                    Event(id=new_id("a"), role=Role.ASSISTANT, text="answer", token_count=tokens())
                )
                continue
            calls = tuple(ToolCall(new_id("c"), "lookup", "{}") for _ in range(n_calls))
            events.append(
                Event(id=new_id("a"), role=Role.ASSISTANT, tool_calls=calls, token_count=tokens())
            )
            last_turn = turn == turns - 1
            pending = last_turn and draw(st.integers(0, 4)) == 0
            answered = calls[:-1] if pending else calls
            if draw(st.booleans()):  # one TOOL event per result, in random order
                for call in draw(st.permutations(answered)):
                    result = ToolResult(call.id, call.name, "data")
                    events.append(
                        Event(
                            id=new_id("t"),
                            role=Role.TOOL,
                            tool_results=(result,),
                            token_count=tokens(),
                        )
                    )
            elif answered:
                results = tuple(ToolResult(c.id, c.name, "data") for c in answered)
                events.append(
                    Event(
                        id=new_id("t"), role=Role.TOOL, tool_results=results, token_count=tokens()
                    )
                )
            if pending:
                break
    return events


def window_strategies() -> st.SearchStrategy[SlidingWindow | TurnWindow | TokenBudget]:
    boundary = st.sampled_from(list(Boundary))
    return st.one_of(
        st.builds(SlidingWindow, max_events=st.integers(1, 30), boundary=boundary),
        st.builds(TurnWindow, max_turns=st.integers(1, 8), boundary=boundary),
        st.builds(TokenBudget, max_tokens=st.integers(1, 3000), boundary=boundary),
    )


@st.composite
def summarize_strategies(draw: st.DrawFn) -> Summarize:
    keep = draw(st.integers(1, 20))
    return Summarize(
        max_events_to_keep=keep,
        overlap=draw(st.integers(0, keep - 1)),
        boundary=draw(st.sampled_from(list(Boundary))),
        max_summary_tokens=draw(st.sampled_from([1, 64, 1024])),  # small caps pass the cost check
    )


def check_invariants(
    events: Sequence[Event], plan: CompactionPlan, result: CompactionResult, boundary: Boundary
) -> None:
    input_ids = [e.id for e in events]
    inserted = {e.id for e in plan.inserts}
    active_ids = [e.id for e in result.active_events]
    archived_ids = [e.id for e in result.archived_events]

    # Nothing lost, nothing duplicated.
    kept_original = [i for i in active_ids if i not in inserted]
    assert sorted(kept_original + archived_ids) == sorted(input_ids)
    assert len(set(active_ids)) == len(active_ids)

    # Log order kept; inserts sit right before the first kept conversation event.
    order = {event_id: n for n, event_id in enumerate(input_ids)}
    assert kept_original == sorted(kept_original, key=order.__getitem__)
    assert archived_ids == sorted(archived_ids, key=order.__getitem__)
    if inserted:
        at = next(n for n, e in enumerate(result.active_events) if e.id in inserted)
        after = result.active_events[at + len(inserted)]
        assert after.is_real
        assert all(e.synthetic for e in result.active_events[at : at + len(inserted)])

    # The latest system message is kept, where it was.
    systems = [e for e in events if e.role is Role.SYSTEM]
    if systems:
        assert systems[-1].id in active_ids
        assert all(s.id in archived_ids for s in systems[:-1])

    real = [e for e in events if e.is_real]
    if boundary is Boundary.TURN:
        # The newest turn is kept whole.
        starts = [n for n, e in enumerate(real) if e.is_turn_start]
        if starts:
            assert all(e.id in active_ids for e in real[starts[-1] :])
        # The kept conversation starts at a turn (or at a kept preamble).
        kept_real = [e for e in result.active_events if e.is_real]
        archived_real = [e for e in result.archived_events if e.is_real]
        if archived_real and kept_real:
            first_after = next(e for e in kept_real if order[e.id] > order[archived_real[-1].id])
            assert first_after.is_turn_start
    elif real:
        assert real[-1].id in active_ids

    # No tool result is kept without the event that requested it.
    requested_by = {c.id: e.id for e in events for c in e.tool_calls}
    for event in result.active_events:
        for tool_result in event.tool_results:
            request = requested_by.get(tool_result.call_id)
            if request is not None:
                assert request in active_ids

    # A request of the newest turn still waiting for its result is never archived.
    answered = {r.call_id for e in events for r in e.tool_results}
    starts = [n for n, e in enumerate(real) if e.is_turn_start]
    newest = real[starts[-1] :] if starts else real
    for event in newest:
        if any(c.id not in answered for c in event.tool_calls):
            assert event.id in active_ids


settings_ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(events=sessions(), strategy=window_strategies())
def test_window_strategies_keep_every_invariant(
    events: list[Event], strategy: SlidingWindow | TurnWindow | TokenBudget
) -> None:
    plan = strategy.plan(events)
    result = apply_plan(events, plan)
    check_invariants(events, plan, result, strategy.boundary)
    assert result.tokens_estimated_saved == sum(e.token_count for e in result.archived_events)
    # A second pass with nothing appended archives nothing more.
    assert strategy.plan(result.active_events).is_empty


def run(coro: Callable[[], object]) -> object:
    return asyncio.run(coro())  # type: ignore[arg-type]


@settings_
@given(events=sessions(), strategy=summarize_strategies(), answer=st.sampled_from(["SUMMARY", " "]))
def test_summarize_keeps_every_invariant(
    events: list[Event], strategy: Summarize, answer: str
) -> None:
    fake = FakeSummarizer(answer)

    async def two_passes() -> None:
        plan = await strategy.plan(events, fake)
        result = apply_plan(events, plan)
        check_invariants(events, plan, result, strategy.boundary)
        assert sum(e.synthetic for e in result.active_events) in (0, 2) or not plan.inserts
        calls = len(fake.requests)
        second = await strategy.plan(result.active_events, fake)
        if answer.strip():
            assert second.is_empty
            assert len(fake.requests) == calls  # no LLM call when nothing is left to summarize

    asyncio.run(two_passes())
