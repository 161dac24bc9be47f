"""The loss report: identifiers of what a pass archives or clears that its window lost."""

from __future__ import annotations

import pytest

from sidecar.compaction.clear_tool_results import ClearToolResults
from sidecar.compaction.loss import MAX_REPORTED, judged
from sidecar.compaction.pipeline import plan_step
from sidecar.compaction.policy import policy_from_dict
from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.tokens import count_event
from sidecar.errors import InvalidConfig
from sidecar.model import Event, Role, SkipReason, ToolCall, ToolResult


def counted(event: Event) -> Event:
    return event.evolve(token_count=count_event(event))


def turn(n: int, content: str) -> list[Event]:
    return [
        counted(Event(id=f"u{n}", role=Role.USER, text=f"look up turn {n}")),
        counted(Event(id=f"a{n}", role=Role.ASSISTANT, tool_calls=(ToolCall(f"c{n}", "lookup"),))),
        counted(
            Event(
                id=f"t{n}", role=Role.TOOL, tool_results=(ToolResult(f"c{n}", "lookup", content),)
            )
        ),
    ]


def test_a_window_pass_reports_what_it_archived_and_the_window_lacks() -> None:
    events = [*turn(1, "order W111222 for ana@example.com"), *turn(2, "order W111222 again")]
    plan = plan_step(SlidingWindow(max_events=3), events)
    assert plan.archive_ids == ("u1", "a1", "t1")
    assert plan.identifiers_dropped == 1  # W111222 is still in the kept turn
    assert plan.dropped_identifiers == ("ana@example.com",)


def test_a_placeholder_that_names_an_identifier_keeps_it() -> None:
    big = "ZFA04Y " + "row " * 300
    events = [*turn(1, big), *turn(2, "done " * 300)]
    with_pointers = plan_step(ClearToolResults(keep_tool_uses=1), events)
    assert with_pointers.identifiers_dropped == 0
    bare = plan_step(ClearToolResults(keep_tool_uses=1, keep_identifiers=False), events)
    assert bare.dropped_identifiers == ("ZFA04Y",)


def test_max_dropped_identifiers_refuses_a_pass_that_drops_more() -> None:
    events = [*turn(1, "A1B2C3 D4E5F6"), *turn(2, "nothing here")]
    plan = plan_step(SlidingWindow(max_events=3, max_dropped_identifiers=1), events)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.WOULD_DROP_IDENTIFIERS
    assert plan.identifiers_dropped == 2
    assert plan_step(SlidingWindow(max_events=3, max_dropped_identifiers=2), events).archive_ids


def test_the_report_names_at_most_a_few() -> None:
    many = " ".join(f"ID{n:05d}" for n in range(100))
    events = [*turn(1, many), *turn(2, "none")]
    plan = judged(events, SlidingWindow(max_events=3).plan(events))
    assert plan.identifiers_dropped == 64  # the ranked identifiers of a span, at most
    assert len(plan.dropped_identifiers) == MAX_REPORTED


def test_an_empty_plan_drops_nothing() -> None:
    events = turn(1, "X12345")
    plan = plan_step(SlidingWindow(max_events=10, max_dropped_identifiers=0), events)
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT
    assert plan.identifiers_dropped == 0


def test_the_limit_is_read_and_stored_beside_the_strategy() -> None:
    data = {"strategy": {"token_budget": {}, "max_dropped_identifiers": 3}}
    policy = policy_from_dict(data)
    assert isinstance(policy.strategy, TokenBudget)
    assert policy.strategy.max_dropped_identifiers == 3
    assert policy.to_dict()["strategy"]["max_dropped_identifiers"] == 3
    with pytest.raises(InvalidConfig) as info:
        policy_from_dict({"strategy": {"token_budget": {}, "max_dropped_identifiers": -1}})
    assert info.value.field == "strategy.max_dropped_identifiers"
