"""The recall answer: best hits first, each with role, time and snippet, within its token bound.

Pure formatting over (event, snippet) pairs, plus the two things the search
side decides without a server: an empty query asks for nothing, and the
settings refuse bounds that leave no room for a hit.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from sidecar.adapters.recall import (
    MIN_MAX_TOKENS,
    RecallSettings,
    format_recall,
    recall,
)
from sidecar.client import Client
from sidecar.model import Event, Role, ToolResult
from sidecar.tokenizer import default_estimator

AT = datetime(2026, 12, 1, 16, 9, 25, tzinfo=UTC)


def tokens(text: str) -> int:
    return default_estimator().count(text)


def hit(text: str, *, role: Role = Role.USER, n: int = 0) -> tuple[Event, str]:
    """An archived event and the snippet the server would send for it."""
    event = Event(id=f"e{n}", role=role, text=text, create_time=AT, archived=True)
    return event, f"{role.value.capitalize()}: {text}"


def many(n: int) -> list[tuple[Event, str]]:
    return [
        hit(f"order **{1000 + i}** shipped to warehouse {i} on a Tuesday", n=i) for i in range(n)
    ]


def test_each_hit_is_a_line_with_its_time_role_and_marked_snippet() -> None:
    answer = format_recall(
        "order 4417",
        [
            hit("my **order** number is **4417**-XK", n=1),
            hit("noted, **order** **4417**-XK", role=Role.ASSISTANT, n=2),
        ],
    )
    assert answer.splitlines() == [
        'From this session\'s archived history, matching "order 4417" (best first):',
        "- 2026-12-01 16:09 UTC user: my **order** number is **4417**-XK",
        "- 2026-12-01 16:09 UTC assistant: noted, **order** **4417**-XK",
    ]


def test_a_tool_result_line_drops_the_label_but_keeps_the_responses() -> None:
    event = Event(
        id="t1",
        role=Role.TOOL,
        tool_results=(ToolResult(call_id="c1", name="lookup", content="order 4417-XK"),),
        create_time=AT,
    )
    answer = format_recall("4417", [(event, "Tool [responses: lookup -> order **4417**-XK]")])
    assert answer.splitlines()[1] == (
        "- 2026-12-01 16:09 UTC tool: [responses: lookup -> order **4417**-XK]"
    )


def test_snippet_newlines_become_spaces_so_each_hit_stays_one_line() -> None:
    event, _ = hit("x")
    answer = format_recall("ship", [(event, "User: first line\n\nsecond **ship** line")])
    assert answer.splitlines()[1].endswith("user: first line second **ship** line")


def test_answer_stays_within_max_tokens_and_says_how_many_more_matched() -> None:
    answer = format_recall("order", many(12), max_tokens=MIN_MAX_TOKENS)
    lines = answer.splitlines()
    shown = [line for line in lines if line.startswith("- ")]
    assert tokens(answer) <= MIN_MAX_TOKENS
    assert 1 <= len(shown) < 12
    assert lines[-1] == (
        f"{12 - len(shown)} more matched; search with more specific words to see them."
    )
    assert (
        shown
        == [line for line in format_recall("order", many(12)).splitlines()][1 : 1 + len(shown)]
    )  # the best ones, in rank order


def test_all_hits_shown_when_they_fit_and_no_count_of_the_rest() -> None:
    answer = format_recall("order", many(3), max_tokens=1_000)
    assert len(answer.splitlines()) == 1 + 3
    assert "more matched" not in answer


def test_a_search_with_more_hits_than_fetched_says_at_least() -> None:
    answer = format_recall("order", many(3), max_tokens=1_000, more_beyond=True)
    assert answer.splitlines()[-1] == (
        "At least 1 more matched; search with more specific words to see them."
    )
    bounded = format_recall("order", many(12), max_tokens=MIN_MAX_TOKENS, more_beyond=True)
    left = 12 - sum(line.startswith("- ") for line in bounded.splitlines())
    assert bounded.splitlines()[-1].startswith(f"At least {left + 1} more matched")
    assert tokens(bounded) <= MIN_MAX_TOKENS


def test_a_best_hit_too_long_alone_is_cut_to_fit() -> None:
    long = " ".join(f"word{i}" for i in range(300))
    answer = format_recall("word7", [hit(long), *many(2)], max_tokens=MIN_MAX_TOKENS)
    lines = answer.splitlines()
    assert tokens(answer) <= MIN_MAX_TOKENS
    assert lines[1].startswith("- 2026-12-01 16:09 UTC user: word0 word1")
    assert lines[1].endswith("…")
    assert lines[-1].startswith("2 more matched")


def test_a_long_query_is_echoed_short() -> None:
    query = "order " * 200
    answer = format_recall(query, many(1))
    assert answer.splitlines()[0].count("order") < 20


def test_nothing_found_is_one_sentence_naming_the_query() -> None:
    assert format_recall("order 4417", []) == (
        'Nothing in this session\'s archived history matches "order 4417".'
    )
    assert format_recall("order", [], archived_only=False) == (
        'Nothing in this session\'s history matches "order".'
    )


def test_an_empty_query_asks_nothing_of_the_server() -> None:
    with Client("127.0.0.1:1", default_timeout=0.01) as client:  # nothing listens there
        assert recall(client, "s", "  \n").startswith("Nothing to search for")


def test_a_search_that_cannot_answer_in_time_is_a_sentence_not_an_error() -> None:
    started = time.monotonic()
    with Client("127.0.0.1:1") as client:  # nothing listens there: retried until the deadline
        answer = recall(client, "s", "order", RecallSettings(timeout_s=0.3))
    assert answer == "The history search is unavailable right now; try again later."
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_tokens", MIN_MAX_TOKENS - 1), ("max_hits", 0), ("timeout_s", 0.0)],
)
def test_settings_refuse_bounds_that_leave_no_room(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        RecallSettings(**{field: value})  # type: ignore[arg-type]
