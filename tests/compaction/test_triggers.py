from __future__ import annotations

import pytest

from sidecar.compaction.triggers import (
    AllOf,
    Always,
    AnyOf,
    EventCount,
    Interval,
    TokenCount,
    TurnCount,
)
from sidecar.errors import InvalidConfig
from sidecar.model import SessionCounters
from tests.compaction.builders import a, s, summary_pair, u


def counters(**kw: int) -> SessionCounters:
    return SessionCounters(**kw)


def test_turn_count_fires_above_n_counting_the_turn_in_progress() -> None:
    window = [u(), a(), u(), a(), u()]  # the third turn is in progress
    c = SessionCounters.of_window(window)
    assert c.turns == 3
    assert TurnCount(2).fires(c)
    assert not TurnCount(3).fires(c)


def test_synthetic_user_events_do_not_start_turns() -> None:
    c = SessionCounters.of_window([*summary_pair(), u(), a()])
    assert c.turns == 1


def test_token_count_fires_at_threshold_and_counts_only_latest_system() -> None:
    window = [s(tokens=500), u(tokens=10), s(tokens=7), *summary_pair(tokens=5), a(tokens=10)]
    c = SessionCounters.of_window(window)
    assert c.tokens == 7 + 10 + 5 + 5 + 10
    assert TokenCount(37).fires(c)
    assert not TokenCount(38).fires(c)


def test_event_count_counts_conversation_only() -> None:
    c = SessionCounters.of_window([s(), u(), a(), *summary_pair()])
    assert c.real_events == 2
    assert EventCount(1).fires(c)
    assert not EventCount(2).fires(c)


def test_interval_fires_every_n_completed_turns_like_adk() -> None:
    trigger = Interval(3)
    c = SessionCounters()
    fired_at: list[int] = []
    for turn in range(1, 11):
        c = c.after_append(u())
        if trigger.fires(c):
            fired_at.append(turn)
            c = SessionCounters.after_compaction([u()])  # the turn in progress is kept
        c = c.after_append(a())
    assert fired_at == [4, 7, 10]


def test_composites() -> None:
    c = counters(turns=5, tokens=100)
    assert AnyOf((TurnCount(10), TokenCount(100))).fires(c)
    assert not AllOf((TurnCount(10), TokenCount(100))).fires(c)
    assert AllOf((TurnCount(4), TokenCount(50))).fires(c)
    assert Always().fires(SessionCounters())


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: TurnCount(0), "trigger.turn_count"),
        (lambda: TokenCount(-5), "trigger.token_count"),
        (lambda: EventCount(0), "trigger.event_count"),
        (lambda: Interval(0), "trigger.interval_turns"),
        (lambda: AnyOf(()), "trigger.any_of"),
        (lambda: AllOf(()), "trigger.all_of"),
    ],
)
def test_invalid_trigger_names_the_field(make: object, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        make()  # type: ignore[operator]
    assert info.value.field == field
