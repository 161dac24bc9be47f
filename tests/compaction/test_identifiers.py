"""Identifiers: what counts as one, how a span's are ranked, and that every pass is bounded."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.compaction import identifiers
from sidecar.compaction.identifiers import (
    Identifier,
    Presence,
    find,
    is_identifier,
    missing,
    of_span,
    rank,
    trail_of,
)
from sidecar.model import Event, Role, ToolCall, ToolResult
from sidecar.summarizer.protocol import trail_line


def user(text: str) -> Event:
    return Event(id="u", role=Role.USER, text=text)


def assistant(text: str = "", calls: dict[str, str] | None = None) -> Event:
    tool_calls = tuple(
        ToolCall(id=f"c{i}", name=name, arguments_json=args)
        for i, (name, args) in enumerate((calls or {}).items())
    )
    return Event(id="a", role=Role.ASSISTANT, text=text, tool_calls=tool_calls)


def tool(content: str, name: str = "lookup") -> Event:
    return Event(
        id="t", role=Role.TOOL, tool_results=(ToolResult(call_id="c0", name=name, content=content),)
    )


def texts(found: list[Identifier]) -> list[str]:
    return [i.text for i in found]


# What a coding agent and a support agent act on.
def test_coding_identifiers_are_found() -> None:
    text = (
        "Fixed getUserDetails in src/app/models.py:142 (commit 3f9c2ab), see"
        " https://github.com/org/repo/pull/88?tab=files and ./scripts/run.sh;"
        " MAX_RETRIES is read by config.load."
    )
    assert find(text) == [
        "getUserDetails",
        "src/app/models.py:142",
        "3f9c2ab",
        "https://github.com/org/repo/pull/88?tab=files",
        "./scripts/run.sh",
        "MAX_RETRIES",
        "config.load",
    ]


def test_support_identifiers_are_found() -> None:
    text = (
        "Reservation ZFA04Y on flight HAT136, 2024-05-20 at 19:00; order #W2378156,"
        " refund of 1,250.00 to card 7447, write to ana.lopez@example.com."
    )
    assert find(text) == [
        "ZFA04Y",
        "HAT136",
        "2024-05-20",
        "19:00",
        "#W2378156",
        "1,250.00",
        "7447",
        "ana.lopez@example.com",
    ]


def test_inner_capitals_make_a_name() -> None:
    assert find("OOMKilled on the iPhone by McDonald, not by NASA, IDs, URLs or Hello") == [
        "OOMKilled",
        "iPhone",
        "McDonald",
    ]


def test_plain_words_ordinals_and_initialisms_are_not_identifiers() -> None:
    text = "Hello USA, a one-way follow-up on the 20th at 5pm, e.g. $30 and 42 bags i.e. none."
    assert find(text) == []


def test_a_hyphenated_word_a_tool_call_was_given_is_one() -> None:
    assert is_identifier("dry-run", action=True)
    assert not is_identifier("dry-run")


def test_a_sentence_end_is_not_part_of_the_identifier() -> None:
    assert find("It is ZFA04Y. Then HAT136, and foo.py.") == ["ZFA04Y", "HAT136", "foo.py"]


def test_json_keys_are_not_identifiers_their_values_are() -> None:
    content = json.dumps(
        {"reservation_id": "ZFA04Y", "first_name": "Mia", "flights": [{"flight_number": "HAT136"}]}
    )
    assert find(content, structured=True) == ["ZFA04Y", "HAT136"]
    python_literal = "{'user_id': 'mia_li_3668', 'payment_methods': {}}"
    assert find(python_literal, structured=True) == ["mia_li_3668"]


def test_blobs_longer_than_an_identifier_are_left_out() -> None:
    blob = "A1" * identifiers.MAX_IDENTIFIER_CHARS
    assert find(f"data {blob} id X9Y") == ["X9Y"]


# Ranking.
def test_used_later_ranks_first_then_recency_then_frequency() -> None:
    events = [
        tool('{"a": "OLD111", "b": "USED222"}'),
        user("what about NEW333 and NEW333 again, or TWICE444"),
        assistant("TWICE444 it is"),  # repeats an older identifier: it is used
        assistant(calls={"get": '{"id": "USED222"}'}),
    ]
    found = of_span(events)
    assert texts(found) == ["USED222", "TWICE444", "NEW333", "OLD111"]
    assert found[0].used
    assert not found[2].used


def test_later_events_mark_identifiers_used_but_add_none() -> None:
    span = [tool('{"x": "AAA111", "y": "BBB222"}')]
    later = [assistant(calls={"cancel": '{"id": "BBB222", "other": "CCC333"}'})]
    assert texts(of_span(span, later=later)) == ["BBB222", "AAA111"]


def test_at_most_limit_are_returned() -> None:
    span = [user(" ".join(f"ID{n:04d}" for n in range(500)))]
    assert len(of_span(span, limit=5)) == 5
    assert len(of_span(span)) == identifiers.MAX_IDENTIFIERS


def test_a_span_is_read_newest_first_within_its_budget() -> None:
    old = user("OLD999 " + "word " * 100)
    new = user("NEW111 " + "word " * 100)
    assert texts(of_span([old, new], budget=300)) == ["NEW111"]


def test_one_event_is_read_only_so_far() -> None:
    text = "word " * (identifiers.MAX_EVENT_CHARS // 5) + "LATE123"
    assert find(text) == []


# Presence and trails.
def test_presence_is_a_token_match() -> None:
    window = Presence(texts=["reservation ZFA04Y. see src/app.py:42"])
    assert window.holds("ZFA04Y")
    assert window.holds("src/app.py:42")
    assert window.holds("src/app.py")
    assert not window.holds("ZFA04")
    assert missing(["ZFA04Y", "HAT136"], window) == ["HAT136"]


def test_presence_reads_the_window_as_token_accounting_renders_it() -> None:
    window = Presence([tool('{"id": "ZFA04Y"}', name="get_reservation")])
    assert window.holds("ZFA04Y")
    assert window.holds("get_reservation")


def test_a_trail_round_trips() -> None:
    summary = "User asked: things\n" + trail_line(["ZFA04Y", "src/a.py:3", "1,250.00"])
    assert trail_of(summary) == ["ZFA04Y", "src/a.py:3", "1,250.00"]
    assert trail_of("no trail here Identifiers: X") == []
    assert trail_line([]) == ""


def test_rank_keeps_input_order_on_ties() -> None:
    same = [Identifier(t, 1, 0, False) for t in ("B22", "A11", "C33")]
    assert texts(rank(same)) == ["B22", "A11", "C33"]


# Properties.
_pieces = st.sampled_from(
    [
        "ZFA04Y",
        "src/app.py:42",
        "2024-05-20",
        "hello",
        "one-way",
        "e.g.",
        "#W123",
        "a.b@c.io",
        "1,250",
        '"key_name":',
        "{",
        "}",
        ",",
        ". ",
        " ",
        "getX",
        "x_1",
        "http://h.io/p?q=1",
        "'",
        "::",
        "--",
        "7",
        "99",
    ]
)
_texts = st.lists(_pieces, max_size=40).map("".join) | st.text(max_size=200)


@given(_texts, st.booleans())
@settings(max_examples=300, deadline=None)
def test_every_found_identifier_is_held_by_its_own_text(text: str, structured: bool) -> None:
    found = find(text, structured=structured)
    window = Presence(texts=[text])
    assert missing(found, window) == []
    assert len(found) == len(set(found))
    assert all(is_identifier(i) for i in found)


@given(st.lists(st.tuples(st.sampled_from(list(Role)), _texts), max_size=12), st.integers(0, 8))
@settings(max_examples=200, deadline=None)
def test_a_span_yields_at_most_limit_identifiers_each_from_its_events(
    pieces: list[tuple[Role, str]], limit: int
) -> None:
    events = [
        tool(text) if role is Role.TOOL else Event(id=str(n), role=role, text=text)
        for n, (role, text) in enumerate(pieces)
    ]
    found = of_span(events, limit=limit)
    assert len(found) <= limit
    assert len({i.text for i in found}) == len(found)
    everything = Presence(events)
    assert all(everything.holds(i.text) for i in found)
    assert all(0 <= i.last_seen < len(events) and i.count >= 1 for i in found)


def test_a_result_repeating_its_call_id_and_tool_name_adds_neither() -> None:
    cleared = Event(
        id="t",
        role=Role.TOOL,
        tool_results=(
            ToolResult(
                "call_77", "get_user_details", "[get_user_details cleared (call_77) ZFA04Y]"
            ),
        ),
    )
    assert texts(of_span([cleared])) == ["ZFA04Y"]
