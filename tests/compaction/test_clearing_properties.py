"""Invariants of clearing and pipelines over random tool-heavy sessions.

No pair split (clearing archives nothing and moves nothing), no log content
changed beyond the cleared results and inputs, counters equal a recount, a
second pass clears nothing new, and a pipeline is its steps applied in
sequence while the trigger fires.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.clear_tool_results import CLEARED_ARGUMENTS, ClearToolResults
from sidecar.compaction.pipeline import Pipeline, WindowStep, plan_step
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.summarize import Summarize
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.compaction.triggers import TokenCount
from sidecar.compaction.window import apply_plan
from sidecar.model import Event, Role, SessionCounters, ToolCall, ToolResult

TOOLS = ("grep", "read_file", "run_tests")


@st.composite
def tool_sessions(draw: st.DrawFn) -> list[Event]:
    """Turns of tool loops whose results vary from a word to a page, counted exactly."""
    counter = itertools.count()
    events: list[Event] = []

    def add(event: Event) -> None:
        events.append(event.evolve(token_count=count_event(event)))

    if draw(st.booleans()):
        add(Event(id="s", role=Role.SYSTEM, text="You are a coding agent."))
    for _ in range(draw(st.integers(1, 5))):
        add(Event(id=f"u{next(counter)}", role=Role.USER, text="fix the failing test"))
        for _ in range(draw(st.integers(0, 6))):
            width = draw(st.integers(1, 3))
            calls = tuple(
                ToolCall(f"c{next(counter)}", draw(st.sampled_from(TOOLS)), '{"path": "a.py"}')
                for _ in range(width)
            )
            add(Event(id=f"a{next(counter)}", role=Role.ASSISTANT, tool_calls=calls))
            results = tuple(
                ToolResult(c.id, c.name, "line " * draw(st.integers(1, 300))) for c in calls
            )
            if draw(st.booleans()):
                add(Event(id=f"t{next(counter)}", role=Role.TOOL, tool_results=results))
            else:
                for r in results:
                    add(Event(id=f"t{next(counter)}", role=Role.TOOL, tool_results=(r,)))
        add(Event(id=f"a{next(counter)}", role=Role.ASSISTANT, text="done"))
    return events


clearings = st.builds(
    ClearToolResults,
    keep_tool_uses=st.integers(0, 6),
    exclude_tools=st.lists(st.sampled_from(TOOLS), max_size=1).map(tuple),
    clear_tool_inputs=st.booleans(),
    min_cleared_tokens=st.sampled_from([0, 0, 50, 5000]),
)

settings_ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(events=tool_sessions(), strategy=clearings)
def test_clearing_keeps_every_invariant(events: list[Event], strategy: ClearToolResults) -> None:
    plan = strategy.plan(events)
    after = apply_plan(events, plan)
    # Nothing archived, nothing moved: no pair can be split.
    assert not plan.archive_ids
    assert not plan.inserts
    assert [e.id for e in after.active_events] == [e.id for e in events]
    for before, now in zip(events, after.active_events, strict=True):
        # Only results and inputs change, and only to their placeholders.
        assert (now.role, now.text, now.position) == (before.role, before.text, before.position)
        assert [r.call_id for r in now.tool_results] == [r.call_id for r in before.tool_results]
        assert [c.id for c in now.tool_calls] == [c.id for c in before.tool_calls]
        for old, new in zip(before.tool_results, now.tool_results, strict=True):
            assert new == old or (
                new.content != old.content and old.name not in strategy.exclude_tools
            )
        for old_call, new_call in zip(before.tool_calls, now.tool_calls, strict=True):
            assert new_call == old_call or new_call.arguments_json == CLEARED_ARGUMENTS
        # Counters equal a recount, and clearing never grows an event.
        assert now.token_count == count_event(now)
        assert now.token_count <= before.token_count
    saved = (
        SessionCounters.of_window(events).tokens
        - SessionCounters.of_window(after.active_events).tokens
    )
    assert plan.tokens_estimated_saved == saved
    assert not plan.clears or saved >= strategy.min_cleared_tokens
    # A second pass with the same settings clears nothing new.
    assert strategy.plan(after.active_events).is_empty


def steps() -> st.SearchStrategy[WindowStep]:
    return st.one_of(
        clearings,
        st.builds(TokenBudget, max_tokens=st.integers(200, 3000)),
        st.builds(SlidingWindow, max_events=st.integers(2, 20)),
    )


@settings_
@given(
    events=tool_sessions(),
    pipeline=st.lists(steps(), min_size=1, max_size=3).map(lambda s: Pipeline(tuple(s))),
    threshold=st.integers(100, 4000),
    force=st.booleans(),
)
def test_a_pipeline_is_its_steps_in_sequence_while_the_trigger_fires(
    events: list[Event], pipeline: Pipeline, threshold: int, force: bool
) -> None:
    trigger = TokenCount(threshold)
    results = pipeline.run_in_memory(events, trigger, force=force)
    window = tuple(events)
    ran = 0
    for step in pipeline.steps:
        assert not isinstance(step, Summarize)  # window steps only, as drawn
        result = apply_plan(window, plan_step(step, window))
        ran += 1
        if result.compacted:
            window = result.active_events
        if not force and not trigger.fires(SessionCounters.of_window(window)):
            break
    assert len(results) == ran
    final = next((r.active_events for r in reversed(results) if r.compacted), tuple(events))
    assert [e.id for e in final] == [e.id for e in window]
    assert final == window
