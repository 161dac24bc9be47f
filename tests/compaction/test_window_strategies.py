"""The window strategies and the boundary rules, on the seeds' worked examples."""

from __future__ import annotations

import pytest

from sidecar.compaction.sliding_window import SlidingWindow
from sidecar.compaction.token_budget import TokenBudget
from sidecar.compaction.turn_window import TurnWindow
from sidecar.compaction.window import apply_plan
from sidecar.errors import InvalidConfig
from sidecar.model import Boundary, SkipReason
from tests.compaction.builders import a, ids, s, summary_pair, t, u


def test_cut_inside_turn_moves_to_next_user() -> None:
    # Budget 3: [u1, a1, u2, a2a, | a2b, u3, a3] -> kept [u3, a3]
    events = [
        u(id="u1"),
        a(id="a1"),
        u(id="u2"),
        a(id="a2a"),
        a(id="a2b"),
        u(id="u3"),
        a(id="a3"),
    ]
    result = apply_plan(events, SlidingWindow(max_events=3).plan(events))
    assert ids(result.active_events) == ["u3", "a3"]
    assert ids(result.archived_events) == ["u1", "a1", "u2", "a2a", "a2b"]
    assert all(e.archived for e in result.archived_events)


def test_newest_turn_is_kept_even_over_the_limit() -> None:
    events = [u(id="u1"), a(id="a1"), u(id="u2"), *[a(id=f"x{i}") for i in range(6)]]
    result = apply_plan(events, SlidingWindow(max_events=2).plan(events))
    assert ids(result.active_events)[0] == "u2"
    assert len(result.active_events) == 7


def test_no_turn_boundary_archives_nothing() -> None:
    events = [u(id="u1"), *[a() for _ in range(30)]]
    plan = SlidingWindow(max_events=5).plan(events)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.NO_TURN_BOUNDARY


def test_everything_fits_keeps_the_preamble() -> None:
    events = [a(id="pre"), u(), a()]
    plan = SlidingWindow(max_events=5).plan(events)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT


def test_latest_system_pinned_in_place_earlier_ones_archived() -> None:
    events = [s(id="s1"), u(id="u1"), a(id="a1"), s(id="s2"), u(id="u2"), a(id="a2"), u(id="u3")]
    result = apply_plan(events, SlidingWindow(max_events=3).plan(events))
    assert ids(result.active_events) == ["s2", "u2", "a2", "u3"]
    assert ids(result.archived_events) == ["s1", "u1", "a1"]


def test_superseded_systems_archived_even_when_nothing_else_is() -> None:
    events = [s(id="s1"), u(), a(), s(id="s2")]
    plan = SlidingWindow(max_events=10).plan(events)
    assert plan.archive_ids == ("s1",)
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT


def test_summaries_are_kept_and_not_counted() -> None:
    pair = summary_pair()
    events = [*pair, u(id="u1"), a(), u(id="u2"), a()]
    result = apply_plan(events, SlidingWindow(max_events=2).plan(events))
    assert ids(result.active_events) == [pair[0].id, pair[1].id, "u2", result.active_events[-1].id]


def test_tokens_saved_is_archived_tokens() -> None:
    events = [u(tokens=100), a(tokens=50), u(tokens=1), a(tokens=1)]
    plan = SlidingWindow(max_events=2).plan(events)
    assert plan.tokens_estimated_saved == 150


def test_parallel_tool_calls_with_consecutive_results_stay_together() -> None:
    # index 1 requests two tools; a cut at index 2 would orphan both results.
    events = [
        u(id="u0"),
        a(id="a0"),
        u(id="u1"),
        a(id="req", calls=["call-1", "call-2"]),
        t(id="r1", results=["call-1"]),
        t(id="r2", results=["call-2"]),
        u(id="u2"),
    ]
    plan = SlidingWindow(max_events=3, boundary=Boundary.TOOL_PAIR).plan(events)
    result = apply_plan(events, plan)
    assert ids(result.active_events) == ["req", "r1", "r2", "u2"]


def test_orphan_results_at_the_cut_are_archived_with_older_events() -> None:
    events = [
        u(id="u0"),
        a(id="a0"),
        t(id="o1", results=["unknown-1"]),
        t(id="o2", results=["unknown-2"]),
        a(id="a1"),
        a(id="a2"),
    ]
    plan = SlidingWindow(max_events=4, boundary=Boundary.TOOL_PAIR).plan(events)
    result = apply_plan(events, plan)
    assert ids(result.active_events) == ["a1", "a2"]
    assert ids(result.archived_events) == ["u0", "a0", "o1", "o2"]


def test_tool_pair_compacts_one_long_tool_loop_that_turn_cannot() -> None:
    events = [u(id="task")]
    for i in range(100):
        events += [a(id=f"req{i}", calls=[f"c{i}"]), t(id=f"res{i}", results=[f"c{i}"])]
    assert SlidingWindow(max_events=10).plan(events).is_empty
    result = apply_plan(
        events, SlidingWindow(max_events=10, boundary=Boundary.TOOL_PAIR).plan(events)
    )
    assert ids(result.active_events) == [f"{k}{i}" for i in range(95, 100) for k in ("req", "res")]


def test_tool_pair_moves_back_over_parallel_results_straddling_the_cut() -> None:
    events = [
        u(id="u0"),
        a(id="req", calls=["x", "y", "z"]),
        t(id="rx", results=["x"]),
        t(id="ry", results=["y"]),
        t(id="rz", results=["z"]),
        a(id="done"),
    ]
    result = apply_plan(
        events, SlidingWindow(max_events=2, boundary=Boundary.TOOL_PAIR).plan(events)
    )
    assert ids(result.active_events) == ["req", "rx", "ry", "rz", "done"]


def test_pending_request_of_the_newest_turn_is_never_archived() -> None:
    events = [u(id="u0"), a(id="wait", calls=["slow"]), a(id="b1"), a(id="b2"), a(id="b3")]
    result = apply_plan(
        events, SlidingWindow(max_events=1, boundary=Boundary.TOOL_PAIR).plan(events)
    )
    assert ids(result.active_events) == ["wait", "b1", "b2", "b3"]


def test_late_tool_result_pulls_its_turn_back_under_turn_boundary() -> None:
    # The tool answered after the user spoke again: its call's turn must stay.
    events = [
        u(id="u1"),
        a(id="call", calls=["slow"]),
        u(id="u2"),
        t(id="late", results=["slow"]),
        a(id="a2"),
        u(id="u3"),
        a(id="a3"),
    ]
    plan = SlidingWindow(max_events=5).plan(events)  # proposes cutting at u2
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.NO_TURN_BOUNDARY


def test_turn_window_keeps_last_turns_and_the_preamble() -> None:
    events = [a(id="pre"), u(id="u1"), a(id="a1"), u(id="u2"), a(id="a2"), u(id="u3"), a(id="a3")]
    result = apply_plan(events, TurnWindow(max_turns=2).plan(events))
    assert ids(result.active_events) == ["pre", "u2", "a2", "u3", "a3"]
    assert ids(result.archived_events) == ["u1", "a1"]


def test_turn_window_counts_turns_not_events() -> None:
    heavy = [u(id="u1"), *[a() for _ in range(20)], u(id="u2"), a()]
    assert TurnWindow(max_turns=2).plan(heavy).is_empty


def test_token_budget_with_a_stored_system_prompt() -> None:
    # Budget 100, system prompt 40: 60 left for the conversation, walked newest first.
    events = [
        s(id="sys", tokens=40),
        u(id="u1", tokens=20),
        a(id="a1", tokens=20),
        u(id="u2", tokens=20),
        a(id="a2", tokens=15),
        u(id="u3", tokens=10),
        a(id="a3", tokens=10),
    ]
    result = apply_plan(events, TokenBudget(max_tokens=100).plan(events))
    # 10 + 10 + 15 + 20 = 55 fits, + 20 = 75 does not; the cut at u2 is a turn start.
    assert ids(result.active_events) == ["sys", "u2", "a2", "u3", "a3"]
    assert result.tokens_estimated_saved == 40


def test_token_budget_contiguous_suffix_stops_at_first_overflow() -> None:
    events = [
        u(id="u1", tokens=1),
        a(id="big", tokens=500),
        u(id="u2", tokens=1),
        a(id="a2", tokens=1),
    ]
    result = apply_plan(events, TokenBudget(max_tokens=100).plan(events))
    assert ids(result.active_events) == ["u2", "a2"]


def test_token_budget_with_no_room_left_keeps_only_the_newest_turn() -> None:
    events = [s(id="huge", tokens=5000), u(id="u1"), a(id="a1"), u(id="u2"), a(id="a2")]
    result = apply_plan(events, TokenBudget(max_tokens=4000).plan(events))
    assert ids(result.active_events) == ["huge", "u2", "a2"]


def test_token_budget_deducts_summaries() -> None:
    pair = summary_pair(tokens=30)
    events = [*pair, u(id="u1", tokens=20), u(id="u2", tokens=20)]
    result = apply_plan(events, TokenBudget(max_tokens=90).plan(events))
    assert ids(result.active_events) == [pair[0].id, pair[1].id, "u2"]


def test_token_budget_has_no_everything_fits_shortcut_but_archives_nothing_when_it_fits() -> None:
    events = [u(tokens=5), a(tokens=5)]
    plan = TokenBudget(max_tokens=100).plan(events)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: SlidingWindow(max_events=0), "strategy.sliding_window.max_events"),
        (lambda: TurnWindow(max_turns=0), "strategy.turn_window.max_turns"),
        (lambda: TokenBudget(max_tokens=0), "strategy.token_budget.max_tokens"),
    ],
)
def test_invalid_sizes_name_the_field(make: object, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        make()  # type: ignore[operator]
    assert info.value.field == field


@pytest.mark.parametrize(
    "make",
    [
        lambda n: SlidingWindow(max_events=2, min_saved_tokens=n),
        lambda n: TurnWindow(max_turns=1, min_saved_tokens=n),
        lambda n: TokenBudget(max_tokens=25, min_saved_tokens=n),
    ],
    ids=["sliding_window", "turn_window", "token_budget"],
)
def test_min_saved_tokens_skips_a_cut_that_frees_too_little(make: object) -> None:
    events = [s(id="s1"), s(id="s2"), u(id="u1"), a(id="a1"), u(id="u2"), a(id="a2")]
    # The cut archives u1 and a1 (10 tokens each) and the superseded system message s1.
    assert ids(apply_plan(events, make(30).plan(events)).archived_events) == ["s1", "u1", "a1"]  # type: ignore[operator]
    skipped = make(31).plan(events)  # type: ignore[operator]
    assert skipped.skipped_reason is SkipReason.NOT_WORTH_IT
    # Superseded system messages are still archived, as on every pass.
    assert skipped.archive_ids == ("s1",)


def test_min_saved_tokens_must_not_be_negative() -> None:
    with pytest.raises(InvalidConfig) as info:
        SlidingWindow(min_saved_tokens=-1)
    assert info.value.field == "strategy.min_saved_tokens"
