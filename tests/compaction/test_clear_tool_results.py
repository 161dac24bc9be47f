"""clear_tool_results: old tool results become a placeholder, in place; nothing is archived."""

from __future__ import annotations

import pytest

from sidecar.compaction.clear_tool_results import (
    CLEARED_ARGUMENTS,
    MAX_PLACEHOLDER_BYTES,
    ClearToolResults,
)
from sidecar.compaction.tokens import STAND_IN_KEY, count_event
from sidecar.compaction.window import apply_plan
from sidecar.errors import InvalidConfig
from sidecar.model import (
    Event,
    Reasoning,
    Role,
    SessionCounters,
    SkipReason,
    ToolCall,
    ToolResult,
)
from tests.compaction.builders import ids

BIG = "row " * 200  # far longer than any placeholder


def counted(event: Event) -> Event:
    return event.evolve(token_count=count_event(event))


def u(text: str, id: str) -> Event:
    return counted(Event(id=id, role=Role.USER, text=text))


def call(id: str, tool: str = "grep", args: str = '{"pattern": "error in the logs"}') -> Event:
    return counted(Event(id=f"a-{id}", role=Role.ASSISTANT, tool_calls=(ToolCall(id, tool, args),)))


def result(id: str, tool: str = "grep", content: str = BIG) -> Event:
    return counted(
        Event(id=f"t-{id}", role=Role.TOOL, tool_results=(ToolResult(id, tool, content),))
    )


def tool_session(n: int, tool: str = "grep") -> list[Event]:
    """One user turn, then ``n`` call/result pairs c1..cn."""
    events = [u("find the bug", "u1")]
    for i in range(1, n + 1):
        events += [call(f"c{i}", tool), result(f"c{i}", tool)]
    return events


def test_all_but_the_newest_three_tool_uses_are_cleared_in_place() -> None:
    events = tool_session(5)
    plan = ClearToolResults().plan(events)
    assert ids(plan.clears) == ["t-c1", "t-c2"]
    assert not plan.archive_ids
    assert not plan.inserts
    after = apply_plan(events, plan)
    assert ids(after.active_events) == ids(events)  # nothing left, nothing moved
    cleared = after.active_events[2]
    assert cleared.cleared
    assert cleared.tool_results[0].call_id == "c1"
    assert "grep" in cleared.tool_results[0].content
    assert "c1" in cleared.tool_results[0].content
    assert cleared.token_count == count_event(cleared)  # counts the placeholder, exactly
    assert after.cleared_ids == ("t-c1", "t-c2")


def test_tokens_saved_is_what_was_freed() -> None:
    events = tool_session(5)
    plan = ClearToolResults().plan(events)
    before = SessionCounters.of_window(events).tokens
    after = SessionCounters.of_window(apply_plan(events, plan).active_events).tokens
    assert plan.tokens_estimated_saved == before - after > 0


def test_a_cleared_stand_in_frees_the_whole_event_it_stood_for() -> None:
    """Its framework sends the whole 2 MB result until it is cleared, the placeholder after:
    counted as its cut text, the clearing freed 1,000 characters' worth and the trigger
    that fired on the whole weight (once stand-ins counted it) would fire again."""
    events = tool_session(4)
    stood_in = events[2].evolve(metadata={STAND_IN_KEY: "2000000"})
    events[2] = counted(stood_in)
    assert events[2].token_count > 2_000_000 // 4 - 1_000
    plan = ClearToolResults().plan(events)
    assert ids(plan.clears) == ["t-c1"]
    assert plan.clears[0].token_count == count_event(plan.clears[0]) < 100
    assert plan.tokens_estimated_saved > 2_000_000 // 4 - 1_000


def test_keep_zero_clears_every_answered_result() -> None:
    plan = ClearToolResults(keep_tool_uses=0).plan(tool_session(3))
    assert ids(plan.clears) == ["t-c1", "t-c2", "t-c3"]


def test_excluded_tools_are_never_cleared_but_count_as_uses() -> None:
    events = [u("go", "u1"), call("c1", "read_file"), result("c1", "read_file")]
    events += [call("c2"), result("c2"), call("c3"), result("c3"), call("c4"), result("c4")]
    events += [call("c5"), result("c5")]
    plan = ClearToolResults(exclude_tools=("read_file",)).plan(events)
    assert ids(plan.clears) == ["t-c2"]  # c1 excluded; c3..c5 are the newest three


def test_exclude_tools_goes_by_the_calls_name_for_results_and_inputs_alike() -> None:
    """A result may carry another name than its call: the call's decides, one rule for both."""
    args = '{"q": "' + "x" * 400 + '"}'
    events = [u("go", "u1"), call("c1", "kubectl", args), result("c1", "runbook")]
    events += [call("c2", "runbook", args), result("c2", "kubectl")]
    events += [call("c3"), result("c3")]
    plan = ClearToolResults(keep_tool_uses=1, exclude_tools=("runbook",), clear_tool_inputs=True)
    cleared = plan.plan(events).clears
    assert ids(cleared) == ["a-c1", "t-c1"]  # c1 called kubectl: cleared, result and input
    assert cleared[1].tool_results[0].content.startswith("[kubectl result cleared")


def test_clear_tool_inputs_replaces_the_cleared_calls_arguments() -> None:
    events = tool_session(4)
    events[1] = call("c1", args='{"pattern": "' + "x" * 400 + '"}')
    plan = ClearToolResults(clear_tool_inputs=True).plan(events)
    assert ids(plan.clears) == ["a-c1", "t-c1"]
    assert plan.clears[0].tool_calls[0].arguments_json == CLEARED_ARGUMENTS
    assert plan.clears[0].tool_calls[0].id == "c1"  # still paired with its result


def test_inputs_are_kept_without_clear_tool_inputs() -> None:
    events = tool_session(4)
    events[1] = call("c1", args='{"pattern": "' + "x" * 400 + '"}')
    assert ids(ClearToolResults().plan(events).clears) == ["t-c1"]


def test_min_cleared_tokens_skips_a_small_clearing() -> None:
    events = tool_session(4)
    freed = ClearToolResults().plan(events).tokens_estimated_saved
    plan = ClearToolResults(min_cleared_tokens=freed + 1).plan(events)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.NOT_WORTH_IT
    assert ClearToolResults(min_cleared_tokens=freed).plan(events).clears


def test_a_second_pass_clears_nothing_new() -> None:
    events = tool_session(6)
    strategy = ClearToolResults()
    once = apply_plan(events, strategy.plan(events)).active_events
    again = strategy.plan(once)
    assert again.is_empty
    assert again.skipped_reason is SkipReason.WITHIN_LIMIT


def test_a_result_smaller_than_its_placeholder_is_left_alone() -> None:
    events = [u("go", "u1")]
    for i in range(1, 5):
        events += [call(f"c{i}"), result(f"c{i}", content="ok")]
    plan = ClearToolResults().plan(events)
    assert plan.is_empty
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT


def test_a_pending_call_counts_as_a_use_and_an_orphan_result_is_not_one() -> None:
    events = [u("go", "u1"), result("gone"), *tool_session(3)[1:], call("c9")]
    plan = ClearToolResults().plan(events)
    # c9 waits for its result and is one of the newest three: c2, c3, c9 are kept.
    assert ids(plan.clears) == ["t-c1"]


def test_the_placeholder_names_the_call() -> None:
    strategy = ClearToolResults(placeholder="<{name} {call_id} cleared>")
    plan = strategy.plan(tool_session(4))
    assert plan.clears[0].tool_results[0].content == "<grep c1 cleared>"


@pytest.mark.parametrize("name", ["n" * 30_000, "名" * 30_000, "a" + "😀" * 10_000])
def test_a_placeholder_is_cut_at_its_bound_however_long_the_name(name: str) -> None:
    """Names stored before they were bounded may be long; a template may repeat them."""
    strategy = ClearToolResults(placeholder="[{name}|{call_id}]" * 100)
    text = strategy.placeholder_for("c" * 30_000, name)
    assert len(text.encode()) <= MAX_PLACEHOLDER_BYTES
    assert len(text.encode()) > MAX_PLACEHOLDER_BYTES - 4  # cut, at a whole character
    assert text.startswith("[" + name[:100])


def test_a_placeholder_within_its_bound_is_expanded_whole() -> None:
    strategy = ClearToolResults(placeholder="{name}:{call_id}:{name}")
    assert strategy.placeholder_for("c1", "grep") == "grep:c1:grep"


def test_system_messages_and_summaries_are_left_alone() -> None:
    system = counted(Event(id="s1", role=Role.SYSTEM, text="be brief"))
    events = [system, *tool_session(4)]
    plan = ClearToolResults().plan(events)
    assert ids(plan.clears) == ["t-c1"]
    assert not plan.archive_ids


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"keep_tool_uses": -1}, "strategy.clear_tool_results.keep_tool_uses"),
        ({"min_cleared_tokens": -5}, "strategy.clear_tool_results.min_cleared_tokens"),
        ({"exclude_tools": ("",)}, "strategy.clear_tool_results.exclude_tools"),
    ],
)
def test_bad_settings_name_the_field(config: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        ClearToolResults(**config)  # type: ignore[arg-type]
    assert info.value.field == field


# -- reasoning (keep_reasoning_turns) ----------------------------------------------------


def thinking(id: str, thought: str = BIG, signature: bytes = b"sig-" + bytes(range(256))) -> Event:
    return counted(
        Event(
            id=id,
            role=Role.ASSISTANT,
            text="on it",
            reasoning=(Reasoning(thought, signature), Reasoning("", b"enc" * 40, redacted=True)),
            tool_calls=(ToolCall(f"c-{id}", "grep", "{}", signature=b"\x00call-sig"),),
        )
    )


def reasoning_session() -> list[Event]:
    return [
        u("first", "u1"),
        thinking("r1"),
        result("c-r1", content="small"),
        u("second", "u2"),
        thinking("r2"),
        result("c-r2", content="small"),
        u("third", "u3"),
        thinking("r3"),
    ]


def test_reasoning_text_of_older_turns_is_cleared_and_every_signature_kept() -> None:
    events = reasoning_session()
    plan = ClearToolResults(keep_tool_uses=10, keep_reasoning_turns=2).plan(events)
    assert [e.id for e in plan.clears] == ["r1"]
    (cleared,) = plan.clears
    original = events[1]
    assert cleared.cleared
    assert [r.text for r in cleared.reasoning] == ["", ""]
    assert [r.signature for r in cleared.reasoning] == [r.signature for r in original.reasoning]
    assert [r.redacted for r in cleared.reasoning] == [False, True]
    assert cleared.tool_calls == original.tool_calls  # the call's signature too
    assert cleared.text == original.text
    assert cleared.token_count < original.token_count
    assert plan.tokens_estimated_saved == original.token_count - cleared.token_count


def test_the_turn_in_progress_keeps_its_reasoning_however_few_turns_are_kept() -> None:
    events = reasoning_session()
    plan = ClearToolResults(keep_tool_uses=10, keep_reasoning_turns=1).plan(events)
    assert [e.id for e in plan.clears] == ["r1", "r2"]
    again = apply_plan(events, plan).active_events
    assert (
        ClearToolResults(keep_tool_uses=10, keep_reasoning_turns=1).plan(again).skipped_reason
        is SkipReason.WITHIN_LIMIT
    )


def test_reasoning_is_never_cleared_unless_asked() -> None:
    plan = ClearToolResults(keep_tool_uses=10).plan(reasoning_session())
    assert plan.skipped_reason is SkipReason.WITHIN_LIMIT


def test_results_and_reasoning_of_one_event_are_cleared_together() -> None:
    events = reasoning_session()
    events[2] = result("c-r1")  # a big result for r1's call
    plan = ClearToolResults(keep_tool_uses=1, keep_reasoning_turns=2).plan(events)
    by_id = {e.id: e for e in plan.clears}
    assert set(by_id) == {"r1", "t-c-r1"}
    assert by_id["r1"].reasoning[0].text == ""
    assert by_id["t-c-r1"].tool_results[0].content != BIG


@pytest.mark.parametrize("value", [0, -1, True, "2"])
def test_keep_reasoning_turns_is_at_least_one(value: object) -> None:
    with pytest.raises(InvalidConfig) as info:
        ClearToolResults(keep_reasoning_turns=value)  # type: ignore[arg-type]
    assert info.value.field == "strategy.clear_tool_results.keep_reasoning_turns"


# Placeholders keep pointers.
RESERVATION = (
    '{"reservation_id": "ZFA04Y", "user_id": "mia_li_3668", "flights": ['
    '{"flight_number": "HAT136", "date": "2024-05-20", "origin": "JFK"}], "passengers": '
    + ", ".join(f'{{"first_name": "Mia", "seat": "{n}A"}}' for n in range(10, 60))
    + "]"
)


def reservation_session(later_args: str = '{"query": "next"}') -> list[Event]:
    return [
        u("change my flight", "u1"),
        call("c1", "get_reservation_details", '{"reservation_id": "ZFA04Y"}'),
        result("c1", "get_reservation_details", RESERVATION),
        call("c2", "search", later_args),
        result("c2", "search", BIG),
    ]


def test_a_cleared_result_names_its_top_identifiers() -> None:
    plan = ClearToolResults(keep_tool_uses=1).plan(reservation_session())
    assert plan.clears[0].tool_results[0].content == (
        "[get_reservation_details result cleared to save context (call c1)"
        " \N{RIGHTWARDS ARROW} ZFA04Y, mia_li_3668, HAT136, 2024-05-20, 10A;"
        " the original stays in the session log and can be searched]"
    )


def test_an_identifier_a_later_action_used_is_named_first() -> None:
    events = reservation_session(later_args='{"flight": "HAT136"}')
    content = ClearToolResults(keep_tool_uses=1).plan(events).clears[0].tool_results[0].content
    assert "\N{RIGHTWARDS ARROW} HAT136, ZFA04Y, mia_li_3668," in content


def test_without_keep_identifiers_the_placeholder_is_bare() -> None:
    plan = ClearToolResults(keep_tool_uses=1, keep_identifiers=False).plan(reservation_session())
    assert plan.clears[0].tool_results[0].content == ClearToolResults().placeholder_for(
        "c1", "get_reservation_details"
    )


def test_a_placeholder_places_its_identifiers_where_it_says() -> None:
    strategy = ClearToolResults(keep_tool_uses=1, placeholder="<{name}: {identifiers}>")
    content = strategy.plan(reservation_session()).clears[0].tool_results[0].content
    assert content.startswith("<get_reservation_details:  \N{RIGHTWARDS ARROW} ZFA04Y, ")
    plain = ClearToolResults(keep_tool_uses=1, placeholder="<{name} gone>")
    content = plain.plan(reservation_session()).clears[0].tool_results[0].content
    assert content.startswith("<get_reservation_details gone> \N{RIGHTWARDS ARROW} ZFA04Y")


def test_pointers_are_bounded_whatever_the_result_holds() -> None:
    hostile = " ".join(f"ID{n:06d}_{'x' * 80}" for n in range(20_000))
    events = [u("go", "u1"), call("c1"), result("c1", content=hostile), call("c2"), result("c2")]
    content = ClearToolResults(keep_tool_uses=1).plan(events).clears[0].tool_results[0].content
    bare = ClearToolResults().placeholder_for("c1", "grep")
    assert len(content) <= len(bare) + len(" \N{RIGHTWARDS ARROW} ") + 120


def test_a_second_pass_leaves_named_placeholders_alone() -> None:
    events = reservation_session()
    first = apply_plan(events, ClearToolResults(keep_tool_uses=1).plan(events)).active_events
    # A later action now uses another identifier: the placeholder is not re-ranked.
    later = [*first, call("c3", "cancel", '{"flight": "HAT136"}'), result("c3", "cancel", BIG)]
    second = ClearToolResults(keep_tool_uses=1).plan(later)
    assert ids(second.clears) == ["t-c2"]
